#include "io/peer_uid.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "openlake/status.h"

namespace openlake::io {
namespace {

// Fills `id` for the socket whose local end is `peer` and remote end is `self`: the client's.
bool FillId(const sockaddr_storage& self, const sockaddr_storage& peer, inet_diag_sockid* id) {
  if (self.ss_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&self);
    const auto* p = reinterpret_cast<const sockaddr_in*>(&peer);
    id->idiag_sport = p->sin_port;
    id->idiag_dport = s->sin_port;
    std::memcpy(id->idiag_src, &p->sin_addr, sizeof(p->sin_addr));
    std::memcpy(id->idiag_dst, &s->sin_addr, sizeof(s->sin_addr));
    return true;
  }
  if (self.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&self);
    const auto* p = reinterpret_cast<const sockaddr_in6*>(&peer);
    id->idiag_sport = p->sin6_port;
    id->idiag_dport = s->sin6_port;
    std::memcpy(id->idiag_src, &p->sin6_addr, sizeof(p->sin6_addr));
    std::memcpy(id->idiag_dst, &s->sin6_addr, sizeof(s->sin6_addr));
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<uid_t> LoopbackPeerUid(int fd) {
  sockaddr_storage self{}, peer{};
  socklen_t slen = sizeof(self), plen = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &slen) != 0) {
    return ErrnoStatus(-errno, "getsockname");
  }
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) {
    return ErrnoStatus(-errno, "getpeername");
  }
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST;
  msg.req.sdiag_family = static_cast<uint8_t>(self.ss_family);
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0u;
  msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  if (!FillId(self, peer, &msg.req.id)) {
    return absl::InvalidArgumentError("not a TCP socket over IPv4 or IPv6");
  }
  const int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return absl::UnavailableError(ErrnoStatus(-errno, "sock_diag socket").message());
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(nl, &msg, sizeof(msg), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) !=
      static_cast<ssize_t>(sizeof(msg))) {
    const int err = errno;
    close(nl);
    return absl::UnavailableError(ErrnoStatus(-err, "sock_diag send").message());
  }
  alignas(nlmsghdr) char buf[4096];
  const ssize_t n = recv(nl, buf, sizeof(buf), 0);
  const int err = errno;
  close(nl);
  if (n < 0) return absl::UnavailableError(ErrnoStatus(-err, "sock_diag recv").message());
  size_t left = static_cast<size_t>(n);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
    if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_DONE) break;
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
        h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) {
      continue;
    }
    const auto* d = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
    return static_cast<uid_t>(d->idiag_uid);
  }
  return absl::NotFoundError("the kernel knows no socket at the connection's other end");
}

}  // namespace openlake::io

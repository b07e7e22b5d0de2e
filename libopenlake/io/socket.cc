#include "openlake/io/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::io {

absl::StatusOr<SocketAddress> SocketAddress::Parse(std::string_view text) {
  SocketAddress a;
  if (text.substr(0, 5) == "unix:") {
    const std::string_view path = text.substr(5);
    sockaddr_un un{};
    if (path.empty() || path.size() >= sizeof(un.sun_path)) {
      return absl::InvalidArgumentError(
          StrCat("unix socket path must be 1..", sizeof(un.sun_path) - 1, " bytes: '", path, "'"));
    }
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path, path.data(), path.size());
    std::memcpy(&a.storage_, &un, sizeof(un));
    a.len_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
    return a;
  }
  std::string host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return absl::InvalidArgumentError(StrCat("bad address '", text, "': want [v6]:port"));
    }
    host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return absl::InvalidArgumentError(
          StrCat("bad address '", text, "': want host:port or unix:/path"));
    }
    host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(AV(port_text), &port) || port > 65535) {
    return absl::InvalidArgumentError(StrCat("bad port in address '", text, "'"));
  }
  if (host.empty()) host = "0.0.0.0";
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(port));
    std::memcpy(&a.storage_, &v4, sizeof(v4));
    a.len_ = sizeof(v4);
    return a;
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<uint16_t>(port));
    std::memcpy(&a.storage_, &v6, sizeof(v6));
    a.len_ = sizeof(v6);
    return a;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::NotFoundError(StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  std::memcpy(&a.storage_, res->ai_addr, res->ai_addrlen);
  a.len_ = res->ai_addrlen;
  freeaddrinfo(res);
  if (a.storage_.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&a.storage_)->sin_port = htons(static_cast<uint16_t>(port));
  } else if (a.storage_.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&a.storage_)->sin6_port = htons(static_cast<uint16_t>(port));
  }
  return a;
}

SocketAddress SocketAddress::FromSockaddr(const sockaddr* sa, socklen_t len) {
  SocketAddress a;
  if (len > sizeof(a.storage_)) len = sizeof(a.storage_);
  std::memcpy(&a.storage_, sa, len);
  a.len_ = len;
  return a;
}

bool SocketAddress::IsLoopback() const {
  switch (storage_.ss_family) {
    case AF_UNIX:
      return true;
    case AF_INET: {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage_);
      return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    }
    case AF_INET6: {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
      if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) return true;
      if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) return v6->sin6_addr.s6_addr[12] == 127;
      return false;
    }
  }
  return false;
}

uint16_t SocketAddress::port() const {
  if (storage_.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  }
  if (storage_.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  }
  return 0;
}

std::string SocketAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  switch (storage_.ss_family) {
    case AF_UNIX: {
      const auto* un = reinterpret_cast<const sockaddr_un*>(&storage_);
      return StrCat("unix:", un->sun_path);
    }
    case AF_INET:
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf,
                sizeof(buf));
      return StrCat(buf, ":", port());
    case AF_INET6:
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf,
                sizeof(buf));
      return StrCat("[", buf, "]:", port());
  }
  return "<unknown address>";
}

void TuneStreamSocket(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const int buf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
}

absl::StatusOr<int> Listen(const SocketAddress& addr, const ListenOptions& options) {
  const int fd = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket");
  auto fail = [fd](int err, std::string what) {
    close(fd);
    return ErrnoStatus(err, what);
  };
  if (addr.is_unix()) {
    const std::string path = addr.ToString().substr(5);
    struct stat st;
    if (lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        close(fd);
        return absl::AlreadyExistsError(
            StrCat(path, " exists and is not a socket; refusing to replace it"));
      }
      // A socket file: live if something accepts on it, stale otherwise. A listener whose
      // process has died can still take connections for a moment: io_uring tears a dead
      // process's ring down later, in a kernel worker, and a pending accept keeps the socket
      // open until then. So a daemon killed -9 and started again at once would find its own
      // old socket "live"; the listener's creator (SO_PEERCRED) being gone says it is not.
      const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      bool live = probe >= 0 && connect(probe, addr.sockaddr_ptr(), addr.length()) == 0;
      if (live) {
        ucred cred{};
        socklen_t len = sizeof(cred);
        if (getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0 &&
            kill(cred.pid, 0) != 0 && errno == ESRCH) {
          live = false;
        }
      }
      if (probe >= 0) close(probe);
      if (live) {
        close(fd);
        return absl::AlreadyExistsError(StrCat("another process is already listening on ", path));
      }
      unlink(path.c_str());
    }
    // Linux applies a socket's inode mode at bind time, so the file is never more open than
    // `unix_mode`, even for an instant.
    fchmod(fd, options.unix_mode);
  } else {
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (options.reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    TuneStreamSocket(fd);
  }
  if (bind(fd, addr.sockaddr_ptr(), addr.length()) != 0) {
    return fail(errno, StrCat("bind ", addr.ToString()));
  }
  if (addr.is_unix()) {
    chmod(addr.ToString().substr(5).c_str(), options.unix_mode);
  }
  if (listen(fd, options.backlog) != 0) {
    return fail(errno, StrCat("listen ", addr.ToString()));
  }
  return fd;
}

absl::StatusOr<int> Connect(const SocketAddress& addr, absl::Duration timeout) {
  const int fd = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket");
  int rc = connect(fd, addr.sockaddr_ptr(), addr.length());
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
    rc = poll(&p, 1, ms < 0 ? 0 : ms);
    if (rc == 0) {
      close(fd);
      return absl::DeadlineExceededError(
          StrCat("connect ", addr.ToString(), ": timed out after ", absl::FormatDuration(timeout)));
    }
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (rc < 0) err = errno;
    if (err != 0) {
      close(fd);
      return absl::UnavailableError(StrCat("connect ", addr.ToString(), ": ", strerror(err)));
    }
  } else if (rc != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(StrCat("connect ", addr.ToString(), ": ", strerror(err)));
  }
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (!addr.is_unix()) TuneStreamSocket(fd);
  return fd;
}

absl::StatusOr<SocketAddress> LocalAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return ErrnoStatus(errno, "getsockname");
  }
  return SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

// ---- Blocking transfers

namespace {

int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  if (ms <= 0) return 0;
  return ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms);
}

}  // namespace

bool WaitReady(int fd, short events, absl::Time deadline, absl::Duration spin) {
  pollfd p{fd, events, 0};
  // poll with a zero timeout is a cheap call that never sleeps.
  if (spin > absl::ZeroDuration()) {
    const absl::Time spin_end = std::min(deadline, absl::Now() + spin);
    do {
      if (poll(&p, 1, 0) > 0) return true;
    } while (absl::Now() < spin_end);
  }
  while (true) {
    const int rc = poll(&p, 1, PollTimeoutMs(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // let the transfer report the error
  }
}

absl::Status SendAll(int fd, iovec* iov, size_t count, std::string_view peer, absl::Time deadline,
                     absl::Duration stall) {
  size_t first = 0;
  while (first < count && iov[first].iov_len == 0) ++first;
  while (first < count) {
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = count - first;
    const ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return ErrnoStatus(errno, StrCat("send to ", peer));
      }
      const absl::Time wait_until =
          stall == absl::InfiniteDuration() ? deadline : std::min(deadline, absl::Now() + stall);
      if (!WaitReady(fd, POLLOUT, wait_until)) {
        return absl::DeadlineExceededError(
            StrCat("sending to ", peer, ": no progress before the deadline"));
      }
      continue;
    }
    auto left = static_cast<size_t>(n);
    while (first < count && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      iov[first].iov_len = 0;
      ++first;
    }
    if (first < count) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> RecvSome(int fd, void* buf, size_t len, std::string_view peer,
                                absl::Time deadline, absl::Duration spin, std::vector<int>* fds) {
  // A caller that spins expects to wait for an answer (the RPC client): it polls first, as a
  // receive now would find nothing. Otherwise the receive goes first and waits only if need be.
  bool waited = false;
  if (spin > absl::ZeroDuration()) {
    if (!WaitReady(fd, POLLIN, deadline, spin)) {
      return absl::DeadlineExceededError(StrCat("no answer from ", peer, " before the deadline"));
    }
    waited = true;
  }
  while (true) {
    iovec iov{buf, len};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 8)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof(cbuf);
    const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return ErrnoStatus(errno, StrCat("receive from ", peer));
      }
      if (waited && absl::Now() >= deadline) {
        return absl::DeadlineExceededError(StrCat("no answer from ", peer, " before the deadline"));
      }
      if (!WaitReady(fd, POLLIN, deadline, waited ? absl::ZeroDuration() : spin)) {
        return absl::DeadlineExceededError(StrCat("no answer from ", peer, " before the deadline"));
      }
      waited = true;
      continue;
    }
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      const size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int rfd;
        std::memcpy(&rfd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        if (fds != nullptr) {
          fds->push_back(rfd);
        } else {
          close(rfd);
        }
      }
    }
    return static_cast<size_t>(n);
  }
}

}  // namespace openlake::io

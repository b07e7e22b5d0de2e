// File: openlake/io/socket.h
//
// Socket set-up for the runtime: parsing addresses, listening and connecting. These helpers
// are blocking (they may resolve a host name) and belong to start-up and client threads, not
// to reactor threads; once a socket exists, its accept/recv/send run through Reactor.
//
// Addresses: "host:port" or "[v6]:port" for TCP, "unix:/path/to.sock" for a Unix socket.
//
//   OL_ASSIGN_OR_RETURN(io::SocketAddress a, io::SocketAddress::Parse("127.0.0.1:9400"));
//   OL_ASSIGN_OR_RETURN(int fd, io::Listen(a, {}));
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "openlake/export.h"

namespace openlake::io {

class OL_EXPORT SocketAddress {
 public:
  // Parses and resolves (numeric first, then the resolver) `text`.
  static absl::StatusOr<SocketAddress> Parse(std::string_view text);
  static SocketAddress FromSockaddr(const sockaddr* sa, socklen_t len);

  bool is_unix() const { return storage_.ss_family == AF_UNIX; }
  // 127.0.0.0/8, ::1, or a Unix socket.
  bool IsLoopback() const;
  uint16_t port() const;
  std::string ToString() const;  // same syntax Parse takes

  const sockaddr* sockaddr_ptr() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const { return len_; }
  int family() const { return storage_.ss_family; }

 private:
  sockaddr_storage storage_{};
  socklen_t len_ = 0;
};

struct ListenOptions {
  int backlog = 1024;
  bool reuse_port = false;  // SO_REUSEPORT, for one listener per reactor
  // Unix sockets: permission bits of the socket file (owner-only by default). A stale socket
  // file with nobody listening is replaced; a live one is AlreadyExists.
  mode_t unix_mode = 0600;
};

// Creates, binds and listens; returns the descriptor (close-on-exec).
OL_EXPORT absl::StatusOr<int> Listen(const SocketAddress& addr, const ListenOptions& options);

// Blocking connect with a timeout. TCP sockets get TCP_NODELAY.
OL_EXPORT absl::StatusOr<int> Connect(const SocketAddress& addr, absl::Duration timeout);

// The address a bound socket listens on (resolves port 0 to the real port).
OL_EXPORT absl::StatusOr<SocketAddress> LocalAddress(int fd);

// Applies TCP_NODELAY and 4 MiB socket buffers where the socket is TCP; harmless otherwise.
OL_EXPORT void TuneStreamSocket(int fd);

// ---- Blocking transfers, for client threads (the RPC client, the S3 client). Each waits in
// poll(2) between partial transfers, so its deadline holds whatever the socket's own blocking
// mode and timeouts; `peer` names the other end in error messages.

// Waits until `fd` is ready for `events` (POLLIN, POLLOUT): true, or false once `deadline`
// passed. Polls without sleeping for `spin` first: a peer that answers within it saves the
// sleeping thread's wake-up (tens of µs on a VM).
OL_EXPORT bool WaitReady(int fd, short events, absl::Time deadline,
                         absl::Duration spin = absl::ZeroDuration());

// Sends every byte of iov[0, count) (advancing the entries as it goes). DeadlineExceeded when
// the socket takes nothing for `stall` or the whole takes past `deadline`; a failed send is its
// errno (ErrnoStatus: EPIPE, ECONNRESET, ...).
OL_EXPORT absl::Status SendAll(int fd, iovec* iov, size_t count, std::string_view peer,
                               absl::Time deadline,
                               absl::Duration stall = absl::InfiniteDuration());

// Receives what has arrived, up to `len` bytes, waiting for it until `deadline`: the count, 0
// when the peer closed. With `spin`, it waits first (as WaitReady, spinning), for a caller that
// knows nothing has arrived yet; without, it receives first. Descriptors sent with the bytes
// (SCM_RIGHTS) are appended to `fds`, or closed when it is null. DeadlineExceeded when nothing
// came in time; a failed receive is its errno.
OL_EXPORT absl::StatusOr<size_t> RecvSome(int fd, void* buf, size_t len, std::string_view peer,
                                          absl::Time deadline,
                                          absl::Duration spin = absl::ZeroDuration(),
                                          std::vector<int>* fds = nullptr);

}  // namespace openlake::io

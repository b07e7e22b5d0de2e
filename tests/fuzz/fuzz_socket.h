// Blocking socket helpers for the fuzz targets that talk to a real server in the same process
// (rpc_service, s3_server): connect, send everything, read with a deadline. Every wait is
// bounded, so a server that stops answering shows as a slow input (libFuzzer's -timeout), never
// as a hung run.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace openlake::fuzz {

class Socket {
 public:
  Socket() = default;
  // Closed with a reset: thousands of connections a second would otherwise leave the
  // loopback's ephemeral ports in TIME_WAIT until connect() finds none free.
  ~Socket() {
    if (fd_ < 0) return;
    const linger l{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool ConnectUnix(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    return Connect(reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  bool ConnectLoopback(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return Connect(reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  // False when the peer closed or reset the connection first.
  bool SendAll(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  void ShutdownWrite() { shutdown(fd_, SHUT_WR); }
  // Appends what arrives within `timeout_ms` (at most `max` bytes) to `out`; 0 at end of
  // stream or timeout, else the bytes read.
  // A signal is not the end of the stream: libFuzzer's SIGALRM (its -timeout watch) interrupts
  // poll() and recv() every second or so, and those waits start again.
  size_t Read(std::string* out, size_t max, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return 0;
      char buf[16384];
      const ssize_t n = recv(fd_, buf, std::min(max, sizeof(buf)), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return 0;
      out->append(buf, static_cast<size_t>(n));
      return static_cast<size_t>(n);
    }
  }
  // Reads until `out` holds `n` bytes; false on end of stream or timeout.
  bool ReadExact(std::string* out, size_t n, int timeout_ms) {
    while (out->size() < n) {
      if (Read(out, n - out->size(), timeout_ms) == 0) return false;
    }
    return true;
  }

 private:
  // connect() interrupted by a signal goes on in the background: wait for it to finish.
  bool Connect(const sockaddr* a, socklen_t len) {
    bool ok = fd_ >= 0 && connect(fd_, a, len) == 0;
    if (!ok && fd_ >= 0 && errno == EINTR) {
      pollfd p{fd_, POLLOUT, 0};
      while (poll(&p, 1, 20000) < 0 && errno == EINTR) {
      }
      int err = 0;
      socklen_t n = sizeof(err);
      ok = getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &n) == 0 && err == 0;
      if (!ok) errno = err;
    }
    if (!ok) std::fprintf(stderr, "fuzz: connect: %s\n", std::strerror(errno));
    return ok;
  }
  int fd_ = -1;
};

}  // namespace openlake::fuzz

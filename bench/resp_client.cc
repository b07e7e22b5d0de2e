#include "resp_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

namespace openlake::bench {

namespace {

constexpr size_t kInBuffer = 64 << 10;
constexpr char kCrlf[] = "\r\n";

absl::Status Errno(const std::string& what) {
  const int err = errno;
  if (err == EAGAIN || err == EWOULDBLOCK) {
    return absl::DeadlineExceededError(what + ": timed out");
  }
  return absl::UnavailableError(what + ": " + std::strerror(err));
}

// "$<len>\r\n" bulk header of one argument.
void AppendBulkHeader(std::string* out, size_t len) {
  *out += '$';
  *out += std::to_string(len);
  *out += kCrlf;
}

}  // namespace

absl::StatusOr<RespClient> RespClient::Connect(uint16_t port, absl::Duration io_timeout) {
  RespClient c;
  c.fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c.fd_ < 0) return Errno("socket");
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(absl::ToInt64Seconds(io_timeout));
  tv.tv_usec = static_cast<suseconds_t>(absl::ToInt64Microseconds(io_timeout) % 1000000);
  setsockopt(c.fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(c.fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int one = 1;
  setsockopt(c.fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(c.fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return Errno("connect 127.0.0.1:" + std::to_string(port));
  }
  c.in_.resize(kInBuffer);
  return c;
}

RespClient::RespClient(RespClient&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      in_(std::move(o.in_)),
      in_pos_(o.in_pos_),
      in_len_(o.in_len_),
      headers_(std::move(o.headers_)) {}

RespClient& RespClient::operator=(RespClient&& o) noexcept {
  std::swap(fd_, o.fd_);
  std::swap(in_, o.in_);
  std::swap(in_pos_, o.in_pos_);
  std::swap(in_len_, o.in_len_);
  std::swap(headers_, o.headers_);
  return *this;
}

RespClient::~RespClient() {
  if (fd_ >= 0) close(fd_);
}

absl::Status RespClient::WriteAll(std::vector<iovec>& iov) {
  size_t first = 0;
  while (first < iov.size()) {
    const int n = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t w = writev(fd_, iov.data() + first, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("writev to redis");
    }
    auto left = static_cast<size_t>(w);
    while (left > 0 && first < iov.size()) {
      if (left >= iov[first].iov_len) {
        left -= iov[first].iov_len;
        ++first;
      } else {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
        left = 0;
      }
    }
    while (first < iov.size() && iov[first].iov_len == 0) ++first;
  }
  return absl::OkStatus();
}

absl::Status RespClient::Fill() {
  if (in_pos_ == in_len_) in_pos_ = in_len_ = 0;
  if (in_len_ == in_.size()) {
    std::memmove(in_.data(), in_.data() + in_pos_, in_len_ - in_pos_);
    in_len_ -= in_pos_;
    in_pos_ = 0;
    if (in_len_ == in_.size()) return absl::InternalError("redis reply line too long");
  }
  for (;;) {
    const ssize_t r = recv(fd_, in_.data() + in_len_, in_.size() - in_len_, 0);
    if (r > 0) {
      in_len_ += static_cast<size_t>(r);
      return absl::OkStatus();
    }
    if (r == 0) return absl::UnavailableError("redis closed the connection");
    if (errno != EINTR) return Errno("recv from redis");
  }
}

absl::StatusOr<std::string> RespClient::ReadLine() {
  for (;;) {
    const char* begin = in_.data() + in_pos_;
    const char* end = in_.data() + in_len_;
    const char* lf = static_cast<const char*>(std::memchr(begin, '\n', end - begin));
    if (lf != nullptr) {
      if (lf == begin || lf[-1] != '\r') return absl::InternalError("malformed redis reply");
      std::string line(begin, lf - 1);
      in_pos_ += static_cast<size_t>(lf + 1 - begin);
      return line;
    }
    if (absl::Status st = Fill(); !st.ok()) return st;
  }
}

absl::Status RespClient::ReadExact(void* dst, size_t n) {
  auto* d = static_cast<char*>(dst);
  const size_t buffered = std::min(n, in_len_ - in_pos_);
  std::memcpy(d, in_.data() + in_pos_, buffered);
  in_pos_ += buffered;
  d += buffered;
  n -= buffered;
  while (n > 0) {
    const ssize_t r = recv(fd_, d, n, 0);
    if (r > 0) {
      d += r;
      n -= static_cast<size_t>(r);
    } else if (r == 0) {
      return absl::UnavailableError("redis closed the connection");
    } else if (errno != EINTR) {
      return Errno("recv from redis");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RespClient::Simple(const std::vector<std::string>& args) {
  std::string cmd = "*";
  cmd += std::to_string(args.size());
  cmd += kCrlf;
  for (const std::string& a : args) {
    AppendBulkHeader(&cmd, a.size());
    cmd += a;
    cmd += kCrlf;
  }
  std::vector<iovec> iov = {{cmd.data(), cmd.size()}};
  if (absl::Status st = WriteAll(iov); !st.ok()) return st;
  absl::StatusOr<std::string> line = ReadLine();
  if (!line.ok()) return line.status();
  if (line->empty()) return absl::InternalError("empty redis reply");
  if ((*line)[0] == '-') return absl::InternalError(std::string("redis: ").append(*line, 1));
  return line->substr(1);
}

absl::Status RespClient::SetBatch(absl::Span<const std::string> keys,
                                  absl::Span<const void* const> values, size_t len) {
  if (keys.size() != values.size()) return absl::InvalidArgumentError("keys and values differ");
  headers_.resize(keys.size());
  std::vector<iovec> iov;
  iov.reserve(keys.size() * 3);
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string& h = headers_[i];
    h.assign("*3\r\n$3\r\nSET\r\n");
    AppendBulkHeader(&h, keys[i].size());
    h += keys[i];
    h += kCrlf;
    AppendBulkHeader(&h, len);
    iov.push_back({h.data(), h.size()});
    iov.push_back({const_cast<void*>(values[i]), len});
    iov.push_back({const_cast<char*>(kCrlf), 2});
  }
  if (absl::Status st = WriteAll(iov); !st.ok()) return st;
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<std::string> line = ReadLine();
    if (!line.ok()) return line.status();
    if (*line != "+OK")
      return absl::InternalError(std::string("redis SET answered ").append(*line));
  }
  return absl::OkStatus();
}

absl::Status RespClient::GetBatch(absl::Span<const std::string> keys, absl::Span<void* const> outs,
                                  size_t len) {
  if (keys.size() != outs.size()) return absl::InvalidArgumentError("keys and buffers differ");
  std::string cmds;
  for (const std::string& k : keys) {
    cmds += "*2\r\n$3\r\nGET\r\n";
    AppendBulkHeader(&cmds, k.size());
    cmds += k;
    cmds += kCrlf;
  }
  std::vector<iovec> iov = {{cmds.data(), cmds.size()}};
  if (absl::Status st = WriteAll(iov); !st.ok()) return st;
  std::string want = "$";
  want += std::to_string(len);
  char crlf[2];
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<std::string> line = ReadLine();
    if (!line.ok()) return line.status();
    if (*line != want)
      return absl::InternalError(std::string("redis GET answered ").append(*line, 0, 40));
    if (absl::Status st = ReadExact(outs[i], len); !st.ok()) return st;
    if (absl::Status st = ReadExact(crlf, 2); !st.ok()) return st;
    if (crlf[0] != '\r' || crlf[1] != '\n') return absl::InternalError("malformed bulk reply");
  }
  return absl::OkStatus();
}

}  // namespace openlake::bench

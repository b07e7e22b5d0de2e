#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

#include "net/frame.h"

#include "openlake/log.h"
#include "openlake/net/rpc.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::net {
namespace {

absl::Status CodeStatus(uint32_t code, std::string_view message) {
  if (code == 0) return absl::OkStatus();
  if (code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(StrCat("server answered unknown status code ", code, ": ", message));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), AV(message));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RpcClient>> RpcClient::Connect(const io::SocketAddress& addr,
                                                              RpcClientOptions options) {
  OL_ASSIGN_OR_RETURN(int fd, io::Connect(addr, options.connect_timeout));
  std::unique_ptr<RpcClient> c(new RpcClient());
  c->addr_ = addr;
  c->peer_ = addr.ToString();
  c->options_ = options;
  {
    absl::MutexLock lock(&c->mu_);
    c->fd_ = fd;
  }
  OL_RETURN_IF_ERROR(c->Handshake(options));
  return c;
}

RpcClient::~RpcClient() { Close(); }

bool RpcClient::connected() const {
  absl::MutexLock lock(&mu_);
  return fd_ >= 0;
}

void RpcClient::Close() {
  absl::MutexLock lock(&mu_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  for (int fd : rfds_) close(fd);
  rfds_.clear();
  for (auto& s : stash_) {
    if (s.response.ok() && s.response->fd >= 0) close(s.response->fd);
  }
  stash_.clear();
}

void RpcClient::Broken(const absl::Status& why) {
  OL_LOG_EVERY_N_SEC(kWarning, 5) << "rpc connection to " << addr_.ToString()
                                  << " closed: " << why.message();
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  rbeg_ = rend_ = 0;
  for (int fd : rfds_) close(fd);
  rfds_.clear();
}

absl::Status RpcClient::Handshake(const RpcClientOptions& options) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  std::string payload;
  int fd = -1;
  FrameHeader h;
  OL_RETURN_IF_ERROR(ReadFrame(deadline, &h, &payload, &fd));
  if (h.type == FrameType::kResponse && h.aux != 0) {  // refused: the server is full
    absl::Status st = CodeStatus(h.aux, payload);
    Broken(st);
    return st;
  }
  if (h.type != FrameType::kHello) {
    Broken(absl::InternalError("no hello"));
    return absl::UnavailableError(
        StrCat(addr_.ToString(), " did not greet with an OpenLake RPC hello"));
  }
  bool auth_required = false;
  uint8_t nonce[kNonceBytes];
  OL_RETURN_IF_ERROR(DecodeHello(payload, &auth_required, nonce, &server_version_));
  if (!auth_required) return absl::OkStatus();
  if (options.secret.empty()) {
    Broken(absl::PermissionDeniedError("no secret"));
    return absl::PermissionDeniedError(
        StrCat(addr_.ToString(), " requires the cluster's shared secret and none was given"));
  }
  FrameHeader auth;
  auth.type = FrameType::kAuth;
  std::string out;
  AppendFrame(auth, AuthMac(options.secret, nonce), &out);
  OL_RETURN_IF_ERROR(SendAll(out));
  OL_RETURN_IF_ERROR(ReadFrame(deadline, &h, &payload, &fd));
  if (h.type != FrameType::kAuth) {
    Broken(absl::InternalError("no auth answer"));
    return absl::UnavailableError("server did not answer the authentication");
  }
  if (h.aux != 0) {
    absl::Status st = CodeStatus(h.aux, payload);
    Broken(st);
    return st;
  }
  return absl::OkStatus();
}

absl::Status RpcClient::SendAll(const std::string& bytes) {
  if (fd_ < 0) return absl::UnavailableError(StrCat("not connected to ", addr_.ToString()));
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  const absl::Status st = io::SendAll(fd_, &iov, 1, peer_, absl::Now() + options_.call_timeout);
  if (st.ok()) return st;
  Broken(st);
  if (absl::IsDeadlineExceeded(st)) return st;
  return absl::UnavailableError(st.message());
}

absl::Status RpcClient::ReadFrame(absl::Time deadline, FrameHeader* h, std::string* payload,
                                  int* fd) {
  *fd = -1;
  size_t need = kFrameHeaderBytes;
  bool have_header = false;
  for (;;) {
    const size_t have = rend_ - rbeg_;
    if (!have_header && have >= kFrameHeaderBytes) {
      absl::Status st = DecodeHeader(rbuf_.get() + rbeg_, options_.max_frame_bytes, h);
      if (!st.ok()) {
        Broken(st);
        return absl::UnavailableError(StrCat("malformed frame from server: ", st.message()));
      }
      have_header = true;
      need = kFrameHeaderBytes + h->length;
    }
    if (have_header && have >= need) break;
    if (fd_ < 0) return absl::UnavailableError(StrCat("not connected to ", addr_.ToString()));
    // Room for at least the rest of this frame (and 64 KiB), receiving straight into the buffer.
    const size_t want = std::max<size_t>(need, have + (64 << 10));
    if (rbeg_ + want > rcap_) {
      if (want <= rcap_) {
        if (have > 0) std::memmove(rbuf_.get(), rbuf_.get() + rbeg_, have);
      } else {
        size_t cap = std::max<size_t>(rcap_, 128 << 10);
        while (cap < want) cap *= 2;
        auto bigger = std::make_unique<char[]>(cap);
        if (have > 0) std::memcpy(bigger.get(), rbuf_.get() + rbeg_, have);
        rbuf_ = std::move(bigger);
        rcap_ = cap;
      }
      rbeg_ = 0;
      rend_ = have;
    }
    // A late answer stays readable: the connection is not broken by a missed deadline.
    absl::StatusOr<size_t> n = io::RecvSome(fd_, rbuf_.get() + rend_, rcap_ - rend_, peer_,
                                            deadline, options_.spin, &rfds_);
    if (!n.ok() && absl::IsDeadlineExceeded(n.status())) return n.status();
    if (!n.ok() || *n == 0) {
      const absl::Status st =
          n.ok() ? absl::UnavailableError(StrCat(peer_, ": connection closed by the server"))
                 : n.status();
      Broken(st);
      return absl::UnavailableError(st.message());
    }
    rend_ += *n;
  }
  payload->assign(rbuf_.get() + rbeg_ + kFrameHeaderBytes, h->length);
  rbeg_ += need;
  if (rbeg_ == rend_) rbeg_ = rend_ = 0;
  if (h->flags & kFrameFlagFd) {
    if (rfds_.empty()) {
      Broken(absl::InternalError("fd missing"));
      return absl::UnavailableError("server announced a descriptor that did not arrive");
    }
    *fd = rfds_.front();
    rfds_.erase(rfds_.begin());
  }
  return absl::OkStatus();
}

absl::Status RpcClient::ReadAnswer(absl::Time deadline, uint64_t* id,
                                   absl::StatusOr<Response>* response) {
  for (;;) {
    std::string payload;
    int fd = -1;
    FrameHeader h;
    OL_RETURN_IF_ERROR(ReadFrame(deadline, &h, &payload, &fd));
    if (h.type != FrameType::kResponse) {
      Broken(absl::InternalError("unexpected frame"));
      return absl::UnavailableError("server sent a frame that is not a response");
    }
    absl::StatusOr<Response> r;
    if (h.aux != 0) {
      r = CodeStatus(h.aux, payload);
      if (fd >= 0) close(fd);
    } else {
      r = Response{std::move(payload), fd};
    }
    auto n = std::find(notified_.begin(), notified_.end(), h.request_id);
    if (n == notified_.end()) {
      *id = h.request_id;
      *response = std::move(r);
      return absl::OkStatus();
    }
    notified_.erase(n);
    if (!r.ok()) {
      OL_LOG_EVERY_N_SEC(kWarning, 5) << "one-way request " << h.request_id << " (method "
                                      << h.method << ") failed: " << r.status().message();
    } else if (r->fd >= 0) {
      close(r->fd);
    }
  }
}

bool RpcClient::Kept(uint64_t id) const {
  for (const Stashed& s : stash_) {
    if (s.id == id) return true;
  }
  return false;
}

absl::StatusOr<RpcClient::Response> RpcClient::Await(uint64_t id, uint16_t method,
                                                     absl::Time deadline) {
  for (auto it = stash_.begin(); it != stash_.end(); ++it) {
    if (it->id == id) {
      absl::StatusOr<Response> r = std::move(it->response);
      stash_.erase(it);
      return r;
    }
  }
  for (;;) {
    uint64_t got = 0;
    absl::StatusOr<Response> r;
    absl::Status st = ReadAnswer(deadline, &got, &r);
    if (!st.ok()) {
      if (absl::IsDeadlineExceeded(st) && fd_ >= 0) notified_.push_back(id);
      return st;
    }
    if (got == id) return r;
    stash_.push_back(Stashed{got, std::move(r)});
  }
}

size_t RpcClient::WaitAny(absl::Span<const Sent> sents) {
  absl::MutexLock lock(&mu_);
  size_t earliest = 0;
  for (size_t i = 0; i < sents.size(); ++i) {
    if (Kept(sents[i].id)) return i;
    if (sents[i].deadline < sents[earliest].deadline) earliest = i;
  }
  if (sents.empty()) return 0;
  for (;;) {
    uint64_t got = 0;
    absl::StatusOr<Response> r;
    // A failure (the earliest deadline passed, or the connection broke) is the earliest's
    // Wait's to report.
    if (!ReadAnswer(sents[earliest].deadline, &got, &r).ok()) return earliest;
    stash_.push_back(Stashed{got, std::move(r)});
    for (size_t i = 0; i < sents.size(); ++i) {
      if (sents[i].id == got) return i;
    }
  }
}

absl::StatusOr<RpcClient::Response> RpcClient::Call(uint16_t method, std::string_view payload,
                                                    absl::Duration timeout) {
  auto results = CallMany({Request{method, payload}}, timeout);
  return std::move(results[0]);
}

std::vector<absl::StatusOr<RpcClient::Response>> RpcClient::CallMany(
    const std::vector<Request>& requests, absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) timeout = options_.call_timeout;
  const absl::Time deadline = absl::Now() + timeout;
  const int64_t ms = absl::ToInt64Milliseconds(timeout);
  const uint32_t budget_ms = ms > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(ms < 1 ? 1 : ms);
  std::vector<absl::StatusOr<RpcClient::Response>> out;
  absl::MutexLock lock(&mu_);
  std::string bytes;
  std::vector<uint64_t> ids;
  for (const Request& r : requests) {
    if (r.payload.size() > options_.max_frame_bytes) {
      out.assign(requests.size(),
                 absl::InvalidArgumentError(StrCat("request of ", r.payload.size(),
                                                   " bytes exceeds the frame limit of ",
                                                   options_.max_frame_bytes)));
      return out;
    }
    FrameHeader h;
    h.type = FrameType::kRequest;
    h.method = r.method;
    h.aux = budget_ms;
    h.request_id = next_id_++;
    ids.push_back(h.request_id);
    AppendFrame(h, r.payload, &bytes);
  }
  if (absl::Status st = SendAll(bytes); !st.ok()) {
    out.assign(requests.size(), st);
    return out;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    out.push_back(Await(ids[i], requests[i].method, deadline));
  }
  return out;
}

absl::StatusOr<RpcClient::Response> RpcClient::CallWithHeadroom(uint16_t method, std::string frame,
                                                                absl::Duration timeout) {
  OL_ASSIGN_OR_RETURN(Sent sent, Send(method, std::move(frame), timeout));
  return Wait(sent);
}

absl::StatusOr<RpcClient::Sent> RpcClient::Send(uint16_t method, std::string frame,
                                                absl::Duration timeout) {
  static_assert(kHeadroom == kFrameHeaderBytes);
  if (frame.size() < kHeadroom) return absl::InvalidArgumentError("frame without headroom");
  const size_t payload = frame.size() - kHeadroom;
  if (payload > options_.max_frame_bytes) {
    return absl::InvalidArgumentError(StrCat(
        "request of ", payload, " bytes exceeds the frame limit of ", options_.max_frame_bytes));
  }
  if (timeout == absl::InfiniteDuration()) timeout = options_.call_timeout;
  const absl::Time deadline = absl::Now() + timeout;
  const int64_t ms = absl::ToInt64Milliseconds(timeout);
  absl::MutexLock lock(&mu_);
  FrameHeader h;
  h.type = FrameType::kRequest;
  h.method = method;
  h.aux = ms > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(ms < 1 ? 1 : ms);
  h.request_id = next_id_++;
  h.length = static_cast<uint32_t>(payload);
  EncodeHeader(h, frame.data());
  OL_RETURN_IF_ERROR(SendAll(frame));
  return Sent{h.request_id, method, deadline};
}

absl::StatusOr<RpcClient::Response> RpcClient::Wait(const Sent& sent) {
  absl::MutexLock lock(&mu_);
  return Await(sent.id, sent.method, sent.deadline);
}

absl::Status RpcClient::Notify(uint16_t method, std::string_view payload) {
  absl::MutexLock lock(&mu_);
  FrameHeader h;
  h.type = FrameType::kRequest;
  h.method = method;
  h.request_id = next_id_++;
  std::string bytes;
  AppendFrame(h, payload, &bytes);
  OL_RETURN_IF_ERROR(SendAll(bytes));
  notified_.push_back(h.request_id);
  return absl::OkStatus();
}

}  // namespace openlake::net

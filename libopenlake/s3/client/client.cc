// The blocking S3 client (see openlake/s3/client.h): requests signed by the server's own SigV4
// code (s3/auth/sigv4.cc), responses framed by the HTTP layer's parser (http/framing.cc), error
// bodies read by the S3 XML reader (s3/api/xml.cc), bytes moved by io/socket.h's blocking
// transfers.
#include "openlake/s3/client.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "http/framing.h"
#include "s3/api/xml.h"
#include "s3/auth/sigv4.h"
#include "s3/client/results.h"

#include "openlake/io/socket.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr std::string_view kErrorCodeUrl = "type.openlake.dev/s3.ErrorCode";
// Received bytes are buffered here; a response head must fit.
constexpr size_t kReadBuffer = 128 << 10;
// Error documents are small; a larger body is not read into memory.
constexpr size_t kMaxErrorBody = 1 << 20;

absl::StatusCode CodeForHttp(int status, std::string_view s3_code) {
  switch (status) {
    case 400:
      return absl::StatusCode::kInvalidArgument;
    case 401:
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return s3_code == "BucketAlreadyOwnedByYou" || s3_code == "BucketAlreadyExists"
                 ? absl::StatusCode::kAlreadyExists
                 : absl::StatusCode::kFailedPrecondition;
    case 412:
      return absl::StatusCode::kFailedPrecondition;
    case 416:
      return absl::StatusCode::kOutOfRange;
    case 501:
      return absl::StatusCode::kUnimplemented;
    case 503:
      return absl::StatusCode::kUnavailable;
    default:
      return status >= 500 ? absl::StatusCode::kInternal : absl::StatusCode::kUnknown;
  }
}

// The code S3 would have written in a body that a HEAD response cannot carry.
std::string CodeForBodiless(int status) {
  switch (status) {
    case 400:
      return "BadRequest";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    default:
      return StrCat("HTTP", status);
  }
}

absl::Status S3Status(int http_status, const std::string& code, std::string_view message) {
  absl::Status s(CodeForHttp(http_status, code),
                 AV(message.empty() ? code : StrCat(code, ": ", message)));
  s.SetPayload(AV(kErrorCodeUrl), absl::Cord(AV(code)));
  return s;
}

// Where a body goes: a caller's fixed buffer, a string that grows, or (neither) nowhere.
struct Sink {
  char* buf = nullptr;
  size_t cap = 0;
  std::string* grow = nullptr;
  size_t size = 0;
  std::string scratch;  // an ignored body passes through here

  // Room for `n` more bytes, or nullptr when they do not fit.
  char* Reserve(size_t n) {
    if (grow != nullptr) {
      grow->resize(size + n);
      return grow->data() + size;
    }
    if (buf == nullptr) {
      scratch.resize(n);
      return scratch.data();
    }
    if (n > cap - size) return nullptr;
    return buf + size;
  }
};

// The request path of bucket and key, path-style, SigV4-encoded.
std::string PathOf(std::string_view bucket, std::string_view key) {
  std::string path = StrCat("/", UriEncode(bucket, false));
  if (!key.empty()) absl::StrAppend(&path, "/", UriEncode(key, true));
  return path;
}

}  // namespace

class Client::Impl {
 public:
  explicit Impl(ClientOptions options) : o(std::move(options)) {}
  ~Impl() { CloseConn(); }

  absl::Status Open() {
    CloseConn();
    OL_ASSIGN_OR_RETURN(fd, io::Connect(addr, o.connect_timeout));
    rbeg = rend = 0;
    return absl::OkStatus();
  }

  void CloseConn() {
    if (fd >= 0) close(fd);
    fd = -1;
    rbeg = rend = 0;
  }

  // One exchange: sends the request and reads the response's body into `sink` (a body that
  // does not fit fails with OutOfRange). Returns the response head; a status other than 2xx
  // becomes the error it carries.
  absl::StatusOr<http::ResponseHead> Do(std::string_view method, const std::string& path,
                                        std::string_view body, Sink* sink) {
    return Do(method, path, "", {}, body, sink);
  }
  // The same with a query (percent-encoded, without '?') and headers beyond the signed ones.
  absl::StatusOr<http::ResponseHead> Do(std::string_view method, const std::string& path,
                                        std::string_view query,
                                        const std::vector<HttpHeader>& extra,
                                        std::string_view body, Sink* sink) {
    const std::string head = RequestHead(method, path, query, extra, body);
    // A kept connection may have been closed by the server while idle: when nothing at all
    // came back, the request is sent once more on a new connection.
    for (int attempt = 0;; ++attempt) {
      const bool fresh = fd < 0;
      if (fresh) OL_RETURN_IF_ERROR(Open());
      bool got_bytes = false;
      absl::StatusOr<http::ResponseHead> r =
          SendAndReadHead(head, body, method == "HEAD", &got_bytes);
      if (!r.ok()) {
        CloseConn();
        if (!fresh && !got_bytes && attempt == 0 && absl::IsUnavailable(r.status())) continue;
        return r.status();
      }
      if (r->status >= 300) return ErrorOf(*r);
      if (absl::Status st = ReadBody(*r, sink); !st.ok()) {
        CloseConn();
        return st;
      }
      if (!r->keep_alive) CloseConn();
      return r;
    }
  }

  ClientOptions o;
  io::SocketAddress addr;

 private:
  std::string RequestHead(std::string_view method, const std::string& path,
                          std::string_view query, const std::vector<HttpHeader>& extra,
                          std::string_view body) {
    RequestToSign r;
    r.method = std::string(method);
    r.host = o.endpoint;
    r.path = path;
    r.query = std::string(query);
    if (o.sign_payload) r.payload_sha256 = Sha256Hex(body);
    std::string out = StrCat(method, " ", path, query.empty() ? "" : "?", query,
                             " HTTP/1.1\r\nHost: ", o.endpoint, "\r\n");
    for (const HttpHeader& h : SignV4Headers(r, o.credential, o.region, absl::Now())) {
      absl::StrAppend(&out, h.name, ": ", h.value, "\r\n");
    }
    for (const HttpHeader& h : extra) absl::StrAppend(&out, h.name, ": ", h.value, "\r\n");
    if (method == "PUT" || !body.empty()) {
      absl::StrAppend(&out, "Content-Length: ", body.size(), "\r\n");
    }
    out += "\r\n";
    return out;
  }

  // A transfer's failure as this client reports it: DeadlineExceeded when the socket made no
  // progress for io_timeout, else Unavailable.
  static absl::Status IoError(const absl::Status& st) {
    return absl::IsDeadlineExceeded(st) ? st : absl::UnavailableError(st.message());
  }

  absl::Status SendAll(std::string_view head, std::string_view body) {
    iovec iov[2] = {{const_cast<char*>(head.data()), head.size()},
                    {const_cast<char*>(body.data()), body.size()}};
    const absl::Status st =
        io::SendAll(fd, iov, 2, o.endpoint, absl::InfiniteFuture(), o.io_timeout);
    return st.ok() ? st : IoError(st);
  }

  // Up to `len` bytes from the socket into `dst`; Unavailable when the server closed it.
  absl::StatusOr<size_t> Recv(char* dst, size_t len) {
    absl::StatusOr<size_t> n = io::RecvSome(fd, dst, len, o.endpoint, absl::Now() + o.io_timeout);
    if (!n.ok()) return IoError(n.status());
    return n;
  }

  // Reads more bytes into the buffer. Unavailable when the server closed the connection.
  absl::Status Fill() {
    if (rbeg == rend) rbeg = rend = 0;
    if (rend == kReadBuffer && rbeg > 0) {
      std::memmove(rbuf.get(), rbuf.get() + rbeg, rend - rbeg);
      rend -= rbeg;
      rbeg = 0;
    }
    if (rend == kReadBuffer) return absl::InternalError("response head too large");
    OL_ASSIGN_OR_RETURN(size_t n, Recv(rbuf.get() + rend, kReadBuffer - rend));
    if (n == 0) return absl::UnavailableError(StrCat(o.endpoint, " closed the connection"));
    rend += n;
    return absl::OkStatus();
  }

  std::string_view Buffered() const { return {rbuf.get() + rbeg, rend - rbeg}; }

  absl::StatusOr<http::ResponseHead> SendAndReadHead(std::string_view head, std::string_view body,
                                                     bool head_request, bool* got_bytes) {
    OL_RETURN_IF_ERROR(SendAll(head, body));
    while (true) {
      if (rend > rbeg) {
        *got_bytes = true;
        http::ResponseHead resp;
        const http::HeadResult r =
            http::ParseResponseHead(Buffered(), http::Limits(), head_request, &resp);
        if (r.state == http::HeadResult::kError) {
          return absl::InternalError(StrCat("malformed response from ", o.endpoint, ": ", r.error));
        }
        if (r.state == http::HeadResult::kComplete) {
          rbeg += r.consumed;
          if (resp.status == 100) continue;  // an interim response: the real one follows
          return resp;
        }
      }
      OL_RETURN_IF_ERROR(Fill());
    }
  }

  // Takes up to `n` buffered bytes into `dst`; how many.
  size_t TakeBuffered(char* dst, size_t n) {
    const size_t take = std::min(n, rend - rbeg);
    std::memcpy(dst, rbuf.get() + rbeg, take);
    rbeg += take;
    return take;
  }

  absl::Status TooLarge(uint64_t size) {
    return absl::OutOfRangeError(StrCat("the object is larger than the buffer given (",
                                        size > 0 ? StrCat(size, " bytes") : "chunked", ")"));
  }

  absl::Status ReadBody(const http::ResponseHead& h, Sink* sink) {
    if (h.framing == http::BodyFraming::kLength) {
      if (h.content_length > SIZE_MAX) return TooLarge(h.content_length);
      const auto len = static_cast<size_t>(h.content_length);
      if (len == 0) return absl::OkStatus();
      char* dst = sink->Reserve(len);
      if (dst == nullptr) return TooLarge(h.content_length);
      size_t got = TakeBuffered(dst, len);
      // The rest straight from the socket into place.
      while (got < len) {
        OL_ASSIGN_OR_RETURN(size_t n, Recv(dst + got, len - got));
        if (n == 0) {
          return absl::UnavailableError(StrCat(o.endpoint, " closed the connection mid-body"));
        }
        got += n;
      }
      sink->size += len;
      return absl::OkStatus();
    }
    if (h.framing == http::BodyFraming::kChunked) {
      http::ChunkedDecoder decoder;
      while (true) {
        http::ChunkedDecoder::Event ev;
        const size_t used = decoder.Next(Buffered(), &ev);
        rbeg += used;
        if (ev.kind == http::ChunkedDecoder::Event::kEnd) return absl::OkStatus();
        if (ev.kind == http::ChunkedDecoder::Event::kError) {
          return absl::InternalError(
              StrCat("malformed chunked body from ", o.endpoint, ": ", ev.error));
        }
        if (ev.kind == http::ChunkedDecoder::Event::kData) {
          char* dst = sink->Reserve(ev.data.size());
          if (dst == nullptr) return TooLarge(0);
          std::memcpy(dst, ev.data.data(), ev.data.size());
          sink->size += ev.data.size();
        } else if (used == 0 || rbeg == rend) {
          OL_RETURN_IF_ERROR(Fill());
        }
      }
    }
    if (h.until_close) {
      while (true) {
        if (rend > rbeg) {
          char* dst = sink->Reserve(rend - rbeg);
          if (dst == nullptr) return TooLarge(0);
          sink->size += TakeBuffered(dst, rend - rbeg);
        }
        absl::Status st = Fill();
        if (absl::IsUnavailable(st)) return absl::OkStatus();  // the end of the body
        OL_RETURN_IF_ERROR(st);
      }
    }
    return absl::OkStatus();
  }

  // The error a non-2xx response carries (its body read and parsed).
  absl::Status ErrorOf(const http::ResponseHead& h) {
    std::string body;
    Sink sink;
    sink.grow = &body;
    const bool small = h.framing != http::BodyFraming::kLength || h.content_length <= kMaxErrorBody;
    absl::Status read = small ? ReadBody(h, &sink) : absl::OutOfRangeError("error body too large");
    if (!read.ok() || !h.keep_alive) {
      CloseConn();
    }
    body.resize(sink.size);
    absl::StatusOr<S3Error> e = ParseErrorXml(body);
    if (!e.ok()) {
      return S3Status(h.status, CodeForBodiless(h.status),
                      StrCat("HTTP ", h.status, body.empty() ? " (no error document)" : ""));
    }
    return S3Status(h.status, e->code, e->message);
  }

  int fd = -1;
  std::unique_ptr<char[]> rbuf{new char[kReadBuffer]};
  size_t rbeg = 0, rend = 0;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::StatusOr<io::SocketAddress> addr = io::SocketAddress::Parse(impl->o.endpoint);
  if (!addr.ok()) {
    return absl::InvalidArgumentError(
        StrCat("S3 endpoint '", impl->o.endpoint, "': ", addr.status().message()));
  }
  impl->addr = *addr;
  OL_RETURN_IF_ERROR(impl->Open());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const ClientOptions& Client::options() const { return impl_->o; }

absl::Status Client::CreateBucket(std::string_view bucket) {
  Sink none;
  return impl_->Do("PUT", PathOf(bucket, ""), "", &none).status();
}

absl::Status Client::HeadBucket(std::string_view bucket) {
  Sink none;
  return impl_->Do("HEAD", PathOf(bucket, ""), "", &none).status();
}

absl::StatusOr<std::string> Client::PutObject(std::string_view bucket, std::string_view key,
                                              std::string_view data) {
  Sink none;
  OL_ASSIGN_OR_RETURN(http::ResponseHead h, impl_->Do("PUT", PathOf(bucket, key), data, &none));
  return std::string(Unquoted(h.Value("etag")));
}

absl::StatusOr<size_t> Client::GetObjectRange(std::string_view bucket, std::string_view key,
                                              uint64_t offset, absl::Span<char> out) {
  if (out.empty()) return 0;
  Sink sink;
  sink.buf = out.data();
  sink.cap = out.size();
  const std::vector<HttpHeader> range = {
      {"Range", StrCat("bytes=", offset, "-", offset + out.size() - 1)}};
  OL_ASSIGN_OR_RETURN(http::ResponseHead h,
                      impl_->Do("GET", PathOf(bucket, key), "", range, "", &sink));
  if (h.status != 206 && offset > 0) {
    // A server that ignored the range sent the whole object from its start: not what was
    // asked for (and it was too large for `out` unless it fitted by chance).
    return absl::InternalError(StrCat("the server ignored the range of ", key));
  }
  return sink.size;
}

absl::StatusOr<ObjectHead> Client::HeadObject(std::string_view bucket, std::string_view key) {
  Sink none;
  OL_ASSIGN_OR_RETURN(http::ResponseHead h, impl_->Do("HEAD", PathOf(bucket, key), "", &none));
  ObjectHead out;
  out.size = h.content_length;
  out.etag = std::string(Unquoted(h.Value("etag")));
  out.content_type = std::string(h.Value("content-type"));
  out.last_modified = std::string(h.Value("last-modified"));
  return out;
}

absl::StatusOr<size_t> Client::GetObject(std::string_view bucket, std::string_view key,
                                         absl::Span<char> out) {
  Sink sink;
  sink.buf = out.data();
  sink.cap = out.size();
  OL_RETURN_IF_ERROR(impl_->Do("GET", PathOf(bucket, key), "", &sink).status());
  return sink.size;
}

absl::StatusOr<std::string> Client::GetObject(std::string_view bucket, std::string_view key) {
  std::string body;
  Sink sink;
  sink.grow = &body;
  OL_RETURN_IF_ERROR(impl_->Do("GET", PathOf(bucket, key), "", &sink).status());
  body.resize(sink.size);
  return body;
}

absl::Status Client::DeleteObject(std::string_view bucket, std::string_view key) {
  Sink none;
  return impl_->Do("DELETE", PathOf(bucket, key), "", &none).status();
}

absl::StatusOr<std::string> Client::CreateMultipartUpload(std::string_view bucket,
                                                          std::string_view key) {
  std::string body;
  Sink sink;
  sink.grow = &body;
  OL_RETURN_IF_ERROR(impl_->Do("POST", PathOf(bucket, key), "uploads=", {}, "", &sink).status());
  body.resize(sink.size);
  return ParseInitiateResult(body);
}

absl::StatusOr<std::string> Client::UploadPart(std::string_view bucket, std::string_view key,
                                               std::string_view upload_id, int part_number,
                                               std::string_view data) {
  Sink none;
  const std::string query =
      StrCat("partNumber=", part_number, "&uploadId=", UriEncode(upload_id, false));
  OL_ASSIGN_OR_RETURN(http::ResponseHead h,
                      impl_->Do("PUT", PathOf(bucket, key), query, {}, data, &none));
  return std::string(Unquoted(h.Value("etag")));
}

absl::StatusOr<std::string> Client::CompleteMultipartUpload(std::string_view bucket,
                                                            std::string_view key,
                                                            std::string_view upload_id,
                                                            const std::vector<PartEtag>& parts) {
  XmlWriter w("CompleteMultipartUpload");
  for (const PartEtag& p : parts) {
    w.Open("Part");
    w.Element("PartNumber", StrCat(p.number));
    w.Element("ETag", StrCat("\"", p.etag, "\""));
    w.Close();
  }
  const std::string doc = w.Finish();
  std::string body;
  Sink sink;
  sink.grow = &body;
  OL_RETURN_IF_ERROR(impl_->Do("POST", PathOf(bucket, key),
                               StrCat("uploadId=", UriEncode(upload_id, false)), {}, doc, &sink)
                         .status());
  body.resize(sink.size);
  // S3 may answer 200 and then report a failure in the body.
  absl::StatusOr<S3Error> failed = ParseErrorXml(body);
  if (failed.ok()) {
    const int http = failed->code == "SlowDown" || failed->code == "ServiceUnavailable" ? 503 : 500;
    return S3Status(http, failed->code, failed->message);
  }
  return ParseCompleteResult(body);
}

absl::Status Client::AbortMultipartUpload(std::string_view bucket, std::string_view key,
                                          std::string_view upload_id) {
  Sink none;
  return impl_
      ->Do("DELETE", PathOf(bucket, key), StrCat("uploadId=", UriEncode(upload_id, false)), {},
           "", &none)
      .status();
}

absl::StatusOr<ListPage> Client::ListObjectsV2(std::string_view bucket,
                                               const ListOptions& options) {
  // Parameters in any order: the signature sorts them.
  std::string query = StrCat("list-type=2&max-keys=", options.max_keys);
  if (!options.prefix.empty()) absl::StrAppend(&query, "&prefix=", UriEncode(options.prefix, false));
  if (!options.delimiter.empty()) {
    absl::StrAppend(&query, "&delimiter=", UriEncode(options.delimiter, false));
  }
  if (!options.continuation_token.empty()) {
    absl::StrAppend(&query, "&continuation-token=",
                    UriEncode(options.continuation_token, false));
  }
  std::string body;
  Sink sink;
  sink.grow = &body;
  OL_RETURN_IF_ERROR(impl_->Do("GET", PathOf(bucket, ""), query, {}, "", &sink).status());
  body.resize(sink.size);
  return ParseListResult(body);
}

std::string ErrorCodeOf(const absl::Status& status) {
  if (status.ok()) return "";
  const auto p = status.GetPayload(AV(kErrorCodeUrl));
  return p ? std::string(*p) : std::string();
}

std::vector<HttpHeader> SignV4Headers(const RequestToSign& r, const Credential& credential,
                                      std::string_view region, absl::Time now) {
  std::vector<http::Header> h;
  h.push_back({"host", r.host});
  h.push_back({"x-amz-content-sha256", r.payload_sha256});
  h.push_back({"x-amz-date", FormatAmzDate(absl::ToUnixSeconds(now))});
  SigV4SignInput in;
  in.method = r.method;
  in.path = r.path;
  in.query = r.query;
  in.headers = &h;
  in.access_key = credential.access_key;
  in.secret_key = credential.secret_key;
  in.region = region;
  const std::string authorization = SignV4(in);
  return {{"x-amz-date", h[2].value},
          {"x-amz-content-sha256", h[1].value},
          {"Authorization", authorization}};
}

}  // namespace openlake::s3

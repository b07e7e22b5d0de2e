// An HTTP/1.1 server on the core-local runtime (docs/s3.md, "The HTTP server"). Reactor 0
// accepts; each connection is handed to a reactor in turn and served there by one coroutine:
// read a head, call the handler with an Exchange (the request, its body as a stream, the
// response as a stream), then the next request on the same connection (keep-alive, pipelining)
// until the client closes, asks to close, goes idle, or the framing goes wrong.
//
//   auto server = http::Server::Start(runtime, addr, opts, [](http::Exchange& ex)
//       -> io::Task<void> {
//     while (true) {
//       auto piece = co_await ex.ReadBody();  // the body, as it arrives
//       if (!piece.ok() || piece->empty()) break;
//     }
//     ex.SetStatus(200);
//     ex.AddHeader("Content-Type", "text/plain");
//     (void)co_await ex.Respond("done\n");
//   });
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "http/framing.h"
#include "io/acceptor.h"

#include "openlake/io/reactor.h"
#include "openlake/io/socket.h"
#include "openlake/io/task.h"

namespace openlake::http {

struct ServerOptions {
  Limits limits;
  // A connection with no request in progress, or a head or body not progressing, for this
  // long is closed (a head cut short gets 408 first).
  absl::Duration idle_timeout = absl::Seconds(60);
  // A request head must be whole this long after its first byte, however it trickles in
  // (408 otherwise); MinIO allows about as long.
  absl::Duration head_timeout = absl::Seconds(30);
  // A response the client does not take for this long closes the connection.
  absl::Duration send_timeout = absl::Seconds(60);
  size_t max_connections = 4096;
  // Connections open at once from one client address; 0: no cap.
  size_t max_per_client = 0;
  // Connections accepted beyond max_connections for the requests `reserve_serves` admits
  // (health probes): one request each, a short head deadline (reserve_head_timeout), and 503
  // for anything else. 0 or no predicate: none.
  size_t reserve = 0;
  std::function<bool(const Request&)> reserve_serves;
  absl::Duration reserve_head_timeout = absl::Seconds(5);
  size_t read_size = 256 << 10;  // bytes asked of each recv
  // A body the handler left unread is read and dropped up to this size so the connection can
  // carry the next request; beyond it the connection closes.
  uint64_t max_drain = 1 << 20;
  // The body of error responses the server makes itself (framing errors, timeouts): given the
  // status and why; empty means none. `headers` may get extra header lines ("Name: v\r\n").
  std::function<std::string(int status, std::string_view why, std::string* content_type,
                            std::string* headers)>
      error_body;
};

class Server;

// One request and its response. Lives until the handler's task ends.
class Exchange {
 public:
  const Request& request() const { return req_; }

  // The next piece of the body (a view valid until the next call); empty once the body is
  // whole. Errors: the peer closed early or went quiet (DataLoss / DeadlineExceeded), or the
  // chunked framing is malformed (InvalidArgument). Sends "100 Continue" first when the
  // client waits for it.
  io::Task<absl::StatusOr<std::string_view>> ReadBody();
  // True once every byte of the body was read.
  bool body_done() const { return body_done_; }
  // Trailer fields of a chunked body (after it is whole).
  const std::vector<Header>& trailers() const;
  // The chunk extensions of the chunk the last piece came from (chunked bodies).
  std::string_view chunk_extensions() const { return chunk_ext_; }

  void SetStatus(int status) { status_ = status; }
  void AddHeader(std::string name, std::string value) {
    headers_.emplace_back(std::move(name), std::move(value));
  }
  // Closes the connection after this response.
  void CloseAfter() { close_after_ = true; }

  // The whole response: head (with Content-Length) and `body`. HEAD requests get the head only.
  io::Task<absl::Status> Respond(std::string_view body);
  // A response streamed in pieces: the head with Content-Length `length`, then Write until
  // that many bytes went (fewer closes the connection: the client sees a short body). The head
  // goes out with the first Write (one send for a small object's whole response).
  io::Task<absl::Status> StartResponse(uint64_t length);
  io::Task<absl::Status> Write(std::string_view data);
  bool responded() const { return head_sent_; }
  int status() const { return status_; }
  // The client's IP address ("203.0.113.7", "2001:db8::1"); "" when the socket has none.
  std::string peer_address() const;
  uint64_t bytes_in() const { return bytes_in_; }    // body bytes read (decoded framing)
  uint64_t bytes_out() const { return bytes_out_; }  // response bytes sent, head included

 private:
  friend class Server;
  struct Conn;
  Exchange(Conn* c, Request req);
  io::Task<absl::Status> SendAll(std::string_view data);
  io::Task<absl::Status> FlushHead();
  // The response head; to an Expect: 100-continue never granted, after "100 Continue" (no
  // body) or with a close (an uninvited body; see there).
  std::string Head(uint64_t length);

  Conn* c_;
  Request req_;
  uint64_t body_left_ = 0;  // kLength
  std::unique_ptr<ChunkedDecoder> chunked_;
  bool body_done_ = false;
  bool continue_sent_ = false;
  std::string chunk_ext_;
  int status_ = 200;
  std::vector<std::pair<std::string, std::string>> headers_;
  bool close_after_ = false;
  bool head_sent_ = false;
  std::string pending_head_;  // StartResponse's head, sent with the first Write
  uint64_t response_left_ = 0;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  bool failed_ = false;
};

using Handler = std::function<io::Task<void>(Exchange&)>;

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(io::Runtime& rt,
                                                       const io::SocketAddress& addr,
                                                       ServerOptions options, Handler handler);
  ~Server();  // Stop()

  uint16_t port() const { return port_; }
  const io::SocketAddress& address() const { return addr_; }
  size_t connections() const;

  // Stops accepting, ends every connection (in-flight exchanges see their sends and reads
  // fail) and waits for their coroutines to finish. Not from a reactor thread. Idempotent.
  void Stop();

 private:
  Server(io::Runtime& rt, ServerOptions options, Handler handler);
  io::Task<void> Serve(io::Connection conn);
  // A whole response, with Connection: close, for an error the server answers itself.
  std::string ErrorResponse(int status, std::string_view why) const;

  io::Runtime& rt_;
  ServerOptions opts_;
  Handler handler_;
  io::SocketAddress addr_;
  uint16_t port_ = 0;
  std::unique_ptr<io::Acceptor> acceptor_;  // on reactor 0
  std::atomic<bool> stopping_{false};
  unsigned next_reactor_ = 0;  // reactor 0's thread only
};

}  // namespace openlake::http

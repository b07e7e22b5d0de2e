// The coroutine RPC client: one connection to one server, living on one reactor, for code that
// runs there (the object store talking to drives on other nodes). Private to the library, like
// net/frame.h; the protocol is docs/rpc.md, and "The coroutine client (RpcChannel)" there says
// what this client does.
//
//   net::RpcChannel ch(reactor, addr, {.secret = secret});          // on `reactor`'s thread
//   absl::StatusOr<std::string> r = co_await ch.Call(kEcho, "hi");  // from a coroutine there
//
// Everything goes through the reactor's ring: the connect, the handshake, the sends and one
// receive loop per connection; nothing blocks the thread. Many Calls may be in flight at once
// (from different coroutines on the reactor): they are pipelined on the one connection and
// their answers matched by request id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "openlake/io/reactor.h"
#include "openlake/io/socket.h"
#include "openlake/io/task.h"
#include "openlake/net/rpc.h"

namespace openlake::net {

struct RpcChannelOptions {
  // The cluster's shared secret, for servers that ask for the handshake.
  std::string secret;
  // Connect, hello and authentication together.
  absl::Duration connect_timeout = absl::Seconds(5);
  // Deadline of calls that do not pass their own; also how long one send may stall before the
  // connection is given up.
  absl::Duration call_timeout = absl::Seconds(10);
  // Largest payload sent or accepted.
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
};

// Thread affinity: construct, call and destroy on `reactor`'s thread. (Destroying it elsewhere
// is allowed once the reactor's runtime has stopped.)
class RpcChannel {
 public:
  // Connects lazily: on the first Call, and again on a later Call after the connection broke.
  RpcChannel(io::Reactor& reactor, io::SocketAddress addr, RpcChannelOptions options);
  // Closes the connection. Calls still in flight come back Cancelled (on later turns of the
  // reactor's loop); their frames keep the channel's shared state alive until then, so nothing
  // touches freed memory.
  ~RpcChannel();
  RpcChannel(const RpcChannel&) = delete;
  RpcChannel& operator=(const RpcChannel&) = delete;

  // One request, one answer: the answer's payload, or the server's non-OK status as that
  // status. `timeout` zero means options.call_timeout. Errors of the channel itself:
  //   Unavailable       the server cannot be reached, or the connection broke while the call
  //                     waited (the message names the address and the cause)
  //   PermissionDenied  the handshake failed: no secret, or a wrong one
  //   DeadlineExceeded  no answer before the deadline (the connection stays up)
  //   InvalidArgument   the payload exceeds max_frame_bytes
  //   Cancelled         the channel was destroyed
  // The Task holds the channel's state, not the channel: it may outlive the channel.
  io::Task<absl::StatusOr<std::string>> Call(uint16_t method, std::string payload,
                                             absl::Duration timeout = absl::ZeroDuration());

  // True while a connection is up (handshake done, not broken).
  bool connected() const;
  const io::SocketAddress& address() const;

  struct State;  // shared by the channel, its calls in flight and its connections

 private:
  std::shared_ptr<State> state_;
};

}  // namespace openlake::net

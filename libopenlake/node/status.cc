// The node status RPC (see openlake/node/status.h).
#include "openlake/node/status.h"

#include <utility>

#include "node/node.pb.h"

#include "openlake/io/socket.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::node {

namespace {

std::string Encode(const NodeStatus& s) {
  wire::StatusResponse m;
  m.set_node_id(s.node_id);
  m.set_version(s.version);
  m.set_uptime_secs(s.uptime_secs);
  m.set_reactors(s.reactors);
  m.set_kv(s.kv);
  m.set_kv_slab_bytes(s.kv_slab_bytes);
  m.set_s3(s.s3);
  m.set_s3_addr(s.s3_addr);
  m.set_admin_addr(s.admin_addr);
  m.set_deployment_id(s.deployment_id);
  m.set_set_count(s.set_count);
  m.set_data_shards(s.data_shards);
  m.set_parity_shards(s.parity_shards);
  m.set_kv_ucx(s.kv_ucx);
  m.set_kv_ucx_tls(s.kv_ucx_tls);
  m.set_kv_ucx_devices(s.kv_ucx_devices);
  for (const DriveStatus& d : s.drives) {
    wire::Drive* w = m.add_drives();
    w->set_path(d.path);
    w->set_set(d.set);
    w->set_position(d.position);
    w->set_online(d.online);
    w->set_state(d.state);
    w->set_drive_id(d.drive_id);
    w->set_total_bytes(d.total_bytes);
    w->set_free_bytes(d.free_bytes);
    w->set_errors(d.errors);
    w->set_node(d.node);
    w->set_remote(d.remote);
  }
  for (const PeerView& p : s.peers) {
    wire::Peer* w = m.add_peers();
    w->set_id(p.id);
    w->set_rpc_addr(p.rpc_addr);
    w->set_state(p.state);
    w->set_missed(p.missed);
    w->set_since_secs(p.since_secs);
  }
  return m.SerializeAsString();
}

absl::StatusOr<NodeStatus> Decode(const std::string& payload) {
  wire::StatusResponse m;
  if (!m.ParseFromString(payload)) {
    return absl::DataLossError("malformed node status answer");
  }
  NodeStatus s;
  s.node_id = m.node_id();
  s.version = m.version();
  s.uptime_secs = m.uptime_secs();
  s.reactors = m.reactors();
  s.kv = m.kv();
  s.kv_slab_bytes = m.kv_slab_bytes();
  s.s3 = m.s3();
  s.s3_addr = m.s3_addr();
  s.admin_addr = m.admin_addr();
  s.deployment_id = m.deployment_id();
  s.set_count = m.set_count();
  s.data_shards = m.data_shards();
  s.parity_shards = m.parity_shards();
  s.kv_ucx = m.kv_ucx();
  s.kv_ucx_tls = m.kv_ucx_tls();
  s.kv_ucx_devices = m.kv_ucx_devices();
  for (const wire::Drive& w : m.drives()) {
    DriveStatus d;
    d.path = w.path();
    d.set = w.set();
    d.position = w.position();
    d.online = w.online();
    d.state = w.state();
    d.drive_id = w.drive_id();
    d.total_bytes = w.total_bytes();
    d.free_bytes = w.free_bytes();
    d.errors = w.errors();
    d.node = w.node();
    d.remote = w.remote();
    s.drives.push_back(std::move(d));
  }
  for (const wire::Peer& w : m.peers()) {
    s.peers.push_back(PeerView{w.id(), w.rpc_addr(), w.state(), w.missed(), w.since_secs()});
  }
  return s;
}

}  // namespace

struct StatusServer::Holder {
  std::unique_ptr<net::RpcServer> server;  // touched on its reactor only
};

void ServeStatus(net::RpcServer& server, StatusFn fn) {
  server.Register(kStatusMethod,
                  [fn = std::move(fn)](net::RpcCall call) { call.Respond(Encode(fn())); });
}

absl::StatusOr<std::unique_ptr<StatusServer>> StatusServer::Start(io::Runtime& runtime,
                                                                  unsigned reactor,
                                                                  const std::string& address,
                                                                  const std::string& secret,
                                                                  StatusFn fn,
                                                                  ExtendFn extend) {
  if (reactor >= runtime.size()) {
    return absl::InvalidArgumentError(StrCat("reactor ", reactor, " does not exist"));
  }
  OL_ASSIGN_OR_RETURN(io::SocketAddress addr, io::SocketAddress::Parse(address));
  std::unique_ptr<StatusServer> s(new StatusServer());
  s->runtime_ = &runtime;
  s->reactor_ = reactor;
  absl::Status started;
  OL_RETURN_IF_ERROR(runtime.RunOn(reactor, [&] {
    net::RpcServerOptions ro;
    ro.secret = secret;
    auto server = net::RpcServer::Create(runtime.reactor(reactor), std::move(ro));
    if (!server.ok()) {
      started = server.status();
      return;
    }
    ServeStatus(**server, std::move(fn));
    if (extend) extend(**server);
    auto bound = (*server)->Listen(addr, io::ListenOptions{});
    if (!bound.ok()) {
      started = bound.status();
      return;  // the server is destroyed here, on its reactor
    }
    s->address_ = bound->ToString();
    s->holder_ = std::make_shared<Holder>();
    s->holder_->server = *std::move(server);
    runtime.reactor(reactor).AtStop([weak = std::weak_ptr<Holder>(s->holder_)] {
      if (auto h = weak.lock()) h->server.reset();
    });
  }));
  OL_RETURN_IF_ERROR(started);
  return s;
}

StatusServer::~StatusServer() { Stop(); }

void StatusServer::Stop() {
  if (!holder_) return;
  // The server lives on its reactor. When the runtime has stopped first, its AtStop hook has
  // already closed it there.
  (void)runtime_->RunOn(reactor_, [h = holder_] { h->server.reset(); });
  holder_.reset();
}

absl::StatusOr<NodeStatus> QueryStatus(net::RpcClient& client, absl::Duration timeout) {
  absl::StatusOr<net::RpcClient::Response> r = client.Call(kStatusMethod, "", timeout);
  if (!r.ok()) {
    if (absl::IsUnimplemented(r.status())) {
      return absl::UnimplementedError(
          StrCat("the server at ", client.address().ToString(),
                 " does not answer the node status method (not an openlaked of this version?)"));
    }
    return r.status();
  }
  return Decode(r->payload);
}

absl::StatusOr<NodeStatus> QueryStatus(const std::string& address, const QueryOptions& options) {
  OL_ASSIGN_OR_RETURN(io::SocketAddress addr, io::SocketAddress::Parse(address));
  net::RpcClientOptions co;
  co.secret = options.secret;
  co.connect_timeout = options.timeout;
  co.call_timeout = options.timeout;
  co.spin = absl::ZeroDuration();
  OL_ASSIGN_OR_RETURN(std::unique_ptr<net::RpcClient> client, net::RpcClient::Connect(addr, co));
  return QueryStatus(*client, options.timeout);
}

}  // namespace openlake::node

// The node status RPC: a StatusServer answers what its function says, the client decodes every
// field; the method beside other methods on one server (as on the KV pool's); the errors an
// operator's tool must tell apart.
#include "openlake/node/status.h"

#include <atomic>

#include <catch2/catch.hpp>

#include "io/test_util.h"

using openlake::node::DriveStatus;
using openlake::node::NodeStatus;
using openlake::node::QueryOptions;
using openlake::node::QueryStatus;
using openlake::node::StatusServer;

namespace {

NodeStatus Sample() {
  NodeStatus st;
  st.node_id = 7;
  st.version = "9.8.7";
  st.uptime_secs = 12.5;
  st.reactors = 3;
  st.kv = true;
  st.kv_slab_bytes = 1ull << 33;
  st.s3 = true;
  st.s3_addr = "127.0.0.1:9000";
  st.admin_addr = "127.0.0.1:9464";
  st.deployment_id = "0b6c5a52-0000-4000-8000-000000000001";
  st.set_count = 2;
  st.data_shards = 2;
  st.parity_shards = 2;
  for (int i = 0; i < 8; ++i) {
    DriveStatus d;
    d.path = "/srv/d" + std::to_string(i);
    d.set = i / 4;
    d.position = i % 4;
    d.online = i != 5;
    d.state = i == 5 ? "missing" : "ok";
    d.drive_id = "drive-" + std::to_string(i);
    d.total_bytes = (i + 1) * 1000ull;
    d.free_bytes = i * 10ull;
    d.errors = i * 3ull;
    st.drives.push_back(d);
  }
  st.peers.push_back({2, "127.0.0.1:9402", "up", 0, 12.5});
  st.peers.push_back({3, "127.0.0.1:9403", "down", 4, 3.25});
  return st;
}

}  // namespace

TEST_CASE("node status: every field travels", "[node]") {
  auto rt = openlake::testing::StartRuntime(1);
  REQUIRE(rt);
  std::atomic<int> calls{0};
  auto srv = StatusServer::Start(*rt, 0, "127.0.0.1:0", "", [&calls] {
    ++calls;
    return Sample();
  });
  REQUIRE(srv.ok());
  auto got = QueryStatus((*srv)->address(), QueryOptions{});
  REQUIRE(got.ok());
  const NodeStatus want = Sample();
  CHECK(got->node_id == want.node_id);
  CHECK(got->version == want.version);
  CHECK(got->uptime_secs == want.uptime_secs);
  CHECK(got->reactors == want.reactors);
  CHECK(got->kv);
  CHECK(got->kv_slab_bytes == want.kv_slab_bytes);
  CHECK(got->s3);
  CHECK(got->s3_addr == want.s3_addr);
  CHECK(got->admin_addr == want.admin_addr);
  CHECK(got->deployment_id == want.deployment_id);
  CHECK(got->set_count == 2);
  CHECK(got->data_shards == 2);
  CHECK(got->parity_shards == 2);
  REQUIRE(got->drives.size() == want.drives.size());
  for (size_t i = 0; i < want.drives.size(); ++i) {
    const DriveStatus& a = got->drives[i];
    const DriveStatus& b = want.drives[i];
    CHECK(a.path == b.path);
    CHECK(a.set == b.set);
    CHECK(a.position == b.position);
    CHECK(a.online == b.online);
    CHECK(a.state == b.state);
    CHECK(a.drive_id == b.drive_id);
    CHECK(a.total_bytes == b.total_bytes);
    CHECK(a.free_bytes == b.free_bytes);
    CHECK(a.errors == b.errors);
  }
  REQUIRE(got->peers.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(got->peers[i].id == want.peers[i].id);
    CHECK(got->peers[i].rpc_addr == want.peers[i].rpc_addr);
    CHECK(got->peers[i].state == want.peers[i].state);
    CHECK(got->peers[i].missed == want.peers[i].missed);
    CHECK(got->peers[i].since_secs == want.peers[i].since_secs);
  }
  CHECK(calls == 1);
  (*srv)->Stop();
  // Stopped: nothing answers there any more.
  auto after = QueryStatus((*srv)->address(), QueryOptions{{}, absl::Seconds(1)});
  CHECK(absl::IsUnavailable(after.status()));
  rt->Stop();
}

TEST_CASE("node status: beside other methods, and from servers without it", "[node]") {
  auto rt = openlake::testing::StartRuntime(1);
  REQUIRE(rt);
  std::unique_ptr<openlake::net::RpcServer> server;
  absl::StatusOr<openlake::io::SocketAddress> bound;
  const auto listen = [&](bool with_status) {
    REQUIRE(rt->RunOn(0, [&] {
                server = *openlake::net::RpcServer::Create(rt->reactor(0), {});
                server->Register(1, [](openlake::net::RpcCall c) { c.Respond("one"); });
                if (with_status) openlake::node::ServeStatus(*server, [] { return Sample(); });
                bound = server->Listen(*openlake::io::SocketAddress::Parse("127.0.0.1:0"), {});
              }).ok());
    REQUIRE(bound.ok());
  };
  listen(true);
  auto client = openlake::net::RpcClient::Connect(*bound, {});
  REQUIRE(client.ok());
  auto one = (*client)->Call(1, "");
  REQUIRE(one.ok());
  CHECK(one->payload == "one");
  auto st = QueryStatus(**client, absl::Seconds(2));
  REQUIRE(st.ok());
  CHECK(st->node_id == 7);
  client->reset();
  REQUIRE(rt->RunOn(0, [&] { server.reset(); }).ok());

  // An RPC server that is not an openlaked of this version.
  listen(false);
  auto other = QueryStatus(bound->ToString(), QueryOptions{});
  CHECK(absl::IsUnimplemented(other.status()));
  CHECK(std::string(other.status().message()).find("does not answer the node status method") !=
        std::string::npos);
  REQUIRE(rt->RunOn(0, [&] { server.reset(); }).ok());
  rt->Stop();
}

TEST_CASE("node status: listener rules", "[node]") {
  auto rt = openlake::testing::StartRuntime(1);
  REQUIRE(rt);
  auto fn = [] { return Sample(); };
  // Beyond loopback without a secret: refused, as every RPC listener.
  auto open = StatusServer::Start(*rt, 0, "0.0.0.0:0", "", fn);
  CHECK(absl::IsFailedPrecondition(open.status()));
  CHECK(absl::IsInvalidArgument(StatusServer::Start(*rt, 0, "not an address", "", fn).status()));
  CHECK(absl::IsInvalidArgument(StatusServer::Start(*rt, 3, "127.0.0.1:0", "", fn).status()));
  // (The handshake a secret turns on is net::RpcServer's, tested in tests/net; tests listen on
  // loopback only.)
  auto srv = StatusServer::Start(*rt, 0, "127.0.0.1:0", "", fn);
  REQUIRE(srv.ok());
  // A runtime that stops first closes the server itself; Stop afterwards is harmless.
  rt->Stop();
  (*srv)->Stop();
}

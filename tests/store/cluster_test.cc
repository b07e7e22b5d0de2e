// The object store over several nodes in one process: each "node" has its own runtime, RPC
// server with the cluster services on 127.0.0.1, drive folders and engine; the engines reach
// each other's drives over real loopback TCP. (tests/integration/cluster/ runs real daemons.)
#include <filesystem>
#include <thread>

#include <catch2/catch.hpp>

#include "store/engine.h"
#include "store/store_test_util.h"

#include "openlake/net/rpc.h"
#include "openlake/store/cluster.h"
#include "openlake/strings.h"

using namespace openlake;
using namespace openlake::testing;
using store::ErrorKind;
using store::ErrorKindOf;

TEST_CASE("cluster layout: the node varies fastest", "[store][cluster]") {
  std::vector<store::ClusterNodeSpec> nodes{{3, "c:1", 2}, {1, "a:1", 2}, {2, "b:1", 2}};
  auto slots = store::ClusterLayout(nodes, 6);
  REQUIRE(slots.ok());
  REQUIRE(slots->size() == 6);
  const uint32_t want_node[] = {1, 2, 3, 1, 2, 3};
  const uint32_t want_index[] = {0, 0, 0, 1, 1, 1};
  for (size_t i = 0; i < 6; ++i) {
    CHECK((*slots)[i].node == want_node[i]);
    CHECK((*slots)[i].index == want_index[i]);
  }
  // Four nodes of two drives in sets of four: each set has one drive of each node.
  std::vector<store::ClusterNodeSpec> four{{0, "", 2}, {1, "", 2}, {2, "", 2}, {3, "", 2}};
  auto s4 = store::ClusterLayout(four, 4);
  REQUIRE(s4.ok());
  for (size_t set = 0; set < 2; ++set) {
    std::set<uint32_t> seen;
    for (size_t p = 0; p < 4; ++p) seen.insert((*s4)[set * 4 + p].node);
    CHECK(seen.size() == 4);
  }
  CHECK(!store::ClusterLayout(nodes, 4).ok());  // 6 drives do not divide into sets of 4
  std::vector<store::ClusterNodeSpec> lopsided{{0, "", 4}, {1, "", 1}, {2, "", 1}};
  CHECK(!store::ClusterLayout(lopsided, 6).ok());  // a set would hold 4 of node 0
  std::vector<store::ClusterNodeSpec> twice{{0, "", 2}, {0, "", 2}};
  CHECK(!store::ClusterLayout(twice, 4).ok());
  // The digest follows what placement depends on, not the order of the list or addresses.
  const std::string d = store::LayoutDigest(nodes, 6, 2);
  std::vector<store::ClusterNodeSpec> moved{{1, "x:9", 2}, {2, "y:9", 2}, {3, "z:9", 2}};
  CHECK(store::LayoutDigest(moved, 6, 2) == d);
  CHECK(store::LayoutDigest(nodes, 6, 3) != d);
  std::vector<store::ClusterNodeSpec> more{{1, "", 2}, {2, "", 2}, {3, "", 3}};
  CHECK(store::LayoutDigest(more, 6, 2) != d);
}

namespace {

// One node: a runtime, an RPC server with the cluster services, drive folders, an engine.
class Node {
 public:
  Node(uint32_t id, const std::string& root, int drives) : id_(id) {
    for (int i = 0; i < drives; ++i) {
      paths_.push_back(StrCat(root, "/n", id, "d", i));
      std::filesystem::create_directories(paths_.back());
    }
    REQUIRE(rt_->RunOn(0, [&] {
                 server_ = *net::RpcServer::Create(rt_->reactor(0), {});
                 addr_ = server_->Listen(*io::SocketAddress::Parse("127.0.0.1:0"), {})->ToString();
               }).ok());
  }
  ~Node() { Stop(); }

  // The services need the layout's digest, known once every node's address is.
  void Serve(const std::string& digest) {
    REQUIRE(rt_->RunOn(0, [&] {
                 store::ClusterServiceOptions o;
                 o.node_id = id_;
                 o.drives = paths_;
                 o.layout_digest = digest;
                 services_ = store::ClusterServices::Attach(*server_, std::move(o));
               }).ok());
  }
  absl::Status Open(store::ClusterSpec spec, int set_drive_count, int parity) {
    store::StoreOptions o;
    o.drives = paths_;
    o.set_drive_count = set_drive_count;
    o.parity = parity;
    o.block_size = 16 << 10;
    spec.self_id = id_;
    spec.runtime = rt_.get();
    spec.boot_timeout = absl::Seconds(20);
    spec.call_timeout = absl::Seconds(2);
    o.cluster = spec;
    auto st = store::Store::Open(o);
    if (!st.ok()) return st.status();
    store_ = *std::move(st);
    return absl::OkStatus();
  }
  // The node dies: its server and engine go (its folders stay).
  void Stop() {
    store_.reset();
    if (server_ != nullptr) {
      (void)rt_->RunOn(0, [&] {
        server_->Stop();
        services_.reset();
        server_.reset();
      });
    }
  }
  store::Store& st() { return *store_; }
  io::Runtime& rt() { return *rt_; }
  const std::string& address() const { return addr_; }
  const std::vector<std::string>& paths() const { return paths_; }
  uint32_t id() const { return id_; }

  absl::StatusOr<store::ObjectInfo> Put(const std::string& b, const std::string& k,
                                        const std::string& data) {
    return io::BlockOn(*rt_, 1, [&]() -> io::Task<absl::StatusOr<store::ObjectInfo>> {
      const store::PutOptions none;
      OL_CO_ASSIGN_OR_RETURN(auto w, co_await store_->CreateObject(b, k, none));
      OL_CO_RETURN_IF_ERROR(co_await w->Write(Bytes(data)));
      co_return co_await w->Commit();
    });
  }
  absl::StatusOr<std::string> Get(const std::string& b, const std::string& k) {
    return io::BlockOn(*rt_, 1, [&]() -> io::Task<absl::StatusOr<std::string>> {
      const store::GetOptions none;
      OL_CO_ASSIGN_OR_RETURN(auto r, co_await store_->OpenObject(b, k, none));
      std::string out;
      while (true) {
        OL_CO_ASSIGN_OR_RETURN(absl::Span<const std::byte> chunk, co_await r->Next());
        if (chunk.empty()) break;
        out.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
      }
      co_return out;
    });
  }

 private:
  uint32_t id_;
  std::unique_ptr<io::Runtime> rt_ = StartRuntime(2);
  std::vector<std::string> paths_;
  std::unique_ptr<net::RpcServer> server_;
  std::unique_ptr<store::ClusterServices> services_;
  std::string addr_;
  std::unique_ptr<store::Store> store_;
};

// Three nodes of two drives, RS(4+2), opened at once (each waits for the others; node 1, the
// lowest id, formats the blank cluster).
struct Cluster {
  TempDir dir;
  std::vector<std::unique_ptr<Node>> nodes;
  store::ClusterSpec spec;

  explicit Cluster(int count = 3, int drives = 2) {
    for (int i = 1; i <= count; ++i) {
      nodes.push_back(std::make_unique<Node>(static_cast<uint32_t>(i), dir.path(), drives));
    }
    for (auto& n : nodes) {
      spec.nodes.push_back({n->id(), n->address(), static_cast<uint32_t>(drives)});
    }
    const std::string digest = store::LayoutDigest(spec.nodes, SetSize(), Parity());
    for (auto& n : nodes) n->Serve(digest);
  }
  int SetSize() const { return nodes.size() == 4 ? 4 : 6; }
  int Parity() const { return 2; }
  // Opens every node's engine at once.
  void OpenAll() {
    std::vector<absl::Status> results(nodes.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < nodes.size(); ++i) {
      threads.emplace_back([&, i] { results[i] = nodes[i]->Open(spec, SetSize(), Parity()); });
    }
    for (auto& t : threads) t.join();
    for (const absl::Status& s : results) REQUIRE(s.ok());
  }
};

}  // namespace

TEST_CASE("cluster: three nodes form one store; any node serves any object", "[store][cluster]") {
  Cluster c;
  c.OpenAll();
  Node& a = *c.nodes[0];
  Node& b = *c.nodes[1];
  Node& n3 = *c.nodes[2];
  // One deployment, formatted once, every drive knowing its node.
  CHECK(a.st().deployment_id() == b.st().deployment_id());
  CHECK(a.st().deployment_id() == n3.st().deployment_id());
  CHECK(a.st().set_count() == 1);
  CHECK(a.st().data_shards() == 4);
  CHECK(a.st().write_quorum() == 4);  // MinIO's rule in a cluster: k when m < k
  for (const store::DriveInfo& d : b.st().Drives()) {
    CHECK(d.online);
    CHECK(d.local == (d.node == b.id()));
  }
  auto inspect = store::InspectDrive(n3.paths()[1]);
  REQUIRE(inspect.identity.has_value());
  CHECK(inspect.identity->node_id == 3);
  CHECK(inspect.identity->position == 5);  // node 3's second drive: the last place of the set

  REQUIRE(io::BlockOn(a.rt(), 0, [&] { return a.st().MakeBucket("bkt"); }).ok());
  auto seen = io::BlockOn(n3.rt(), 0, [&] { return n3.st().StatBucket("bkt"); });
  REQUIRE(seen.ok());
  std::map<std::string, std::string> written;
  for (int i = 0; i < 12; ++i) {
    Node& via = *c.nodes[static_cast<size_t>(i % 3)];
    const std::string key = StrCat("k", i);
    const std::string data = RandomBytes(static_cast<size_t>(i) * 23456 + 1, static_cast<uint32_t>(i));
    REQUIRE(via.Put("bkt", key, data).ok());
    written[key] = data;
  }
  for (auto& n : c.nodes) {
    for (const auto& [key, data] : written) {
      auto got = n->Get("bkt", key);
      REQUIRE(got.ok());
      CHECK(*got == data);
    }
    store::ListOptions lo;
    auto list = io::BlockOn(n->rt(), 0, [&] { return n->st().ListObjects("bkt", lo); });
    REQUIRE(list.ok());
    CHECK(list->objects.size() == written.size());
  }
  // Every node holds its shards: the bytes are spread over the cluster.
  for (auto& n : c.nodes) {
    for (const std::string& p : n->paths()) {
      CHECK(std::filesystem::exists(std::filesystem::path(p) / "bkt" / "k11"));
    }
  }

  SECTION("a node dies: reads and writes go on through the others, then it returns") {
    n3.Stop();
    const std::string later = RandomBytes(150000, 99);
    REQUIRE(a.Put("bkt", "later", later).ok());  // 4 of 6 drives: the write quorum
    for (const auto& [key, data] : written) CHECK(*b.Get("bkt", key) == data);
    CHECK(*b.Get("bkt", "later") == later);
    // Another node lost too: 2 drives are fewer than k.
    b.Stop();
    CHECK(ErrorKindOf(a.Put("bkt", "none", "x").status()) == ErrorKind::kInsufficientDrives);
  }
}

TEST_CASE("cluster: a node with another layout refuses to join", "[store][cluster]") {
  Cluster c;
  c.OpenAll();
  // A fourth engine configured with other parity meets node 1's services.
  store::ClusterSpec spec = c.spec;
  TempDir other;
  Node stranger(1, other.path(), 2);
  store::StoreOptions o;
  o.drives = stranger.paths();
  o.set_drive_count = 6;
  o.parity = 1;
  spec.self_id = 1;
  spec.runtime = &stranger.rt();
  spec.boot_timeout = absl::Seconds(5);
  o.cluster = spec;
  auto st = store::Store::Open(o);
  REQUIRE(!st.ok());
  CHECK(absl::IsFailedPrecondition(st.status()));
  CHECK(st.status().message().find("layout") != std::string::npos);
}

// Quorum locks across nodes (store/dist_locks.h): three or four lock tables, each an RpcServer
// with a LockService on a runtime of its own, and lock clients on runtimes of their own, all
// over loopback TCP as the nodes of a cluster would be. Waits are bounded and nothing is
// asserted about how long something took, except that a lock that cannot be had gives up soon
// after its timeout.
#include "store/dist_locks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "io/test_util.h"
#include "store/lock_rpc.pb.h"

#include "openlake/io/task.h"
#include "openlake/net/rpc.h"
#include "openlake/strings.h"

using namespace openlake;
using openlake::testing::StartRuntime;
using openlake::testing::WaitFor;

namespace {

// One node's lock table. Stop and Restart play a node that goes down, and one that comes back
// with an empty table on the same address.
class LockNode {
 public:
  explicit LockNode(store::LockServiceOptions o = {}) : o_(o) {
    REQUIRE(rt_ != nullptr);
    Start(*io::SocketAddress::Parse("127.0.0.1:0"));
  }
  ~LockNode() {
    Stop();
    rt_->Stop();
  }
  const io::SocketAddress& address() const { return addr_; }

  void Stop() {
    (void)rt_->RunOn(0, [&] {
      if (server_ == nullptr) return;
      server_->Stop();
      service_.reset();
      server_.reset();
    });
  }
  void Restart() {
    Stop();
    Start(addr_);
  }

  store::LockService::Counters counters() {
    store::LockService::Counters c;
    (void)rt_->RunOn(0, [&] {
      if (service_ != nullptr) c = service_->counters();
    });
    return c;
  }
  size_t held() {
    size_t n = 0;
    (void)rt_->RunOn(0, [&] {
      if (service_ != nullptr) n = service_->held();
    });
    return n;
  }

 private:
  void Start(io::SocketAddress at) {
    absl::Status s;
    REQUIRE(rt_->RunOn(0,
                       [&] {
                         server_ = *net::RpcServer::Create(rt_->reactor(0), {});
                         service_ = store::LockService::Attach(*server_, o_);
                         absl::StatusOr<io::SocketAddress> bound = server_->Listen(at, {});
                         if (bound.ok()) {
                           addr_ = *bound;
                         } else {
                           s = bound.status();
                         }
                       })
                .ok());
    REQUIRE(s.ok());
  }

  store::LockServiceOptions o_;
  std::unique_ptr<io::Runtime> rt_ = StartRuntime(1);
  std::unique_ptr<net::RpcServer> server_;
  std::unique_ptr<store::LockService> service_;
  io::SocketAddress addr_;
};

struct Nodes {
  explicit Nodes(size_t n, store::LockServiceOptions o = {}) {
    for (size_t i = 0; i < n; ++i) nodes.push_back(std::make_unique<LockNode>(o));
  }
  std::vector<io::SocketAddress> addresses() const {
    std::vector<io::SocketAddress> out;
    for (const auto& n : nodes) out.push_back(n->address());
    return out;
  }
  uint64_t refusals() {
    uint64_t sum = 0;
    for (auto& n : nodes) sum += n->counters().refusals;
    return sum;
  }
  uint64_t expirations() {
    uint64_t sum = 0;
    for (auto& n : nodes) sum += n->counters().expirations;
    return sum;
  }
  size_t held() {
    size_t sum = 0;
    for (auto& n : nodes) sum += n->held();
    return sum;
  }
  LockNode& operator[](size_t i) { return *nodes[i]; }

  std::vector<std::unique_ptr<LockNode>> nodes;
};

// A port bound but never listened on: a connect there is refused at once, like one to a node
// that is down, and nothing else can take the port while the test runs.
class DeadPort {
 public:
  DeadPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
    socklen_t len = sizeof(sa);
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
    addr_ = *io::SocketAddress::Parse(StrCat("127.0.0.1:", ntohs(sa.sin_port)));
  }
  ~DeadPort() { close(fd_); }
  const io::SocketAddress& address() const { return addr_; }

 private:
  int fd_ = -1;
  io::SocketAddress addr_;
};

// A node's lock client: a runtime of its own (a PeerLink's channels belong to one runtime),
// links to `lockers` and DistLocks over them.
class Client {
 public:
  Client(const std::vector<io::SocketAddress>& lockers, uint32_t node_id,
         store::DistLocksOptions o = {}) {
    REQUIRE(rt_ != nullptr);
    std::vector<store::PeerLink*> raw;
    for (size_t i = 0; i < lockers.size(); ++i) {
      links_.push_back(std::make_unique<store::PeerLink>(
          static_cast<uint32_t>(i), lockers[i].ToString(), net::RpcChannelOptions{}));
      raw.push_back(links_.back().get());
    }
    locks_ = std::make_unique<store::DistLocks>(std::move(raw), node_id, o);
  }
  ~Client() {
    // Releases posted from other threads run first; then the background unlocks and refresh
    // loops end before the links (and the runtime) they use go away.
    (void)rt_->RunOn(0, [] {});
    (void)WaitFor([&] { return locks_->counters().background == 0; }, 10);
    locks_.reset();
    links_.clear();
    rt_->Stop();
  }

  absl::StatusOr<store::DistLock> Lock(const std::string& resource, bool exclusive,
                                       absl::Duration timeout) {
    return io::BlockOn(*rt_, 0, [&] { return locks_->Lock(resource, exclusive, timeout); });
  }
  // On the lock's own reactor, and back once its release is under way.
  void Release(store::DistLock& l) {
    (void)rt_->RunOn(0, [&] { l.Release(); });
  }
  bool Quiet() {
    return WaitFor([&] { return locks_->counters().background == 0; }, 10);
  }

  store::DistLocks& locks() { return *locks_; }
  io::Runtime& rt() { return *rt_; }

 private:
  std::unique_ptr<io::Runtime> rt_ = StartRuntime(1);
  std::vector<std::unique_ptr<store::PeerLink>> links_;
  std::unique_ptr<store::DistLocks> locks_;
};

bool IsDeadline(const absl::StatusOr<store::DistLock>& r) {
  return !r.ok() && r.status().code() == absl::StatusCode::kDeadlineExceeded;
}

bool IsUnavailable(const absl::StatusOr<store::DistLock>& r) {
  return !r.ok() && r.status().code() == absl::StatusCode::kUnavailable;
}

// Takes `resource` exclusively `rounds` times; inside, counts how many holders there are.
io::Task<absl::Status> Hammer(store::DistLocks* locks, std::atomic<int>* inside,
                              std::atomic<int>* overlaps, int rounds) {
  const std::string resource = "o:bkt/hot";
  const absl::Duration timeout = absl::Seconds(20);
  const absl::Duration hold = absl::Milliseconds(2);
  for (int i = 0; i < rounds; ++i) {
    io::Task<absl::StatusOr<store::DistLock>> take = locks->Lock(resource, true, timeout);
    absl::StatusOr<store::DistLock> lock = co_await std::move(take);
    if (!lock.ok()) co_return lock.status();
    if (inside->fetch_add(1) != 0) overlaps->fetch_add(1);
    io::Sleep nap{hold};
    co_await nap;
    inside->fetch_sub(1);
    lock->Release();
  }
  co_return absl::OkStatus();
}

// One request to a lock table from a blocking client.
template <typename Answer, typename Request>
absl::StatusOr<Answer> Ask(net::RpcClient& c, uint16_t method, const Request& req) {
  absl::StatusOr<net::RpcClient::Response> r = c.Call(method, req.SerializeAsString());
  if (!r.ok()) return r.status();
  Answer a;
  if (!a.ParseFromString(r->payload)) return absl::InternalError("unparsable answer");
  return a;
}

bool Grant(net::RpcClient& c, const std::string& resource, const std::string& uid, bool exclusive,
           uint32_t ttl_ms = 0) {
  store::pb::LockRequest req;
  req.set_resource(resource);
  req.set_uid(uid);
  req.set_owner(7);
  req.set_exclusive(exclusive);
  req.set_ttl_ms(ttl_ms);
  absl::StatusOr<store::pb::LockAnswer> a = Ask<store::pb::LockAnswer>(c, store::kLockAcquire, req);
  REQUIRE(a.ok());
  return a->granted();
}

}  // namespace

TEST_CASE("dist locks: quorum sizes", "[locks]") {
  using store::DistLocks;
  CHECK(DistLocks::Quorum(1, false) == 1);
  CHECK(DistLocks::Quorum(1, true) == 1);
  CHECK(DistLocks::Quorum(2, false) == 1);
  CHECK(DistLocks::Quorum(2, true) == 2);
  CHECK(DistLocks::Quorum(3, false) == 2);
  CHECK(DistLocks::Quorum(3, true) == 2);
  CHECK(DistLocks::Quorum(4, false) == 2);
  CHECK(DistLocks::Quorum(4, true) == 3);
  CHECK(DistLocks::Quorum(5, true) == 3);
  CHECK(DistLocks::Quorum(16, false) == 8);
  CHECK(DistLocks::Quorum(16, true) == 9);
  for (size_t n = 1; n <= 32; ++n) {
    // Two writers, and a writer and a quorum of readers, always meet on some table.
    CHECK(2 * DistLocks::Quorum(n, true) > n);
    CHECK(DistLocks::Quorum(n, true) + DistLocks::Quorum(n, false) > n);
  }
}

TEST_CASE("lock service: the table's rules, over the wire", "[locks]") {
  store::LockServiceOptions o;
  o.sweep_interval = absl::Milliseconds(20);
  LockNode node(o);
  auto client = net::RpcClient::Connect(node.address(), {});
  REQUIRE(client.ok());
  net::RpcClient& c = **client;

  CHECK(Grant(c, "o:b/k", "w1", true));
  CHECK_FALSE(Grant(c, "o:b/k", "r1", false));  // a writer excludes readers
  CHECK_FALSE(Grant(c, "o:b/k", "w2", true));   // and other writers
  CHECK(Grant(c, "o:b/k", "w1", true));         // its own uid again: a re-grant
  CHECK(node.held() == 1);

  store::pb::RefreshRequest rr;
  for (const char* res : {"o:b/k", "o:b/k", "o:b/other"}) rr.add_resources(res);
  for (const char* uid : {"w1", "r1", "w1"}) rr.add_uids(uid);
  rr.set_ttl_ms(60000);
  auto refreshed = Ask<store::pb::RefreshAnswer>(c, store::kLockRefresh, rr);
  REQUIRE(refreshed.ok());
  REQUIRE(refreshed->held_size() == 3);
  CHECK(refreshed->held(0));
  CHECK_FALSE(refreshed->held(1));
  CHECK_FALSE(refreshed->held(2));

  store::pb::UnlockRequest un;
  un.set_resource("o:b/k");
  un.set_uid("nobody");  // missing is fine
  CHECK(c.Call(store::kLockRelease, un.SerializeAsString()).ok());
  CHECK(node.held() == 1);
  un.set_uid("w1");
  CHECK(c.Call(store::kLockRelease, un.SerializeAsString()).ok());
  CHECK(node.held() == 0);

  CHECK(Grant(c, "o:b/k", "r1", false));  // readers share
  CHECK(Grant(c, "o:b/k", "r2", false));
  CHECK_FALSE(Grant(c, "o:b/k", "w3", true));
  CHECK(node.held() == 2);
  const store::LockService::Counters n = node.counters();
  CHECK(n.grants == 4);
  CHECK(n.refusals == 3);

  // An entry not refreshed goes away by itself.
  CHECK(Grant(c, "o:b/short", "s1", true, 30));
  CHECK(WaitFor([&] { return node.counters().expirations >= 1; }, 5));
  CHECK(Grant(c, "o:b/short", "s2", true, 30));

  // Garbage is refused, not guessed at.
  auto bad = c.Call(store::kLockAcquire, std::string("\xff\xff\xff", 3));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("dist locks: an exclusive lock waits for its holder's release", "[locks]") {
  Nodes nodes(3);
  Client a(nodes.addresses(), 1);
  Client b(nodes.addresses(), 2);
  absl::StatusOr<store::DistLock> la = a.Lock("o:bkt/key", true, absl::Seconds(5));
  REQUIRE(la.ok());
  CHECK(la->held());
  CHECK(la->exclusive());
  CHECK(la->resource() == "o:bkt/key");
  CHECK(la->granted() == std::vector<bool>{true, true, true});

  const uint64_t refused_before = nodes.refusals();
  std::atomic<bool> a_released{false};
  std::atomic<bool> b_ok{false};
  std::atomic<bool> b_after_a{false};
  std::thread tb([&] {
    absl::StatusOr<store::DistLock> lb = b.Lock("o:bkt/key", true, absl::Seconds(20));
    b_after_a = a_released.load();
    b_ok = lb.ok();
    if (lb.ok()) b.Release(*lb);
  });
  // B asked and was refused: it is waiting for A.
  const bool b_waits = WaitFor([&] { return nodes.refusals() > refused_before; }, 10);
  a_released = true;
  a.Release(*la);
  CHECK_FALSE(la->held());
  tb.join();
  CHECK(b_waits);
  CHECK(b_ok);
  CHECK(b_after_a);
}

TEST_CASE("dist locks: shared locks coexist; shared and exclusive exclude each other", "[locks]") {
  Nodes nodes(3);
  Client a(nodes.addresses(), 1);
  Client b(nodes.addresses(), 2);
  Client c(nodes.addresses(), 3);
  absl::StatusOr<store::DistLock> ra = a.Lock("o:bkt/key", false, absl::Seconds(5));
  absl::StatusOr<store::DistLock> rb = b.Lock("o:bkt/key", false, absl::Seconds(5));
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  CHECK(nodes.held() == 6);  // both readers on every table

  absl::StatusOr<store::DistLock> rc = c.Lock("o:bkt/key", true, absl::Milliseconds(300));
  CHECK(IsDeadline(rc));
  // Another name is not affected.
  absl::StatusOr<store::DistLock> other = c.Lock("o:bkt/other", true, absl::Seconds(5));
  CHECK(other.ok());
  if (other.ok()) c.Release(*other);

  a.Release(*ra);
  b.Release(*rb);
  rc = c.Lock("o:bkt/key", true, absl::Seconds(5));
  REQUIRE(rc.ok());
  absl::StatusOr<store::DistLock> rd = a.Lock("o:bkt/key", false, absl::Milliseconds(300));
  CHECK(IsDeadline(rd));
  c.Release(*rc);
  CHECK(a.Quiet());
  CHECK(c.Quiet());
  CHECK(nodes.held() == 0);
}

TEST_CASE("dist locks: holders never overlap under contention", "[locks]") {
  Nodes nodes(3);
  std::vector<std::unique_ptr<Client>> clients;
  for (uint32_t i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<Client>(nodes.addresses(), i + 1));
  }
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::vector<absl::Status> results(clients.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < clients.size(); ++i) {
    threads.emplace_back([&, i] {
      Client& cl = *clients[i];
      results[i] =
          io::BlockOn(cl.rt(), 0, [&] { return Hammer(&cl.locks(), &inside, &overlaps, 8); });
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) CHECK(s.ok());
  CHECK(overlaps == 0);
  uint64_t acquired = 0;
  for (auto& cl : clients) acquired += cl->locks().counters().acquired;
  CHECK(acquired == 24);
}

TEST_CASE("dist locks: one locker of three down still locks; two down fail at once", "[locks]") {
  Nodes nodes(3);
  Client a(nodes.addresses(), 1);
  Client b(nodes.addresses(), 2);
  nodes[2].Stop();
  absl::StatusOr<store::DistLock> la = a.Lock("o:bkt/key", true, absl::Seconds(5));
  REQUIRE(la.ok());
  CHECK(la->granted() == std::vector<bool>{true, true, false});
  // Two of three still exclude a second writer.
  absl::StatusOr<store::DistLock> lb = b.Lock("o:bkt/key", true, absl::Milliseconds(300));
  CHECK(IsDeadline(lb));
  a.Release(*la);

  nodes[1].Stop();
  // With one table of three answering no quorum can form until a node returns: the
  // acquisition says so after its first round instead of waiting out its timeout.
  const absl::Duration timeout = absl::Seconds(20);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<store::DistLock> lc = b.Lock("o:bkt/key2", true, timeout);
  const auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(IsUnavailable(lc));
  INFO(lc.status().ToString());
  CHECK(std::string(SV(lc.status().message())).find("only 1 of 3 lockers answer") !=
        std::string::npos);
  CHECK(took < std::chrono::milliseconds(3500));  // a refused connect fails at once
  CHECK(b.locks().counters().timed_out == 1);
  CHECK(b.locks().counters().unreachable == 1);
}

TEST_CASE("dist locks: a holder that stops refreshing loses its lock to the ttl", "[locks]") {
  Nodes nodes(3);
  store::DistLocksOptions dies;
  dies.ttl = absl::Milliseconds(300);
  dies.refresh_interval = absl::InfiniteDuration();
  Client a(nodes.addresses(), 1, dies);
  Client b(nodes.addresses(), 2);
  Client c(nodes.addresses(), 3);
  absl::StatusOr<store::DistLock> la = a.Lock("o:bkt/key", true, absl::Seconds(5));
  REQUIRE(la.ok());
  absl::StatusOr<store::DistLock> lb = b.Lock("o:bkt/key", true, absl::Seconds(10));
  REQUIRE(lb.ok());
  CHECK(nodes.expirations() >= 2);
  CHECK(b.locks().counters().lock_rounds > 1);  // it was refused before the entries expired

  // The late release of the first holder does not touch the second one's entries.
  a.Release(*la);
  CHECK(a.Quiet());
  absl::StatusOr<store::DistLock> lc = c.Lock("o:bkt/key", true, absl::Milliseconds(300));
  CHECK(IsDeadline(lc));
  CHECK(lb->held());
  b.Release(*lb);
}

TEST_CASE("dist locks: refreshes keep a lock past its ttl", "[locks]") {
  Nodes nodes(3);
  store::DistLocksOptions o;
  o.ttl = absl::Seconds(1);  // refreshed every 333 ms
  Client a(nodes.addresses(), 1, o);
  Client b(nodes.addresses(), 2);
  absl::StatusOr<store::DistLock> la = a.Lock("o:bkt/key", true, absl::Seconds(5));
  REQUIRE(la.ok());
  // Five refresh rounds after the lock's own: well past one ttl.
  CHECK(WaitFor([&] { return a.locks().counters().rounds >= 6; }, 10));
  CHECK(la->held());
  absl::StatusOr<store::DistLock> lb = b.Lock("o:bkt/key", true, absl::Milliseconds(300));
  CHECK(IsDeadline(lb));
  CHECK(nodes.expirations() == 0);
  a.Release(*la);
}

TEST_CASE("dist locks: held() turns false when the lockers forget the lock", "[locks]") {
  Nodes nodes(3);
  store::DistLocksOptions o;
  o.refresh_interval = absl::Milliseconds(100);
  Client a(nodes.addresses(), 1, o);
  Client b(nodes.addresses(), 2);
  absl::StatusOr<store::DistLock> la = a.Lock("o:bkt/key", true, absl::Seconds(5));
  REQUIRE(la.ok());
  nodes[1].Restart();
  nodes[2].Restart();
  CHECK(WaitFor([&] { return !la->held(); }, 10));
  CHECK(a.locks().counters().lost == 1);
  // The one table that still had it was told to let go: another node gets it at once.
  CHECK(a.Quiet());
  absl::StatusOr<store::DistLock> lb = b.Lock("o:bkt/key", true, absl::Seconds(3));
  CHECK(lb.ok());
  if (lb.ok()) b.Release(*lb);
  a.Release(*la);  // a lost lock is released like any other (nothing left to send)
}

TEST_CASE("dist locks: four lockers split two and two cannot both write", "[locks]") {
  Nodes nodes(4);
  DeadPort d0;
  DeadPort d1;
  const std::vector<io::SocketAddress> all = nodes.addresses();
  // A reaches tables 0 and 1 only, B tables 2 and 3: each sees the other half as down.
  Client a({all[0], all[1], d0.address(), d1.address()}, 1);
  Client b({d0.address(), d1.address(), all[2], all[3]}, 2);
  Client c(all, 3);
  CHECK(a.locks().lockers() == 4);

  absl::StatusOr<store::DistLock> la = a.Lock("o:bkt/key", true, absl::Seconds(20));
  absl::StatusOr<store::DistLock> lb = b.Lock("o:bkt/key", true, absl::Seconds(20));
  CHECK(IsUnavailable(la));
  CHECK(IsUnavailable(lb));
  if (!la.ok()) {
    CHECK(std::string(SV(la.status().message())).find("only 2 of 4 lockers answer") !=
          std::string::npos);
  }

  // Reading needs only two of four, so both halves may read...
  la = a.Lock("o:bkt/key", false, absl::Seconds(5));
  lb = b.Lock("o:bkt/key", false, absl::Seconds(5));
  REQUIRE(la.ok());
  REQUIRE(lb.ok());
  b.Release(*lb);
  CHECK(b.Quiet());
  // ...but with half the tables holding a read, nobody can write, even reaching all four.
  absl::StatusOr<store::DistLock> lc = c.Lock("o:bkt/key", true, absl::Milliseconds(300));
  CHECK(IsDeadline(lc));
  a.Release(*la);
  CHECK(a.Quiet());
  lc = c.Lock("o:bkt/key", true, absl::Seconds(5));
  CHECK(lc.ok());
  if (lc.ok()) c.Release(*lc);
}

TEST_CASE("dist locks: round trips are counted", "[locks]") {
  Nodes nodes(3);
  Client a(nodes.addresses(), 1);
  const store::DistLocks::Counters before = a.locks().counters();
  absl::StatusOr<store::DistLock> la = a.Lock("o:bkt/key", true, absl::Seconds(5));
  REQUIRE(la.ok());
  a.Release(*la);
  REQUIRE(a.Quiet());
  const store::DistLocks::Counters after = a.locks().counters();
  // An uncontended lock and its release: one round each, a request per locker in each.
  CHECK(after.lock_rounds - before.lock_rounds == 1);
  CHECK(after.rounds - before.rounds == 2);
  CHECK(after.rpcs - before.rpcs == 6);
  CHECK(after.acquired - before.acquired == 1);
}

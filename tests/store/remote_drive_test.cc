// The engine through the drive RPC: half of a set's drives are RemoteDrives whose steps travel
// over real loopback TCP to a DriveService on another runtime (another "node"), which runs them
// on LocalDrives over the same folders. Everything the engine does (writes, reads, multipart,
// listings, versions, heals) must work the same through them.
#include <chrono>
#include <filesystem>
#include <thread>

#include <catch2/catch.hpp>

#include "store/drive_service.h"
#include "store/drive_wire.h"
#include "store/engine.h"
#include "store/errors.h"
#include "store/local_drive.h"
#include "store/names.h"
#include "store/remote_drive.h"
#include "store/store_test_util.h"
#include "store/test_util_md5.h"

#include "openlake/net/rpc.h"

using namespace openlake;
using namespace openlake::testing;
using store::ErrorKind;
using store::ErrorKindOf;
using openlake::testing::WaitFor;

namespace {

// The "other node": an RpcServer with the drive service on a runtime of its own, serving the
// fixture's drive folders.
class DriveNode {
 public:
  explicit DriveNode(std::vector<store::FileBackend*> backends) {
    for (store::FileBackend* b : backends) {
      drives_.push_back(std::make_unique<store::LocalDrive>(b, nullptr));
    }
    offline_.assign(drives_.size(), false);
    REQUIRE(rt_->RunOn(0, [&] {
                 server_ = *net::RpcServer::Create(rt_->reactor(0), {});
                 store::DriveServiceOptions o;
                 o.drive_count = static_cast<uint32_t>(drives_.size());
                 o.node_id = 1;
                 o.layout_digest = "test-layout";
                 o.drive = [this](uint32_t i) -> store::DriveApi* {
                   return offline_[i] ? nullptr : drives_[i].get();
                 };
                 service_ = store::DriveService::Attach(*server_, std::move(o));
                 addr_ = *server_->Listen(*io::SocketAddress::Parse("127.0.0.1:0"), {});
               }).ok());
  }
  ~DriveNode() {
    (void)rt_->RunOn(0, [&] {
      server_->Stop();
      service_.reset();
      server_.reset();
    });
    rt_->Stop();
  }
  const io::SocketAddress& address() const { return addr_; }
  void SetOffline(int i, bool off) {
    REQUIRE(rt_->RunOn(0, [&] { offline_[static_cast<size_t>(i)] = off; }).ok());
  }
  uint64_t requests() {
    uint64_t n = 0;
    REQUIRE(rt_->RunOn(0, [&] { n = service_->requests(); }).ok());
    return n;
  }
  size_t open_handles() {
    size_t n = 0;
    REQUIRE(rt_->RunOn(0, [&] { n = service_->open_handles(); }).ok());
    return n;
  }

 private:
  std::unique_ptr<io::Runtime> rt_ = StartRuntime(1);
  std::vector<std::unique_ptr<store::LocalDrive>> drives_;
  std::vector<bool> offline_;
  std::unique_ptr<net::RpcServer> server_;
  std::unique_ptr<store::DriveService> service_;
  io::SocketAddress addr_;
};

// A fixture whose engine reaches drives `remote` of set 0 through a DriveNode.
struct RemoteFixture {
  explicit RemoteFixture(std::vector<int> remote, uint32_t block_size = 16 << 10)
      : f(4, 4, 2, block_size, /*faulty=*/false, /*reactors=*/2) {
    REQUIRE(f.Open().ok());
    auto& e = engine();
    std::vector<store::FileBackend*> backends;
    for (int p = 0; p < 4; ++p) backends.push_back(e.drive(0, p).fs.get());
    node = std::make_unique<DriveNode>(backends);
    link = std::make_unique<store::PeerLink>(1, node->address().ToString(), net::RpcChannelOptions{});
    for (int p : remote) {
      e.SetDriveApi(0, p, std::make_unique<store::RemoteDrive>(
                              link.get(), static_cast<uint32_t>(p),
                              StrCat(node->address().ToString(), ":", f.drive_path(p))));
    }
  }
  ~RemoteFixture() {
    f.Close();  // the engine (and its remote drives) before the link they use
    link.reset();
    node.reset();
  }
  store::Engine& engine() { return static_cast<store::Engine&>(f.st()); }

  StoreFixture f;
  std::unique_ptr<DriveNode> node;
  std::unique_ptr<store::PeerLink> link;
};

}  // namespace

TEST_CASE("remote drives: objects of every size through the drive RPC", "[store][remote]") {
  RemoteFixture rf({1, 3});
  StoreFixture& f = rf.f;
  REQUIRE(f.MakeBucket("bkt").ok());
  for (size_t size : {size_t{0}, size_t{1}, size_t{16383}, size_t{16385}, size_t{32769},
                      size_t{100000}, size_t{1 << 20}}) {
    INFO(size);
    const std::string data = RandomBytes(size, static_cast<uint32_t>(size) + 7);
    const std::string key = "dir/obj-" + std::to_string(size);
    auto info = f.Put("bkt", key, data, {}, 7777);
    REQUIRE(info.ok());
    CHECK(info->etag == Md5Hex(data));
    auto got = f.Get("bkt", key);
    REQUIRE(got.ok());
    CHECK(*got == data);
    // A range that starts inside the second window.
    if (size > 40000) {
      store::GetOptions go;
      go.range = store::RangeSpec{33000, 39999, std::nullopt};
      auto part = f.Get("bkt", key, go);
      REQUIRE(part.ok());
      CHECK(*part == data.substr(33000, 7000));
    }
  }
  // The shard files of the remote drives are where a local drive would have put them.
  const auto rest = f.Stat("bkt", "dir/obj-100000");
  REQUIRE(rest.ok());
  CHECK(rest->size == 100000);
  CHECK(rf.node->requests() > 20);

  // Listings merge the remote drives' walks with the local ones'.
  store::ListOptions lo;
  lo.delimiter = "/";
  auto top = f.List("bkt", lo);
  REQUIRE(top.ok());
  REQUIRE(top->common_prefixes.size() == 1);
  CHECK(top->common_prefixes[0] == "dir/");
  lo.prefix = "dir/";
  lo.max_keys = 3;
  auto page = f.List("bkt", lo);
  REQUIRE(page.ok());
  CHECK(page->objects.size() == 3);
  CHECK(page->truncated);

  // Overwrite and delete.
  REQUIRE(f.Put("bkt", "dir/obj-1", "again").ok());
  CHECK(*f.Get("bkt", "dir/obj-1") == "again");
  REQUIRE(f.Delete("bkt", "dir/obj-1").ok());
  CHECK(ErrorKindOf(f.Get("bkt", "dir/obj-1").status()) == ErrorKind::kNoSuchKey);
  // A bucket that is not there: the engine's kind, whichever drive answered.
  CHECK(ErrorKindOf(f.Put("nope", "k", "v").status()) == ErrorKind::kNoSuchBucket);

  // Readers and writers closed their remote handles.
  for (int i = 0; i < 100 && rf.node->open_handles() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  CHECK(rf.node->open_handles() == 0);
}

TEST_CASE("remote drives: multipart uploads link their parts on the owner", "[store][remote]") {
  RemoteFixture rf({0, 2});
  StoreFixture& f = rf.f;
  f.options().min_part_size = 1;
  REQUIRE(f.MakeBucket("bkt").ok());
  const store::PutOptions none;
  auto id = f.Run([&] { return f.st().CreateUpload("bkt", "mp", none); });
  REQUIRE(id.ok());
  const std::string a = RandomBytes(70000, 1), b = RandomBytes(30000, 2);
  auto pa = f.PutPart("bkt", "mp", *id, 1, a);
  auto pb = f.PutPart("bkt", "mp", *id, 2, b);
  REQUIRE((pa.ok() && pb.ok()));
  auto parts = f.Run([&] { return f.st().ListParts("bkt", "mp", *id, 0, 1000); });
  REQUIRE(parts.ok());
  CHECK(parts->parts.size() == 2);
  std::vector<store::CompletePart> list{{1, pa->etag}, {2, pb->etag}};
  const store::CompleteOptions co;
  auto done = f.Run([&] { return f.st().CompleteUpload("bkt", "mp", *id, list, co); });
  REQUIRE(done.ok());
  CHECK(*f.Get("bkt", "mp") == a + b);
}

TEST_CASE("remote drives: versions, and heals rebuild a remote drive", "[store][remote]") {
  RemoteFixture rf({1, 2});
  StoreFixture& f = rf.f;
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string big = RandomBytes(200000, 3), small = RandomBytes(500, 4);
  REQUIRE(f.Put("bkt", "big", big).ok());
  REQUIRE(f.Put("bkt", "small", small).ok());
  store::PutOptions versioned;
  versioned.versioning = store::Versioning::kEnabled;
  auto v1 = f.Put("bkt", "ver", "one", versioned);
  auto v2 = f.Put("bkt", "ver", "two", versioned);
  REQUIRE((v1.ok() && v2.ok()));
  store::GetOptions old;
  old.conditions.version_id = v1->version_id;
  CHECK(*f.Get("bkt", "ver", old) == "one");

  // The remote drive at position 1 loses everything in the bucket.
  std::filesystem::remove_all(std::filesystem::path(f.drive_path(1)) / "bkt");
  std::filesystem::create_directory(std::filesystem::path(f.drive_path(1)) / "bkt");
  auto healed = f.Heal("bkt");
  REQUIRE(healed.ok());
  CHECK(healed->objects_healed == 3);
  auto again = f.Heal("bkt");
  REQUIRE(again.ok());
  CHECK(again->objects_healed == 0);
  CHECK(std::filesystem::exists(std::filesystem::path(f.drive_path(1)) / "bkt" / "big"));
  // Rebuilt on the remote drive: the reads work from the two remote drives alone.
  rf.engine().MarkOffline(0, 0, absl::UnavailableError("test"));
  rf.engine().MarkOffline(0, 3, absl::UnavailableError("test"));
  CHECK(*f.Get("bkt", "big") == big);
  CHECK(*f.Get("bkt", "small") == small);
  CHECK(*f.Get("bkt", "ver", old) == "one");
}

TEST_CASE("remote drives: a drive offline on its owner is a missing drive", "[store][remote]") {
  RemoteFixture rf({1, 3});
  StoreFixture& f = rf.f;
  REQUIRE(f.MakeBucket("bkt").ok());
  rf.node->SetOffline(3, true);
  const std::string data = RandomBytes(100000, 9);
  REQUIRE(f.Put("bkt", "k", data).ok());  // RS(2+2): three drives are a write quorum
  CHECK(*f.Get("bkt", "k") == data);
  rf.node->SetOffline(1, true);
  CHECK(*f.Get("bkt", "k") == data);  // two drives still hold k shards
  CHECK(ErrorKindOf(f.Put("bkt", "k2", data).status()) == ErrorKind::kInsufficientDrives);
  rf.node->SetOffline(1, false);
  rf.node->SetOffline(3, false);
  auto healed = f.Heal("bkt");
  REQUIRE(healed.ok());
  CHECK(healed->objects_healed == 1);
  CHECK(healed->shards_written >= 1);
}

TEST_CASE("remote drives: engine errors keep their kind across the wire", "[store][remote]") {
  const absl::Status s = store::Error(ErrorKind::kNoSuchBucket, "bucket \"b\" is missing");
  const absl::Status wire(s.code(), store::EncodeDriveError(s));
  const absl::Status back = store::DecodeDriveError(wire);
  CHECK(ErrorKindOf(back) == ErrorKind::kNoSuchBucket);
  CHECK(back.message() == "bucket \"b\" is missing");
  const absl::Status plain = absl::UnavailableError("[kind 99] not ours");
  CHECK(store::DecodeDriveError(plain) == plain);
  CHECK(ErrorKindOf(store::DecodeDriveError(absl::NotFoundError("x"))) == ErrorKind::kNone);
}

namespace {

constexpr uint16_t kPing = 900;

// A peer whose answers can be switched off: while silent, it keeps every request it gets
// unanswered (a cut-off node whose connections stay open), and answers again when told.
class FlakyPeer {
 public:
  FlakyPeer() {
    REQUIRE(rt_->RunOn(0, [&] {
                 server_ = *net::RpcServer::Create(rt_->reactor(0), {});
                 for (uint16_t m : {kPing, static_cast<uint16_t>(store::kDriveHello)}) {
                   server_->Register(m, [this](net::RpcCall call) {
                     if (silent_) {
                       held_.push_back(std::move(call));
                       return;
                     }
                     call.Respond("pong");
                   });
                 }
                 addr_ = *server_->Listen(*io::SocketAddress::Parse("127.0.0.1:0"), {});
               }).ok());
  }
  ~FlakyPeer() {
    (void)rt_->RunOn(0, [&] {
      held_.clear();
      server_->Stop();
      server_.reset();
    });
    rt_->Stop();
  }
  std::string address() const { return addr_.ToString(); }
  void SetSilent(bool s) {
    REQUIRE(rt_->RunOn(0, [&] { silent_ = s; }).ok());
  }
  uint64_t connections() {
    uint64_t n = 0;
    REQUIRE(rt_->RunOn(0, [&] { n = server_->counters().accepted; }).ok());
    return n;
  }

 private:
  std::unique_ptr<io::Runtime> rt_ = StartRuntime(1);
  std::unique_ptr<net::RpcServer> server_;
  std::vector<net::RpcCall> held_;  // never answered while the peer is silent
  bool silent_ = false;
  io::SocketAddress addr_;
};

io::Task<absl::StatusOr<bool>> ProbeOnce(store::PeerLink* link) {
  io::Task<bool> probe = link->Probe();
  const bool answered = co_await std::move(probe);
  co_return answered;
}

}  // namespace

TEST_CASE("peer link: a silent peer fails calls at once until a background probe finds it back",
          "[store][remote]") {
  FlakyPeer peer;
  auto rt = StartRuntime(1);
  auto link = std::make_unique<store::PeerLink>(7, peer.address(), net::RpcChannelOptions{});
  auto call = [&](absl::Duration timeout) {
    return io::BlockOn(*rt, 0, [&] { return link->Call(kPing, "ping", timeout); });
  };
  auto took_ms = [](auto start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now() - start)
        .count();
  };
  REQUIRE(call(absl::Seconds(5)).ok());
  CHECK(link->up());
  CHECK(peer.connections() == 1);

  // Cut off: the first call waits out its deadline and takes the peer as down.
  peer.SetSilent(true);
  CHECK(absl::IsDeadlineExceeded(call(absl::Milliseconds(300)).status()));
  CHECK_FALSE(link->up());
  // Later calls fail at once, also the one that starts a probe once a second: no request waits
  // on a peer that may be cut off.
  for (int i = 0; i < 6; ++i) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> r = call(absl::Seconds(5));
    CHECK(absl::IsUnavailable(r.status()));
    CHECK(took_ms(start) < 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  // The probe went out on a new connection, not the stuck one.
  CHECK(peer.connections() >= 2);

  // Back: a probe started by a later call brings the peer up again.
  peer.SetSilent(false);
  const bool back = WaitFor(
      [&] {
        (void)call(absl::Seconds(5));
        return link->up();
      },
      10);
  REQUIRE(back);
  CHECK(call(absl::Seconds(5)).ok());

  // An explicit probe of a peer that is up uses its connection.
  const uint64_t before = peer.connections();
  absl::StatusOr<bool> probed = io::BlockOn(*rt, 0, [&] { return ProbeOnce(link.get()); });
  REQUIRE(probed.ok());
  CHECK(*probed);
  CHECK(peer.connections() == before);
  // Not from a reactor (its channels close on their reactors while the runtime runs).
  link.reset();
  rt->Stop();
}

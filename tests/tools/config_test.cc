#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "daemon_config.h"

using openlake::tools::Config;
using openlake::tools::ParseConfig;

namespace {
std::string Msg(const absl::Status& s) { return std::string(s.message()); }
}  // namespace

TEST_CASE("embedded default serves the KV pool on loopback", "[config]") {
  Config c = openlake::tools::DefaultConfig();
  CHECK(c.kv_enabled);
  CHECK(c.rpc_addr == "127.0.0.1:9400");
  CHECK(c.s3_addr == "127.0.0.1:9000");
  CHECK(c.kv_slab.cpu_ram_frac.value() == 0.5);
  CHECK(c.credentials.empty());  // no built-in password
  CHECK(c.data_dirs.size() == 4);
}

TEST_CASE("upstream kv_local.toml parses as is", "[config]") {
  auto c = openlake::tools::LoadConfigFile(OL_SOURCE_ROOT "/examples/configs/kv_local.toml");
  REQUIRE(c.ok());
  CHECK(c->mode == openlake::tools::Mode::kKv);
  CHECK(c->kv_enabled);
  CHECK(c->rpc_addr == "127.0.0.1:9400");
  CHECK(c->kv_slab.cpu_ram_frac.value() == 0.5);
  CHECK(c->kv_slab.reserve_ttl_secs == 60);
  REQUIRE(c->nodes.size() == 1);
  CHECK(c->nodes[0].disk_count == 0);
  REQUIRE(c->credentials.size() == 1);
}

TEST_CASE("all upstream keys are accepted", "[config]") {
  const char* text = R"(
self_id = 1
mode = "storage"
transport = "rdma"
rpc_addr = "10.0.0.2:9100"
s3_addr = "0.0.0.0:9000"
s3_port = 9000
region = "eu-west-1"
data_dir = "/legacy"
data_dirs = ["/d1", "/d2"]
replication = 4
default_parity_count = 2
memory_pool = { enabled = true, size_bytes = 1024, bucket_capacity = 8 }
s3_tls = { cert_path = "/c.pem", key_path = "/k.pem" }
[[credentials]]
access_key = "akey"
secret_key = "secretkey"
display_name = "Ana"
[[nodes]]
id = 0
rpc_addr = "10.0.0.1:9100"
[[nodes]]
id = 1
rpc_addr = "10.0.0.2:9100"
disk_count = 2
[kv_slab]
capacity_gb = 2
reserve_ttl_secs = 30
[rdma]
backend = "dct"
self_node_id = 1
dev_name = "mlx5_0"
dc_key = 4919
srq_depth = 4096
max_send_wr = 256
peer_credit = 4
max_clients = 512
[rdma.qos]
tc = 0
sl = 0
)";
  auto c = ParseConfig(text, "t.toml");
  REQUIRE(c.ok());
  CHECK(c->self_id == 1);
  CHECK(c->transport == openlake::tools::Transport::kRdma);
  CHECK(c->data_dirs == std::vector<std::string>{"/d1", "/d2"});
  CHECK(c->set_drive_count == 4);
  CHECK(c->nodes.size() == 2);
  CHECK(c->nodes[0].disk_count == 1);  // upstream default
  REQUIRE(c->credentials.size() == 1);
  CHECK(c->credentials[0].display_name == "Ana");
  CHECK(c->kv_slab.capacity_gb.value() == 2);
  CHECK(c->kv_slab.reserve_ttl_secs == 30);
  REQUIRE(c->rdma.has_value());
  CHECK(c->rdma->max_clients.value() == 512);
  CHECK(c->s3_tls->cert_path == "/c.pem");
  CHECK(c->kv_enabled);
}

TEST_CASE("errors name the file, the line and the key", "[config]") {
  SECTION("wrong type") {
    auto c = ParseConfig("self_id = 0\nregion = 5\n", "bad.toml");
    REQUIRE(!c.ok());
    CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(Msg(c.status()) == "bad.toml:2: key 'region' must be a string");
  }
  SECTION("syntax error") {
    auto c = ParseConfig("self_id = \n", "syn.toml");
    REQUIRE(!c.ok());
    CHECK(Msg(c.status()).rfind("syn.toml:1:", 0) == 0);
  }
  SECTION("value out of range") {
    auto c = ParseConfig("[kv_slab]\ncpu_ram_frac = 1.5\n", "r.toml");
    REQUIRE(!c.ok());
    CHECK(Msg(c.status()).find("r.toml:2: key 'kv_slab.cpu_ram_frac' must be in (0, 1]") !=
          std::string::npos);
  }
  SECTION("missing required key in a table") {
    auto c = ParseConfig("[[nodes]]\nid = 0\n", "n.toml");
    REQUIRE(!c.ok());
    CHECK(Msg(c.status()).find("key 'nodes.rpc_addr' is required") != std::string::npos);
  }
  SECTION("empty credentials") {
    auto c = ParseConfig("[[credentials]]\naccess_key = \"\"\nsecret_key = \"x\"\n", "c.toml");
    REQUIRE(!c.ok());
  }
  SECTION("self_id not among nodes") {
    auto c = ParseConfig("self_id = 3\n[[nodes]]\nid = 0\nrpc_addr = \"127.0.0.1:1\"\n", "s.toml");
    REQUIRE(!c.ok());
    CHECK(Msg(c.status()).find("self_id 3") != std::string::npos);
  }
  SECTION("kv mode takes a cluster of nodes, with unique ids") {
    auto c = ParseConfig(
        "mode = \"kv\"\n[[nodes]]\nid = 0\nrpc_addr = \"a:1\"\n[[nodes]]\nid = 1\nrpc_addr = "
        "\"b:1\"\n",
        "k.toml");
    REQUIRE(c.ok());
    CHECK(c->nodes.size() == 2);
    auto dup = ParseConfig(
        "mode = \"kv\"\n[[nodes]]\nid = 0\nrpc_addr = \"a:1\"\n[[nodes]]\nid = 0\nrpc_addr = "
        "\"b:1\"\n",
        "k.toml");
    REQUIRE(!dup.ok());
  }
  SECTION("parity beyond half") {
    auto c = ParseConfig("set_drive_count = 4\ndefault_parity_count = 3\n", "p.toml");
    REQUIRE(!c.ok());
  }
  SECTION("a set larger than the folders listed") {
    auto c = ParseConfig("data_dirs = [\"/a\", \"/b\", \"/c\", \"/d\"]\nset_drive_count = 5\n",
                         "d.toml");
    REQUIRE(!c.ok());
    CHECK(Msg(c.status()).find("d.toml:2: key 'set_drive_count' is 5 but data_dirs lists 4") !=
          std::string::npos);
  }
  SECTION("a file given as a drive folder") {
    auto c = ParseConfig("data_dirs = [\"/etc/hostname\"]\n", "f.toml");
    REQUIRE(!c.ok());
    CHECK(
        Msg(c.status()).find("f.toml:1: key 'data_dirs' lists '/etc/hostname', which is a file") !=
        std::string::npos);
  }
  SECTION("secrets too short to guard anything") {
    for (const char* text : {"rpc_secret = \"x\"\n", "admin_token = \"abc\"\n",
                             "[[credentials]]\naccess_key = \"ak\"\nsecret_key = \"secretkey\"\n",
                             "[[credentials]]\naccess_key = \"akey\"\nsecret_key = \"s\"\n"}) {
      auto c = ParseConfig(text, "s.toml");
      REQUIRE(!c.ok());
      CHECK(Msg(c.status()).find("must be at least") != std::string::npos);
      CHECK(Msg(c.status()).rfind("s.toml:", 0) == 0);
    }
  }
  SECTION("capacity_gb must be finite") {
    for (const char* v : {"inf", "nan", "-1.0", "0.0"}) {
      auto c = ParseConfig(std::string("[kv_slab]\ncapacity_gb = ") + v + "\n", "c.toml");
      REQUIRE(!c.ok());
      CHECK(Msg(c.status()).find("c.toml:2: key 'kv_slab.capacity_gb'") != std::string::npos);
    }
  }
  SECTION("rdma transport needs [rdma]") {
    auto c = ParseConfig("transport = \"rdma\"\n", "x.toml");
    REQUIRE(!c.ok());
  }
}

TEST_CASE("unknown keys are ignored", "[config]") {
  auto c = ParseConfig("self_id = 0\nfuture_knob = 3\n", "u.toml");
  CHECK(c.ok());
}

TEST_CASE("missing config file is NotFound", "[config]") {
  auto c = openlake::tools::LoadConfigFile("/nonexistent/openlake.toml");
  REQUIRE(!c.ok());
  CHECK(c.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("slab size from cpu_ram_frac or capacity_gb", "[config]") {
  openlake::tools::KvSlabConfig k;
  const uint64_t gib = 1ull << 30;
  k.cpu_ram_frac = 0.5;
  CHECK(openlake::tools::KvSlabBytes(k, 24 * gib).value() == 12 * gib);
  k.cpu_ram_frac.reset();
  k.capacity_gb = 0.25;
  CHECK(openlake::tools::KvSlabBytes(k, 24 * gib).value() == gib / 4);
  k.capacity_gb = 100;
  CHECK(!openlake::tools::KvSlabBytes(k, 24 * gib).ok());  // beyond RAM
  k.capacity_gb = 0.001;
  CHECK(!openlake::tools::KvSlabBytes(k, 24 * gib).ok());  // below 16 MiB
  CHECK(openlake::tools::MemTotalBytes() > 0);
}

TEST_CASE("the config maps onto the library's options", "[config]") {
  namespace t = openlake::tools;
  auto c = t::LoadConfigFile(OL_SOURCE_ROOT "/examples/configs/storage-tcp-local.toml");
  REQUIRE(c.ok());
  const openlake::store::StoreOptions so = t::StoreOptionsFor(*c);
  CHECK(so.drives == c->data_dirs);
  CHECK(so.set_drive_count == 4);
  CHECK(so.parity == 1);
  const openlake::s3::S3ServerOptions s3 = t::S3ServerOptionsFor(*c);
  CHECK(s3.address == "127.0.0.1:9000");
  CHECK(s3.region == "us-east-1");
  REQUIRE(s3.credentials.size() == 1);
  CHECK(s3.credentials[0].access_key == "openlakeadmin");
  CHECK(s3.data_dir == "./data");  // where a generated pair would be kept
  CHECK(t::RuntimeOptionsFor(*c).poll_window == absl::ZeroDuration());  // no KV pool: no spin

  // Fewer folders than a set: one set of them all; parity at most half of it.
  t::Config small = *c;
  small.data_dirs = {"/a/d0", "/a/d1"};
  small.default_parity_count = 2;
  CHECK(t::StoreOptionsFor(small).set_drive_count == 2);
  CHECK(t::StoreOptionsFor(small).parity == 1);
  CHECK(t::S3ServerOptionsFor(small).data_dir == "/a");

  t::Config kv = t::DefaultConfig();
  kv.cores = {1};
  kv.rpc_secret = "s3cr3t";
  kv.kv_slab.reserve_ttl_secs = 7;
  const openlake::io::RuntimeOptions ro = t::RuntimeOptionsFor(kv);
  CHECK(ro.cpus == std::vector<int>{1});
  CHECK(ro.poll_window == absl::Microseconds(50));
  const openlake::kv::KvServiceOptions ko = t::KvServiceOptionsFor(kv, 1ull << 30, "/run/x.sock");
  CHECK(ko.tcp_address == "127.0.0.1:9400");
  CHECK(ko.unix_socket == "/run/x.sock");
  CHECK(ko.slab_bytes == 1ull << 30);
  CHECK(ko.segment_bytes == kv.kv_slab.segment_bytes);
  CHECK(ko.lease == absl::Seconds(7));
  CHECK(ko.secret == "s3cr3t");
}

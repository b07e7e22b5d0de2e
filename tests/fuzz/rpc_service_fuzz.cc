// Fuzz target for the RPC services as a client reaches them: a real KvService (with the node
// status service on the same server, as openlaked runs them) on a Unix socket, fed by a client
// on a real connection. The first byte chooses how the rest is read:
//   odd:  the bytes after the hello, sent as they are (frames, junk, half frames), then the
//         answers read until the server closes or goes quiet;
//   even: a script of operations, each an opcode byte and its argument bytes, turned into
//         well-formed requests that carry what earlier answers returned (namespace refs,
//         reserved slots, pin batches), so that the fuzzer walks the pool's state machine
//         (attach, open, reserve, commit, lookup, release, exists, remove, reset, stats, find,
//         node status) and not only its parsers. Opcode 12 sends a frame of any method with
//         the next bytes as its payload.
// Beyond "no crash": every well-formed request gets exactly one answer with its request id.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_socket.h"
#include "io/test_util.h"
#include "kv/kv.pb.h"
#include "kv/wire.h"
#include "net/frame.h"

#include "openlake/kv/service.h"
#include "openlake/node/status.h"

namespace {

namespace kv = openlake::kv;
namespace net = openlake::net;
namespace wire = openlake::kv::wire;

struct Service {
  std::unique_ptr<openlake::io::Runtime> rt = openlake::testing::StartRuntime(1);
  openlake::testing::TempDir dir;
  std::unique_ptr<kv::KvService> svc;
  std::string socket_path;

  Service() {
    kv::KvServiceOptions o;
    o.tcp_address = "";
    o.unix_socket = dir.path() + "/run/kv.sock";
    o.slab_bytes = 32ull << 20;
    o.segment_bytes = 8ull << 20;
    o.max_frame_bytes = 1u << 20;
    o.extend = [](net::RpcServer& s) {
      openlake::node::ServeStatus(s, [] {
        openlake::node::NodeStatus st;
        st.version = "fuzz";
        st.kv = true;
        return st;
      });
    };
    auto s = kv::KvService::Start(*rt, o);
    if (!s.ok()) __builtin_trap();
    svc = *std::move(s);
    socket_path = svc->unix_socket();
  }
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool empty() const { return in_.empty(); }
  uint8_t Byte() {
    if (in_.empty()) return 0;
    const uint8_t b = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return b;
  }
  std::string_view Bytes(size_t n) {
    n = std::min(n, in_.size());
    std::string_view out = in_.substr(0, n);
    in_.remove_prefix(n);
    return out;
  }

 private:
  std::string_view in_;
};

class Session {
 public:
  explicit Session(openlake::fuzz::Socket& s) : sock_(s) {}

  // Sends one request and reads its answer; false when the connection ended.
  bool Call(uint16_t method, const std::string& payload, std::string* answer, uint32_t* code) {
    net::FrameHeader h;
    h.type = net::FrameType::kRequest;
    h.method = method;
    h.request_id = ++id_;
    h.aux = 2000;
    h.length = static_cast<uint32_t>(payload.size());
    std::string frame;
    net::AppendFrame(h, payload, &frame);
    if (!sock_.SendAll(frame)) return false;
    std::string head;
    if (!sock_.ReadExact(&head, net::kFrameHeaderBytes, 3000)) return false;
    net::FrameHeader r;
    if (!net::DecodeHeader(head.data(), 64u << 20, &r).ok()) __builtin_trap();
    if (r.type != net::FrameType::kResponse) return false;  // an error frame: server full
    if (r.request_id != h.request_id) __builtin_trap();
    std::string body;
    if (!sock_.ReadExact(&body, r.length, 3000)) return false;
    *answer = std::move(body);
    *code = r.aux;
    return true;
  }

  bool Run(Reader& in) {
    while (!in.empty()) {
      const uint8_t op = in.Byte() % 13;
      std::string payload, answer;
      uint32_t code = 0;
      uint16_t method = 0;
      switch (op) {
        case 0: {
          wire::AttachRequest r;
          r.set_want_slab(in.Byte() & 1);
          method = wire::kAttach;
          r.SerializeToString(&payload);
          break;
        }
        case 1: {
          wire::OpenNamespaceRequest r;
          const uint8_t b = in.Byte();
          r.set_name("ns" + std::to_string(b % 4));
          wire::Fingerprint* fp = r.mutable_fingerprint();
          fp->set_model("m");
          fp->set_dtype("bf16");
          fp->set_num_layers(1 + b % 3);
          fp->set_block_tokens(16);
          r.set_block_bytes(static_cast<uint32_t>(in.Byte()) << (in.Byte() % 16));
          method = wire::kOpenNamespace;
          r.SerializeToString(&payload);
          break;
        }
        case 2: {
          wire::ReserveRequest r;
          *r.mutable_ns() = ns_;
          r.set_count(in.Byte() % 9);
          r.set_allow_partial(in.Byte() & 1);
          method = wire::kReserve;
          r.SerializeToString(&payload);
          break;
        }
        case 3: {
          wire::CommitRequest r;
          *r.mutable_ns() = ns_;
          const size_t n = std::min<size_t>(reserved_.size(), in.Byte() % 9);
          std::vector<kv::BlockKey> keys;
          for (size_t i = 0; i < n; ++i) {
            r.add_slots(reserved_[i]);
            r.add_checksums(in.Byte());
            keys.push_back(Key(in.Byte()));
          }
          if (in.Byte() & 1) r.add_depths(1);
          r.set_key_len(Pack(keys, r.mutable_keys()));
          method = wire::kCommit;
          r.SerializeToString(&payload);
          break;
        }
        case 4:
        case 6:
        case 7: {
          wire::LookupRequest r;  // Lookup, Exists and Remove share their fields' numbers
          *r.mutable_ns() = ns_;
          std::vector<kv::BlockKey> keys;
          const size_t n = in.Byte() % 9;
          for (size_t i = 0; i < n; ++i) keys.push_back(Key(in.Byte()));
          r.set_key_len(Pack(keys, r.mutable_keys()));
          method = op == 4 ? wire::kLookup : op == 6 ? wire::kExists : wire::kRemove;
          r.SerializeToString(&payload);
          break;
        }
        case 5: {
          wire::ReleaseRequest r;
          if (pin_batch_ != 0) r.add_pin_batches(pin_batch_ + (in.Byte() & 1));
          for (uint64_t s : reserved_) r.add_reserved(s);
          method = wire::kRelease;
          r.SerializeToString(&payload);
          break;
        }
        case 8: {
          wire::ResetRequest r;
          *r.mutable_ns() = ns_;
          method = wire::kReset;
          r.SerializeToString(&payload);
          break;
        }
        case 9:
          method = wire::kStats;
          break;
        case 10: {
          wire::FindNamespaceRequest r;
          r.set_name("ns" + std::to_string(in.Byte() % 4));
          method = wire::kFindNamespace;
          r.SerializeToString(&payload);
          break;
        }
        case 11:
          method = openlake::node::kStatusMethod;
          break;
        default: {
          method = static_cast<uint16_t>(in.Byte() | (in.Byte() << 8));
          payload = std::string(in.Bytes(in.Byte()));
          break;
        }
      }
      if (!Call(method, payload, &answer, &code)) return false;
      if (code != 0) continue;
      if (method == wire::kOpenNamespace) {
        wire::OpenNamespaceResponse r;
        if (r.ParseFromString(answer)) {
          ns_.set_id(r.id());
          ns_.set_digest(r.digest());
        }
      } else if (method == wire::kReserve) {
        wire::ReserveResponse r;
        if (r.ParseFromString(answer)) reserved_.assign(r.slots().begin(), r.slots().end());
      } else if (method == wire::kCommit || method == wire::kRelease) {
        reserved_.clear();
      } else if (method == wire::kLookup) {
        wire::LookupResponse r;
        if (r.ParseFromString(answer) && r.pin_batch() != 0) pin_batch_ = r.pin_batch();
      }
    }
    return true;
  }

 private:
  // Packs `keys` into a request's key field; the key_len to send with it.
  static uint32_t Pack(const std::vector<kv::BlockKey>& keys, std::string* field) {
    uint32_t len = 0;
    if (!keys.empty()) (void)wire::PackKeys(keys.data(), keys.size(), field, &len);
    return len;
  }

  static kv::BlockKey Key(uint8_t b) {
    uint8_t bytes[16] = {};
    bytes[0] = b % 16;  // few distinct keys, so that lookups hit
    bytes[15] = 0x5a;
    return kv::BlockKey(std::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
  }

  openlake::fuzz::Socket& sock_;
  uint64_t id_ = 0;
  wire::NsRef ns_;
  std::vector<uint64_t> reserved_;
  uint64_t pin_batch_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Service instance;  // destroyed at exit: its folder goes too
  Service* const service = &instance;
  if (size == 0) return 0;
  openlake::fuzz::Socket sock;
  if (!sock.ConnectUnix(service->socket_path)) __builtin_trap();
  // The hello: header and payload. A server that cannot send 32 bytes in 20 s (on a loaded
  // machine, under the sanitizers) is stuck.
  std::string hello;
  if (!sock.ReadExact(&hello, net::kFrameHeaderBytes, 20000)) {
    std::fprintf(stderr, "fuzz: no hello (%zu bytes)\n", hello.size());
    __builtin_trap();
  }
  net::FrameHeader h;
  if (!net::DecodeHeader(hello.data(), 1u << 20, &h).ok()) __builtin_trap();
  hello.clear();
  if (!sock.ReadExact(&hello, h.length, 20000)) __builtin_trap();

  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    (void)sock.SendAll(rest);
    sock.ShutdownWrite();  // the server answers what it got, then sees the end and closes
    std::string answers;
    while (sock.Read(&answers, 1 << 20, 200) > 0 && answers.size() < (8u << 20)) {
    }
    return 0;
  }
  Reader in(rest);
  Session session(sock);
  (void)session.Run(in);
  return 0;
}

// Fuzz target for the RPC wire format before any service sees a request (docs/rpc.md): the
// 32-byte frame header, the hello, the auth MAC check, and the KV service's key packing and
// request messages. Beyond "no crash": a header that decodes encodes back to the same bytes
// (every byte of it is checked), and unpacked keys pack back to an equivalent field.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kv/kv.pb.h"
#include "kv/wire.h"
#include "net/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace net = openlake::net;
  namespace wire = openlake::kv::wire;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (in.size() >= net::kFrameHeaderBytes) {
    net::FrameHeader h;
    if (net::DecodeHeader(in.data(), 1u << 20, &h).ok()) {
      char again[net::kFrameHeaderBytes];
      net::EncodeHeader(h, again);
      if (std::string_view(again, sizeof(again)) != in.substr(0, net::kFrameHeaderBytes))
        __builtin_trap();
      if (h.length > (1u << 20)) __builtin_trap();
    }
    in.remove_prefix(net::kFrameHeaderBytes);
  }
  bool auth_required = false;
  uint8_t nonce[net::kNonceBytes] = {};
  std::string version;
  (void)net::DecodeHello(in, &auth_required, nonce, &version);
  (void)net::AuthMacMatches("fuzz-secret", nonce, in);

  if (in.empty()) return 0;
  const uint32_t key_len = static_cast<uint8_t>(in[0]) % 40;
  const std::string packed(in.substr(1));
  auto keys = wire::UnpackKeys(packed, key_len);
  if (keys.ok() && !keys->empty()) {
    std::string out;
    uint32_t len = 0;
    if (!wire::PackKeys(keys->data(), keys->size(), &out, &len).ok()) __builtin_trap();
    auto back = wire::UnpackKeys(out, len);
    if (!back.ok() || back->size() != keys->size()) __builtin_trap();
  }

  // Every request message the KV service parses, from the same bytes.
  namespace pb = openlake::kv::wire;
  pb::AttachRequest attach;
  pb::OpenNamespaceRequest open;
  pb::ReserveRequest reserve;
  pb::CommitRequest commit;
  pb::LookupRequest lookup;
  pb::ReleaseRequest release;
  pb::ExistsRequest exists;
  pb::ResetRequest reset;
  pb::FindNamespaceRequest find;
  pb::RemoveRequest remove;
  google::protobuf::MessageLite* const messages[] = {&attach,  &open,   &reserve, &commit, &lookup,
                                                     &release, &exists, &reset,   &find,   &remove};
  for (google::protobuf::MessageLite* m : messages) {
    (void)wire::Parse(in, m);
  }
  return 0;
}

// Fuzz target for the HTTP framing (http/framing.h): a request head, then a chunked body, from the
// same bytes. Built with libFuzzer where the compiler has it (-fsanitize=fuzzer); otherwise
// fuzz_main.cc replays the corpus in tests/fuzz/corpus/http_request/ as a unit test.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http/framing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace http = openlake::http;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  http::Limits limits;
  limits.max_request_line = 512;
  limits.max_header_bytes = 2048;
  limits.max_headers = 16;
  http::Request req;
  const http::HeadResult h = http::ParseRequestHead(in, limits, &req);
  if (h.state == http::HeadResult::kComplete && h.consumed > in.size()) __builtin_trap();
  if (h.state == http::HeadResult::kError && (h.status < 400 || h.error.empty())) __builtin_trap();
  (void)http::HeadMayBeComplete(in, size / 2, limits);

  // Whatever follows the head (or the whole input) as a chunked body, in two pieces.
  std::string_view body = h.state == http::HeadResult::kComplete ? in.substr(h.consumed) : in;
  http::ChunkedDecoder d(limits);
  uint64_t data_bytes = 0;
  for (std::string_view piece : {body.substr(0, body.size() / 3), body.substr(body.size() / 3)}) {
    while (true) {
      http::ChunkedDecoder::Event ev;
      const size_t used = d.Next(piece, &ev);
      if (used > piece.size()) __builtin_trap();
      if (ev.kind == http::ChunkedDecoder::Event::kData) data_bytes += ev.data.size();
      piece.remove_prefix(used);
      if (ev.kind == http::ChunkedDecoder::Event::kEnd ||
          ev.kind == http::ChunkedDecoder::Event::kError)
        break;
      if (used == 0 && ev.kind == http::ChunkedDecoder::Event::kNeedMore) break;
    }
  }
  if (data_bytes != d.body_bytes()) __builtin_trap();
  return 0;
}

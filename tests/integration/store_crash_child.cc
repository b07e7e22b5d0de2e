// The writer the crash test kills: opens the store on the given drive folders and writes until
// it is killed, announcing each operation on stdout before it starts ("B op key seed") and
// after it was acknowledged ("A key seed"; "F key seed error" when it failed).
//
//   store_crash_child SEED DRIVE...
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "integration/crash_corpus.h"

using namespace openlake;
using openlake::testing::CrashBody;
using openlake::testing::CrashOp;
using openlake::testing::CrashParts;

namespace {

// (Arguments inside co_await are named values, never temporaries: see io/task.h on GCC 12.)
io::Task<absl::Status> WriteObject(store::Store& st, std::string key, std::string body) {
  const std::string bucket = "crash";
  const store::PutOptions opts;
  OL_CO_ASSIGN_OR_RETURN(auto w, co_await st.CreateObject(bucket, key, opts));
  for (size_t at = 0; at < body.size(); at += 100000) {
    const size_t n = std::min<size_t>(100000, body.size() - at);
    OL_CO_RETURN_IF_ERROR(co_await w->Write(testing::Bytes(body).subspan(at, n)));
  }
  OL_CO_RETURN_IF_ERROR((co_await w->Commit()).status());
  co_return absl::OkStatus();
}

io::Task<absl::Status> WriteMultipart(store::Store& st, std::string key, uint32_t seed) {
  const std::string bucket = "crash";
  const store::PutOptions opts;
  OL_CO_ASSIGN_OR_RETURN(std::string id, co_await st.CreateUpload(bucket, key, opts));
  std::vector<store::CompletePart> done;
  const auto parts = CrashParts(seed);
  for (size_t i = 0; i < parts.size(); ++i) {
    const int n = static_cast<int>(i) + 1;
    const auto size = static_cast<int64_t>(parts[i].size());
    OL_CO_ASSIGN_OR_RETURN(auto w, co_await st.UploadPart(bucket, key, id, n, size));
    OL_CO_RETURN_IF_ERROR(co_await w->Write(testing::Bytes(parts[i])));
    OL_CO_ASSIGN_OR_RETURN(store::ObjectInfo info, co_await w->Commit());
    store::CompletePart p;
    p.number = n;
    p.etag = info.etag;
    done.push_back(p);
  }
  const store::CompleteOptions unconditional;
  OL_CO_RETURN_IF_ERROR(
      (co_await st.CompleteUpload(bucket, key, id, std::move(done), unconditional)).status());
  co_return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: store_crash_child SEED DRIVE...\n");
    return 2;
  }
  const uint32_t seed = static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10));
  std::vector<std::string> drives(argv + 2, argv + argc);
  auto rt = testing::StartRuntime(1);
  if (rt == nullptr) return 3;
  auto opened = store::Store::Open(testing::CrashStoreOptions(drives));
  if (!opened.ok()) {
    std::fprintf(stderr, "open: %s\n", opened.status().ToString().c_str());
    return 4;
  }
  store::Store& st = **opened;
  const std::string bucket = "crash";
  auto made = io::BlockOn(*rt, 0, [&] { return st.MakeBucket(bucket); });
  if (!made.ok() && !absl::IsAlreadyExists(made)) return 5;

  std::mt19937 rng(seed);
  for (uint32_t i = 0;; ++i) {
    const uint32_t s = seed * 100000 + i;
    // Small writes twice as often as each other kind: most keys' records are packed.
    const uint32_t pick = rng() % 6;
    const auto op = static_cast<CrashOp>(pick >= 4 ? 4 : pick);
    std::string key;
    switch (op) {
      case CrashOp::kPut: key = "put/" + std::to_string(s); break;
      case CrashOp::kMultipart: key = "mp/" + std::to_string(s); break;
      case CrashOp::kSmall: key = "sm/" + std::to_string(rng() % 8); break;
      case CrashOp::kDelete:  // either kind of shared key
        key = (rng() % 2 ? "ow/" : "sm/") + std::to_string(rng() % 4);
        break;
      default: key = "ow/" + std::to_string(rng() % 4); break;  // shared across rounds
    }
    std::printf("B %d %s %u\n", static_cast<int>(op), key.c_str(), s);
    std::fflush(stdout);
    absl::Status r;
    if (op == CrashOp::kDelete) {
      r = io::BlockOn(*rt, 0, [&] { return st.DeleteObject(bucket, key); });
      if (absl::IsNotFound(r)) r = absl::OkStatus();
    } else if (op == CrashOp::kMultipart) {
      r = io::BlockOn(*rt, 0, [&] { return WriteMultipart(st, key, s); });
    } else {
      r = io::BlockOn(*rt, 0, [&] { return WriteObject(st, key, CrashBody(op, s)); });
    }
    if (r.ok()) {
      std::printf("A %s %u\n", key.c_str(), s);
    } else {
      std::printf("F %s %u %s\n", key.c_str(), s, r.ToString().c_str());
    }
    std::fflush(stdout);
  }
}

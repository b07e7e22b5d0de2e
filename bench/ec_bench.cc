// ec_bench: Reed–Solomon encode and reconstruct through ec::Codec, against ISA-L's
// ec_encode_data called directly, in the same run, on one core.
//
//   ec_bench [--json] [--quick] [--seconds 1] [--block-kib 1024] [--cpu 0]
//
// For RS(4+2) and RS(8+4), blocks of --block-kib KiB of data (shards of block / k bytes, from a
// pool of 64 blocks so the data does not sit in cache): GB/s of data encoded, and GB/s of data
// reconstructed with m data shards lost (the worst case). ISA-L's side uses tables it built
// itself, so the figure compares our per-call work (shape checks, the decode-table cache
// lookup) against the bare kernel. Rounds alternate ours and ISA-L's; figures are medians.
// Last line with --json: one object with every figure and ratio (bar: ratio >= 0.9).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <isa-l/erasure_code.h>

#include "bench_util.h"

#include "openlake/ec/codec.h"

namespace openlake::bench {
namespace {

struct Options {
  bool json = false;
  bool quick = false;
  double seconds = 1.0;
  int block_kib = 1024;
  int cpu = 0;
  int rounds = 5;
};

struct Figures {
  int k = 0, m = 0;
  double encode = NAN, isal_encode = NAN, reconstruct = NAN, isal_reconstruct = NAN;
};

// Runs `fn(i)` for i = 0, 1, ... until `seconds` pass; returns calls per second.
template <typename Fn>
double Rate(double seconds, Fn fn) {
  const int64_t end = NowNs() + static_cast<int64_t>(seconds * 1e9);
  int64_t t0 = NowNs();
  uint64_t n = 0;
  int64_t now = t0;
  while (now < end) {
    for (int i = 0; i < 8; ++i) fn(n++);
    now = NowNs();
  }
  return static_cast<double>(n) / (static_cast<double>(now - t0) / 1e9);
}

Figures Measure(int k, int m, const Options& o) {
  constexpr int kPool = 64;
  const size_t block = static_cast<size_t>(o.block_kib) << 10;
  const size_t shard = block / static_cast<size_t>(k);
  const int n = k + m;
  // kPool stripes, each k + m shards.
  std::vector<std::vector<uint8_t>> mem(static_cast<size_t>(kPool * n),
                                        std::vector<uint8_t>(shard));
  for (size_t i = 0; i < mem.size(); ++i) FillRandom(mem[i].data(), shard, i + 1);
  std::vector<std::vector<uint8_t*>> stripes(kPool);
  for (int s = 0; s < kPool; ++s) {
    for (int i = 0; i < n; ++i) stripes[s].push_back(mem[static_cast<size_t>(s * n + i)].data());
  }
  auto codec = *ec::Codec::Create(k, m);

  // ISA-L by hand: the same Cauchy matrix and tables.
  std::vector<unsigned char> matrix(static_cast<size_t>(n * k)), tables(32u * k * m);
  gf_gen_cauchy1_matrix(matrix.data(), n, k);
  ec_init_tables(k, m, &matrix[static_cast<size_t>(k * k)], tables.data());
  // Decode tables for "data shards 0..m-1 lost", built once as a caller of ISA-L would.
  std::vector<int> src;
  for (int i = m; i < n && static_cast<int>(src.size()) < k; ++i) src.push_back(i);
  std::vector<unsigned char> b(static_cast<size_t>(k * k)), inv(static_cast<size_t>(k * k));
  for (int r = 0; r < k; ++r) {
    for (int c = 0; c < k; ++c) b[r * k + c] = matrix[src[r] * k + c];
  }
  gf_invert_matrix(b.data(), inv.data(), k);
  std::vector<unsigned char> dtables(32u * k * m);
  ec_init_tables(k, m, inv.data(), dtables.data());  // rows 0..m-1 of B^-1: the lost data
  std::unique_ptr<bool[]> present(new bool[n]);
  for (int i = 0; i < n; ++i) present[i] = i >= m;

  std::vector<double> enc, ienc, rec, irec;
  const double per = o.seconds / 4;
  for (int r = 0; r < o.rounds; ++r) {
    auto ours_e = [&] {
      return Rate(per, [&](uint64_t i) {
        uint8_t* const* s = stripes[i % kPool].data();
        codec->Encode(shard, s, s + k);
      });
    };
    auto isal_e = [&] {
      return Rate(per, [&](uint64_t i) {
        unsigned char** s = stripes[i % kPool].data();
        ec_encode_data(static_cast<int>(shard), k, m, tables.data(), s, s + k);
      });
    };
    auto ours_r = [&] {
      return Rate(per, [&](uint64_t i) {
        (void)codec->Reconstruct(shard, stripes[i % kPool].data(),
                                 absl::MakeConstSpan(present.get(), n));
      });
    };
    auto isal_r = [&] {
      return Rate(per, [&](uint64_t i) {
        unsigned char** s = stripes[i % kPool].data();
        unsigned char* out[ec::kMaxShards];
        for (int x = 0; x < m; ++x) out[x] = s[x];
        ec_encode_data(static_cast<int>(shard), k, m, dtables.data(), s + m, out);
      });
    };
    if (r % 2 == 0) {
      enc.push_back(ours_e());
      ienc.push_back(isal_e());
      rec.push_back(ours_r());
      irec.push_back(isal_r());
    } else {
      ienc.push_back(isal_e());
      enc.push_back(ours_e());
      irec.push_back(isal_r());
      rec.push_back(ours_r());
    }
  }
  const double gb = static_cast<double>(block) / 1e9;
  Figures f;
  f.k = k;
  f.m = m;
  f.encode = Median(enc) * gb;
  f.isal_encode = Median(ienc) * gb;
  f.reconstruct = Median(rec) * gb;
  f.isal_reconstruct = Median(irec) * gb;
  return f;
}

int Main(const Options& o) {
  const MachineInfo mi = ProbeMachine(o.cpu);
  PrintMachine(mi);
  PrintBackgroundLoad(BackgroundLoad(absl::Milliseconds(300)));
  PinThisThread(o.cpu);
  std::vector<Figures> all;
  for (auto [k, m] : {std::pair{4, 2}, std::pair{8, 4}}) {
    Figures f = Measure(k, m, o);
    std::printf(
        "RS(%d+%d), %d KiB blocks, one core (GB/s of data):\n"
        "  encode      ours %7.2f   ISA-L %7.2f   ratio %.3f (bar >= 0.9)\n"
        "  reconstruct ours %7.2f   ISA-L %7.2f   ratio %.3f (%d data shards lost)\n",
        k, m, o.block_kib, f.encode, f.isal_encode, Ratio(f.encode, f.isal_encode), f.reconstruct,
        f.isal_reconstruct, Ratio(f.reconstruct, f.isal_reconstruct), m);
    all.push_back(f);
  }
  if (o.json) {
    JsonLine j;
    j.Add("bench", "ec")
        .Add("block_bytes", static_cast<int64_t>(o.block_kib) << 10)
        .Add("quick", o.quick);
    for (const Figures& f : all) {
      const std::string p = "rs" + std::to_string(f.k) + "_" + std::to_string(f.m) + "_";
      j.Add(p + "encode_GBps", f.encode, 2)
          .Add(p + "isal_encode_GBps", f.isal_encode, 2)
          .Add(p + "encode_ratio", Ratio(f.encode, f.isal_encode), 3)
          .Add(p + "reconstruct_GBps", f.reconstruct, 2)
          .Add(p + "isal_reconstruct_GBps", f.isal_reconstruct, 2)
          .Add(p + "reconstruct_ratio", Ratio(f.reconstruct, f.isal_reconstruct), 3);
    }
    std::printf("%s\n", j.str().c_str());
  }
  return 0;
}

}  // namespace
}  // namespace openlake::bench

int main(int argc, char** argv) {
  openlake::bench::Options o;
  CLI::App app{"ec_bench: Reed-Solomon through ec::Codec vs ISA-L's ec_encode_data"};
  app.add_flag("--json", o.json, "end with one JSON object");
  app.add_flag("--quick", o.quick, "a smoke run (short, one round)");
  app.add_option("--seconds", o.seconds, "time per code and round (default 1)");
  app.add_option("--block-kib", o.block_kib, "data per stripe in KiB (default 1024)")
      ->check(CLI::Range(4, 1 << 16));
  app.add_option("--cpu", o.cpu, "CPU to run on (default 0)");
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    o.seconds = 0.1;
    o.rounds = 1;
  }
  return openlake::bench::Main(o);
}

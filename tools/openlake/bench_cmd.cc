// `openlake bench client` and `openlake bench target` (docs/cli.md, "bench"). The client is in
// bench_client.cc; the target, here, is a net::RpcServer on one reactor that answers method
// kBenchEchoMethod with the request's payload, for measuring the RPC transport alone.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"

#include "bench.h"
#include "cli.h"

#include "openlake/io/reactor.h"
#include "openlake/io/socket.h"
#include "openlake/net/rpc.h"
#include "openlake/version.h"

namespace openlake::cli {
namespace {

struct TargetOptions {
  std::string bind = "127.0.0.1:9500";
  std::string secret;
  bool json = false;
};

int RunBenchTarget(const TargetOptions& o) {
  absl::StatusOr<io::SocketAddress> addr = io::SocketAddress::Parse(o.bind);
  if (!addr.ok()) {
    return Fail(kExitUsage,
                "bench target: --bind " + o.bind + ": " + std::string(addr.status().message()));
  }
  // SIGINT and SIGTERM are taken by sigwait below: blocked here, before the reactor thread
  // starts, so that it inherits the mask and never receives them itself.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  io::RuntimeOptions ro;
  const std::vector<int> cpus = io::AllowedCpus();
  ro.cpus = {cpus.empty() ? 0 : cpus.front()};
  ro.pin = false;  // the client threads may want that CPU as much
  ro.thread_name = "bench-target";
  absl::StatusOr<std::unique_ptr<io::Runtime>> rt = io::Runtime::Create(ro);
  absl::Status started = rt.ok() ? (*rt)->Start() : rt.status();
  if (!started.ok()) {
    return Fail(kExitRuntime,
                "bench target: cannot start a reactor: " + std::string(started.message()));
  }
  std::unique_ptr<net::RpcServer> server;
  absl::StatusOr<io::SocketAddress> bound = absl::UnknownError("not started");
  absl::Status ran = (*rt)->RunOn(0, [&] {
    net::RpcServerOptions so;
    so.secret = o.secret;
    so.version = std::string(Version());
    absl::StatusOr<std::unique_ptr<net::RpcServer>> s =
        net::RpcServer::Create((*rt)->reactor(0), std::move(so));
    if (!s.ok()) {
      bound = s.status();
      return;
    }
    server = *std::move(s);
    server->Register(kBenchEchoMethod, [](net::RpcCall call) {
      // The answer is built behind room for its frame header: one copy of the payload.
      const std::string_view in = call.payload();
      std::string frame(net::RpcCall::kHeadroom + in.size(), '\0');
      std::copy(in.begin(), in.end(), frame.begin() + net::RpcCall::kHeadroom);
      call.RespondWithHeadroom(std::move(frame));
    });
    bound = server->Listen(*addr, {});
  });
  if (!ran.ok()) bound = ran;
  int code = kExitOk;
  if (!bound.ok()) {
    // Beyond loopback without --secret the server refuses (FailedPrecondition): a usage error.
    const bool usage =
        absl::IsFailedPrecondition(bound.status()) && !addr->IsLoopback() && o.secret.empty();
    code = Fail(usage ? kExitUsage : kExitRuntime,
                "bench target: " + std::string(bound.status().message()) +
                    (usage ? " (pass --secret, and the same --secret to the client)" : ""));
  } else {
    if (o.json) {
      JsonWriter w;
      w.BeginObject()
          .Field("listening", bound->ToString())
          .Field("method", uint32_t{kBenchEchoMethod})
          .EndObject();
      PrintJson(w);
    } else {
      std::printf("bench target: listening on %s (rpc method %u echoes its payload)\n",
                  bound->ToString().c_str(), unsigned{kBenchEchoMethod});
    }
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop_signals, &sig);
  }
  (void)(*rt)->RunOn(0, [&] { server.reset(); });
  (*rt)->Stop();
  return code;
}

}  // namespace

void AddBenchCommands(CLI::App& app, int* exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "load generators against a running store");
  bench->require_subcommand(1);
  bench->footer(absl::StrFormat(
      "Examples:\n"
      "  openlake bench target --bind 127.0.0.1:9500 &\n"
      "  openlake bench client --target 127.0.0.1:9500 --op rpc-echo --size 4KiB --threads 2\n"
      "  openlake bench client --target 127.0.0.1:9400 --op kv-get --size 1MiB --json\n"
      "`openlake bench client --help` lists the ops; the target answers rpc method %u.",
      unsigned{kBenchEchoMethod}));

  CLI::App* client = bench->add_subcommand(
      "client", "drive one operation from N threads; report ops/s, MB/s and latency percentiles");
  auto o = std::make_shared<BenchClientOptions>();
  auto size_text = std::make_shared<std::string>("4KiB");
  client
      ->add_option("-t,--target", o->target,
                   "kv-*: the KV pool's rpc_addr; s3-*: an S3 endpoint (s3_addr); rpc-echo: a "
                   "`bench target`")
      ->required();
  client->add_option("--op", o->op, "kv-put, kv-get, s3-put, s3-get or rpc-echo")
      ->required()
      ->check(CLI::IsMember({"kv-put", "kv-get", "s3-put", "s3-get", "rpc-echo"}));
  client->add_option("--size", *size_text, "bytes per op: 4096, 4KiB, 1MiB, ...")
      ->capture_default_str();
  client->add_option("--threads", o->threads, "worker threads, each with its own connection")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  client->add_option("--duration-secs", o->duration_secs, "measured period")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  client->add_option("--warmup-secs", o->warmup_secs, "warm-up before it (not counted)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  client->add_option("--timeout-secs", o->timeout_secs, "connect timeout and per-call timeout")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  client->add_option("--secret", o->secret, "rpc_secret, for a pool or target beyond loopback")
      ->envname("OPENLAKE_RPC_SECRET");
  client->add_option("--access-key", o->access_key, "S3 access key (s3-*)")
      ->envname("AWS_ACCESS_KEY_ID");
  client->add_option("--secret-key", o->secret_key, "S3 secret key (s3-*)")
      ->envname("AWS_SECRET_ACCESS_KEY");
  client->add_option("--bucket", o->bucket, "S3 bucket, created when missing (s3-*)")
      ->capture_default_str();
  client->add_option("--region", o->region, "S3 region (s3-*)")->capture_default_str();
  client->add_flag("--json", o->json, "one JSON object on stdout at the end");
  client->footer(
      "Examples:\n"
      "  openlake bench client --target 127.0.0.1:9400 --op kv-put --size 1MiB --threads 2\n"
      "  openlake bench client --target 127.0.0.1:9400 --op kv-get --size 256KiB --json\n"
      "  AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \\\n"
      "    openlake bench client --target 127.0.0.1:9000 --op s3-get --size 1MiB\n"
      "  openlake bench client --target 10.0.0.5:9500 --op rpc-echo --secret S --threads 4\n"
      "Progress goes to stderr once a second; the report (or --json) to stdout.");
  client->callback([o, size_text, exit_code] {
    if (!ParseByteSize(*size_text, &o->size)) {
      *exit_code = Fail(kExitUsage, "bench client: --size " + *size_text +
                                        ": expected a byte count such as 4096, 4KiB or 1MiB");
      return;
    }
    *exit_code = RunBenchClient(*o);
  });

  CLI::App* target = bench->add_subcommand(
      "target", "an RPC echo server for `bench client --op rpc-echo` (the transport alone)");
  auto t = std::make_shared<TargetOptions>();
  target->add_option("--bind", t->bind, "address to listen on (host:port)")->capture_default_str();
  target->add_option("--secret", t->secret, "shared secret; required beyond loopback")
      ->envname("OPENLAKE_RPC_SECRET");
  target->add_flag("--json", t->json, "the listening line as one JSON object");
  target->footer(absl::StrFormat(
      "Runs until SIGINT or SIGTERM; answers rpc method %u with the request's payload.\n"
      "Examples:\n"
      "  openlake bench target --bind 127.0.0.1:9500\n"
      "  openlake bench target --bind 0.0.0.0:9500 --secret S",
      unsigned{kBenchEchoMethod}));
  target->callback([t, exit_code] { *exit_code = RunBenchTarget(*t); });
}

}  // namespace openlake::cli

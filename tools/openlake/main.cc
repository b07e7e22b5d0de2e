// openlake: the operator's command-line tool. It answers questions about this machine, its
// drives, the KV pool and the cluster through libopenlake's public API, starts openlaked for
// local development, and loads a running store (`bench`). Every command takes --json (one JSON
// object on stdout) and exits 0 when it succeeded, 1 when it ran and failed (say, a daemon that
// cannot be reached), 2 on bad usage or a bad config. See docs/cli.md.
//
//   openlake version
//   openlake node info --json
//   openlake disk info --config node.toml
//   openlake kv stats --target 127.0.0.1:9400
//   openlake cluster up --config node.toml
//   openlake cluster status --config cluster.toml
//   openlake cluster topology --config cluster.toml --probe
//   openlake bench client --target 127.0.0.1:9400 --op kv-put --size 1MiB
#include <csignal>

#include <CLI/CLI.hpp>

#include "cli.h"

int main(int argc, char** argv) {
  // A reader that goes away (`openlake ... | head`) ends the output, not the process by signal.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"openlake: inspect and run OpenLake nodes (KV-cache pool and S3 object store)"};
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  openlake version\n"
      "  openlake node info --json\n"
      "  openlake disk info --config node.toml\n"
      "  openlake kv stats --target 127.0.0.1:9400\n"
      "  openlake cluster up --config node.toml\n"
      "  openlake cluster status --config cluster.toml\n"
      "  openlake cluster topology --config cluster.toml --probe\n"
      "  openlake bench target --bind 127.0.0.1:9500\n"
      "  openlake bench client --target 127.0.0.1:9500 --op rpc-echo --size 4KiB\n"
      "  openlake bench client --target 127.0.0.1:9400 --op kv-put --size 1MiB --threads 2\n"
      "\n"
      "Exit codes: 0 ok, 1 the command failed (e.g. a daemon is unreachable), 2 bad usage or\n"
      "config. `openlake COMMAND --help` describes each command.");
  int exit_code = openlake::cli::kExitOk;
  openlake::cli::AddVersionCommand(app, &exit_code);
  openlake::cli::AddNodeCommands(app, &exit_code);
  openlake::cli::AddDiskCommands(app, &exit_code);
  openlake::cli::AddKvCommands(app, &exit_code);
  openlake::cli::AddClusterCommands(app, &exit_code);
  openlake::cli::AddBenchCommands(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; every other parse error is a usage error.
    return app.exit(e) == 0 ? openlake::cli::kExitOk : openlake::cli::kExitUsage;
  }
  return exit_code;
}

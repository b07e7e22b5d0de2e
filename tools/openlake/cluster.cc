// `openlake cluster ...`: whole-deployment commands. Here `cluster up`, which runs openlaked
// with a config in the foreground (local development): the process becomes openlaked (execv),
// so Ctrl-C and SIGTERM reach the daemon directly. `cluster status` and `cluster topology` are
// in cluster_status.cc.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "daemon_config.h"

namespace openlake::cli {

namespace {

struct UpOptions {
  std::string config;
  std::string openlaked;  // explicit binary; empty = search
  std::string log_level;
};

bool Executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// openlaked next to this binary (an install puts both in bin/; the build tree keeps it in
// ../openlaked/), else the first on $PATH. Empty when none is found.
std::string FindOpenlaked() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.resize(dir.rfind('/') + 1);
    for (const char* rel : {"openlaked", "../openlaked/openlaked"}) {
      if (Executable(dir + rel)) return dir + rel;
    }
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string d;
    while (std::getline(dirs, d, ':')) {
      if (!d.empty() && Executable(d + "/openlaked")) return d + "/openlaked";
    }
  }
  return "";
}

int RunUp(const UpOptions& o) {
  // Check the config here first, so a mistake reads the same as from every other command.
  if (!LoadConfigOrReport(o.config)) return kExitUsage;
  std::string bin = o.openlaked;
  if (bin.empty()) {
    bin = FindOpenlaked();
    if (bin.empty()) {
      return Fail(kExitRuntime,
                  "cannot find openlaked next to this program or on PATH (use --openlaked PATH)");
    }
  } else if (!Executable(bin)) {
    return Fail(kExitUsage, "--openlaked " + bin + ": not an executable file");
  }
  std::vector<std::string> args = {bin, "--config", o.config};
  if (!o.log_level.empty()) {
    args.push_back("--log-level");
    args.push_back(o.log_level);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execv(bin.c_str(), argv.data());
  return Fail(kExitRuntime, "cannot run " + bin + ": " + std::strerror(errno));
}

}  // namespace

void AddClusterCommands(CLI::App& app, int* exit_code) {
  CLI::App* cluster = app.add_subcommand("cluster", "the deployment a config describes");
  cluster->require_subcommand(1);
  CLI::App* up = cluster->add_subcommand(
      "up", "run openlaked with this config in the foreground (local development)");
  auto o = std::make_shared<UpOptions>();
  up->add_option("-c,--config", o->config, "TOML config for openlaked")->required();
  up->add_option("--openlaked", o->openlaked,
                 "the daemon binary; default: next to openlake, else on PATH");
  up->add_option("--log-level", o->log_level, "passed to openlaked: debug, info, warning, error")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  up->footer(
      "The daemon replaces this process: Ctrl-C or SIGTERM stops it; its exit status is ours.\n"
      "\n"
      "Examples:\n"
      "  openlake cluster up --config examples/configs/kv_local.toml\n"
      "  openlake cluster up --config node.toml --openlaked ./build/tools/openlaked/openlaked");
  up->callback([o, exit_code] { *exit_code = RunUp(*o); });
  AddClusterStatusCommands(*cluster, exit_code);
}

}  // namespace openlake::cli

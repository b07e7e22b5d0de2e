// An openlaked process for the KV integration tests, and the helpers they share: a config, block
// contents that depend on writer and block, client processes.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../io/test_util.h"
#include "../kv/kv_test_util.h"
#include "integration_util.h"

#include "openlake/kv/client.h"

namespace openlake::testing {

using kv::BlockKey;
using kv::Client;
using kv::ClientOptions;
using kv::LayoutFingerprint;

// One openlaked process. Start() returns once it printed its "KV pool:" line.
class Daemon {
 public:
  explicit Daemon(std::string config_text = "", std::vector<std::string> args = {})
      : config_text_(std::move(config_text)), args_(std::move(args)) {}
  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Starts the daemon in `cwd`; false (with the output kept) if it exits or stays silent.
  bool Start(const std::string& cwd) {
    out_path_ = cwd + "/openlaked.out";
    std::vector<std::string> argv = {Binary()};
    if (!config_text_.empty()) {
      const std::string cfg = cwd + "/openlake.toml";
      std::ofstream(cfg) << config_text_;
      argv.push_back("--config");
      argv.push_back(cfg);
    }
    for (auto& a : args_) argv.push_back(a);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      // Dies with the test, even when the test itself crashes.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (chdir(cwd.c_str()) != 0) _exit(126);
      const int fd = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    const bool up = WaitFor(
        [&] {
          int status;
          if (waitpid(pid_, &status, WNOHANG) == pid_) {
            exit_status_ = status;
            pid_ = -1;
            return true;
          }
          return Output().find("KV pool:") != std::string::npos;
        },
        20);
    if (!up || pid_ < 0) return false;
    // "KV pool: tcp ADDR, unix PATH; ..."
    const std::string out = Output();
    const size_t t = out.find("tcp ");
    const size_t u = out.find(", unix ", t);
    const size_t e = out.find(';', u);
    if (t != std::string::npos && u != std::string::npos && e != std::string::npos) {
      tcp_ = out.substr(t + 4, u - t - 4);
      unix_ = out.substr(u + 7, e - u - 7);
    }
    return !tcp_.empty();
  }

  // SIGTERM; returns the exit status (0 = clean).
  int Stop() {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_status_;
  }

  // Runs the daemon to completion (for configs it must refuse); returns the exit code.
  int RunToExit(const std::string& cwd) {
    Start(cwd);
    if (pid_ > 0) return Stop();
    return WIFEXITED(exit_status_) ? WEXITSTATUS(exit_status_) : 128;
  }

  std::string Output() const { return ReadFile(out_path_); }
  const std::string& tcp() const { return tcp_; }
  const std::string& unix_socket() const { return unix_; }
  pid_t pid() const { return pid_; }

  static std::string Binary() {
    const char* p = std::getenv("OPENLAKED");
    REQUIRE(p != nullptr);
    return p;
  }

 private:
  std::string config_text_;
  std::vector<std::string> args_;
  std::string out_path_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
  std::string tcp_, unix_;
};

inline std::string KvConfig(const TempDir& dir, uint16_t port, double capacity_gb,
                            int segment_mb = 4, const std::string& extra = "") {
  std::ostringstream c;
  c << "mode = \"kv\"\nrpc_addr = \"127.0.0.1:" << port << "\"\n"
    << "kv_socket = \"" << dir.File("sock/kv.sock") << "\"\n"
    << extra << "[kv_slab]\ncapacity_gb = " << capacity_gb << "\nsegment_mb = " << segment_mb
    << "\nreserve_ttl_secs = 60\n";
  return c.str();
}

inline LayoutFingerprint Fp(std::string dtype = "bfloat16") {
  return openlake::testing::TestFingerprint(std::move(dtype));
}

// Bytes of block `block` of writer `writer`: every byte depends on all three.
inline void Fill(std::vector<uint8_t>& buf, int writer, int block) {
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(writer * 1000003 + block + 1);
  for (auto& b : buf) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
}

inline BlockKey KeyOf(int writer, int block) {
  return BlockKey("w" + std::to_string(writer) + "-b" + std::to_string(block));
}

// Runs `fn` in a forked child; returns its exit code.
inline int InChild(const std::function<int()>& fn) {
  const pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline std::unique_ptr<Client> Connect(const std::string& addr, ClientOptions o = {}) {
  auto c = Client::Connect(addr, o);
  if (!c.ok()) FAIL("connect " << addr << ": " << c.status().message());
  return *std::move(c);
}

}  // namespace openlake::testing

// Helpers shared by the io, net and kv unit tests.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "openlake/io/reactor.h"

namespace openlake::testing {

// A runtime of `n` unpinned reactors (unit tests run in parallel; pinning is tested apart).
inline std::unique_ptr<io::Runtime> StartRuntime(unsigned n, unsigned queue_capacity = 4096) {
  io::RuntimeOptions o;
  o.cpus.assign(n, 0);
  o.pin = false;
  o.queue_capacity = queue_capacity;
  o.sq_entries = 256;
  auto rt = io::Runtime::Create(o);
  if (!rt.ok() || !(*rt)->Start().ok()) return nullptr;
  return *std::move(rt);
}

// A fresh folder on a disk-backed file system (O_DIRECT works there), removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/var/tmp/openlake-test-XXXXXX";
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Polls `cond` every millisecond for up to `seconds`.
inline bool WaitFor(const std::function<bool()>& cond, double seconds = 5) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return cond();
}

}  // namespace openlake::testing

#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cstring>

namespace openlake::testing {

// Runs `fn` in a forked child inside a private network namespace whose only interface is its
// own loopback, brought up here. Servers there may listen on 0.0.0.0 (an address beyond
// loopback, as far as our code can tell) without being reachable from any real network.
// Returns fn's exit code, or 77 when namespaces are not available (not root).
inline int RunInPrivateNetwork(const std::function<int()>& fn) {
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(77);
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) _exit(77);
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) _exit(77);
    close(s);
    _exit(fn());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace openlake::testing

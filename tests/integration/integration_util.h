// Helpers shared by the integration tests that run daemons and tools as processes.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "openlake/io/socket.h"

namespace openlake::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A loopback port that was free a moment ago, never one this process handed out before.
// Drawn below the kernel's ephemeral range (32768-60999 on Debian): a port the kernel picked
// for "port 0" may be picked again for the next caller, or for a listener UCX opens inside an
// earlier daemon before the daemon meant to get it binds it (seen: a cluster test's third node
// found its port taken by the first).
inline uint16_t FreePort() {
  static std::set<uint16_t> given;
  static std::mt19937 rng(static_cast<uint32_t>(getpid()) * 7919u + 17u);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const auto port = static_cast<uint16_t>(std::uniform_int_distribution<int>(20000, 32000)(rng));
    if (given.count(port) != 0) continue;
    auto addr = io::SocketAddress::Parse("127.0.0.1:" + std::to_string(port));
    auto fd = io::Listen(*addr, {});
    if (!fd.ok()) continue;
    close(*fd);
    given.insert(port);
    return port;
  }
  FAIL("no free loopback port between 20000 and 32000");
  return 0;
}

}  // namespace openlake::testing

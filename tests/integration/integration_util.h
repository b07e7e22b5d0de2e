// Helpers shared by the integration tests that run daemons and tools as processes.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
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

// A loopback port that was free a moment ago.
inline uint16_t FreePort() {
  auto fd = io::Listen(*io::SocketAddress::Parse("127.0.0.1:0"), {});
  REQUIRE(fd.ok());
  const uint16_t port = io::LocalAddress(*fd)->port();
  close(*fd);
  return port;
}

}  // namespace openlake::testing

// An S3 server over a real object engine on a free loopback port, and clients of it: the
// fixture of the S3 client's and the transfers' tests.
#pragma once

#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "integration/integration_util.h"
#include "store/store_test_util.h"

#include "openlake/s3/client.h"
#include "openlake/s3/server.h"

namespace openlake::s3 {

constexpr char kAccess[] = "clienttestkey";
constexpr char kSecret[] = "client-test-secret-0123456789";

// A store of four drives with an S3 server on a free loopback port.
struct Server {
  testing::StoreFixture f{4, 4, 2, 64 << 10, /*faulty=*/false};
  testing::TempDir data;
  std::unique_ptr<S3Server> server;

  explicit Server(absl::Duration idle_timeout = absl::Seconds(60)) {
    REQUIRE(f.Open().ok());
    S3ServerOptions o;
    o.address = "127.0.0.1:0";
    o.credentials = {{kAccess, kSecret}};
    o.data_dir = data.path();
    o.idle_timeout = idle_timeout;
    auto s = S3Server::Start(f.rt(), f.st(), o);
    REQUIRE(s.ok());
    server = *std::move(s);
  }
  ~Server() { server->Stop(); }

  ClientOptions Options(std::string secret = kSecret) const {
    ClientOptions o;
    o.endpoint = server->address();
    o.credential = {kAccess, std::move(secret)};
    return o;
  }
  std::unique_ptr<Client> Connect(ClientOptions o) const {
    auto c = Client::Connect(std::move(o));
    REQUIRE(c.ok());
    return *std::move(c);
  }
};

}  // namespace openlake::s3

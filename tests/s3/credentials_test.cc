// Credentials: configured keys win; otherwise a pair is generated once, kept owner-only, and
// refused when anyone else could have read or changed it.
#include "s3/auth/credentials.h"

#include <sys/stat.h>

#include <fstream>
#include <set>

#include <catch2/catch.hpp>

#include "io/test_util.h"

namespace openlake::s3 {
namespace {

TEST_CASE("credentials: configured, generated once, kept private", "[s3][credentials]") {
  testing::TempDir tmp;
  const std::string data = tmp.path() + "/data";

  auto configured = LoadOrCreateCredentials({{"AK1", "S1"}, {"AK2", "S2"}}, data);
  REQUIRE(configured.ok());
  CHECK(!configured->generated);
  CHECK(configured->SecretOf("AK2") == "S2");
  CHECK(!configured->SecretOf("nope"));
  CHECK(!std::ifstream(GeneratedCredentialsPath(data)).good());  // nothing written

  auto first = LoadOrCreateCredentials({}, data);
  REQUIRE(first.ok());
  CHECK(first->generated);
  REQUIRE(first->keys.size() == 1);
  const Credential made = first->keys[0];
  CHECK(made.access_key.size() == 20);
  CHECK(made.secret_key.size() == 40);
  struct stat st;
  REQUIRE(stat(first->path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(stat(data.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);

  auto again = LoadOrCreateCredentials({}, data);  // the next start reads the same pair
  REQUIRE(again.ok());
  CHECK(!again->generated);
  CHECK(again->keys[0].access_key == made.access_key);
  CHECK(again->SecretOf(made.access_key) == made.secret_key);

  // Another data folder gets another pair.
  auto other = LoadOrCreateCredentials({}, tmp.path() + "/other");
  REQUIRE(other.ok());
  CHECK(other->keys[0].access_key != made.access_key);
  CHECK(other->keys[0].secret_key != made.secret_key);

  chmod(first->path.c_str(), 0644);  // readable by others: refused, with the file named
  auto exposed = LoadOrCreateCredentials({}, data);
  REQUIRE(!exposed.ok());
  CHECK(absl::IsPermissionDenied(exposed.status()));
  CHECK(exposed.status().message().find(first->path) != std::string_view::npos);

  chmod(first->path.c_str(), 0600);
  std::ofstream(first->path) << "access_key = \"only\"\n";
  auto broken = LoadOrCreateCredentials({}, data);
  REQUIRE(!broken.ok());
  CHECK(absl::IsInvalidArgument(broken.status()));
}

}  // namespace
}  // namespace openlake::s3

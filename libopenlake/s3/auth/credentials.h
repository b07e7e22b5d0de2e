// The S3 server's credentials (docs/s3.md, "Credentials"): those of the config's
// [[credentials]], or, when it has none, a pair generated on first start and kept owner-only
// in the data folder. There is no built-in password.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "openlake/s3/credential.h"

namespace openlake::s3 {

struct CredentialSet {
  std::vector<Credential> keys;
  bool generated = false;  // made by this call (the daemon prints it once)
  std::string path;        // where a generated pair is kept ("" for configured keys)

  std::optional<std::string> SecretOf(std::string_view access_key) const;
};

// The file a generated pair lives in, under the data folder.
std::string GeneratedCredentialsPath(std::string_view data_dir);

// The configured keys when there are any; else the pair stored in `data_dir` (created with
// mode 0700 when missing), generating and storing it (mode 0600) on first start. A stored file
// that other users can read, or that is malformed, is an error naming the file: secrets are
// never used from a file anyone else could have read or written.
absl::StatusOr<CredentialSet> LoadOrCreateCredentials(const std::vector<Credential>& configured,
                                                      std::string_view data_dir);

}  // namespace openlake::s3

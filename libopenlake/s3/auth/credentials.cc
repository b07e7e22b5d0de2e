// The S3 server's credentials (see credentials.h).
#include "s3/auth/credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "common/random.h"

#include "openlake/io/file.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

// `n` characters of `alphabet`, uniformly (rejection sampling over random bytes).
std::string RandomString(size_t n, std::string_view alphabet) {
  std::string out;
  const unsigned limit = 256 - 256 % alphabet.size();
  while (out.size() < n) {
    unsigned char buf[64];
    RandomBytes(buf, sizeof(buf));
    for (unsigned char b : buf) {
      if (b < limit && out.size() < n) out.push_back(alphabet[b % alphabet.size()]);
    }
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

absl::StatusOr<Credential> ReadStored(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, StrCat("stat ", path));
  if ((st.st_mode & 077) != 0 || st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(
        StrCat(path, " must belong to this user and be readable by it alone (chmod 600): its "
                     "secret may have been read or replaced by someone else"));
  }
  std::ifstream in(path);
  std::string line;
  Credential c;
  while (std::getline(in, line)) {
    const std::string_view l = Trim(line);
    if (l.empty() || l.front() == '#' || l.front() == '[') continue;
    const size_t eq = l.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = Trim(l.substr(0, eq));
    std::string_view value = Trim(l.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "access_key") c.access_key = std::string(value);
    if (key == "secret_key") c.secret_key = std::string(value);
  }
  if (c.access_key.empty() || c.secret_key.empty()) {
    return absl::InvalidArgumentError(
        StrCat(path, ": needs access_key and secret_key (delete it to have a new pair made)"));
  }
  return c;
}

}  // namespace

std::optional<std::string> CredentialSet::SecretOf(std::string_view access_key) const {
  for (const Credential& c : keys) {
    if (c.access_key == access_key) return c.secret_key;
  }
  return std::nullopt;
}

std::string GeneratedCredentialsPath(std::string_view data_dir) {
  return StrCat(data_dir, "/.openlake-credentials.toml");
}

absl::StatusOr<CredentialSet> LoadOrCreateCredentials(const std::vector<Credential>& configured,
                                                      std::string_view data_dir) {
  CredentialSet set;
  if (!configured.empty()) {
    set.keys = configured;
    return set;
  }
  set.path = GeneratedCredentialsPath(data_dir);
  if (access(set.path.c_str(), F_OK) == 0) {
    OL_ASSIGN_OR_RETURN(Credential c, ReadStored(set.path));
    set.keys.push_back(std::move(c));
    return set;
  }
  const std::string dir(data_dir);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, StrCat("mkdir ", dir));
  }
  Credential c;
  c.access_key = "OL" + RandomString(18, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
  c.secret_key = RandomString(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789");
  const std::string text = StrCat(
      "# S3 credentials openlaked generated on its first start (no [[credentials]] in the\n"
      "# config). Keep this file private; to choose your own, add [[credentials]] to the config.\n"
      "[[credentials]]\naccess_key = \"", c.access_key, "\"\nsecret_key = \"", c.secret_key,
      "\"\n");
  OL_RETURN_IF_ERROR(io::AtomicWriteFileSync(set.path, text, 0600));
  set.keys.push_back(std::move(c));
  set.generated = true;
  return set;
}

}  // namespace openlake::s3

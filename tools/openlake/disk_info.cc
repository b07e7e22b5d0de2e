// `openlake disk info`: the drives a config names (data_dirs), each with its state, the identity
// the object store wrote on it (.openlake.sys/format.json) and its capacity and free space.
// Read-only: it never creates, formats or locks anything.
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"

#include "daemon_config.h"

namespace openlake::cli {

namespace {

namespace fs = std::filesystem;

// Where the object store keeps a drive's identity, relative to the drive's folder.
constexpr std::string_view kSysDir = ".openlake.sys";
constexpr std::string_view kFormatFile = ".openlake.sys/format.json";

struct Identity {
  std::string deployment_id;
  std::string drive_id;
  uint64_t set_count = 0;
  uint64_t set_drive_count = 0;
  uint64_t set_index = 0;
  uint64_t position = 0;
};

struct DriveReport {
  std::string path;
  bool exists = false;
  // ok, missing, unformatted-empty, unformatted-nonempty, corrupt-format or error.
  std::string state;
  std::string detail;  // why, for corrupt-format and error
  std::optional<Identity> identity;
  std::optional<uint64_t> capacity_bytes;
  std::optional<uint64_t> free_bytes;  // available to unprivileged writers
};

// A minimal reader for format.json, a flat JSON object of strings and unsigned numbers (the
// protobuf JSON form of store.proto's DriveFormat; fields at their default are left out).
class FlatJson {
 public:
  // False when `text` is not a flat JSON object.
  bool Parse(std::string_view text) {
    s_ = text;
    i_ = 0;
    Skip();
    if (!Eat('{')) return false;
    Skip();
    if (Eat('}')) return Rest();
    while (true) {
      std::string key, value;
      Skip();
      if (!ReadString(&key)) return false;
      Skip();
      if (!Eat(':')) return false;
      Skip();
      if (i_ < s_.size() && s_[i_] == '"') {
        if (!ReadString(&value)) return false;
      } else if (!ReadNumber(&value)) {
        return false;
      }
      fields_.emplace_back(std::move(key), std::move(value));
      Skip();
      if (Eat('}')) return Rest();
      if (!Eat(',')) return false;
    }
  }

  std::string Get(std::string_view key) const {
    for (const auto& [k, v] : fields_) {
      if (k == key) return v;
    }
    return "";
  }

  // A number field; 0 when absent (protobuf leaves zeros out), nullopt when not a number.
  std::optional<uint64_t> GetUint(std::string_view key) const {
    const std::string v = Get(key);
    if (v.empty()) return 0;
    uint64_t n = 0;
    for (char c : v) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    return n;
  }

 private:
  void Skip() {
    while (i_ < s_.size() && std::strchr(" \t\r\n", s_[i_]) != nullptr) ++i_;
  }
  bool Eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Rest() {
    Skip();
    return i_ == s_.size();
  }
  bool ReadString(std::string* out) {
    if (!Eat('"')) return false;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      if (e == 'u') return false;  // identities are ASCII; anything else is not ours
      *out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
    }
    return false;
  }
  bool ReadNumber(std::string* out) {
    // protobuf JSON may also quote 64-bit numbers; uint32 fields come bare.
    while (i_ < s_.size() && std::strchr("0123456789-+.eE", s_[i_]) != nullptr) {
      *out += s_[i_++];
    }
    return !out->empty();
  }

  std::string_view s_;
  size_t i_ = 0;
  std::vector<std::pair<std::string, std::string>> fields_;
};

// True when `dir` holds nothing but what a fresh drive may hold (lost+found, a system folder
// without an identity): the object store formats such a drive on its own.
bool LooksEmpty(const fs::path& dir, std::error_code& ec) {
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename();
    if (name == "lost+found") continue;
    if (name == kSysDir && !fs::exists(dir / kFormatFile)) continue;
    return false;
  }
  return !ec;
}

DriveReport Inspect(const std::string& path) {
  DriveReport r;
  r.path = path;
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    r.state = "missing";
    r.detail = stat(path.c_str(), &st) != 0 ? std::strerror(errno) : "not a folder";
    return r;
  }
  r.exists = true;
  struct statvfs vfs;
  if (statvfs(path.c_str(), &vfs) == 0) {
    r.capacity_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    r.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  const fs::path format = fs::path(path) / kFormatFile;
  std::error_code ec;
  if (!fs::exists(format, ec)) {
    if (ec) {
      r.state = "error";
      r.detail = ec.message();
    } else if (LooksEmpty(path, ec)) {
      r.state = "unformatted-empty";
    } else if (ec) {
      r.state = "error";
      r.detail = ec.message();
    } else {
      r.state = "unformatted-nonempty";
      r.detail = "holds files but no OpenLake identity; the object store will not format it";
    }
    return r;
  }
  std::ifstream in(format);
  if (!in) {
    r.state = "error";
    r.detail = "cannot read " + format.string() + ": " + std::strerror(errno);
    return r;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  FlatJson j;
  Identity id;
  const bool parsed = j.Parse(ss.str());
  const std::optional<uint64_t> version = j.GetUint("version");
  std::optional<uint64_t> nums[] = {j.GetUint("set_count"), j.GetUint("set_drive_count"),
                                    j.GetUint("set_index"), j.GetUint("position")};
  const bool numbers_ok = nums[0] && nums[1] && nums[2] && nums[3];
  if (!parsed || j.Get("format") != "openlake" || version != 1u || j.Get("deployment_id").empty() ||
      !numbers_ok) {
    r.state = "corrupt-format";
    r.detail = format.string() + " is not a valid OpenLake drive identity";
    return r;
  }
  id.deployment_id = j.Get("deployment_id");
  id.drive_id = j.Get("drive_id");
  id.set_count = *nums[0];
  id.set_drive_count = *nums[1];
  id.set_index = *nums[2];
  id.position = *nums[3];
  r.identity = id;
  r.state = "ok";
  return r;
}

void WriteOptional(JsonWriter& w, std::string_view key, const std::optional<uint64_t>& v) {
  w.Key(key);
  if (v) {
    w.Uint(*v);
  } else {
    w.Null();
  }
}

void PrintJsonReport(const Config& cfg, const std::vector<DriveReport>& drives) {
  JsonWriter w;
  w.BeginObject().Field("config", cfg.source).Field("set_drive_count", cfg.set_drive_count);
  w.Key("drives").BeginArray();
  for (const DriveReport& d : drives) {
    w.BeginObject().Field("path", d.path).Field("exists", d.exists).Field("state", d.state);
    if (!d.detail.empty()) w.Field("detail", d.detail);
    w.Key("identity");
    if (d.identity) {
      const Identity& i = *d.identity;
      w.BeginObject()
          .Field("deployment_id", i.deployment_id)
          .Field("drive_id", i.drive_id)
          .Field("set_count", i.set_count)
          .Field("set_drive_count", i.set_drive_count)
          .Field("set_index", i.set_index)
          .Field("position", i.position)
          .EndObject();
    } else {
      w.Null();
    }
    WriteOptional(w, "capacity_bytes", d.capacity_bytes);
    WriteOptional(w, "free_bytes", d.free_bytes);
    w.EndObject();
  }
  w.EndArray().EndObject();
  PrintJson(w);
}

void PrintText(const Config& cfg, const std::vector<DriveReport>& drives) {
  std::printf("config %s: %zu drive(s)\n", cfg.source.c_str(), drives.size());
  for (const DriveReport& d : drives) {
    std::printf("%s\n  state:    %s%s%s\n", d.path.c_str(), d.state.c_str(),
                d.detail.empty() ? "" : " (", d.detail.empty() ? "" : (d.detail + ")").c_str());
    if (d.identity) {
      const Identity& i = *d.identity;
      std::printf("  identity: deployment %s, drive %s, set %llu position %llu\n",
                  i.deployment_id.c_str(), i.drive_id.c_str(),
                  static_cast<unsigned long long>(i.set_index),
                  static_cast<unsigned long long>(i.position));
    }
    if (d.capacity_bytes && d.free_bytes) {
      std::printf("  space:    %s free of %s\n", HumanBytes(*d.free_bytes).c_str(),
                  HumanBytes(*d.capacity_bytes).c_str());
    }
  }
}

struct DiskOptions {
  std::string config;
  bool json = false;
};

int RunDiskInfo(const DiskOptions& o) {
  std::optional<Config> cfg = LoadConfigOrReport(o.config);
  if (!cfg) return kExitUsage;
  std::vector<DriveReport> drives;
  for (const std::string& dir : cfg->data_dirs) drives.push_back(Inspect(dir));
  if (o.json) {
    PrintJsonReport(*cfg, drives);
  } else {
    PrintText(*cfg, drives);
  }
  return kExitOk;
}

}  // namespace

void AddDiskCommands(CLI::App& app, int* exit_code) {
  CLI::App* disk = app.add_subcommand("disk", "the drives of a node");
  disk->require_subcommand(1);
  CLI::App* info = disk->add_subcommand(
      "info", "each drive of the config: path, state, identity, capacity and free space");
  auto o = std::make_shared<DiskOptions>();
  info->add_option("-c,--config", o->config,
                   "TOML config whose data_dirs to inspect; default: the embedded one");
  info->add_flag("--json", o->json, "one JSON object on stdout");
  info->footer(
      "States: ok, missing, unformatted-empty (the object store formats it on start),\n"
      "unformatted-nonempty (holds other files: refused), corrupt-format, error.\n"
      "Read-only: nothing is created or changed.\n"
      "\n"
      "Examples:\n"
      "  openlake disk info                       ./data/d0..d3 (the embedded default)\n"
      "  openlake disk info --config node.toml --json");
  info->callback([o, exit_code] { *exit_code = RunDiskInfo(*o); });
}

}  // namespace openlake::cli

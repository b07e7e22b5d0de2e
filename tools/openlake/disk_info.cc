// `openlake disk info`: the drives a config names (data_dirs), each with its state, the identity
// the object store wrote on it and its capacity and free space, as store::InspectDrive reads
// them. Read-only: it never creates, formats or locks anything.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "daemon_config.h"

#include "openlake/store/store.h"

namespace openlake::cli {

namespace {

void WriteOptional(JsonWriter& w, std::string_view key, const std::optional<uint64_t>& v) {
  w.Key(key);
  if (v) {
    w.Uint(*v);
  } else {
    w.Null();
  }
}

void PrintJsonReport(const Config& cfg, const std::vector<store::DriveInspection>& drives) {
  JsonWriter w;
  w.BeginObject().Field("config", cfg.source).Field("set_drive_count", cfg.set_drive_count);
  w.Key("drives").BeginArray();
  for (const store::DriveInspection& d : drives) {
    w.BeginObject()
        .Field("path", d.path)
        .Field("exists", d.exists)
        .Field("state", store::DriveStateName(d.state));
    if (!d.detail.empty()) w.Field("detail", d.detail);
    w.Key("identity");
    if (d.identity) {
      const store::DriveIdentity& i = *d.identity;
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

void PrintText(const Config& cfg, const std::vector<store::DriveInspection>& drives) {
  std::printf("config %s: %zu drive(s)\n", cfg.source.c_str(), drives.size());
  for (const store::DriveInspection& d : drives) {
    const std::string state(store::DriveStateName(d.state));
    std::printf("%s\n  state:    %s%s%s\n", d.path.c_str(), state.c_str(),
                d.detail.empty() ? "" : " (", d.detail.empty() ? "" : (d.detail + ")").c_str());
    if (d.identity) {
      const store::DriveIdentity& i = *d.identity;
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
  std::vector<store::DriveInspection> drives;
  for (const std::string& dir : cfg->data_dirs) drives.push_back(store::InspectDrive(dir));
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

// `openlake version`: the library's version and the optional parts it was built with.
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"

#include "openlake/version.h"

namespace openlake::cli {

namespace {

int RunVersion(bool json) {
  const std::vector<BuildFeature> features = BuildFeatures();
  if (json) {
    JsonWriter w;
    w.BeginObject().Field("version", Version()).Key("features").BeginObject();
    for (const BuildFeature& f : features) w.Field(f.name, f.enabled);
    w.EndObject().EndObject();
    PrintJson(w);
    return kExitOk;
  }
  std::printf("openlake %s\n", std::string(Version()).c_str());
  for (const BuildFeature& f : features) {
    std::printf("  %-6s %-3s %s\n", std::string(f.name).c_str(), f.enabled ? "yes" : "no",
                std::string(f.description).c_str());
  }
  return kExitOk;
}

}  // namespace

void AddVersionCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("version", "print the library version and build features");
  // The callback owns the option storage, so it lives as long as the App.
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "one JSON object on stdout");
  cmd->footer(
      "Examples:\n"
      "  openlake version\n"
      "  openlake version --json    {\"version\":\"0.1.0\",\"features\":{\"rdma\":false,...}}");
  cmd->callback([json, exit_code] { *exit_code = RunVersion(*json); });
}

}  // namespace openlake::cli

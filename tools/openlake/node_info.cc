// `openlake node info`: what this machine offers a node. CPUs, NUMA nodes, memory, network
// interfaces, RDMA devices, GPUs and the kernel's io_uring, all read from /proc and /sys (and
// from creating one ring). Read-only.
#include <liburing.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "daemon_config.h"

#include "openlake/io/reactor.h"

namespace openlake::cli {

namespace {

namespace fs = std::filesystem;

// The first line of a small sysfs/procfs file, without its newline; empty when unreadable.
std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return line;
}

// Entries of a folder, sorted by name (empty when it does not exist).
std::vector<std::string> ListDir(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// The value of "key: value" in /proc/cpuinfo or a GPU information file.
std::string FieldOf(const fs::path& path, std::string_view key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

// A /proc/meminfo value ("MemAvailable:   123 kB") in bytes; 0 if absent.
uint64_t MemInfoBytes(std::string_view key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  uint64_t kb = 0;
  std::string unit;
  while (in >> name >> kb) {
    std::getline(in, unit);
    if (name.size() == key.size() + 1 && name.compare(0, key.size(), key) == 0) return kb * 1024;
  }
  return 0;
}

struct NumaNode {
  int id = 0;
  std::string cpus;  // "0-15,32-47"
};

struct Nic {
  std::string name;
  std::string state;        // operstate: "up", "down", "unknown"
  std::string address;      // MAC
  int64_t speed_mbps = -1;  // -1 when the driver does not say (virtual devices, link down)
  uint32_t mtu = 0;
};

struct RdmaPort {
  std::string device;
  std::string port;
  std::string state;  // "4: ACTIVE"
  std::string rate;   // "200 Gb/sec (4X HDR)"
  std::string link_layer;
};

struct Gpu {
  std::string id;  // PCI bus id or nvidia-smi's index
  std::string model;
};

struct UringInfo {
  bool available = false;
  std::string error;
  std::string disabled_sysctl;  // /proc/sys/kernel/io_uring_disabled, when present
  std::vector<std::string> features;
  unsigned opcodes_supported = 0;
  std::vector<std::string> opcodes_missing;  // of those openlake uses
  bool deferred_taskrun = false;             // openlake's reactors get SINGLE_ISSUER|DEFER_TASKRUN
};

struct NodeInfo {
  std::string hostname;
  std::string kernel;
  std::string cpu_model;
  unsigned online_cpus = 0;
  unsigned allowed_cpus = 0;
  std::vector<NumaNode> numa;
  uint64_t mem_total = 0;
  uint64_t mem_available = 0;
  std::vector<Nic> nics;
  std::vector<RdmaPort> rdma;
  std::vector<Gpu> gpus;
  std::string gpu_source;  // where the GPU list came from
  UringInfo uring;
};

std::vector<NumaNode> ProbeNuma() {
  std::vector<NumaNode> nodes;
  for (const std::string& name : ListDir("/sys/devices/system/node")) {
    if (name.size() < 5 || name.compare(0, 4, "node") != 0) continue;
    if (name.find_first_not_of("0123456789", 4) != std::string::npos) continue;
    nodes.push_back({std::stoi(name.substr(4)),
                     ReadLine(fs::path("/sys/devices/system/node") / name / "cpulist")});
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return nodes;
}

std::vector<Nic> ProbeNics() {
  std::vector<Nic> nics;
  for (const std::string& name : ListDir("/sys/class/net")) {
    const fs::path dir = fs::path("/sys/class/net") / name;
    Nic n;
    n.name = name;
    n.state = ReadLine(dir / "operstate");
    n.address = ReadLine(dir / "address");
    // Reading `speed` fails (EINVAL) on virtual devices and links that are down.
    const std::string speed = ReadLine(dir / "speed");
    if (!speed.empty()) {
      try {
        n.speed_mbps = std::stoll(speed);
      } catch (...) {
      }
      if (n.speed_mbps <= 0) n.speed_mbps = -1;
    }
    const std::string mtu = ReadLine(dir / "mtu");
    if (!mtu.empty()) n.mtu = static_cast<uint32_t>(std::strtoul(mtu.c_str(), nullptr, 10));
    nics.push_back(std::move(n));
  }
  return nics;
}

std::vector<RdmaPort> ProbeRdma() {
  std::vector<RdmaPort> ports;
  for (const std::string& dev : ListDir("/sys/class/infiniband")) {
    const fs::path pdir = fs::path("/sys/class/infiniband") / dev / "ports";
    for (const std::string& port : ListDir(pdir)) {
      ports.push_back({dev, port, ReadLine(pdir / port / "state"), ReadLine(pdir / port / "rate"),
                       ReadLine(pdir / port / "link_layer")});
    }
  }
  return ports;
}

// The path of `prog` on $PATH, or empty.
std::string FindOnPath(const std::string& prog) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + prog;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::vector<Gpu> ProbeGpus(std::string* source) {
  std::vector<Gpu> gpus;
  const fs::path dir = "/proc/driver/nvidia/gpus";
  for (const std::string& bus : ListDir(dir)) {
    gpus.push_back({bus, FieldOf(dir / bus / "information", "Model")});
  }
  if (!gpus.empty()) {
    *source = dir.string();
    return gpus;
  }
  const std::string smi = FindOnPath("nvidia-smi");
  if (smi.empty()) return gpus;
  // "GPU 0: NVIDIA H200 (UUID: GPU-...)"
  FILE* p = popen((smi + " -L 2>/dev/null").c_str(), "r");
  if (p == nullptr) return gpus;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) {
    std::string line(buf);
    if (line.compare(0, 4, "GPU ") != 0) continue;
    const size_t colon = line.find(':');
    const size_t uuid = line.find(" (UUID");
    if (colon == std::string::npos) continue;
    gpus.push_back(
        {line.substr(4, colon - 4),
         line.substr(colon + 2, uuid == std::string::npos ? std::string::npos : uuid - colon - 2)});
    while (!gpus.back().model.empty() && gpus.back().model.back() == '\n') {
      gpus.back().model.pop_back();
    }
  }
  pclose(p);
  if (!gpus.empty()) *source = "nvidia-smi";
  return gpus;
}

UringInfo ProbeUring() {
  UringInfo u;
  u.disabled_sysctl = ReadLine("/proc/sys/kernel/io_uring_disabled");
  io_uring ring;
  io_uring_params params{};
  const int rc = io_uring_queue_init_params(8, &ring, &params);
  if (rc < 0) {
    u.error = std::string("io_uring_setup: ") + strerror(-rc);
    return u;
  }
  u.available = true;
  static constexpr struct {
    unsigned bit;
    const char* name;
  } kFeatures[] = {
      {IORING_FEAT_SINGLE_MMAP, "SINGLE_MMAP"},
      {IORING_FEAT_NODROP, "NODROP"},
      {IORING_FEAT_SUBMIT_STABLE, "SUBMIT_STABLE"},
      {IORING_FEAT_RW_CUR_POS, "RW_CUR_POS"},
      {IORING_FEAT_CUR_PERSONALITY, "CUR_PERSONALITY"},
      {IORING_FEAT_FAST_POLL, "FAST_POLL"},
      {IORING_FEAT_POLL_32BITS, "POLL_32BITS"},
      {IORING_FEAT_SQPOLL_NONFIXED, "SQPOLL_NONFIXED"},
      {IORING_FEAT_EXT_ARG, "EXT_ARG"},
      {IORING_FEAT_NATIVE_WORKERS, "NATIVE_WORKERS"},
      {IORING_FEAT_RSRC_TAGS, "RSRC_TAGS"},
      {IORING_FEAT_CQE_SKIP, "CQE_SKIP"},
      {IORING_FEAT_LINKED_FILE, "LINKED_FILE"},
  };
  for (const auto& f : kFeatures) {
    if (params.features & f.bit) u.features.push_back(f.name);
  }
  if (io_uring_probe* probe = io_uring_get_probe_ring(&ring)) {
    for (int op = 0; op < IORING_OP_LAST; ++op) {
      u.opcodes_supported += io_uring_opcode_supported(probe, op) ? 1 : 0;
    }
    static constexpr struct {
      int op;
      const char* name;
    } kUsed[] = {
        {IORING_OP_READ, "READ"},
        {IORING_OP_WRITE, "WRITE"},
        {IORING_OP_READV, "READV"},
        {IORING_OP_WRITEV, "WRITEV"},
        {IORING_OP_FSYNC, "FSYNC"},
        {IORING_OP_SEND, "SEND"},
        {IORING_OP_RECV, "RECV"},
        {IORING_OP_SENDMSG, "SENDMSG"},
        {IORING_OP_RECVMSG, "RECVMSG"},
        {IORING_OP_ACCEPT, "ACCEPT"},
        {IORING_OP_CONNECT, "CONNECT"},
        {IORING_OP_OPENAT, "OPENAT"},
        {IORING_OP_CLOSE, "CLOSE"},
        {IORING_OP_RENAMEAT, "RENAMEAT"},
        {IORING_OP_UNLINKAT, "UNLINKAT"},
        {IORING_OP_POLL_ADD, "POLL_ADD"},
        {IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"},
        {IORING_OP_SEND_ZC, "SEND_ZC"},
    };
    for (const auto& o : kUsed) {
      if (!io_uring_opcode_supported(probe, o.op)) u.opcodes_missing.push_back(o.name);
    }
    io_uring_free_probe(probe);
  }
  io_uring_queue_exit(&ring);

  // What openlake's own reactors get: one unpinned reactor, started and stopped.
  io::RuntimeOptions ro;
  const std::vector<int> cpus = io::AllowedCpus();
  ro.cpus = {cpus.empty() ? 0 : cpus.front()};
  ro.pin = false;
  ro.sq_entries = 8;
  ro.thread_name = "openlake-probe";
  if (auto rt = io::Runtime::Create(ro); rt.ok() && (*rt)->Start().ok()) {
    u.deferred_taskrun = (*rt)->reactor(0).deferred_taskrun();
    (*rt)->Stop();
  }
  return u;
}

NodeInfo Probe() {
  NodeInfo n;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) n.hostname = host;
  utsname u{};
  n.kernel = uname(&u) == 0 ? u.release : "";
  n.cpu_model = FieldOf("/proc/cpuinfo", "model name");
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  n.online_cpus = online > 0 ? static_cast<unsigned>(online) : 0;
  n.allowed_cpus = static_cast<unsigned>(io::AllowedCpus().size());
  n.numa = ProbeNuma();
  n.mem_total = MemTotalBytes();
  n.mem_available = MemInfoBytes("MemAvailable");
  n.nics = ProbeNics();
  n.rdma = ProbeRdma();
  n.gpus = ProbeGpus(&n.gpu_source);
  n.uring = ProbeUring();
  return n;
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

void PrintJsonInfo(const NodeInfo& n) {
  JsonWriter w;
  w.BeginObject()
      .Field("hostname", n.hostname)
      .Field("kernel", n.kernel)
      .Field("cpu_model", n.cpu_model)
      .Field("cores", n.online_cpus)
      .Field("allowed_cores", n.allowed_cpus);
  w.Key("numa_nodes").BeginArray();
  for (const NumaNode& m : n.numa)
    w.BeginObject().Field("id", m.id).Field("cpus", m.cpus).EndObject();
  w.EndArray();
  w.Key("memory").BeginObject().Field("total_bytes", n.mem_total);
  w.Field("available_bytes", n.mem_available).EndObject();
  w.Key("nics").BeginArray();
  for (const Nic& c : n.nics) {
    w.BeginObject().Field("name", c.name).Field("state", c.state).Field("address", c.address);
    w.Key("speed_mbps");
    if (c.speed_mbps > 0) {
      w.Int(c.speed_mbps);
    } else {
      w.Null();
    }
    w.Field("mtu", c.mtu).EndObject();
  }
  w.EndArray();
  w.Key("rdma").BeginArray();
  for (const RdmaPort& r : n.rdma) {
    w.BeginObject().Field("device", r.device).Field("port", r.port).Field("state", r.state);
    w.Field("rate", r.rate).Field("link_layer", r.link_layer).EndObject();
  }
  w.EndArray();
  w.Key("gpus").BeginArray();
  for (const Gpu& g : n.gpus) w.BeginObject().Field("id", g.id).Field("model", g.model).EndObject();
  w.EndArray();
  const UringInfo& u = n.uring;
  w.Key("io_uring").BeginObject().Field("available", u.available);
  if (!u.error.empty()) w.Field("error", u.error);
  if (!u.disabled_sysctl.empty()) w.Field("io_uring_disabled", u.disabled_sysctl);
  w.Key("features").BeginArray();
  for (const std::string& f : u.features) w.String(f);
  w.EndArray().Field("opcodes_supported", u.opcodes_supported);
  w.Key("opcodes_missing").BeginArray();
  for (const std::string& o : u.opcodes_missing) w.String(o);
  w.EndArray().Field("defer_taskrun", u.deferred_taskrun).EndObject();
  w.EndObject();
  PrintJson(w);
}

void PrintText(const NodeInfo& n) {
  std::printf("host:     %s (kernel %s)\n", n.hostname.c_str(), n.kernel.c_str());
  std::printf("cpus:     %u online, %u allowed to this process%s%s\n", n.online_cpus,
              n.allowed_cpus, n.cpu_model.empty() ? "" : "; ", n.cpu_model.c_str());
  std::printf("numa:     %zu node(s)\n", n.numa.size());
  for (const NumaNode& m : n.numa) std::printf("  node%d   cpus %s\n", m.id, m.cpus.c_str());
  std::printf("memory:   %s total, %s available\n", HumanBytes(n.mem_total).c_str(),
              HumanBytes(n.mem_available).c_str());
  std::printf("nics:     %zu\n", n.nics.size());
  for (const Nic& c : n.nics) {
    const std::string speed =
        c.speed_mbps > 0 ? std::to_string(c.speed_mbps) + " Mb/s" : std::string("speed n/a");
    std::printf("  %-12s %-8s %-10s mtu %u  %s\n", c.name.c_str(), c.state.c_str(), speed.c_str(),
                c.mtu, c.address.c_str());
  }
  if (n.rdma.empty()) {
    std::printf("rdma:     none (/sys/class/infiniband is empty or absent)\n");
  } else {
    std::printf("rdma:     %zu port(s)\n", n.rdma.size());
    for (const RdmaPort& r : n.rdma) {
      std::printf("  %s port %s: %s, %s, %s\n", r.device.c_str(), r.port.c_str(), r.state.c_str(),
                  r.rate.c_str(), r.link_layer.c_str());
    }
  }
  if (n.gpus.empty()) {
    std::printf("gpus:     none visible\n");
  } else {
    std::printf("gpus:     %zu (from %s)\n", n.gpus.size(), n.gpu_source.c_str());
    for (const Gpu& g : n.gpus) std::printf("  %s  %s\n", g.id.c_str(), g.model.c_str());
  }
  const UringInfo& u = n.uring;
  if (!u.available) {
    std::printf("io_uring: unavailable: %s%s%s\n", u.error.c_str(),
                u.disabled_sysctl.empty() ? "" : "; kernel.io_uring_disabled = ",
                u.disabled_sysctl.c_str());
    return;
  }
  std::printf("io_uring: available, %u opcodes; reactors get %s\n", u.opcodes_supported,
              u.deferred_taskrun ? "SINGLE_ISSUER|DEFER_TASKRUN" : "plain flags (older kernel)");
  std::printf("  features: %s\n", Join(u.features, " ").c_str());
  if (!u.opcodes_missing.empty()) {
    std::printf("  missing opcodes openlake uses: %s\n", Join(u.opcodes_missing, " ").c_str());
  }
}

}  // namespace

void AddNodeCommands(CLI::App& app, int* exit_code) {
  CLI::App* node = app.add_subcommand("node", "this machine");
  node->require_subcommand(1);
  CLI::App* info = node->add_subcommand(
      "info", "CPUs, NUMA nodes, memory, NICs, RDMA devices, GPUs and io_uring support");
  auto json = std::make_shared<bool>(false);
  info->add_flag("--json", *json, "one JSON object on stdout");
  info->footer(
      "Examples:\n"
      "  openlake node info\n"
      "  openlake node info --json | jq .cores");
  info->callback([json, exit_code] {
    const NodeInfo n = Probe();
    if (*json) {
      PrintJsonInfo(n);
    } else {
      PrintText(n);
    }
    *exit_code = kExitOk;
  });
}

}  // namespace openlake::cli

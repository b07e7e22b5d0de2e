// The cluster's layout (docs/object-store.md, "Clusters"): the deployment's drives striped over
// nodes into erasure sets, and the digest nodes compare before they join.
#include <algorithm>
#include <map>

#include "common/digest.h"

#include "openlake/store/cluster.h"
#include "openlake/strings.h"

namespace openlake::store {

absl::StatusOr<std::vector<DriveSlot>> ClusterLayout(const std::vector<ClusterNodeSpec>& nodes,
                                                     int set_drive_count) {
  if (nodes.empty()) return absl::InvalidArgumentError("a cluster needs at least one node");
  std::vector<ClusterNodeSpec> sorted = nodes;
  std::sort(sorted.begin(), sorted.end(),
            [](const ClusterNodeSpec& a, const ClusterNodeSpec& b) { return a.id < b.id; });
  uint32_t most = 0;
  size_t with_drives = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0 && sorted[i].id == sorted[i - 1].id) {
      return absl::InvalidArgumentError(StrCat("node id ", sorted[i].id, " is listed twice"));
    }
    most = std::max(most, sorted[i].disk_count);
    with_drives += sorted[i].disk_count > 0 ? 1 : 0;
  }
  std::vector<DriveSlot> slots;
  for (uint32_t d = 0; d < most; ++d) {
    for (const ClusterNodeSpec& n : sorted) {
      if (d < n.disk_count) slots.push_back({n.id, d});
    }
  }
  const size_t n = static_cast<size_t>(set_drive_count);
  if (n == 0 || slots.empty() || slots.size() % n != 0) {
    return absl::InvalidArgumentError(
        StrCat("the cluster has ", slots.size(), " drives, which do not divide into sets of ",
               set_drive_count, " (set_drive_count)"));
  }
  // Losing one node must cost each set no more than its fair share of shards.
  const size_t fair = (n + with_drives - 1) / with_drives;
  for (size_t s = 0; s < slots.size() / n; ++s) {
    std::map<uint32_t, size_t> per_node;
    for (size_t p = 0; p < n; ++p) {
      const uint32_t node = slots[s * n + p].node;
      if (++per_node[node] > fair) {
        return absl::InvalidArgumentError(StrCat(
            "set ", s, " would hold ", per_node[node], " drives of node ", node, " (at most ",
            fair, " with ", with_drives, " nodes): give the nodes equal disk_counts"));
      }
    }
  }
  return slots;
}

std::string LayoutDigest(const std::vector<ClusterNodeSpec>& nodes, int set_drive_count,
                         int parity) {
  std::vector<ClusterNodeSpec> sorted = nodes;
  std::sort(sorted.begin(), sorted.end(),
            [](const ClusterNodeSpec& a, const ClusterNodeSpec& b) { return a.id < b.id; });
  std::string text = StrCat("openlake-layout 1\nset_drive_count ", set_drive_count, "\nparity ",
                            parity, "\n");
  for (const ClusterNodeSpec& n : sorted) {
    text += StrCat("node ", n.id, " disks ", n.disk_count, "\n");
  }
  Digest d(Digest::kSha256);
  d.Update(text);
  return Hex(d.Final()).substr(0, 16);
}

}  // namespace openlake::store

#include "kv/wire.h"

#include <cstring>

#include "openlake/strings.h"

namespace openlake::kv::wire {

void ToWire(const LayoutFingerprint& fp, Fingerprint* out) {
  out->set_model(fp.model);
  out->set_dtype(fp.dtype);
  out->set_layout(fp.layout);
  out->set_num_layers(fp.num_layers);
  out->set_num_kv_heads(fp.num_kv_heads);
  out->set_head_size(fp.head_size);
  out->set_block_tokens(fp.block_tokens);
  out->set_tp_rank(fp.tp_rank);
  out->set_tp_size(fp.tp_size);
  out->set_pp_rank(fp.pp_rank);
  out->set_pp_size(fp.pp_size);
  out->set_extra(fp.extra);
}

LayoutFingerprint FromWire(const Fingerprint& fp) {
  LayoutFingerprint out;
  out.model = fp.model();
  out.dtype = fp.dtype();
  out.layout = fp.layout();
  out.num_layers = fp.num_layers();
  out.num_kv_heads = fp.num_kv_heads();
  out.head_size = fp.head_size();
  out.block_tokens = fp.block_tokens();
  out.tp_rank = fp.tp_rank();
  out.tp_size = fp.tp_size();
  out.pp_rank = fp.pp_rank();
  out.pp_size = fp.pp_size();
  out.extra = fp.extra();
  return out;
}

void ToWire(const PoolStats& s, StatsResponse* out) {
  out->set_capacity_bytes(s.capacity_bytes);
  out->set_segment_bytes(s.segment_bytes);
  out->set_segments_total(s.segments_total);
  out->set_segments_used(s.segments_used);
  out->set_used_bytes(s.used_bytes);
  out->set_committed_blocks(s.committed_blocks);
  out->set_reserved_slots(s.reserved_slots);
  out->set_pinned_slots(s.pinned_slots);
  out->set_namespaces(s.namespaces);
  out->set_sessions(s.sessions);
  out->set_lookups(s.lookups);
  out->set_lookup_keys(s.lookup_keys);
  out->set_hits(s.hits);
  out->set_misses(s.misses);
  out->set_commits(s.commits);
  out->set_evictions(s.evictions);
  out->set_expired_reservations(s.expired_reservations);
  out->set_expired_pins(s.expired_pins);
  out->set_reserve_failures(s.reserve_failures);
  out->set_bytes_in(s.bytes_in);
  out->set_bytes_out(s.bytes_out);
  out->set_disk_paths(s.disk_paths);
  out->set_disk_paths_online(s.disk_paths_online);
  out->set_disk_capacity_bytes(s.disk_capacity_bytes);
  out->set_disk_used_bytes(s.disk_used_bytes);
  out->set_disk_blocks(s.disk_blocks);
  out->set_dirty_blocks(s.dirty_blocks);
  out->set_disk_hits(s.disk_hits);
  out->set_spilled_blocks(s.spilled_blocks);
  out->set_spilled_bytes(s.spilled_bytes);
  out->set_promoted_blocks(s.promoted_blocks);
  out->set_promoted_bytes(s.promoted_bytes);
  out->set_spill_drops(s.spill_drops);
  out->set_disk_evictions(s.disk_evictions);
  out->set_disk_errors(s.disk_errors);
  out->set_disk_checksum_errors(s.disk_checksum_errors);
  out->set_recovered_blocks(s.recovered_blocks);
  out->set_recovery_seconds(s.recovery_seconds);
  out->set_remote_hits(s.remote_hits);
  out->set_remote_probe_hits(s.remote_probe_hits);
  out->set_pulls(s.pulls);
  out->set_pulled_blocks(s.pulled_blocks);
  out->set_pulled_bytes(s.pulled_bytes);
  out->set_pull_failures(s.pull_failures);
  out->set_pull_rejected_blocks(s.pull_rejected_blocks);
  out->set_probes(s.probes);
  out->set_announcements(s.announcements);
  out->set_peer_lookups(s.peer_lookups);
  out->set_peer_served_blocks(s.peer_served_blocks);
  out->set_cluster_nodes(s.cluster_nodes);
  out->set_pull_get_seconds(s.pull_get_seconds);
  for (const kv::NamespaceStats& n : s.per_namespace) {
    auto* w = out->add_per_namespace();
    w->set_name(n.name);
    w->set_id(n.id);
    w->set_block_bytes(n.block_bytes);
    w->set_blocks(n.blocks);
    w->set_fingerprint(n.fingerprint);
  }
}

PoolStats FromWire(const StatsResponse& s) {
  PoolStats out;
  out.capacity_bytes = s.capacity_bytes();
  out.segment_bytes = s.segment_bytes();
  out.segments_total = s.segments_total();
  out.segments_used = s.segments_used();
  out.used_bytes = s.used_bytes();
  out.committed_blocks = s.committed_blocks();
  out.reserved_slots = s.reserved_slots();
  out.pinned_slots = s.pinned_slots();
  out.namespaces = s.namespaces();
  out.sessions = s.sessions();
  out.lookups = s.lookups();
  out.lookup_keys = s.lookup_keys();
  out.hits = s.hits();
  out.misses = s.misses();
  out.commits = s.commits();
  out.evictions = s.evictions();
  out.expired_reservations = s.expired_reservations();
  out.expired_pins = s.expired_pins();
  out.reserve_failures = s.reserve_failures();
  out.bytes_in = s.bytes_in();
  out.bytes_out = s.bytes_out();
  out.disk_paths = s.disk_paths();
  out.disk_paths_online = s.disk_paths_online();
  out.disk_capacity_bytes = s.disk_capacity_bytes();
  out.disk_used_bytes = s.disk_used_bytes();
  out.disk_blocks = s.disk_blocks();
  out.dirty_blocks = s.dirty_blocks();
  out.disk_hits = s.disk_hits();
  out.spilled_blocks = s.spilled_blocks();
  out.spilled_bytes = s.spilled_bytes();
  out.promoted_blocks = s.promoted_blocks();
  out.promoted_bytes = s.promoted_bytes();
  out.spill_drops = s.spill_drops();
  out.disk_evictions = s.disk_evictions();
  out.disk_errors = s.disk_errors();
  out.disk_checksum_errors = s.disk_checksum_errors();
  out.recovered_blocks = s.recovered_blocks();
  out.recovery_seconds = s.recovery_seconds();
  out.remote_hits = s.remote_hits();
  out.remote_probe_hits = s.remote_probe_hits();
  out.pulls = s.pulls();
  out.pulled_blocks = s.pulled_blocks();
  out.pulled_bytes = s.pulled_bytes();
  out.pull_failures = s.pull_failures();
  out.pull_rejected_blocks = s.pull_rejected_blocks();
  out.probes = s.probes();
  out.announcements = s.announcements();
  out.peer_lookups = s.peer_lookups();
  out.peer_served_blocks = s.peer_served_blocks();
  out.cluster_nodes = s.cluster_nodes();
  out.pull_get_seconds = s.pull_get_seconds();
  for (const auto& n : s.per_namespace()) {
    out.per_namespace.push_back(
        kv::NamespaceStats{n.name(), n.id(), n.block_bytes(), n.blocks(), n.fingerprint()});
  }
  return out;
}

absl::Status PackKeys(const BlockKey* keys, size_t n, std::string* out, uint32_t* key_len) {
  out->clear();
  *key_len = n ? static_cast<uint32_t>(keys[0].size()) : 0;
  bool uniform = true;
  for (size_t i = 0; i < n; ++i) {
    if (keys[i].empty()) return absl::InvalidArgumentError(StrCat("key ", i, " is empty"));
    uniform = uniform && keys[i].size() == *key_len;
  }
  if (uniform) {
    // Sized once, then plain copies: string::append per 32-byte key compiles to a slow
    // `rep movs` here, and block hashes are usually exactly 32 bytes.
    out->resize(n * *key_len);
    char* p = out->data();
    if (*key_len == kMaxKeyBytes) {
      for (size_t i = 0; i < n; ++i, p += kMaxKeyBytes) {
        std::memcpy(p, keys[i].bytes().data(), kMaxKeyBytes);
      }
    } else {
      for (size_t i = 0; i < n; ++i, p += *key_len) {
        std::memcpy(p, keys[i].bytes().data(), *key_len);
      }
    }
    return absl::OkStatus();
  }
  // Mixed lengths: key_len 0, and every key carries a one-byte length.
  *key_len = 0;
  for (size_t i = 0; i < n; ++i) {
    out->push_back(static_cast<char>(keys[i].size()));
    out->append(keys[i].bytes());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BlockKey>> UnpackKeys(const std::string& packed, uint32_t key_len) {
  std::vector<BlockKey> keys;
  if (packed.empty()) return keys;
  if (key_len == 0) {
    size_t at = 0;
    while (at < packed.size()) {
      const auto len = static_cast<uint8_t>(packed[at]);
      if (len == 0 || len > kMaxKeyBytes || at + 1 + len > packed.size()) {
        return absl::InvalidArgumentError(
            StrCat("malformed length-prefixed key at byte ", at, " of the key list"));
      }
      if (keys.size() == kMaxBatch) {
        return absl::InvalidArgumentError(StrCat("more than ", kMaxBatch, " keys in one batch"));
      }
      keys.emplace_back(std::string_view(packed).substr(at + 1, len));
      at += 1 + len;
    }
    return keys;
  }
  if (key_len > kMaxKeyBytes) {
    return absl::InvalidArgumentError(StrCat("key_len ", key_len, " is not in 1..", kMaxKeyBytes));
  }
  if (packed.size() % key_len != 0) {
    return absl::InvalidArgumentError(
        StrCat("packed keys of ", packed.size(), " bytes are not a multiple of key_len ", key_len));
  }
  const size_t n = packed.size() / key_len;
  if (n > kMaxBatch) {
    return absl::InvalidArgumentError(StrCat(n, " keys exceed the batch limit of ", kMaxBatch));
  }
  keys.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    keys.emplace_back(std::string_view(packed).substr(i * key_len, key_len));
  }
  return keys;
}

absl::Status Parse(std::string_view payload, google::protobuf::MessageLite* msg) {
  if (payload.size() > static_cast<size_t>(INT32_MAX) ||
      !msg->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::InvalidArgumentError(StrCat("malformed ", msg->GetTypeName(), " message"));
  }
  return absl::OkStatus();
}

}  // namespace openlake::kv::wire

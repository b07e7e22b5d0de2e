// The object engine's internals: the drives, the erasure sets, and the Engine that implements
// the public Store. Each concern has its own file:
//   engine_open.cc   drive formats, positions, Store::Open, the trash purger
//   drive_api.h      the per-drive API the engine goes through: local_drive.cc (a FileBackend),
//                    drive_walk.cc (one drive's listing walk)
//   drive_io.cc      coroutine helpers on one backend (read a record, write one durably, sync)
//   quorum.cc        reading an object's metadata on every drive and choosing its version
//   commit.cc        the two-phase metadata commit every write, delete and heal goes through
//   writer.cc        streaming an object or part in: windows, encoding, parallel shard writes
//   reader.cc        streaming it out: verified blocks, reconstruction, heal queueing
//   objects.cc       stat, delete, copy, conditions and ranges
//   buckets.cc       bucket create, delete, stat, list
//   listing.cc       the sorted walk over drive folders, prefixes, delimiters, markers
//   multipart.cc     uploads, parts, complete, abort, listings
//   heal.cc          per-object repair, the heal queue and the full scan
// and across nodes (docs/object-store.md, "Clusters"):
//   remote_drive.cc  another node's drive over the drive RPC, and the PeerLink to each node
//   drive_service.cc this node's drives served to the others; cluster_services.cc with locks
//   cluster_layout.cc  the striping of drives over nodes and the layout digest
//   cluster_boot.cc  opening every node's drives, formatting a blank cluster, cluster locks
//   dist_locks.h     quorum locks over every node's lock table (lock_client.cc, lock_service.cc)
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

#include "store/store.pb.h"
#include "store/dist_locks.h"
#include "store/drive_api.h"
#include "store/inline_cache.h"
#include "store/locks.h"
#include "store/meta.h"
#include "store/placement.h"

#include "openlake/ec/codec.h"
#include "openlake/io/task.h"
#include "openlake/store/file_backend.h"
#include "openlake/status.h"
#include "openlake/store/store.h"

namespace openlake::store {

class LocalDrive;
class PeerLink;

// A namespace lock as the engine holds it: this process's (locks.h) and, in a cluster, the
// quorum lock across the nodes (dist_locks.h).
struct NsLock {
  LockGuard local;
  std::optional<DistLock> cluster;
  // False once the cluster lock was lost (its tables forgot it, or could not be reached): a
  // commit under it must not go ahead.
  bool held() const { return !cluster || cluster->held(); }
};

struct Drive {
  std::string path;
  std::unique_ptr<FileBackend> fs;  // a drive of this node: null when the folder is missing
  // What the engine goes through: a LocalDrive over `fs` (`local`), or a remote drive.
  std::unique_ptr<DriveApi> api;
  LocalDrive* local = nullptr;
  // A drive of another node (a cluster's): its node, its index there and the link to it.
  uint32_t node = 0;
  uint32_t index = 0;
  PeerLink* link = nullptr;
  int set = -1;
  int position = -1;
  std::atomic<bool> online{false};
  // Read by metrics and the status RPC on other threads while MarkOffline and RestoreDrives may
  // change it: an atomic, like `online`.
  std::atomic<DriveState> state{DriveState::kMissing};
  // I/O errors and damaged data found on this drive since the process started (reads that
  // failed or did not match their checksum, writes that failed); for metrics.
  std::atomic<uint64_t> errors{0};
  pb::DriveFormat format;
  int lock_fd = -1;  // flock on format.json: one process per drive
};

// What healing one object did.
struct HealOutcome {
  bool healed = false;  // some drive was rewritten, or stray versions dropped
  uint64_t shards = 0;  // drive copies rebuilt
  uint64_t bytes = 0;   // shard bytes written
};

// What each drive of a set holds of an object's versions while healing rebuilds them.
struct HealDrives {
  std::vector<std::vector<pb::ObjectVersion>> held;  // per position: its agreed records
  std::vector<bool> stale;  // per position: its metadata file must be rewritten as `held`
};

// One drive's answer when asked for an object's metadata.
struct MetaRead {
  enum Kind { kOk, kNotFound, kError } kind = kError;
  pb::ObjectMeta meta;
  absl::Status error;
};

// What the drives of a set agree on about a key: its versions, and the one asked for.
struct Resolved {
  // OK, or NoSuchKey / NoSuchVersion / DeleteMarker (the version read is one) /
  // InsufficientDrives.
  absl::Status status;
  // The version read: the current one or the one asked for (shared fields; per-drive ones
  // from one holder). A tombstone (`deleted`) when the key is being removed.
  pb::ObjectVersion version;
  std::vector<const pb::ObjectVersion*> copy;  // per position: that drive's copy, or null
  std::vector<MetaRead> reads;  // what each position answered (owns what the pointers point at)
  // Every version of the key a read quorum agrees on, newest first: one record per S3
  // identity (the newest; older ones are superseded). Empty while the key is being removed.
  std::vector<const pb::ObjectVersion*> versions;
  bool clean = true;            // every position holds exactly these versions
  int holders = 0;              // drives holding `version`
};

// engine_open.cc: a new random (version 4) UUID, and a UUID's 16 bytes (false when it is not one).
std::string NewUuid();
bool UuidBytes(std::string_view uuid, SipKey* out);

// Whether record a is newer than b (later time; the larger id on a tie).
bool Newer(const pb::ObjectVersion* a, const pb::ObjectVersion* b);

// quorum.cc: the records one drive answered (`m`) that are among `versions` (Resolved's).
std::vector<pb::ObjectVersion> GoodRecords(const MetaRead& m,
                                           const std::vector<const pb::ObjectVersion*>& versions);

// The state of one object write being committed, per position of the set.
struct DriveCommit {
  bool use = false;
  pb::ObjectVersion version;  // complete, with this drive's per-drive fields
  std::string staged_dir;     // tmp/<id> holding this drive's shard files, "" when inline
};

// What a writer hands to the commit: one object or part, streamed and durable on the drives
// that did not fail.
struct WriteTarget {
  std::string bucket;
  std::string key;
  std::string upload_id;  // a part of this upload when not empty
  int part_number = 0;
  PutOptions options;
  int set = 0;
  uint32_t rotation = 0;
  uint32_t k = 0;  // the layout: data and parity shards (Engine::LayoutFor)
  uint32_t m = 0;
};

struct WriteResult {
  std::string version_id;  // 16 bytes
  int64_t mod_time_ns = 0;
  uint64_t size = 0;
  std::string md5;  // 16 raw bytes
  bool inline_data = false;
  std::vector<bool> wrote;                   // per position: every shard block is durable
  std::vector<std::string> inline_shard;     // per position
  std::vector<std::vector<uint64_t>> crcs;   // per position: block checksums
  std::string staged_dir;                    // tmp/<id> on each drive that wrote
  std::string file_name;                     // shard file inside it
};

class Engine final : public Store {
 public:
  explicit Engine(StoreOptions options);
  ~Engine() override;

  absl::Status Init();  // engine_open.cc

  // ---- Store.
  std::vector<DriveInfo> Drives() const override;
  int set_count() const override { return sets_; }
  int data_shards() const override { return k_; }
  int parity_shards() const override { return m_; }
  int write_quorum() const override { return write_quorum_; }
  std::string deployment_id() const override { return deployment_id_; }
  ClusterCounters cluster_counters() const override;  // cluster_boot.cc

  using Store::DeleteObject;
  using Store::MakeBucket;
  io::Task<absl::Status> MakeBucket(std::string bucket, std::string owner) override;
  io::Task<absl::Status> DeleteBucket(std::string bucket) override;
  io::Task<absl::Status> SetBucketPolicy(std::string bucket, std::string policy) override;
  io::Task<absl::Status> SetBucketAcl(std::string bucket, std::string acl) override;
  io::Task<absl::Status> SetBucketVersioning(std::string bucket, Versioning versioning) override;
  io::Task<absl::Status> SetBucketLifecycle(std::string bucket, std::string lifecycle) override;
  io::Task<absl::Status> SetBucketTagging(std::string bucket, std::string tagging) override;
  io::Task<absl::StatusOr<BucketInfo>> StatBucket(std::string bucket) override;
  io::Task<absl::StatusOr<std::vector<BucketInfo>>> ListBuckets() override;

  io::Task<absl::StatusOr<std::unique_ptr<ObjectWriter>>> CreateObject(
      std::string bucket, std::string key, PutOptions options) override;
  io::Task<absl::StatusOr<std::unique_ptr<ObjectReader>>> OpenObject(
      std::string bucket, std::string key, GetOptions options) override;
  io::Task<absl::StatusOr<ObjectInfo>> StatObject(std::string bucket, std::string key,
                                                  Conditions conditions) override;
  io::Task<absl::StatusOr<DeleteResult>> DeleteObject(std::string bucket, std::string key,
                                                      DeleteOptions options) override;
  io::Task<absl::StatusOr<ObjectInfo>> CopyObject(std::string src_bucket, std::string src_key,
                                                  std::string dst_bucket, std::string dst_key,
                                                  std::optional<PutOptions> replace,
                                                  Conditions conditions,
                                                  WriteConditions when) override;
  io::Task<absl::StatusOr<ObjectInfo>> UpdateObjectMeta(std::string bucket, std::string key,
                                                        MetaUpdate update) override;
  io::Task<absl::StatusOr<ListResult>> ListObjects(std::string bucket,
                                                   ListOptions options) override;
  io::Task<absl::StatusOr<ListVersionsResult>> ListObjectVersions(
      std::string bucket, ListVersionsOptions options) override;

  io::Task<absl::StatusOr<std::string>> CreateUpload(std::string bucket, std::string key,
                                                     PutOptions options) override;
  io::Task<absl::StatusOr<std::unique_ptr<ObjectWriter>>> UploadPart(
      std::string bucket, std::string key, std::string upload_id, int part_number,
      int64_t size) override;
  io::Task<absl::StatusOr<ListPartsResult>> ListParts(std::string bucket, std::string key,
                                                      std::string upload_id, int part_marker,
                                                      int max_parts) override;
  io::Task<absl::StatusOr<ListUploadsResult>> ListUploads(std::string bucket,
                                                          ListUploadsOptions options) override;
  io::Task<absl::Status> AbortUpload(std::string bucket, std::string key,
                                     std::string upload_id) override;
  io::Task<absl::StatusOr<ObjectInfo>> CompleteUpload(std::string bucket, std::string key,
                                                      std::string upload_id,
                                                      std::vector<CompletePart> parts,
                                                      CompleteOptions options) override;

  io::Task<absl::StatusOr<HealResult>> Heal(std::string bucket, std::string prefix) override;
  io::Task<absl::StatusOr<HealResult>> HealObject(std::string bucket, std::string key) override;
  size_t heal_backlog() const override;
  io::Task<absl::StatusOr<HealResult>> DrainHealQueue() override;
  absl::StatusOr<int> RestoreDrives() override;
  // Brings back a drive taken offline while running once it takes a write again; true when
  // it did.
  bool ProbeReturn(Drive& d);

  // ---- Shared by the files of the engine.
  // Writes identity `f` into the blank local drive folder `path` (its system folder first):
  // this engine's formatting, and the drive service's for a peer.
  static absl::Status WriteFormat(FileBackend& fs, const std::string& path,
                                  const pb::DriveFormat& f);
  const StoreOptions& options() const { return opts_; }
  int n() const { return n_; }  // drives per set
  int k() const { return k_; }
  int m() const { return m_; }
  // The codec of a layout: the set's, its reduced one, or (for a version written under other
  // options) one made on first use; null when there can be none.
  const ec::Codec* CodecFor(uint32_t k, uint32_t m);
  // k and m of a new object: the set's, or its reduced redundancy layout.
  std::pair<uint32_t, uint32_t> LayoutFor(bool reduced_redundancy) const;
  // Drives that must take a write of layout k + m: the set's write quorum for its own layout,
  // MinIO's for a reduced one (engine_open.cc). (Out of line: g++ 12 crashed compiling
  // store/reader.cc with -g when it was inline here.)
  int QuorumOf(uint32_t k, uint32_t m) const;
  NamespaceLocks& locks() { return locks_; }
  // Takes `name` (locks.h's names) here and, in a cluster, on a quorum of the nodes' tables;
  // InsufficientDrives when no quorum granted it in time.
  io::Task<absl::StatusOr<NsLock>> Lock(std::string name, bool exclusive);
  // InsufficientDrives unless `lock` is still held: checked just before a commit.
  static absl::Status StillHeld(const NsLock& lock, std::string_view what);
  InlineCache& inline_cache() { return inline_cache_; }
  Drive& drive(int set, int pos) { return *drives_[static_cast<size_t>(set * n_ + pos)]; }
  // The drive when it is online, else null.
  DriveApi* api(int set, int pos);
  // Puts `api` in the place of drive (set, pos), a remote drive (tests, the cluster).
  void SetDriveApi(int set, int pos, std::unique_ptr<DriveApi> api);
  void MarkOffline(int set, int pos, const absl::Status& why);
  // Counts an I/O error or damaged data found on a drive (Drive::errors).
  void CountDriveError(int set, int pos) {
    drive(set, pos).errors.fetch_add(1, std::memory_order_relaxed);
  }
  Placement PlaceObject(std::string_view bucket, std::string_view key) const;

  // buckets.cc: the newest bucket record any drive holds (an empty one, named, for folders
  // without a record); NoSuchBucket unless the folder is on at least half the online drives.
  io::Task<absl::StatusOr<pb::BucketMeta>> NewestBucketRecord(std::string bucket);
  // Rewrites the bucket's newest record, changed by `change`, on every drive holding the
  // bucket (a majority of all drives must take it).
  io::Task<absl::Status> RewriteBucketRecord(std::string bucket, std::string what,
                                             std::function<void(pb::BucketMeta&)> change);

  // quorum.cc
  io::Task<MetaRead> ReadMetaOn(int set, int pos, std::string bucket, std::string key);
  // `want`: the identity (IdentityOf) of the version to read; none: the current one.
  io::Task<Resolved> ReadAndResolve(int set, std::string bucket, std::string key,
                                    std::optional<std::string> want = std::nullopt);
  Resolved ResolveReads(std::vector<MetaRead> reads,
                        const std::optional<std::string>& want = std::nullopt) const;
  // ReadAndResolve for a read: queues a heal when the drives disagree, and tells a missing
  // bucket from a missing key.
  io::Task<Resolved> ResolveForRead(int set, std::string bucket, std::string key,
                                    std::optional<std::string> want = std::nullopt);
  // NoSuchBucket or NoSuchKey, depending on whether the bucket exists on the set's drives.
  io::Task<absl::Status> NotFoundError(int set, std::string bucket, std::string key);
  io::Task<bool> BucketExistsOnSet(int set, std::string bucket);

  // commit.cc: commits `commits` (per position) as a version of the object under the
  // object's exclusive lock (the caller holds it), beside the versions each drive holds; once
  // `quorum` drives have it, the records it supersedes (of its identity) go. With `mod_time`,
  // the version becomes the key's newest (its time raised past the current one's if the clock
  // is behind) and its time is stored there.
  io::Task<absl::Status> CommitVersion(int set, std::string bucket, std::string key,
                                       std::vector<DriveCommit> commits, int quorum,
                                       int64_t* mod_time);
  // One drive: moves `dc.staged_dir` in as the data folder and makes {dc.version, others...}
  // the drive's metadata, durably (the folder's fsync after the rename only when `sync_dir`).
  // Trashes data folders no record of these uses.
  io::Task<absl::Status> CommitOnDrive(int set, int pos, const std::string& bucket,
                                       const std::string& key, const DriveCommit& dc,
                                       std::vector<pb::ObjectVersion> others,
                                       bool sync_dir = true);
  // objects.cc: DeleteObject of one version, resolved in `r` (with its identity asked for).
  io::Task<absl::StatusOr<DeleteResult>> RemoveVersion(int set, std::string bucket,
                                                       std::string key, Resolved r);
  // Makes `records` a drive's records of the key (none: removes the key there).
  io::Task<absl::Status> RewriteRecords(int set, int pos, std::string bucket, std::string key,
                                        std::vector<pb::ObjectVersion> records);
  // Removes an object's folder entries on one drive (into the trash) and prunes empty parents.
  io::Task<absl::Status> RemoveObjectOnDrive(int set, int pos, std::string bucket,
                                             std::string key);
  // Wakes the trash purger (something went into a local drive's trash).
  void WakePurger();

  // writer.cc / multipart.cc: make a finished stream visible.
  io::Task<absl::StatusOr<ObjectInfo>> CommitPut(const WriteTarget& t, WriteResult w);
  io::Task<absl::StatusOr<ObjectInfo>> CommitPart(const WriteTarget& t, WriteResult w);
  // Moves tmp/<id> of every drive into the trash (a writer that will not commit), in the
  // background on this reactor.
  void DiscardStaging(int set, const std::string& staged_dir);
  io::Task<void> TrashOnSet(int set, std::string path);
  absl::StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(WriteTarget t, int64_t size);

  // heal.cc
  void QueueHeal(const std::string& bucket, const std::string& key);
  // Work that outlives the call that started it (a dropped writer's clean-up, a dropped
  // reader's read-ahead) counts itself here; the destructor waits for it to finish.
  void BackgroundStarted() { background_.fetch_add(1, std::memory_order_relaxed); }
  void BackgroundDone() { background_.fetch_sub(1, std::memory_order_release); }

  // listing.cc
  // Up to `limit` items of `set` in key order after `marker`: the drives' walks merged (see
  // listing.cc). Objects need metadata on `min_count` drives.
  io::Task<absl::StatusOr<std::vector<WalkItem>>> WalkSet(int set, WalkRequest request,
                                                          int min_count);
  // WalkSet over every set, merged: up to `limit` items in key order (objects need metadata on
  // k drives).
  io::Task<absl::StatusOr<std::vector<WalkItem>>> WalkAll(WalkRequest request);

 private:
  absl::Status LoadDrives();
  // cluster_boot.cc: the drives of every node of opts_.cluster, this node's and the others',
  // formatting a blank cluster (the node with the lowest id does it).
  absl::Status LoadClusterDrives();
  // A new identity for the drive at (set, pos) of this deployment (node and layout: a
  // cluster's).
  pb::DriveFormat NewFormat(int set, int pos, uint32_t node, const std::string& layout) const;
  // Flock, system folders and a clean staging area on each of this node's online drives.
  absl::Status PrepareLocalDrives();
  // A remote drive taken offline (or unreachable since start) that answers with its identity
  // again; true when it came back.
  bool ProbeRemote(Drive& d);
  // Says hello to every peer (a dead one is taken as down, one taken as down comes back at its
  // first answer); returns how many came back since the last call.
  int ProbeLinks();
  void StartPurger();
  void PurgeLoop();
  io::Task<absl::StatusOr<HealResult>> HealBucketDirs(std::string bucket);
  io::Task<absl::StatusOr<HealOutcome>> HealOne(std::string bucket, std::string key);
  // Rebuilds version `v` (each drive's copy in `copy`, or null) on the drives that lack it or
  // hold it damaged; commits rebuilt shard files at once, and leaves records that carry their
  // bytes (inline shards, delete markers) in `drives` for HealOne's final rewrite.
  io::Task<absl::Status> HealVersion(int set, std::string bucket, std::string key,
                                     pb::ObjectVersion v,
                                     std::vector<const pb::ObjectVersion*> copy,
                                     HealDrives& drives, HealOutcome& out);
  // A heal's commit on one drive: a drive that lost the bucket's folder after the heal pass
  // recreated it (a drive emptied again under a running heal) gets it back and the commit
  // again, once.
  io::Task<absl::Status> HealCommit(int set, int pos, const std::string& bucket,
                                    const std::string& key, const DriveCommit& dc,
                                    std::vector<pb::ObjectVersion> others);

  StoreOptions opts_;
  // The other nodes of a cluster (declared before drives_: the drives point at them).
  std::vector<std::unique_ptr<PeerLink>> links_;
  std::vector<bool> links_were_up_;  // RestoreDrives' view, to notice a node that came back
  std::unique_ptr<PeerLink> self_link_;    // this node's own lock table, over loopback RPC
  std::unique_ptr<DistLocks> dist_locks_;  // a cluster's: every node's table
  std::string layout_digest_;
  std::string hello_;  // pb::DriveHello of this node: the hello and the links' probe
  std::vector<std::unique_ptr<Drive>> drives_;  // set-major: set * n + position
  int sets_ = 0;
  int n_ = 0;
  int k_ = 0;
  int m_ = 0;
  int write_quorum_ = 0;
  std::string deployment_id_;
  SipKey sip_key_{};
  std::unique_ptr<ec::Codec> codec_;
  int reduced_m_ = 0;
  absl::Mutex codecs_mu_;
  // Codecs of other layouts, indexed by parity (codec_ is the set's); made on first use.
  std::vector<std::unique_ptr<ec::Codec>> codecs_ ABSL_GUARDED_BY(codecs_mu_);
  NamespaceLocks locks_;
  InlineCache inline_cache_;

  mutable absl::Mutex heal_mu_;
  std::deque<std::pair<std::string, std::string>> heal_queue_ ABSL_GUARDED_BY(heal_mu_);
  absl::flat_hash_set<std::string> heal_queued_ ABSL_GUARDED_BY(heal_mu_);

  std::atomic<int> background_{0};

  // The trash purger: a helper thread, so that removing whole trees (blocking calls) stays off
  // the reactors. Trash() and the destructor wake it.
  absl::Mutex purge_mu_;
  absl::CondVar purge_cv_;
  bool purge_stop_ ABSL_GUARDED_BY(purge_mu_) = false;
  bool purge_wanted_ ABSL_GUARDED_BY(purge_mu_) = false;
  std::thread purger_;
};

// ---- drive_io.cc: coroutine helpers on one drive's backend, on the current reactor.

// The whole file; NotFound when it does not exist.
io::Task<absl::StatusOr<std::string>> ReadWholeFile(FileBackend& fs, std::string path);
// Writes all of `bytes` to `f` at `offset` (`name`: the file, for messages).
io::Task<absl::Status> WriteAllAt(FileHandle* f, std::string_view bytes, uint64_t offset,
                                  std::string name);
// Creates `path` with `data` and (with `sync`) fdatasyncs it.
io::Task<absl::Status> WriteWholeFile(FileBackend& fs, std::string path, std::string data,
                                      bool sync);
// fsync of a folder.
io::Task<absl::Status> SyncDir(FileBackend& fs, std::string path);
// FileBackend::MakeDirs whose new folders are made durable (their parents fsynced) through the
// reactor's ring, so the reactor goes on with other work meanwhile.
io::Task<absl::Status> MakeDirsDurable(FileBackend& fs, std::string path, std::string from);
// Writes `data` to a temporary in tmp/, fsyncs it (unless `sync_data` is false: a journal
// step, durable already), renames it to `path` and fsyncs its folder (when `sync_dir`).
io::Task<absl::Status> AtomicReplace(FileBackend& fs, std::string path, std::string data,
                                     bool sync_dir, bool sync_data = true);
std::string ParentOf(std::string_view path);
std::string TmpName(std::string_view what);

// Bytes of a shard block: block `b` of a part of `part_size` bytes, k data shards of at most
// `block_size`; files round the last block up to 4096 (O_DIRECT), inline shards do not.
uint64_t ShardBlockLen(uint64_t part_size, uint64_t b, uint32_t k, uint32_t block_size,
                       bool inline_data);
uint64_t BlockCount(uint64_t part_size, uint32_t k, uint32_t block_size);

// objects.cc: S3's conditional-request rules (If-Match, If-None-Match, If-Modified-Since,
// If-Unmodified-Since and their precedence) and byte ranges.
// (ResolveRange is public: openlake/store/store.h.)
absl::Status CheckConditions(const ObjectInfo& info, const Conditions& c);
// A conditional write against the object's current state `cur` (ReadAndResolve):
// PreconditionFailed when it does not hold (NoSuchKey for an If-Match of a missing key), the
// read's error when the state is unknown (too few drives), OK otherwise.
absl::Status CheckWriteConditions(const Resolved& cur, const WriteConditions& when);

}  // namespace openlake::store

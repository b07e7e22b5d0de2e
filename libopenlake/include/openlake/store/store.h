// File: openlake/store/store.h
//
// The erasure-coded object engine: buckets and objects over local drives, Reed–Solomon coded
// in erasure sets, with bitrot checksums, healing, multipart uploads and listing. The S3
// server sits on this API; docs/object-store.md describes the formats and the paths.
//
//   store::StoreOptions o;
//   o.drives = {"/data/d0", "/data/d1", "/data/d2", "/data/d3"};
//   o.set_drive_count = 4;  o.parity = 2;                 // RS(2+2)
//   OL_ASSIGN_OR_RETURN(auto st, store::Store::Open(o));  // blocking: formats, checks drives
//
//   // On a reactor, in a coroutine:
//   OL_CO_RETURN_IF_ERROR(co_await st->MakeBucket("photos"));
//   store::PutOptions po;                                // named: never `{}` in a co_await
//   OL_CO_ASSIGN_OR_RETURN(auto w, co_await st->CreateObject("photos", "a/b.jpg", po));
//   OL_CO_RETURN_IF_ERROR(co_await w->Write(bytes));     // as many windows as the body has
//   OL_CO_ASSIGN_OR_RETURN(store::ObjectInfo info, co_await w->Commit());
//   store::GetOptions go;
//   OL_CO_ASSIGN_OR_RETURN(auto r, co_await st->OpenObject("photos", "a/b.jpg", go));
//   while (true) {
//     OL_CO_ASSIGN_OR_RETURN(absl::Span<const std::byte> chunk, co_await r->Next());
//     if (chunk.empty()) break;
//     ...
//   }
//
// Every call that touches a drive is a coroutine (io::Task) and must run on a reactor of an
// io::Runtime; a writer or reader stays on the reactor that created it. The Store itself is
// shared by all reactors. Objects stream in windows of k × block_size bytes: nothing is
// buffered whole.
//
// Errors are absl::Status values with a canonical code and, attached, an ErrorKind that tells
// the S3 layer which S3 error to answer (ErrorKindOf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "openlake/export.h"
#include "openlake/io/task.h"
#include "openlake/store/file_backend.h"

namespace openlake::store {

// ---- Errors.

enum class ErrorKind {
  kNone = 0,
  kNoSuchBucket,        // NotFound
  kNoSuchKey,           // NotFound
  kNoSuchUpload,        // NotFound
  kBucketExists,        // AlreadyExists
  kBucketNotEmpty,      // FailedPrecondition
  kInvalidBucketName,   // InvalidArgument
  kInvalidObjectName,   // InvalidArgument (".." segments, NUL, absolute, too long, ...)
  kInvalidPart,         // InvalidArgument: a listed part is missing or its ETag differs
  kInvalidPartOrder,    // InvalidArgument: part numbers not ascending
  kEntityTooSmall,      // InvalidArgument: a part other than the last below the minimum
  kEntityTooLarge,      // InvalidArgument
  kInvalidRange,        // OutOfRange: no byte of the range exists
  kPreconditionFailed,  // FailedPrecondition: If-Match / If-Unmodified-Since
  kNotModified,         // FailedPrecondition: If-None-Match / If-Modified-Since
  kConditionalConflict, // Aborted: a conditional write lost a race with another write
  kInsufficientDrives,  // Unavailable: fewer drives answered than the quorum needs
  kCorrupt,             // DataLoss: too few intact shards to rebuild the bytes
  kStorageFull,         // ResourceExhausted: too few drives had room for a write
  kNoSuchVersion,       // NotFound: the key has no version with that id
  kDeleteMarker,        // NotFound: the version read is a delete marker (VersionIdOf names it)
  kInvalidVersionId,    // InvalidArgument: not a version id this store gives out
};

// The kind attached to `s` (kNone for OK or a status the engine did not make).
OL_EXPORT ErrorKind ErrorKindOf(const absl::Status& s);
OL_EXPORT std::string_view ErrorKindName(ErrorKind k);
// The S3 version id an error is about: the delete marker of a kDeleteMarker ("" otherwise).
OL_EXPORT std::string VersionIdOf(const absl::Status& s);

// A bucket's S3 versioning state. A bucket never versioned keeps one version per key, the
// "null" one; Enabled keeps every write and delete as a version with its own id; Suspended
// writes the "null" version again (replacing the previous null one) and keeps the others.
enum class Versioning : uint8_t { kUnversioned = 0, kEnabled = 1, kSuspended = 2 };

// ---- Values.

struct BucketInfo {
  std::string name;
  absl::Time created;
  std::string owner;  // the owner's id; "" for a bucket made before buckets had owners
  std::string policy;  // its S3 bucket policy (JSON), "" when it has none
  std::string acl;     // its S3 ACL as the S3 layer encodes it, "" when never set
  Versioning versioning = Versioning::kUnversioned;
  std::string lifecycle;  // its S3 lifecycle configuration (the S3 layer's XML), "" when none
  std::string tagging;    // its S3 tags (the S3 layer's encoding), "" when none
};

struct PartSummary {
  int number = 0;
  uint64_t size = 0;
  std::map<std::string, std::string> meta;  // the part's own (ObjectWriter::SetMeta)
};

struct ObjectInfo {
  std::string bucket;
  std::string key;
  uint64_t size = 0;
  std::string etag;  // lowercase hex, no quotes; "<hex>-<parts>" after a multipart upload
  std::string content_type;
  std::map<std::string, std::string> user_meta;  // names lowercase, without "x-amz-meta-"
  absl::Time mod_time;
  std::vector<PartSummary> parts;  // empty for a single PUT
  // The S3 version id: "null" for the null version (every version of a bucket never
  // versioned, and writes while versioning is suspended), else 32 hex digits.
  std::string version_id;
  bool delete_marker = false;  // a delete marker (ListObjectVersions): no bytes
  bool is_latest = true;       // the key's current version (ListObjectVersions)
};

// The S3 version id of the null version.
inline constexpr std::string_view kNullVersionId = "null";

// A conditional write (S3's If-None-Match: * and If-Match on PutObject and
// CompleteMultipartUpload). A PUT checks it when it starts (PreconditionFailed) and again under
// the object's lock as it commits, atomically with the commit: a condition that held at the
// start and fails there (another write won the race) is ConditionalConflict, and nothing of
// this write becomes visible.
struct WriteConditions {
  bool if_none_match = false;  // the key must not exist
  std::string if_match;        // the current object's ETag (quotes optional; "*": any object);
                               // NoSuchKey when there is none
};
// CompleteUpload's options: the conditions, and user metadata the completed object gets on top
// of the upload's (a checksum the caller derived from the parts').
struct CompleteOptions {
  WriteConditions when;
  std::map<std::string, std::string> meta;
  Versioning versioning = Versioning::kUnversioned;
};

// Whether `w` asks for anything. (A free function: as a member of WriteConditions, g++ 12
// crashed compiling store/reader.cc with -g -Wall.)
inline bool Conditional(const WriteConditions& w) { return w.if_none_match || !w.if_match.empty(); }

// A change to an object's metadata that leaves its bytes (and ETag and Last-Modified) alone:
// S3 object tagging. Entries of user_meta are set, then erased.
struct MetaUpdate {
  std::map<std::string, std::string> set;
  std::vector<std::string> erase;
  std::string if_match;  // the ETag the object must still have ("" for any), else 412
  std::string version_id;  // the version to change (S3 version id; "" for the current one)
};

struct PutOptions {
  std::string content_type;  // "" → application/octet-stream
  std::map<std::string, std::string> user_meta;
  // The body's size when known (-1 otherwise). A body that ends at another size fails.
  int64_t size = -1;
  WriteConditions when;  // PUT only (CreateUpload ignores it: Complete takes its own)
  // The bucket's versioning state, which decides what the write keeps of the key's versions
  // (CreateUpload ignores it: Complete takes its own).
  Versioning versioning = Versioning::kUnversioned;
  // S3's REDUCED_REDUNDANCY: coded with the set's reduced parity (StoreOptions::reduced_parity)
  // instead of its parity (CreateUpload: every part of the upload).
  bool reduced_redundancy = false;
};

// Conditional read (RFC 7232 as S3 applies it). ETags compare without quotes; "*" matches any.
//
// `version_id` is no condition but says which version is read (an S3 version id; "" for the
// current one), here so that every read, a copy's source too, names it the same way.
struct Conditions {
  std::string version_id;
  std::string if_match;
  std::string if_none_match;
  std::optional<absl::Time> if_modified_since;
  std::optional<absl::Time> if_unmodified_since;
};

// An HTTP byte range before it meets the object's size: [first, last], [first, end) when
// `last` is absent, or the final `suffix` bytes.
struct RangeSpec {
  std::optional<uint64_t> first;
  std::optional<uint64_t> last;
  std::optional<uint64_t> suffix;
};

struct GetOptions {
  std::optional<RangeSpec> range;
  Conditions conditions;
};

// [offset, offset + length) of a `size`-byte object for `range` (the whole object without
// one); InvalidRange when no byte of it exists. OpenObject applies it; a HEAD answer too.
OL_EXPORT absl::Status ResolveRange(uint64_t size, const std::optional<RangeSpec>& range,
                                    uint64_t* offset, uint64_t* length);

struct ListOptions {
  std::string prefix;
  std::string delimiter;
  std::string marker;  // list keys (and common prefixes) strictly after this one
  int max_keys = 1000;
};

struct ListResult {
  std::vector<ObjectInfo> objects;        // sorted by key (UTF-8 bytes)
  std::vector<std::string> common_prefixes;  // sorted
  bool truncated = false;
  std::string next_marker;  // the last key or prefix returned, when truncated
};

struct ListVersionsOptions {
  std::string prefix;
  std::string delimiter;
  std::string key_marker;         // keys after this one, or this key's versions after...
  std::string version_id_marker;  // ...this one (S3 version id; "" with a key marker: none)
  int max_keys = 1000;            // versions and common prefixes, together
};

struct ListVersionsResult {
  // By key, each key's versions newest first (delete_marker and is_latest set).
  std::vector<ObjectInfo> versions;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_key_marker;
  std::string next_version_id_marker;
};

// What DeleteObject did: the version it removed or the delete marker it made.
struct DeleteOptions {
  Versioning versioning = Versioning::kUnversioned;
  std::string version_id;  // remove this version for good (S3 version id); "" for the key
};
struct DeleteResult {
  std::string version_id;      // the removed version's, or the new delete marker's ("" if none)
  bool delete_marker = false;  // a delete marker was made, or the removed version was one
};

struct UploadInfo {
  std::string bucket;
  std::string key;
  std::string upload_id;
  absl::Time initiated;
};

struct PartInfo {
  int number = 0;
  std::string etag;
  uint64_t size = 0;
  absl::Time mod_time;
  std::map<std::string, std::string> meta;  // the part's own (ObjectWriter::SetMeta)
};

struct CompletePart {
  int number = 0;
  std::string etag;  // quotes are ignored
};

struct ListPartsResult {
  std::vector<PartInfo> parts;
  bool truncated = false;
  int next_marker = 0;
  std::map<std::string, std::string> upload_meta;  // the upload's user metadata
};

struct ListUploadsOptions {
  std::string prefix;
  std::string delimiter;
  std::string key_marker;
  std::string upload_id_marker;
  int max_uploads = 1000;
};

struct ListUploadsResult {
  std::vector<UploadInfo> uploads;  // by key, then initiation time
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
};

struct HealResult {
  uint64_t objects_scanned = 0;
  uint64_t objects_healed = 0;   // at least one drive rewritten
  uint64_t shards_written = 0;   // drive copies rebuilt
  uint64_t objects_failed = 0;   // could not be rebuilt (too few intact shards)
  uint64_t buckets_healed = 0;   // bucket folders recreated on drives
  uint64_t bytes_written = 0;    // shard bytes rebuilt (data files and inline shards)
};

// What a drive folder is to the store.
enum class DriveState : uint8_t {
  kOk,                   // formatted for this deployment, serving
  kReplaced,             // found empty in a formatted set's place: formatted anew, to be healed
  kMissing,              // no such folder (an unmounted disk's mount point, a typo)
  kUnformattedEmpty,     // empty (or only lost+found): the store formats it on start
  kUnformattedNonempty,  // holds other files and no identity: never formatted
  kCorruptFormat,        // its identity (format.json) does not parse or is not ours
  kForeign,              // formatted for another deployment
  kDuplicate,            // claims a place another drive holds
  kSpare,                // empty, but every place is taken
  kError,                // an I/O error, or taken offline while serving
};
// "ok", "replaced", "missing", "unformatted-empty", "unformatted-nonempty", "corrupt-format",
// "foreign", "duplicate", "spare", "error": the names metrics, the CLI and the status RPC show.
OL_EXPORT std::string_view DriveStateName(DriveState state);

struct DriveInfo {
  std::string path;
  int set = -1;
  int position = -1;  // within its set
  bool online = false;
  std::string state;  // DriveStateName() of its state
  std::string drive_id;
  // I/O errors and damaged data found on the drive since the store opened: failed or
  // checksum-mismatched reads, failed writes.
  uint64_t errors = 0;
  uint32_t node = 0;  // the node holding it (in a cluster; 0 otherwise)
  bool local = true;  // on this node
};

// The identity the store writes on each drive it formats (.openlake.sys/format.json; see
// docs/object-store.md, "Drives").
struct DriveIdentity {
  std::string deployment_id;
  std::string drive_id;
  uint32_t set_count = 0;
  uint32_t set_drive_count = 0;
  uint32_t set_index = 0;
  uint32_t position = 0;
  uint32_t node_id = 0;  // the node it belongs to (a cluster's drives)
  std::string layout;    // the cluster layout's digest ("" outside a cluster)
};

// A drive folder as InspectDrive finds it.
struct DriveInspection {
  std::string path;
  bool exists = false;  // a folder is there
  // kOk (an identity was read), kMissing, kUnformattedEmpty, kUnformattedNonempty,
  // kCorruptFormat or kError: what the store would make of it on start, before comparing it
  // with the other drives (foreign, duplicate and spare need the whole set).
  DriveState state = DriveState::kMissing;
  std::string detail;  // why, for kMissing, kUnformattedNonempty, kCorruptFormat and kError
  std::optional<DriveIdentity> identity;   // with kOk
  std::optional<uint64_t> capacity_bytes;  // of its file system
  std::optional<uint64_t> free_bytes;      // available to unprivileged writers
};

// Reads what the store would read of the drive folder `path` at start, changing nothing: no
// folder is created, no format written, no lock taken (`openlake disk info` runs it beside a
// serving daemon). Blocking.
OL_EXPORT DriveInspection InspectDrive(const std::string& path);

// ---- Streams.

// Streams one object (or one multipart part) in. Write copies the bytes into the current
// window; a full window is encoded and its shards written in parallel while the caller goes on.
// Nothing is visible until Commit returns OK. Destroying a writer without Commit discards it.
class OL_EXPORT ObjectWriter {
 public:
  virtual ~ObjectWriter() = default;
  virtual io::Task<absl::Status> Write(absl::Span<const std::byte> data) = 0;
  // Makes the object (or part) visible atomically. An error leaves the previous object as it
  // was. For a part, the returned info carries the part's ETag and size.
  virtual io::Task<absl::StatusOr<ObjectInfo>> Commit() = 0;
  virtual uint64_t bytes_written() const = 0;
  // User metadata known only once the body has been read (a checksum sent as a trailer),
  // stored with the object, or with the part (PartInfo::meta); before Commit.
  virtual void SetMeta(std::string name, std::string value) = 0;
};

// Streams one object (or a byte range of it) out, verified: every shard block is checked
// against its checksum; a bad or missing shard is rebuilt from parity and queued for healing.
class OL_EXPORT ObjectReader {
 public:
  virtual ~ObjectReader() = default;
  virtual const ObjectInfo& info() const = 0;
  // The resolved range: [offset, offset + length) of the object.
  virtual uint64_t offset() const = 0;
  virtual uint64_t length() const = 0;
  // The next bytes of the range; an empty span at the end. The span stays valid until the
  // next call.
  virtual io::Task<absl::StatusOr<absl::Span<const std::byte>>> Next() = 0;
};

// ---- The engine.

// A deployment over several nodes (docs/object-store.md, "Clusters"): every node is configured
// with the same list, and each node's own drives are StoreOptions::drives (its data_dirs, as
// many as its disk_count). The drives of all nodes are striped into erasure sets so that the
// node varies fastest (ClusterLayout, openlake/store/cluster.h); each node's engine reaches the
// others' drives over the drive RPC on their rpc_addr.
struct ClusterNodeSpec {
  uint32_t id = 0;
  std::string rpc_addr;  // host:port; a name is resolved whenever a connection is made
  uint32_t disk_count = 1;
};
struct ClusterSpec {
  uint32_t self_id = 0;
  std::vector<ClusterNodeSpec> nodes;
  std::string secret;  // the RPC shared secret (needed beyond loopback)
  // The reactors the engine talks to other nodes on; must run while the store is open.
  io::Runtime* runtime = nullptr;
  // How long Open waits for enough of the cluster to answer (a blank cluster: every drive,
  // for the node with the lowest id to format them; later: a majority of formatted drives).
  absl::Duration boot_timeout = absl::Minutes(5);
  // Asked once a second while Open waits for the cluster: true gives up the wait (Open fails
  // with Cancelled), as a daemon told to stop while it starts must.
  std::function<bool()> cancelled;
  // A request to another node's drive that gets no answer in this long fails (the node is then
  // taken as down until it answers again).
  absl::Duration call_timeout = absl::Seconds(10);
};

struct StoreOptions {
  std::vector<std::string> drives;  // folders; order fixes positions when formatting
  // Drives per erasure set; 0: all drives in one set. The drive count must be a multiple.
  int set_drive_count = 0;
  // Parity shards per set (m); -1: set_drive_count / 2 for 4+ drives, else as MinIO does
  // for small sets (1 for 2–3 drives, 0 for one drive). 0 ≤ m ≤ set_drive_count / 2.
  int parity = -1;
  // Bytes per shard block (the unit of O_DIRECT I/O and of bitrot checksums); a multiple of
  // 4096. A window (what is encoded at once) is k × block_size bytes.
  uint32_t block_size = 1 << 20;
  // Parity shards of objects written with PutOptions::reduced_redundancy; -1: one (as MinIO's
  // REDUCED_REDUNDANCY default), or the set's parity when that is less. 0 ≤ it ≤ parity.
  int reduced_parity = -1;
  // Objects up to this size keep their shards inside the metadata files.
  uint32_t inline_threshold = 128 << 10;
  // Windows being written or read ahead at once per stream.
  int window_depth = 2;
  // Multipart: the smallest part other than the last (S3: 5 MiB).
  uint64_t min_part_size = 5ull << 20;
  // Largest object or part accepted (S3: 5 GiB per PUT or part).
  uint64_t max_part_size = 5ull << 30;
  // Seam for tests; empty: NewLocalFileBackend.
  FileBackendFactory backend_factory;
  // Purge the trash in a background thread (tests may turn it off).
  bool purge_trash = true;
  // Each local drive commits metadata through its journal (group commit: one fdatasync for
  // every commit that arrived meanwhile; docs/object-store.md, "The commit journal"). false:
  // each commit syncs its own record and folders, as before the journal (store_bench compares).
  bool commit_journal = true;
  // ETags of objects (and parts) written through data files are the MD5 of their bytes, as S3
  // clients expect. MD5 is serial and runs at ~0.7 GB/s per core, which caps one stream's
  // write rate; false derives the ETag from the shard blocks' CRC-64s instead (still 32 hex
  // digits and the same for the same bytes in this store, but not their MD5). Objects small
  // enough to be inline always get an MD5 ETag.
  bool etag_md5 = true;
  // Objects small enough to be inline are kept in memory after a read, up to this many bytes
  // in all, and served from there until they change (0: off). See docs/object-store.md. Off
  // in a cluster, where another node may change them.
  size_t inline_cache_bytes = 64 << 20;
  // Several nodes (none: every drive is this node's).
  std::optional<ClusterSpec> cluster;
};

// What a store over several nodes has done with them (zero on one node).
struct ClusterCounters {
  int peers = 0;                // the other nodes
  int peers_up = 0;             // those answering now
  uint64_t lock_rounds = 0;     // lock, unlock and refresh rounds (one request to each node)
  uint64_t lock_requests = 0;   // the requests of those rounds
  uint64_t locks_acquired = 0;
  uint64_t locks_timed_out = 0;  // no quorum within the timeout
  uint64_t locks_unreachable = 0;  // too few nodes answered for a quorum
  uint64_t locks_lost = 0;       // a held lock its refresh found gone
};

class OL_EXPORT Store {
 public:
  // Opens (and formats on first use) the drives. Blocking. Fails when the options are invalid
  // or fewer than a write quorum of drives per set are usable. A missing, foreign or
  // non-empty-but-unformatted drive is left offline (DriveInfo says why); an empty folder in
  // the place of a lost drive is formatted as its replacement and marked for healing.
  static absl::StatusOr<std::unique_ptr<Store>> Open(StoreOptions options);
  virtual ~Store() = default;

  virtual std::vector<DriveInfo> Drives() const = 0;
  virtual int set_count() const = 0;
  virtual int data_shards() const = 0;
  virtual int parity_shards() const = 0;
  // Drives of a set that must take a write for it to succeed.
  virtual int write_quorum() const = 0;
  virtual std::string deployment_id() const = 0;
  virtual ClusterCounters cluster_counters() const { return {}; }

  // ---- Buckets.
  // `owner`: the id kept as the bucket's owner (BucketInfo::owner).
  virtual io::Task<absl::Status> MakeBucket(std::string bucket, std::string owner) = 0;
  io::Task<absl::Status> MakeBucket(std::string bucket) {
    return MakeBucket(std::move(bucket), std::string());
  }
  // Only an empty bucket (in-progress multipart uploads are aborted with it).
  virtual io::Task<absl::Status> DeleteBucket(std::string bucket) = 0;
  // Replaces the bucket's policy document ("" removes it) on every drive holding the bucket;
  // a majority of all drives must take it. The store keeps it as given (the S3 layer checks it).
  virtual io::Task<absl::Status> SetBucketPolicy(std::string bucket, std::string policy) = 0;
  // The same for the bucket's ACL (kept as given).
  virtual io::Task<absl::Status> SetBucketAcl(std::string bucket, std::string acl) = 0;
  // The same for its versioning state (kUnversioned is refused: S3 cannot turn it back off).
  virtual io::Task<absl::Status> SetBucketVersioning(std::string bucket,
                                                     Versioning versioning) = 0;
  // The same for its lifecycle configuration ("" removes it; kept as given).
  virtual io::Task<absl::Status> SetBucketLifecycle(std::string bucket,
                                                    std::string lifecycle) = 0;
  // The same for its tags ("" removes them; kept as given).
  virtual io::Task<absl::Status> SetBucketTagging(std::string bucket, std::string tagging) = 0;
  virtual io::Task<absl::StatusOr<BucketInfo>> StatBucket(std::string bucket) = 0;
  virtual io::Task<absl::StatusOr<std::vector<BucketInfo>>> ListBuckets() = 0;

  // ---- Objects.
  virtual io::Task<absl::StatusOr<std::unique_ptr<ObjectWriter>>> CreateObject(
      std::string bucket, std::string key, PutOptions options) = 0;
  virtual io::Task<absl::StatusOr<std::unique_ptr<ObjectReader>>> OpenObject(
      std::string bucket, std::string key, GetOptions options) = 0;
  virtual io::Task<absl::StatusOr<ObjectInfo>> StatObject(std::string bucket, std::string key,
                                                          Conditions conditions) = 0;
  // Without a version id: an unversioned bucket's key is removed (NoSuchKey when there is
  // none); a versioned bucket gets a delete marker as the key's current version (Suspended: the
  // null one, replacing the null version). With one: that version is removed for good (a
  // delete marker too), and the next newest becomes current; none left, the key is gone.
  virtual io::Task<absl::StatusOr<DeleteResult>> DeleteObject(std::string bucket,
                                                              std::string key,
                                                              DeleteOptions options) = 0;
  // DeleteObject of an unversioned bucket's key.
  io::Task<absl::Status> DeleteObject(std::string bucket, std::string key);
  // Copies through the engine (read, verify, re-encode); `replace` keeps the source's content
  // type and user metadata when absent. `conditions` apply to the source, `when` to the
  // destination (as a PUT's).
  virtual io::Task<absl::StatusOr<ObjectInfo>> CopyObject(std::string src_bucket,
                                                          std::string src_key,
                                                          std::string dst_bucket,
                                                          std::string dst_key,
                                                          std::optional<PutOptions> replace,
                                                          Conditions conditions,
                                                          WriteConditions when) = 0;
  // Applies `update` to a version's user metadata (update.version_id, else the current one's)
  // under the object's lock, without rewriting its data: a new record (committed on a write
  // quorum) over the same shards replaces the version's, keeping its S3 version id, ETag and
  // Last-Modified. NoSuchKey when there is no object, NoSuchVersion when no such version.
  virtual io::Task<absl::StatusOr<ObjectInfo>> UpdateObjectMeta(std::string bucket,
                                                                std::string key,
                                                                MetaUpdate update) = 0;
  virtual io::Task<absl::StatusOr<ListResult>> ListObjects(std::string bucket,
                                                           ListOptions options) = 0;
  // Every version and delete marker, by key then newest first (S3 ListObjectVersions).
  virtual io::Task<absl::StatusOr<ListVersionsResult>> ListObjectVersions(
      std::string bucket, ListVersionsOptions options) = 0;

  // ---- Multipart uploads.
  virtual io::Task<absl::StatusOr<std::string>> CreateUpload(std::string bucket,
                                                             std::string key,
                                                             PutOptions options) = 0;
  // part_number 1..10000; a part uploaded again replaces the earlier one.
  virtual io::Task<absl::StatusOr<std::unique_ptr<ObjectWriter>>> UploadPart(
      std::string bucket, std::string key, std::string upload_id, int part_number,
      int64_t size) = 0;
  virtual io::Task<absl::StatusOr<ListPartsResult>> ListParts(std::string bucket,
                                                              std::string key,
                                                              std::string upload_id,
                                                              int part_marker, int max_parts) = 0;
  virtual io::Task<absl::StatusOr<ListUploadsResult>> ListUploads(
      std::string bucket, ListUploadsOptions options) = 0;
  virtual io::Task<absl::Status> AbortUpload(std::string bucket, std::string key,
                                             std::string upload_id) = 0;
  // Validates the list (ascending numbers, each part present with that ETag, every part but
  // the last at least min_part_size) and commits the object atomically by linking the parts'
  // shard files (no data is copied). After a failure the upload is intact and the call can be
  // repeated; repeated after a success, it answers that success again. `options.when`: checked
  // under the object's lock (PreconditionFailed).
  virtual io::Task<absl::StatusOr<ObjectInfo>> CompleteUpload(
      std::string bucket, std::string key, std::string upload_id,
      std::vector<CompletePart> parts, CompleteOptions options) = 0;

  // ---- Healing.
  // Rebuilds every object under `prefix` in `bucket` ("" and "": every bucket) whose drives
  // disagree or whose shards are missing or damaged, and recreates missing bucket folders.
  virtual io::Task<absl::StatusOr<HealResult>> Heal(std::string bucket, std::string prefix) = 0;
  virtual io::Task<absl::StatusOr<HealResult>> HealObject(std::string bucket,
                                                          std::string key) = 0;
  // Objects queued for healing by reads that met bad shards, not yet repaired.
  virtual size_t heal_backlog() const = 0;
  // Repairs queued objects until the queue is empty (for a timer of the embedding program).
  virtual io::Task<absl::StatusOr<HealResult>> DrainHealQueue() = 0;
  // Checks that every online drive still has its folder and identity (format.json). One whose
  // folder was removed or emptied while the engine ran gets them back in place, as the
  // replacement of itself, so that a Heal("", "") rebuilds its buckets and shards. Returns how
  // many drives it restored. A drive taken offline for errors while running is probed (its
  // identity is there and it takes a write) and brought back when it works again, counted
  // too. Blocking (a few stat calls per drive); not from a reactor.
  virtual absl::StatusOr<int> RestoreDrives() = 0;
};

}  // namespace openlake::store

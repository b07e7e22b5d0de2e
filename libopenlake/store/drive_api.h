// The per-drive API: every step the engine takes on one drive, as coroutines on the calling
// reactor. A LocalDrive (local_drive.h) runs them on a FileBackend; a RemoteDrive
// (remote_drive.h) sends each one as a single RPC to the node that owns the drive, which runs it
// on its LocalDrive (drive_service.h). The steps are chosen so that a remote drive costs one
// round trip per step of an operation, not one per system call: reading a record, committing a
// version (the renames and fsyncs together), removing an object, a page of a listing walk, one
// block of a shard file.
//
// Paths are relative to the drive's folder and never hold "." or ".." (the engine builds them
// from validated names; the backend refuses anything else). Every method may be called from any
// reactor; a FileHandle an OpenFile returns stays with the reactor that opened it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "openlake/io/task.h"
#include "openlake/store/file_backend.h"

namespace openlake::store {

// One entry of a listing walk: an object key, or a common prefix (with a delimiter).
struct WalkItem {
  std::string key;
  bool is_prefix = false;
};

// A page of a bucket's keys on one drive: the objects whose metadata it holds (a folder's
// metadata file or a packed record, pack.h), and with a delimiter the common prefixes holding
// one, after `marker` in key order, at most `limit`.
struct WalkRequest {
  std::string bucket;
  std::string prefix;
  std::string delimiter;
  std::string marker;
  uint32_t limit = 1000;
};

// The common prefix `key` rolls up into under `request` (its prefix, then up to and including
// the first delimiter after it), or "" when it does not (drive_walk.cc). Every walk, of folders
// or of a pack, rolls keys up by this one rule.
std::string RollUp(std::string_view key, const WalkRequest& request);

// The commit of one version on one drive (Engine::CommitOnDrive): moves `staged_dir` (if any) in
// as the data folder `data_dir` of the object's folder, replaces the object's metadata file with
// `meta` durably, and trashes the data folders none of `keep_data_dirs` names.
struct CommitStep {
  std::string bucket;
  std::string key;
  std::string staged_dir;  // tmp/<id> holding this drive's shard files, "" when none
  std::string data_dir;    // its name in the object's folder
  std::string meta;        // the encoded metadata record (EncodeRecord)
  std::vector<std::string> keep_data_dirs;
  bool sync_dir = true;  // fsync the object's folder after the metadata's rename
};

// A shard file to check where its bytes are: every block present, whole and matching its
// CRC-64 (block b is ShardBlockLen(part_size, b, k, block_size) bytes at b × block_size).
struct VerifyRequest {
  std::string path;
  uint64_t part_size = 0;
  uint32_t data_shards = 0;
  uint32_t block_size = 0;
  std::vector<uint64_t> block_crcs;
};

struct LinkPair {
  std::string from;
  std::string to;
};

struct DriveUsage {
  uint64_t free_bytes = 0;
};

class DriveApi {
 public:
  virtual ~DriveApi() = default;

  // For messages: the folder, or "<node address>:<folder>" for a remote drive.
  virtual const std::string& name() const = 0;
  virtual bool is_local() const = 0;

  // ---- Small files (records), read and replaced whole.
  // NotFound when there is no such file.
  virtual io::Task<absl::StatusOr<std::string>> ReadFile(std::string path) = 0;
  // Writes `data` to a temporary, fsyncs it, renames it over `path` and (with `sync_dir`) fsyncs
  // the folder.
  virtual io::Task<absl::Status> WriteFile(std::string path, std::string data, bool sync_dir) = 0;

  // ---- Shard files. kRead and kCreate; the handle stays on the calling reactor.
  virtual io::Task<absl::StatusOr<std::unique_ptr<FileHandle>>> OpenFile(std::string path,
                                                                         OpenMode mode) = 0;

  // ---- The namespace.
  // Creates `path` and missing parents, durably (each new folder fsynced in its parent);
  // `parents_from` must exist already (NotFound otherwise).
  virtual io::Task<absl::Status> MakeDirs(std::string path, std::string parents_from) = 0;
  virtual io::Task<absl::StatusOr<std::vector<DirEntry>>> ReadDir(std::string path) = 0;
  virtual io::Task<absl::StatusOr<bool>> Exists(std::string path) = 0;
  virtual io::Task<absl::Status> Rename(std::string from, std::string to) = 0;
  // Makes the folder `dir` in the staging area (tmp/) and links each pair's first path to its
  // second (link(2): no data is copied): a completed upload's parts, in one step.
  virtual io::Task<absl::Status> LinkInto(std::string dir, std::vector<LinkPair> links) = 0;
  virtual io::Task<absl::Status> Unlink(std::string path) = 0;
  // An empty folder; FailedPrecondition when it is not.
  virtual io::Task<absl::Status> RemoveDir(std::string path) = 0;
  // Renames a file or tree into the drive's trash, which its owner purges (missing is fine).
  virtual io::Task<absl::Status> Trash(std::string path) = 0;
  // fsync of a folder ("" for the drive's own).
  virtual io::Task<absl::Status> SyncDir(std::string path) = 0;
  virtual io::Task<absl::StatusOr<DriveUsage>> Usage() = 0;

  // ---- Steps of the engine's operations, whole.
  virtual io::Task<absl::Status> CommitObject(CommitStep step) = 0;
  // Removes an object's metadata file and data folders (into the trash) and prunes the folders
  // it leaves empty up to the bucket. A missing object is fine.
  virtual io::Task<absl::Status> RemoveObject(std::string bucket, std::string key) = 0;
  virtual io::Task<absl::StatusOr<std::vector<WalkItem>>> Walk(WalkRequest request) = 0;
  // Whether the shard file holds every block intact (false: missing, short or damaged; an
  // error only when the drive cannot answer).
  virtual io::Task<absl::StatusOr<bool>> VerifyFile(VerifyRequest request) = 0;
};

}  // namespace openlake::store

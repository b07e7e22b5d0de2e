// What a node serves the cluster (openlake/store/cluster.h): its drive folders through the drive
// RPC, and its table of the cluster's object locks (dist_locks.h). The folders are served on their own, apart from this node's engine, so that the peers'
// engines can read and format them while this one is still starting (or waiting for them).
#include <sys/stat.h>

#include "store/dist_locks.h"
#include "store/drive_service.h"
#include "store/local_drive.h"

#include "openlake/store/cluster.h"

namespace openlake::store {

struct ClusterServices::Impl {
  ClusterServiceOptions o;
  std::vector<std::unique_ptr<FileBackend>> fs;
  std::vector<std::unique_ptr<LocalDrive>> drives;
  std::unique_ptr<DriveService> drive_service;
  std::unique_ptr<LockService> lock_service;

  // Drive `i`, once its folder exists (a disk mounted late is served from then on).
  DriveApi* Drive(uint32_t i) {
    if (i >= drives.size()) return nullptr;
    if (drives[i] == nullptr) {
      struct stat st;
      if (stat(o.drives[i].c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return nullptr;
      fs[i] = NewLocalFileBackend(o.drives[i]);
      // The trash is emptied by this node's engine, which purges its drives every 30 s.
      drives[i] = std::make_unique<LocalDrive>(fs[i].get(), nullptr);
    }
    return drives[i].get();
  }
};

ClusterServices::ClusterServices(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterServices::~ClusterServices() = default;

std::unique_ptr<ClusterServices> ClusterServices::Attach(net::RpcServer& server,
                                                         ClusterServiceOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->o = std::move(options);
  impl->fs.resize(impl->o.drives.size());
  impl->drives.resize(impl->o.drives.size());
  DriveServiceOptions d;
  Impl* raw = impl.get();
  d.drive = [raw](uint32_t i) { return raw->Drive(i); };
  d.drive_count = static_cast<uint32_t>(impl->o.drives.size());
  d.paths = impl->o.drives;
  d.node_id = impl->o.node_id;
  d.layout_digest = impl->o.layout_digest;
  impl->drive_service = DriveService::Attach(server, std::move(d));
  impl->lock_service = LockService::Attach(server, LockServiceOptions());
  return std::unique_ptr<ClusterServices>(new ClusterServices(std::move(impl)));
}

uint64_t ClusterServices::requests() const { return impl_->drive_service->requests(); }

}  // namespace openlake::store

// UCX transport, for a build without UCX: every Create answers Unimplemented, so nothing else
// can be reached (see openlake/net/ucx.h).
#include <cstdlib>
#include <utility>

#include "openlake/net/ucx.h"

namespace openlake::net {

namespace {
absl::Status NotBuilt() {
  return absl::UnimplementedError("this OpenLake was built without UCX (meson -Ducx=enabled)");
}
}  // namespace

bool UcxBuilt() { return false; }

struct UcxContext::Impl {};
struct UcxRegion::Impl {
  std::string packed;
};
struct UcxWorker::Impl {
  std::string address;
};
struct UcxEndpoint::Impl {};
struct UcxRemoteKey::Impl {};

UcxContext::UcxContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxContext::~UcxContext() = default;
absl::StatusOr<std::unique_ptr<UcxContext>> UcxContext::Create(const UcxOptions&) {
  return NotBuilt();
}
std::string UcxContext::Describe() const { return ""; }
bool UcxContext::Supports(UcxMemory) const { return false; }

UcxRegion::UcxRegion(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxRegion::~UcxRegion() = default;
absl::StatusOr<std::unique_ptr<UcxRegion>> UcxRegion::Map(UcxContext&, void*, size_t,
                                                          UcxMemory) {
  return NotBuilt();
}
uint64_t UcxRegion::address() const { return 0; }
size_t UcxRegion::length() const { return 0; }
UcxMemory UcxRegion::memory() const { return UcxMemory::kHost; }
const std::string& UcxRegion::packed_key() const { return impl_->packed; }

UcxWorker::UcxWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxWorker::~UcxWorker() = default;
absl::StatusOr<std::unique_ptr<UcxWorker>> UcxWorker::Create(UcxContext&) { return NotBuilt(); }
const std::string& UcxWorker::address() const { return impl_->address; }
unsigned UcxWorker::Progress() { return 0; }
int UcxWorker::event_fd() const { return -1; }
void UcxWorker::Attach(io::Reactor&) {}
void UcxWorker::Kick() {}

UcxEndpoint::UcxEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxEndpoint::~UcxEndpoint() = default;
absl::StatusOr<std::unique_ptr<UcxEndpoint>> UcxEndpoint::Connect(UcxWorker&, std::string_view) {
  return NotBuilt();
}
absl::Status UcxEndpoint::health() const { return NotBuilt(); }
void UcxEndpoint::Abort(absl::Status) {}
bool UcxEndpoint::detects_peer_failure() const { return false; }
absl::StatusOr<std::unique_ptr<UcxRemoteKey>> UcxEndpoint::Unpack(std::string_view) {
  return NotBuilt();
}

UcxWorker& UcxEndpoint::worker() const { std::abort(); }

UcxRemoteKey::UcxRemoteKey(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxRemoteKey::~UcxRemoteKey() = default;

void GetMany(UcxEndpoint&, const UcxRemoteKey&, absl::Span<const UcxGet>, const UcxRegion*,
             UcxDone done) {
  done(NotBuilt());
}

}  // namespace openlake::net

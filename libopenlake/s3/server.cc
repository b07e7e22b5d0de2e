// The S3 server: credentials, the service and the HTTP server together (see
// openlake/s3/server.h).
#include "openlake/s3/server.h"

#include "http/server.h"
#include "s3/api/lifecycle_scan.h"
#include "s3/api/service.h"
#include "s3/auth/credentials.h"

#include "openlake/io/socket.h"

namespace openlake::s3 {

struct S3Server::Impl {
  std::unique_ptr<S3Service> service;
  std::unique_ptr<http::Server> http;
  std::unique_ptr<LifecycleScanner> lifecycle;
};

absl::StatusOr<std::unique_ptr<S3Server>> S3Server::Start(io::Runtime& rt, store::Store& store,
                                                          S3ServerOptions options) {
  absl::StatusOr<io::SocketAddress> addr = io::SocketAddress::Parse(options.address);
  if (!addr.ok()) return addr.status();
  absl::StatusOr<CredentialSet> creds =
      LoadOrCreateCredentials(options.credentials, options.data_dir);
  if (!creds.ok()) return creds.status();
  ServiceOptions so;
  so.region = options.region;
  so.credentials = *std::move(creds);
  so.route.domains = options.domains;
  so.reactors = rt.size();
  so.bucket_cache_ttl = options.bucket_cache_ttl;
  auto impl = std::make_unique<Impl>();
  impl->service = std::make_unique<S3Service>(store, std::move(so));
  LifecycleLimits limits;
  limits.keys_per_round = options.lifecycle_keys_per_round;
  limits.keys_per_second = options.lifecycle_keys_per_second;
  impl->lifecycle = std::make_unique<LifecycleScanner>(store, limits);
  http::ServerOptions ho;
  ho.idle_timeout = options.idle_timeout;
  ho.head_timeout = options.head_timeout;
  ho.max_connections = options.max_connections;
  ho.max_per_client = options.max_connections_per_client;
  S3Service* svc = impl->service.get();
  ho.error_body = [svc](int status, std::string_view why, std::string* type, std::string* headers) {
    return svc->ErrorBody(status, why, type, headers);
  };
  absl::StatusOr<std::unique_ptr<http::Server>> http = http::Server::Start(
      rt, *addr, std::move(ho), [svc](http::Exchange& ex) { return svc->Handle(ex); });
  if (!http.ok()) return http.status();
  impl->http = *std::move(http);
  return std::unique_ptr<S3Server>(new S3Server(std::move(impl)));
}

S3Server::S3Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

S3Server::~S3Server() { Stop(); }

uint16_t S3Server::port() const { return impl_->http->port(); }

std::string S3Server::address() const { return impl_->http->address().ToString(); }

const std::vector<Credential>& S3Server::credentials() const {
  return impl_->service->options().credentials.keys;
}

bool S3Server::generated_credentials() const {
  return impl_->service->options().credentials.generated;
}

const std::string& S3Server::credentials_file() const {
  return impl_->service->options().credentials.path;
}

void S3Server::WriteMetrics(PrometheusWriter& w) const {
  impl_->service->metrics().Write(w);
  const LifecycleTotals& t = impl_->lifecycle->totals();
  auto counter = [&w](const char* name, const char* help, const std::atomic<uint64_t>& v) {
    w.Counter(name, help, static_cast<double>(v.load(std::memory_order_relaxed)));
  };
  counter("openlake_s3_lifecycle_rounds_total", "Rounds the lifecycle scanner ran", t.rounds);
  counter("openlake_s3_lifecycle_passes_total",
          "Passes of the lifecycle scanner over every bucket with rules", t.passes);
  counter("openlake_s3_lifecycle_keys_scanned_total", "Keys the lifecycle scanner looked at",
          t.keys_scanned);
  counter("openlake_s3_lifecycle_expired_total",
          "Current versions the lifecycle rules expired (deleted, or a delete marker made)",
          t.expired);
  counter("openlake_s3_lifecycle_versions_removed_total",
          "Noncurrent versions and lone delete markers the lifecycle rules removed",
          t.versions_removed);
  counter("openlake_s3_lifecycle_uploads_aborted_total",
          "Incomplete multipart uploads the lifecycle rules aborted", t.uploads_aborted);
  counter("openlake_s3_lifecycle_errors_total",
          "Lifecycle actions or listings that failed (tried again on the next pass)", t.errors);
}

io::Task<absl::StatusOr<bool>> S3Server::RunLifecycleRound(absl::Time now) {
  const bool pass_done = co_await impl_->lifecycle->RunRound(now);
  co_return pass_done;
}

void S3Server::Stop() {
  if (impl_ && impl_->http) impl_->http->Stop();
}

}  // namespace openlake::s3

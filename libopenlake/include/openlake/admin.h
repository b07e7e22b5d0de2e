// File: openlake/admin.h
//
// The admin listener (docs/operations.md): Prometheus metrics at /metrics and the health checks
// /health/live and /health/ready, on a small runtime of its own (one unpinned reactor), so
// that collecting figures may block on the serving reactors without ever running on one.
//
//   AdminSources src;
//   src.metrics = [&](PrometheusWriter& w) { ... };          // called per scrape
//   src.ready = [&](std::string* why) { return pool_up; };  // false: 503 with `why`
//   OL_ASSIGN_OR_RETURN(auto admin, AdminServer::Start({"127.0.0.1:9464", token}, src));
//
// Every endpoint asks for `Authorization: Bearer <token>` when a token is set; openlaked
// requires one when the listener is not on loopback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "openlake/export.h"
#include "openlake/prometheus.h"

namespace openlake {

struct AdminOptions {
  std::string address = "127.0.0.1:9464";  // port 0 picks a free one
  std::string token;                        // empty: no authentication
};

struct AdminSources {
  std::function<void(PrometheusWriter&)> metrics;
  std::function<bool(std::string* why)> ready;
};

class OL_EXPORT AdminServer {
 public:
  static absl::StatusOr<std::unique_ptr<AdminServer>> Start(AdminOptions options,
                                                            AdminSources sources);
  ~AdminServer();  // Stop()
  std::string address() const;  // "127.0.0.1:9464", the port actually bound
  void Stop();                  // idempotent

 private:
  struct Impl;
  explicit AdminServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace openlake

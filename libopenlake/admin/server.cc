// The admin listener (see openlake/admin.h).
#include "http/server.h"

#include <openssl/crypto.h>

#include "http/framing.h"

#include "openlake/admin.h"
#include "openlake/io/reactor.h"
#include "openlake/io/socket.h"

namespace openlake {

struct AdminServer::Impl {
  AdminOptions options;
  AdminSources sources;
  std::unique_ptr<io::Runtime> rt;
  std::unique_ptr<http::Server> http;

  bool Authorized(const http::Request& req) const {
    if (options.token.empty()) return true;
    const std::string want = "Bearer " + options.token;
    const std::string_view got = req.Value("authorization");
    return got.size() == want.size() && CRYPTO_memcmp(got.data(), want.data(), got.size()) == 0;
  }

  io::Task<void> Handle(http::Exchange& ex) {
    const http::Request& req = ex.request();
    std::string_view path, query;
    http::SplitTarget(req.target, &path, &query);
    ex.AddHeader("Content-Type", "text/plain; charset=utf-8");
    // A place from the reserve (the listener is full) serves only the probes: the server
    // chose it by path before this token check (reserve_serves below).
    if (!Authorized(req)) {
      ex.SetStatus(401);
      ex.AddHeader("WWW-Authenticate", "Bearer");
      (void)co_await ex.Respond("unauthorized: send Authorization: Bearer <admin_token>\n");
      co_return;
    }
    if (req.method != "GET" && req.method != "HEAD") {
      ex.SetStatus(405);
      ex.AddHeader("Allow", "GET, HEAD");
      (void)co_await ex.Respond("only GET and HEAD\n");
      co_return;
    }
    if (path == "/metrics") {
      PrometheusWriter w;
      if (sources.metrics) sources.metrics(w);
      ex.SetStatus(200);
      ex.AddHeader("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
      const std::string body = w.Finish();
      (void)co_await ex.Respond(body);
    } else if (path == "/health/live") {
      ex.SetStatus(200);
      (void)co_await ex.Respond("ok\n");
    } else if (path == "/health/ready") {
      std::string why;
      const bool ready = !sources.ready || sources.ready(&why);
      ex.SetStatus(ready ? 200 : 503);
      const std::string body = ready ? std::string("ready\n") : "not ready: " + why + "\n";
      (void)co_await ex.Respond(body);
    } else {
      ex.SetStatus(404);
      (void)co_await ex.Respond("not found: /metrics, /health/live, /health/ready\n");
    }
  }
};

absl::StatusOr<std::unique_ptr<AdminServer>> AdminServer::Start(AdminOptions options,
                                                                 AdminSources sources) {
  absl::StatusOr<io::SocketAddress> addr = io::SocketAddress::Parse(options.address);
  if (!addr.ok()) return addr.status();
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->sources = std::move(sources);
  io::RuntimeOptions ro;
  ro.cpus = {0};
  ro.pin = false;
  ro.sq_entries = 256;
  ro.thread_name = "openlake-admin";
  absl::StatusOr<std::unique_ptr<io::Runtime>> rt = io::Runtime::Create(ro);
  if (!rt.ok()) return rt.status();
  impl->rt = *std::move(rt);
  if (absl::Status st = impl->rt->Start(); !st.ok()) return st;
  http::ServerOptions ho;
  // Scrapes and probes are small and quick: a slow or idle client's place is taken back when
  // the listener is full (http::ServerOptions), and a reserve of places serves the probes alone.
  ho.max_connections = 128;
  ho.max_per_client = 64;
  ho.reserve = 32;
  ho.reserve_serves = [](const http::Request& req) {
    std::string_view path, query;
    http::SplitTarget(req.target, &path, &query);
    return path == "/health/live" || path == "/health/ready";
  };
  ho.read_size = 16 << 10;
  ho.idle_timeout = absl::Seconds(30);
  ho.head_timeout = absl::Seconds(10);
  ho.reserve_head_timeout = absl::Seconds(2);
  Impl* raw = impl.get();
  absl::StatusOr<std::unique_ptr<http::Server>> http = http::Server::Start(
      *impl->rt, *addr, std::move(ho), [raw](http::Exchange& ex) { return raw->Handle(ex); });
  if (!http.ok()) {
    impl->rt->Stop();
    return http.status();
  }
  impl->http = *std::move(http);
  return std::unique_ptr<AdminServer>(new AdminServer(std::move(impl)));
}

AdminServer::AdminServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AdminServer::~AdminServer() { Stop(); }

std::string AdminServer::address() const { return impl_->http->address().ToString(); }

void AdminServer::Stop() {
  if (!impl_ || !impl_->rt) return;
  if (impl_->http) impl_->http->Stop();
  impl_->rt->Stop();
  impl_->http.reset();
  impl_->rt.reset();
}

}  // namespace openlake

// A UCX peer for the transport's tests, in a process of its own so that a test can SIGSTOP and
// SIGKILL it: maps a region filled with ucx_pattern.h's bytes, prints one line
//   <worker address hex> <packed key hex> <region address> <region length>
// and then progresses its worker (woken by its event fd) until it is killed or stdin closes.
//   ucx_peer TLS DEVICES BYTES        ("-" for UCX's default TLS or devices)
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ucx_pattern.h"

#include "openlake/net/ucx.h"
#include "openlake/strings.h"

int main(int argc, char** argv) {
  using namespace openlake;
  if (argc != 4) {
    std::fprintf(stderr, "usage: ucx_peer TLS DEVICES BYTES\n");
    return 2;
  }
  net::UcxOptions options;
  if (std::string(argv[1]) != "-") options.tls = argv[1];
  if (std::string(argv[2]) != "-") options.net_devices = argv[2];
  const size_t bytes = std::strtoull(argv[3], nullptr, 10);
  std::vector<unsigned char> region(bytes);
  for (size_t i = 0; i < bytes; ++i) region[i] = test::UcxPattern(i);
  auto ctx = net::UcxContext::Create(options);
  if (!ctx.ok()) {
    std::fprintf(stderr, "%s\n", ctx.status().ToString().c_str());
    return 1;
  }
  auto mapped = net::UcxRegion::Map(**ctx, region.data(), region.size());
  auto worker = net::UcxWorker::Create(**ctx);
  if (!mapped.ok() || !worker.ok()) {
    std::fprintf(stderr, "%s %s\n", mapped.status().ToString().c_str(),
                 worker.status().ToString().c_str());
    return 1;
  }
  std::printf("%s %s %llu %zu\n", Hex((*worker)->address()).c_str(),
              Hex((*mapped)->packed_key()).c_str(),
              static_cast<unsigned long long>((*mapped)->address()), (*mapped)->length());
  std::fflush(stdout);
  pollfd fds[2] = {{(*worker)->event_fd(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
  for (;;) {
    (*worker)->Progress();
    if (poll(fds, 2, 1000) < 0) continue;
    if (fds[1].revents != 0) {
      char c;
      if (read(STDIN_FILENO, &c, 1) <= 0) return 0;
    }
  }
}

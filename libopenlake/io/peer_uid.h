// The user behind a loopback TCP connection. A Unix socket tells its peer's credentials
// (SO_PEERCRED); TCP does not, but on loopback the peer's socket lives in this host's (and
// network namespace's) kernel, which knows who owns it: one NETLINK_SOCK_DIAG query (what
// `ss -e` shows) for the socket whose local end is our peer's address and whose remote end is
// ours. Used to authenticate local clients without a shared secret (docs/security.md).
#pragma once

#include <sys/types.h>

#include "absl/status/statusor.h"

namespace openlake::io {

// The uid owning the other end of the connected loopback TCP socket `fd` (IPv4 or IPv6).
// NotFound when the kernel knows no such socket (the peer is in another network namespace, or
// already gone); Unavailable when sock_diag cannot be asked.
absl::StatusOr<uid_t> LoopbackPeerUid(int fd);

}  // namespace openlake::io

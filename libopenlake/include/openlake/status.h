// File: openlake/status.h
//
// libopenlake reports every failure as an absl::Status (or absl::StatusOr<T>) with a canonical
// code and a message that says what failed and where. Nothing throws across the public API.
//
// Two propagation macros keep call sites short:
//
//   absl::StatusOr<Slab> OpenSlab(const Options& opts) {
//     OL_ASSIGN_OR_RETURN(int fd, CreateMemfd(opts.name));
//     OL_RETURN_IF_ERROR(Resize(fd, opts.bytes));
//     return Slab(fd);
//   }
//
// Codes used across the library: NotFound, AlreadyExists, InvalidArgument, ResourceExhausted
// (pool full), Unavailable (retryable: peer gone, connection refused), DataLoss (checksum
// mismatch), FailedPrecondition (wrong state, e.g. expired reservation), DeadlineExceeded,
// PermissionDenied (authentication), Internal.
#pragma once

#include <cerrno>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include "openlake/export.h"

namespace openlake {

// Turns a negative errno (liburing's cqe->res convention) or a positive errno into a Status
// whose message is "<what>: <strerror>".
OL_EXPORT absl::Status ErrnoStatus(int err, std::string_view what);

namespace internal {
inline absl::Status AsStatus(const absl::Status& s) { return s; }
inline absl::Status AsStatus(absl::Status&& s) { return std::move(s); }
template <typename T>
absl::Status AsStatus(const absl::StatusOr<T>& s) {
  return s.status();
}
}  // namespace internal

}  // namespace openlake

#define OL_STATUS_CONCAT_INNER_(a, b) a##b
#define OL_STATUS_CONCAT_(a, b) OL_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (a Status or StatusOr) is not OK.
#define OL_RETURN_IF_ERROR(expr)                                                  \
  do {                                                                            \
    if (auto ol_status_ = ::openlake::internal::AsStatus(expr); !ol_status_.ok()) \
      return ol_status_;                                                          \
  } while (0)

// Evaluates `rexpr` (a StatusOr<T>); on error returns its status, else assigns the value to
// `lhs`, which may be a declaration ("auto x") or an existing variable.
#define OL_ASSIGN_OR_RETURN(lhs, rexpr) \
  OL_ASSIGN_OR_RETURN_IMPL_(OL_STATUS_CONCAT_(ol_statusor_, __LINE__), lhs, rexpr)

#define OL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                              \
  if (!tmp.ok()) return std::move(tmp).status();   \
  lhs = std::move(tmp).value()

// The same two macros for coroutines (io::Task<absl::Status> or io::Task<absl::StatusOr<T>>),
// which must co_return instead of return.
// `expr` is usually a co_await: it is evaluated in a declaration of its own, never in an if's
// head (g++ 12 miscompiles co_await in conditions; docs/architecture.md).
#define OL_CO_RETURN_IF_ERROR(expr)                         \
  do {                                                      \
    auto ol_status_ = ::openlake::internal::AsStatus(expr); \
    if (!ol_status_.ok()) co_return ol_status_;             \
  } while (0)

#define OL_CO_ASSIGN_OR_RETURN(lhs, rexpr) \
  OL_CO_ASSIGN_OR_RETURN_IMPL_(OL_STATUS_CONCAT_(ol_statusor_, __LINE__), lhs, rexpr)

#define OL_CO_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                 \
  if (!tmp.ok()) co_return std::move(tmp).status();   \
  lhs = std::move(tmp).value()

// What the module's two sources share: the S3 transfer's binding (s3_transfer.cc), and the one
// place a Status becomes a Python exception (_openlake.cc).
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace openlake_py {

// Raises the exception of `st` (not OK): NotFoundError, UnavailableError, ... with .code (the
// status code's name) and .s3_code (an S3 server's error code, or ""). Needs the GIL.
[[noreturn]] void Raise(const absl::Status& st);

template <typename T>
T Unwrap(absl::StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return *std::move(v);
}

// Adds S3Transfer to the module.
void BindS3Transfer(pybind11::module_& m);

}  // namespace openlake_py

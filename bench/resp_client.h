// File: bench/resp_client.h
//
// A minimal Redis (RESP2) client for the KV bench's baseline: one blocking TCP connection,
// pipelined SET and GET batches, values sent from and received into the caller's buffers
// without intermediate copies (writev for SET; GET bulk replies are read straight into the
// destination). It implements what the bench needs and nothing else: no hiredis.
//
//   OL_ASSIGN_OR_RETURN(bench::RespClient redis, bench::RespClient::Connect(port, timeout));
//   OL_RETURN_IF_ERROR(redis.SetBatch(keys, values, block_bytes));  // 64 SETs, then 64 +OK
//   OL_RETURN_IF_ERROR(redis.GetBatch(keys, outs, block_bytes));    // 64 GETs, then 64 bulks
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace openlake::bench {

class RespClient {
 public:
  // Connects to 127.0.0.1:port. Every later send or receive gives up after `io_timeout`.
  static absl::StatusOr<RespClient> Connect(uint16_t port, absl::Duration io_timeout);
  RespClient() = default;
  RespClient(RespClient&& o) noexcept;
  RespClient& operator=(RespClient&& o) noexcept;
  RespClient(const RespClient&) = delete;
  RespClient& operator=(const RespClient&) = delete;
  ~RespClient();

  // Sends one command and returns its reply line without the type byte, for simple and error
  // replies ("PONG", "OK"). An error reply ('-') is an Internal status with its text.
  absl::StatusOr<std::string> Simple(const std::vector<std::string>& args);

  // Pipelines SET keys[i] values[i] (each `len` bytes) for every i, then reads every reply.
  absl::Status SetBatch(absl::Span<const std::string> keys, absl::Span<const void* const> values,
                        size_t len);
  // Pipelines GET keys[i] for every i, then reads each bulk reply into outs[i], which must be
  // exactly `len` bytes long (a nil or a different length is an error).
  absl::Status GetBatch(absl::Span<const std::string> keys, absl::Span<void* const> outs,
                        size_t len);

 private:
  // Writes every byte of `iov` (advancing over short writes).
  absl::Status WriteAll(std::vector<iovec>& iov);
  // Reads one CRLF-terminated line (without CRLF).
  absl::StatusOr<std::string> ReadLine();
  // Reads exactly `n` bytes into `dst` (buffered bytes first, then straight from the socket).
  absl::Status ReadExact(void* dst, size_t n);
  absl::Status Fill();

  int fd_ = -1;
  std::vector<char> in_;  // receive buffer
  size_t in_pos_ = 0;
  size_t in_len_ = 0;
  std::vector<std::string> headers_;  // per-command headers, reused between batches
};

}  // namespace openlake::bench

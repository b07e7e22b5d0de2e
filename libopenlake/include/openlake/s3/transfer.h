// File: openlake/s3/transfer.h
//
// Many objects, or one large one, moved at once over several S3 connections: what a
// checkpoint's writer and reader need (docs/checkpoints.md). Each of `connections` worker
// threads keeps its own keep-alive s3::Client; an object larger than `part_size` goes up as a
// multipart upload whose parts travel in parallel, and a large read is split into ranged GETs
// that land in place. Bytes are never copied between the caller's memory and the socket: a PUT
// sends straight from the caller's buffer, a GET receives straight into it (only what arrived
// with the response head passes through the connection's buffer).
//
//   s3::TransferOptions o;
//   o.client.endpoint = "127.0.0.1:9000";
//   o.client.credential = {"AKIA...", "secret"};
//   OL_ASSIGN_OR_RETURN(auto t, s3::Transfer::Create(o));
//   std::vector<s3::PutItem> items = {{"ckpt/0.distcp", bytes0}, {"ckpt/1.distcp", bytes1}};
//   for (auto& r : t->PutMany("bucket", items)) OL_RETURN_IF_ERROR(r.status());
//   std::vector<s3::GetItem> reads = {{"ckpt/0.distcp", 4096, absl::MakeSpan(buf)}};
//   for (auto& s : t->GetMany("bucket", reads)) OL_RETURN_IF_ERROR(s);
//
// Failures: a piece that fails with a transport error, a 5xx or 503 is tried again (`retries`
// times, with a growing pause) on a fresh connection; other errors (403, 404, ...) are final.
// A multipart upload that cannot complete is aborted, so nothing of it stays visible or
// stored. The methods block the calling thread; one batch at a time per Transfer (calls from
// several threads are serialised). A Transfer belongs to the process that made it: in a child
// forked from it (a DataLoader worker) its batches fail with FailedPrecondition, and destroying
// it there leaves its memory alone (its threads and locks are the parent's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "openlake/export.h"
#include "openlake/s3/client.h"

namespace openlake::s3 {

struct TransferOptions {
  ClientOptions client;
  // Worker threads, each with its own connection: how many requests are in flight at once.
  int connections = 8;
  // Objects above this size are uploaded in parts of this size; reads are split into ranges of
  // it. S3 wants parts of at least 5 MiB (but the last), and at most 10,000 of them.
  size_t part_size = 16 << 20;
  // Further tries of a piece that failed with a transport error or a 5xx.
  int retries = 3;
  // Called as pieces complete, with the bytes done and the bytes of the whole batch. From a
  // worker thread, one call at a time. May be empty.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct PutItem {
  std::string key;
  std::string_view data;  // must stay valid until PutMany returns
};

struct GetItem {
  std::string key;
  uint64_t offset = 0;     // where in the object the read starts
  absl::Span<char> out;    // exactly out.size() bytes are read: the object must hold them
  // When set, the CRC-64 (openlake::Crc64) the bytes read must have: checked on a worker as
  // the item's last piece lands, while others still arrive; DataLoss when they differ.
  std::optional<uint64_t> crc64;
};

class OL_EXPORT Transfer {
 public:
  // Fails with InvalidArgument for bad options, Unavailable when the endpoint cannot be
  // reached (one connection is made before returning, the others on first use).
  static absl::StatusOr<std::unique_ptr<Transfer>> Create(TransferOptions options);
  ~Transfer();  // joins the workers (a batch under way finishes first)

  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  // Uploads every item into `bucket`, all at once; one answer per item, in order: its ETag or
  // its error.
  std::vector<absl::StatusOr<std::string>> PutMany(std::string_view bucket,
                                                   const std::vector<PutItem>& items);
  // Reads every item, all at once; one status per item, in order. An object shorter than an
  // item's range fails it with OutOfRange.
  std::vector<absl::Status> GetMany(std::string_view bucket, const std::vector<GetItem>& items);

  absl::StatusOr<std::string> Put(std::string_view bucket, std::string_view key,
                                  std::string_view data);
  absl::Status Get(std::string_view bucket, std::string_view key, uint64_t offset,
                   absl::Span<char> out);

  // A connection of its own for other requests (listings, heads, deletes) from this thread;
  // made on first use, reused after.
  absl::StatusOr<Client*> control();

  const TransferOptions& options() const;

  struct Counters {
    uint64_t requests = 0;  // PUT, part, GET and multipart requests sent, tries included
    uint64_t retries = 0;
    uint64_t bytes_sent = 0;
    uint64_t bytes_received = 0;
  };
  Counters counters() const;

 private:
  class Impl;
  explicit Transfer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace openlake::s3

// Parallel transfers (openlake/s3/transfer.h): a pool of worker threads, each with its own
// s3::Client, fed from one queue. A multipart upload is a chain of jobs (start, parts,
// complete or abort), each link put at the head of the queue by the one before: every
// connection carries data from a batch's first request to its last, and few uploads are open.
#include "openlake/s3/transfer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

#include "openlake/checksum.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr size_t kMinPart = 5 << 20;  // S3's smallest part but the last
constexpr size_t kMaxParts = 10000;

const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

bool Retryable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsInternal(s) ||
         absl::IsUnknown(s);
}

// The part size for an object of `size` bytes: the configured one, raised so that no object
// needs more than S3's 10,000 parts.
size_t PartSizeFor(uint64_t size, size_t part) {
  const uint64_t least = (size + kMaxParts - 1) / kMaxParts;
  if (least <= part) return part;
  const uint64_t mib = 1 << 20;
  return static_cast<size_t>((least + mib - 1) / mib * mib);
}

// DataLoss into `*status` when `item` asks for a CRC-64 its bytes do not have.
void CheckCrc(const GetItem& item, absl::Status* status) {
  if (!item.crc64) return;
  const uint64_t got = Crc64(item.out.data(), item.out.size());
  if (got == *item.crc64) return;
  *status = absl::DataLossError(StrCat(item.key, " at ", item.offset, ": ", item.out.size(),
                                       " bytes read with CRC-64 ", absl::Hex(got), ", expected ",
                                       absl::Hex(*item.crc64)));
}

}  // namespace

class Transfer::Impl {
 public:
  explicit Impl(TransferOptions options) : o(std::move(options)) {}

  // Whether this is the process that made the transfer: a child forked from it (a DataLoader
  // worker) has a copy of it without its threads.
  bool Inherited() const { return getpid() != owner; }

  ~Impl() {
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

  void Start() {
    for (int i = 0; i < o.connections; ++i) threads_.emplace_back([this] { Work(); });
  }

  // A worker's connection, made on first use and dropped after a failure.
  struct Worker {
    std::unique_ptr<Client> client;
  };
  using Job = std::function<void(Worker&)>;

  // Runs the jobs on the workers and returns when all are done, jobs they added included.
  void RunAll(std::vector<Job> jobs) {
    absl::MutexLock l(&mu_);
    for (Job& j : jobs) queue_.push_back(Counted(std::move(j)));
    mu_.Await(absl::Condition(+[](int* pending) { return *pending == 0; }, &pending_));
  }

  // From a job of the batch that RunAll runs: `jobs` go ahead of everything queued, in their
  // order, and RunAll waits for them too. What a job started is finished first, so a batch
  // keeps few things half done.
  void RunNext(std::vector<Job> jobs) {
    absl::MutexLock l(&mu_);
    for (size_t i = jobs.size(); i-- > 0;) queue_.push_front(Counted(std::move(jobs[i])));
  }

  // `f(client)` on the worker's connection, tried again on a fresh one after a transport
  // error or a 5xx.
  template <typename F>
  auto WithRetries(Worker& w, F&& f) -> decltype(f(std::declval<Client&>())) {
    decltype(f(std::declval<Client&>())) r = absl::UnknownError("not tried");
    for (int attempt = 0;; ++attempt) {
      if (w.client == nullptr) {
        absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o.client);
        if (c.ok()) w.client = *std::move(c);
        else r = c.status();
      }
      if (w.client != nullptr) {
        requests.fetch_add(1, std::memory_order_relaxed);
        r = f(*w.client);
        if (r.ok() || !Retryable(StatusOf(r))) return r;
        w.client.reset();
      }
      if (attempt >= o.retries) return r;
      retries.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(attempt, 5)));
    }
  }

  void Progress(uint64_t bytes) {
    if (!o.progress) return;
    absl::MutexLock l(&progress_mu_);
    done_ += bytes;
    o.progress(done_, total_);
  }
  void StartBatch(uint64_t total) {
    absl::MutexLock l(&progress_mu_);
    done_ = 0;
    total_ = total;
  }

  TransferOptions o;
  const pid_t owner = getpid();
  absl::Mutex batch_mu;  // one batch at a time
  std::unique_ptr<Client> control;
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> retries{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> bytes_received{0};

 private:
  Job Counted(Job j) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++pending_;
    return [this, job = std::move(j)](Worker& w) {
      job(w);
      absl::MutexLock l(&mu_);
      --pending_;
    };
  }

  void Work() {
    Worker w;
    while (true) {
      Job job;
      {
        absl::MutexLock l(&mu_);
        mu_.Await(absl::Condition(
            +[](Impl* self) { return self->stop_ || !self->queue_.empty(); }, this));
        if (queue_.empty()) return;  // stopping, nothing left
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job(w);
    }
  }

  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // jobs of the batch queued or running
  std::vector<std::thread> threads_;
  absl::Mutex progress_mu_;
  uint64_t done_ ABSL_GUARDED_BY(progress_mu_) = 0;
  uint64_t total_ ABSL_GUARDED_BY(progress_mu_) = 0;
};

Transfer::Transfer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Transfer::~Transfer() {
  // In a forked child the workers do not exist (joining them would hang) and the parent's
  // threads may have held its locks at the fork: the copy is left as it is.
  if (impl_ != nullptr && impl_->Inherited()) (void)impl_.release();
}

namespace {

absl::Status InheritedError() {
  return absl::FailedPreconditionError(
      "this S3 transfer was made in another process (before a fork): make one in this process");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transfer>> Transfer::Create(TransferOptions options) {
  if (options.connections < 1 || options.connections > 256) {
    return absl::InvalidArgumentError(
        StrCat("transfer: connections must be 1..256, not ", options.connections));
  }
  if (options.part_size < kMinPart) {
    return absl::InvalidArgumentError(
        StrCat("transfer: part_size must be at least 5 MiB (S3's smallest part), not ",
               options.part_size));
  }
  if (options.retries < 0) return absl::InvalidArgumentError("transfer: retries below 0");
  auto impl = std::make_unique<Impl>(std::move(options));
  // One connection now, so that a wrong endpoint fails here.
  OL_ASSIGN_OR_RETURN(impl->control, Client::Connect(impl->o.client));
  impl->Start();
  return std::unique_ptr<Transfer>(new Transfer(std::move(impl)));
}

const TransferOptions& Transfer::options() const { return impl_->o; }

absl::StatusOr<Client*> Transfer::control() {
  if (impl_->Inherited()) return InheritedError();  // its connection is the parent's
  if (impl_->control == nullptr) {
    OL_ASSIGN_OR_RETURN(impl_->control, Client::Connect(impl_->o.client));
  }
  return impl_->control.get();
}

Transfer::Counters Transfer::counters() const {
  Counters c;
  c.requests = impl_->requests.load(std::memory_order_relaxed);
  c.retries = impl_->retries.load(std::memory_order_relaxed);
  c.bytes_sent = impl_->bytes_sent.load(std::memory_order_relaxed);
  c.bytes_received = impl_->bytes_received.load(std::memory_order_relaxed);
  return c;
}

std::vector<absl::StatusOr<std::string>> Transfer::PutMany(std::string_view bucket,
                                                           const std::vector<PutItem>& items) {
  Impl& im = *impl_;
  if (im.Inherited()) return {items.size(), absl::StatusOr<std::string>(InheritedError())};
  absl::MutexLock batch(&im.batch_mu);
  const std::string b(bucket);
  const size_t n = items.size();
  std::vector<absl::StatusOr<std::string>> out(n, absl::UnknownError("not sent"));
  uint64_t total = 0;
  for (const PutItem& it : items) total += it.data.size();
  im.StartBatch(total);

  // Small objects go whole. A large one is a chain of jobs: its start, then its parts, then
  // its completion (or abort), each put ahead of the queue by the one before (RunNext). So
  // the parts of an upload follow its start at once, and an upload completes as soon as its
  // last part is in: the connections carry data from the first request to the last, and few
  // uploads are open at any time.
  struct Upload {
    size_t item = 0;
    size_t part_size = 0;
    std::string id;
    absl::Status status;          // the first part that failed
    std::vector<PartEtag> parts;
    size_t left = 0;              // parts not yet answered
  };
  size_t large = 0;
  for (const PutItem& it : items) large += it.data.size() > im.o.part_size ? 1 : 0;
  std::vector<Upload> uploads(large);  // never resized: jobs hold pointers into it
  absl::Mutex upload_mu;               // guards each upload's status and left

  // The last job of an upload: complete it with every part in, else abort it.
  auto finish = [&im, &b, &items, &out](Upload* u) -> Impl::Job {
    return [&im, &b, &items, &out, u](Impl::Worker& w) {
      const std::string& key = items[u->item].key;
      if (!u->status.ok()) {
        (void)im.WithRetries(w, [&](Client& c) { return c.AbortMultipartUpload(b, key, u->id); });
        out[u->item] = u->status;
        return;
      }
      bool sent_once = false;
      absl::StatusOr<std::string> etag = im.WithRetries(w, [&](Client& c) {
        absl::StatusOr<std::string> r = c.CompleteMultipartUpload(b, key, u->id, u->parts);
        // A completion whose answer was lost, then tried again, finds its upload gone: the
        // object is there if it carries this upload's part count.
        if (sent_once && absl::IsNotFound(r.status()) && ErrorCodeOf(r.status()) == "NoSuchUpload") {
          absl::StatusOr<ObjectHead> h = c.HeadObject(b, key);
          const std::string suffix = StrCat("-", u->parts.size());
          if (h.ok() && h->size == items[u->item].data.size() && h->etag.size() > suffix.size() &&
              h->etag.compare(h->etag.size() - suffix.size(), suffix.size(), suffix) == 0) {
            return absl::StatusOr<std::string>(h->etag);
          }
        }
        sent_once = true;
        return r;
      });
      if (!etag.ok()) {
        (void)im.WithRetries(w, [&](Client& c) { return c.AbortMultipartUpload(b, key, u->id); });
      }
      out[u->item] = std::move(etag);
    };
  };

  // One part; the upload's last part to answer queues its finish.
  auto part = [&im, &b, &items, &upload_mu, finish](Upload* u, size_t p) -> Impl::Job {
    return [&im, &b, &items, &upload_mu, finish, u, p](Impl::Worker& w) {
      const std::string_view data = items[u->item].data;
      const std::string_view piece = data.substr(p * u->part_size, u->part_size);
      const int number = static_cast<int>(p + 1);
      absl::StatusOr<std::string> etag = im.WithRetries(w, [&](Client& c) {
        return c.UploadPart(b, items[u->item].key, u->id, number, piece);
      });
      if (etag.ok()) {
        u->parts[p] = {number, *std::move(etag)};
        im.bytes_sent.fetch_add(piece.size(), std::memory_order_relaxed);
        im.Progress(piece.size());
      }
      bool last = false;
      {
        absl::MutexLock l(&upload_mu);
        if (!etag.ok() && u->status.ok()) u->status = etag.status();
        last = --u->left == 0;
      }
      if (last) im.RunNext({finish(u)});
    };
  };

  std::vector<Impl::Job> jobs;
  size_t next_upload = 0;
  for (size_t i = 0; i < n; ++i) {
    if (items[i].data.size() <= im.o.part_size) {
      jobs.push_back([&im, &b, &items, &out, i](Impl::Worker& w) {
        const PutItem& it = items[i];
        out[i] = im.WithRetries(w, [&](Client& c) { return c.PutObject(b, it.key, it.data); });
        if (out[i].ok()) {
          im.bytes_sent.fetch_add(it.data.size(), std::memory_order_relaxed);
          im.Progress(it.data.size());
        }
      });
      continue;
    }
    Upload* u = &uploads[next_upload++];
    u->item = i;
    u->part_size = PartSizeFor(items[i].data.size(), im.o.part_size);
    jobs.push_back([&im, &b, &items, &out, part, u](Impl::Worker& w) {
      absl::StatusOr<std::string> id = im.WithRetries(
          w, [&](Client& c) { return c.CreateMultipartUpload(b, items[u->item].key); });
      if (!id.ok()) {
        out[u->item] = id.status();
        return;
      }
      u->id = *std::move(id);
      const size_t size = items[u->item].data.size();
      const size_t count = (size + u->part_size - 1) / u->part_size;
      u->parts.resize(count);
      u->left = count;  // no part runs before RunNext below
      std::vector<Impl::Job> parts;
      parts.reserve(count);
      for (size_t p = 0; p < count; ++p) parts.push_back(part(u, p));
      im.RunNext(std::move(parts));
    });
  }
  im.RunAll(std::move(jobs));
  return out;
}

std::vector<absl::Status> Transfer::GetMany(std::string_view bucket,
                                            const std::vector<GetItem>& items) {
  Impl& im = *impl_;
  if (im.Inherited()) return std::vector<absl::Status>(items.size(), InheritedError());
  absl::MutexLock batch(&im.batch_mu);
  const std::string b(bucket);
  std::vector<absl::Status> out(items.size());
  uint64_t total = 0;
  for (const GetItem& it : items) total += it.out.size();
  im.StartBatch(total);
  absl::Mutex status_mu;
  // Per item, the pieces not yet landed: the worker that lands the last checks the CRC-64.
  std::unique_ptr<std::atomic<size_t>[]> left(new std::atomic<size_t>[items.size()]);
  std::vector<Impl::Job> jobs;
  for (size_t i = 0; i < items.size(); ++i) {
    const size_t len = items[i].out.size();
    left[i].store((len + im.o.part_size - 1) / im.o.part_size, std::memory_order_relaxed);
    if (len == 0) CheckCrc(items[i], &out[i]);
    for (size_t at = 0; at < len; at += im.o.part_size) {
      jobs.push_back([&im, &b, &items, &out, &status_mu, &left, i, at](Impl::Worker& w) {
        const GetItem& it = items[i];
        const absl::Span<char> piece = it.out.subspan(at, im.o.part_size);
        absl::StatusOr<size_t> got = im.WithRetries(
            w, [&](Client& c) { return c.GetObjectRange(b, it.key, it.offset + at, piece); });
        absl::Status s = got.status();
        if (got.ok() && *got < piece.size()) {
          s = absl::OutOfRangeError(StrCat(it.key, " ends before byte ",
                                           it.offset + at + piece.size(), " of the read"));
        }
        if (!s.ok()) {
          absl::MutexLock l(&status_mu);
          if (out[i].ok()) out[i] = s;
          return;
        }
        im.bytes_received.fetch_add(piece.size(), std::memory_order_relaxed);
        if (left[i].fetch_sub(1, std::memory_order_acq_rel) == 1) {
          // Every piece landed well (a failed one never counts down): no other job writes
          // out[i] now.
          CheckCrc(it, &out[i]);
        }
        im.Progress(piece.size());
      });
    }
  }
  im.RunAll(std::move(jobs));
  return out;
}

absl::StatusOr<std::string> Transfer::Put(std::string_view bucket, std::string_view key,
                                          std::string_view data) {
  std::vector<absl::StatusOr<std::string>> r = PutMany(bucket, {PutItem{std::string(key), data}});
  return std::move(r[0]);
}

absl::Status Transfer::Get(std::string_view bucket, std::string_view key, uint64_t offset,
                           absl::Span<char> out) {
  std::vector<absl::Status> r = GetMany(bucket, {GetItem{std::string(key), offset, out}});
  return r[0];
}

}  // namespace openlake::s3

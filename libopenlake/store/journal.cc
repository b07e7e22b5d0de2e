// A drive's commit journal (journal.h).
#include "store/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"

#include "store/engine.h"
#include "store/meta.h"
#include "store/names.h"

#include "openlake/io/file.h"
#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

// A file grows in steps of this much (zeros written ahead), so that a batch's fdatasync has no
// size change to commit in the file system's own journal, as fio's preallocated file has none.
constexpr uint64_t kGrowBytes = 1u << 20;

std::string JournalPath(int i) { return StrCat(kJournalDir, "/", i); }

std::string HeaderRecord(uint64_t first_seq) {
  pb::JournalEntry h;
  h.set_seq(first_seq);
  std::string out = EncodeRecord(RecordType::kJournalHeader, h);
  out.resize(DriveJournal::kHeaderBytes, '\0');
  return out;
}

// What a file holds: its entries from the header on, while each record checks out and the
// sequence numbers rise (stale entries of the file's earlier rounds are all older than its
// header's first). `max_seq` grows to the highest number seen.
std::vector<pb::JournalEntry> ParseFile(std::string_view image, uint64_t* max_seq) {
  std::vector<pb::JournalEntry> out;
  if (image.size() < DriveJournal::kHeaderBytes) return out;
  const size_t hs = RecordSizeAt(image);
  pb::JournalEntry header;
  if (hs == 0 || hs > DriveJournal::kHeaderBytes ||
      !DecodeRecord(RecordType::kJournalHeader, image.substr(0, hs), &header).ok()) {
    return out;
  }
  const uint64_t first = header.seq();
  *max_seq = std::max(*max_seq, first);
  uint64_t last = 0;
  size_t off = DriveJournal::kHeaderBytes;
  while (off < image.size()) {
    const std::string_view rest = image.substr(off);
    const size_t n = RecordSizeAt(rest);
    if (n == 0 || n > rest.size()) break;
    pb::JournalEntry e;
    if (!DecodeRecord(RecordType::kJournalEntry, rest.substr(0, n), &e).ok()) break;
    if (e.seq() < first || (last != 0 && e.seq() <= last)) break;
    last = e.seq();
    out.push_back(std::move(e));
    off += n;
  }
  *max_seq = std::max(*max_seq, last);
  return out;
}

absl::StatusOr<std::string> ReadNow(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::string();
    return ErrnoStatus(errno, StrCat("open ", path));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return ErrnoStatus(err, StrCat("read ", path));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// Writes a fresh header over a file's and returns the file's size.
absl::StatusOr<uint64_t> ResetNow(const std::string& path, uint64_t first_seq) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, StrCat("open ", path));
  const std::string header = HeaderRecord(first_seq);
  absl::Status s;
  struct stat st;
  if (pwrite(fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
    s = ErrnoStatus(errno, StrCat("write ", path));
  } else if (fdatasync(fd) != 0) {
    s = ErrnoStatus(errno, StrCat("fdatasync ", path));
  } else if (fstat(fd, &st) != 0) {
    s = ErrnoStatus(errno, StrCat("stat ", path));
  }
  close(fd);
  if (!s.ok()) return s;
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace

class DriveJournal::Enqueue {
 public:
  Enqueue(DriveJournal* j, pb::JournalEntry* e, Waiter* w) : j_(j), e_(e), w_(w) {}
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    io::Reactor* home = io::Reactor::Current();
    w_->h = h;
    w_->home = home;
    bool lead = false;
    {
      absl::MutexLock lock(&j_->mu_);
      e_->set_seq(j_->next_seq_++);
      j_->pending_ += EncodeRecord(RecordType::kJournalEntry, *e_);
      j_->waiters_.push_back(w_);
      if (!j_->leading_) j_->leading_ = lead = true;
    }
    // The leader starts on a later turn of this loop: what the other coroutines of this turn
    // log goes into its first batch.
    if (lead) {
      DriveJournal* j = j_;
      home->Defer([j] { io::Spawn(j->Lead()); });
    }
    return true;
  }
  void await_resume() const noexcept {}

 private:
  DriveJournal* j_;
  pb::JournalEntry* e_;
  Waiter* w_;
};

absl::StatusOr<std::unique_ptr<DriveJournal>> DriveJournal::Open(FileBackend* fs,
                                                                 const ApplyFn& apply,
                                                                 uint64_t file_bytes) {
  OL_RETURN_IF_ERROR(fs->MakeDirs(kJournalDir, ""));
  std::unique_ptr<DriveJournal> j(new DriveJournal(fs, file_bytes));
  std::vector<pb::JournalEntry> all;
  uint64_t max_seq = 0;
  for (int i = 0; i < 2; ++i) {
    OL_ASSIGN_OR_RETURN(std::string image, ReadNow(StrCat(fs->root(), "/", JournalPath(i))));
    std::vector<pb::JournalEntry> got = ParseFile(image, &max_seq);
    for (pb::JournalEntry& e : got) all.push_back(std::move(e));
  }
  std::sort(all.begin(), all.end(), [](const pb::JournalEntry& a, const pb::JournalEntry& b) {
    return a.seq() < b.seq();
  });
  // The last step of each object decides; a bucket's trash voids what came before it there.
  // The drops themselves are applied too, in their place (the drive's pack forgets the
  // bucket's records at them).
  absl::flat_hash_map<std::pair<std::string, std::string>, size_t> last;
  std::vector<size_t> order;
  for (size_t i = 0; i < all.size(); ++i) {
    const pb::JournalEntry& e = all[i];
    if (e.op() == pb::JournalEntry::DROP_BUCKET) {
      absl::erase_if(last, [&](const auto& kv) { return kv.first.first == e.bucket(); });
      order.push_back(i);
    } else {
      last[{e.bucket(), e.key()}] = i;
    }
  }
  order.reserve(order.size() + last.size());
  for (const auto& kv : last) order.push_back(kv.second);
  std::sort(order.begin(), order.end());
  for (size_t i : order) {
    const absl::Status s = apply(all[i]);
    if (!s.ok()) {
      return absl::Status(s.code(), StrCat("replaying the journal's step ", all[i].seq(), " (",
                                           all[i].bucket(), "/", all[i].key(), "): ",
                                           s.message()));
    }
  }
  if (!order.empty()) OL_RETURN_IF_ERROR(fs->SyncAll());
  // Both files start over: an entry older than the replay's must never be read again.
  const uint64_t next = max_seq + 1;
  {
    absl::MutexLock lock(&j->mu_);
    j->stats_.replayed = order.size();
    j->next_seq_ = j->pending_first_ = next;
  }
  for (int i = 0; i < 2; ++i) {
    OL_ASSIGN_OR_RETURN(uint64_t size, ResetNow(StrCat(fs->root(), "/", JournalPath(i)), next));
    j->files_[i].allocated = size;
  }
  // The files' names, when this made them.
  OL_RETURN_IF_ERROR(io::SyncParentDir(StrCat(fs->root(), "/", JournalPath(0))));
  return j;
}

DriveJournal::~DriveJournal() {
  if (reclaimer_.joinable()) reclaimer_.join();
}

void DriveJournal::Applying::Done() {
  if (journal_ == nullptr) return;
  absl::MutexLock lock(&journal_->mu_);
  --journal_->unapplied_[file_];
  journal_ = nullptr;
}

io::Task<absl::Status> DriveJournal::Log(pb::JournalEntry entry, Applying* applying) {
  Waiter w;
  Enqueue enqueue(this, &entry, &w);
  co_await enqueue;
  if (w.status.ok()) {
    applying->journal_ = this;
    applying->file_ = w.file;
  }
  co_return w.status;
}

io::Task<void> DriveJournal::Lead() {
  for (;;) {
    std::string batch;
    std::vector<Waiter*> waiters;
    uint64_t first = 0;
    {
      absl::MutexLock lock(&mu_);
      if (pending_.empty()) {
        leading_ = false;
        break;
      }
      batch.swap(pending_);
      waiters.swap(waiters_);
      first = pending_first_;
      pending_first_ = next_seq_;
    }
    int file = 0;
    const size_t n = waiters.size();
    const absl::Status s = co_await WriteBatch(std::move(batch), first, &file);
    {
      absl::MutexLock lock(&mu_);
      if (s.ok()) {
        unapplied_[file] += n;
        stats_.entries += n;
        ++stats_.batches;
      }
    }
    for (Waiter* w : waiters) {
      w->status = s;
      w->file = file;
      io::ResumeOn(*w->home, w->h);
    }
  }
}

bool DriveJournal::Ready(int file) {
  absl::MutexLock lock(&mu_);
  return ready_[file];
}

void DriveJournal::StartReclaim(int file) {
  // The previous reclaim is over: the file it reclaimed has just been found ready.
  if (reclaimer_.joinable()) reclaimer_.join();
  {
    absl::MutexLock lock(&mu_);
    ready_[file] = false;
    ++stats_.switches;
  }
  // A thread of its own: syncfs can take long (every dirty page of the file system), and no
  // reactor should wait for it.
  reclaimer_ = std::thread([this, file] {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](uint64_t* n) { return *n == 0; }, &unapplied_[file]));
      }
      const absl::Status s = fs_->SyncAll();
      if (s.ok()) break;
      OL_LOG_EVERY_N_SEC(kError, 10) << "store: journal of " << fs_->root()
                                     << ": cannot reclaim a file: " << s;
      absl::SleepFor(absl::Seconds(1));
    }
    absl::MutexLock lock(&mu_);
    ready_[file] = true;
  });
}

io::Task<absl::Status> DriveJournal::WriteBatch(std::string batch, uint64_t first_seq,
                                                int* file) {
  File* f = &files_[active_];
  if (f->tail > kHeaderBytes && f->tail + batch.size() > file_bytes_) {
    // Switch. The other file's steps must be applied and durable in their own files before
    // its header is rewritten: its reclaim began when it was left, and is normally done.
    const int other = 1 - active_;
    while (!Ready(other)) {
      io::Sleep pause{absl::Milliseconds(1)};
      co_await pause;
    }
    StartReclaim(active_);
    active_ = other;
    f = &files_[other];
    f->tail = kHeaderBytes;
    f->needs_header = true;
  }
  *file = active_;
  // Open for the batch alone: a descriptor open for writing between batches would keep the
  // drive's file system from being remounted read-only (which a drive going bad, or its
  // operator, does), and a read-only one fails the batch here.
  absl::StatusOr<std::unique_ptr<FileHandle>> opened =
      fs_->Open(JournalPath(*file), OpenMode::kJournal);
  if (absl::IsNotFound(opened.status())) {
    // The drive's folder was made again while running (Engine::RestoreDrives): so is this.
    OL_CO_RETURN_IF_ERROR(fs_->MakeDirs(kJournalDir, ""));
    opened = fs_->Open(JournalPath(*file), OpenMode::kJournal);
  }
  OL_CO_RETURN_IF_ERROR(opened.status());
  std::unique_ptr<FileHandle> handle = std::move(*opened);
  FileHandle* h = handle.get();
  const std::string name = StrCat(fs_->root(), "/", JournalPath(*file));
  OL_CO_ASSIGN_OR_RETURN(uint64_t size, h->Size());
  if (size < f->tail) {
    // Not the file this journal wrote (made anew with the drive's folder): it starts over,
    // and its name is made durable.
    f->tail = kHeaderBytes;
    f->allocated = size;
    f->needs_header = true;
    OL_CO_RETURN_IF_ERROR(io::SyncParentDir(name));
  }
  if (f->needs_header) {
    const std::string header = HeaderRecord(first_seq);
    OL_CO_RETURN_IF_ERROR(co_await WriteAllAt(h, header, 0, name));
  }
  const uint64_t end = f->tail + batch.size();
  OL_CO_RETURN_IF_ERROR(co_await WriteAllAt(h, batch, f->tail, name));
  if (end > f->allocated) {
    static const std::string zeros(kGrowBytes, '\0');
    const uint64_t grown = (end + kGrowBytes - 1) / kGrowBytes * kGrowBytes;
    const std::string_view pad(zeros.data(), grown - end);
    OL_CO_RETURN_IF_ERROR(co_await WriteAllAt(h, pad, end, name));
    f->allocated = grown;
  }
  io::Reactor& r = *io::Reactor::Current();
  const int32_t synced = co_await io::Op([&](io::Completion* c) { h->Sync(r, c); });
  if (synced < 0) co_return ErrnoStatus(synced, StrCat("fdatasync ", name));
  // A failed batch leaves tail where it was: the next one overwrites what it left.
  f->tail = end;
  f->needs_header = false;
  co_return absl::OkStatus();
}

DriveJournal::Stats DriveJournal::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace openlake::store

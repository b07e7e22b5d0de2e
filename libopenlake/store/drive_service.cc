#include "store/drive_service.h"

#include <cerrno>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"

#include "store/drive_probe.h"
#include "store/drive_rpc.pb.h"
#include "store/drive_wire.h"
#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/io/buffer.h"
#include "openlake/io/task.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::store {

std::string EncodeDriveError(const absl::Status& s) {
  const ErrorKind kind = ErrorKindOf(s);
  if (kind == ErrorKind::kNone) return std::string(SV(s.message()));
  return StrCat("[kind ", static_cast<int>(kind), "] ", SV(s.message()));
}

absl::Status DecodeDriveError(const absl::Status& s) {
  std::string_view m = SV(s.message());
  if (m.substr(0, 6) != "[kind ") return s;
  const size_t end = m.find("] ");
  int kind = 0;
  if (end == std::string_view::npos || !absl::SimpleAtoi(AV(m.substr(6, end - 6)), &kind) ||
      kind <= 0 || kind > static_cast<int>(ErrorKind::kInvalidVersionId)) {
    return s;
  }
  return Error(static_cast<ErrorKind>(kind), std::string(m.substr(end + 2)));
}

struct DriveService::State {
  DriveServiceOptions o;
  io::Reactor* reactor = nullptr;
  uint64_t requests = 0;
  uint64_t next_handle = 1;
  struct Open {
    std::shared_ptr<FileHandle> file;
    uint64_t conn = 0;
    int64_t used_ns = 0;
  };
  absl::flat_hash_map<uint64_t, Open> handles;
  io::TimerId sweep;
  bool stopped = false;
};

namespace {

using State = DriveService::State;

void Fail(net::RpcCall& call, const absl::Status& s) {
  call.RespondError(absl::Status(s.code(), AV(EncodeDriveError(s))));
}

void Answer(net::RpcCall& call, const absl::Status& s) {
  if (s.ok()) {
    call.Respond(std::string());
  } else {
    Fail(call, s);
  }
}

// The drive a request names, or null after answering why not.
DriveApi* DriveFor(State& st, net::RpcCall& call, uint32_t index) {
  if (index >= st.o.drive_count) {
    call.RespondError(absl::InvalidArgumentError(
        StrCat("node ", st.o.node_id, " has no drive ", index, " (it has ", st.o.drive_count,
               ")")));
    return nullptr;
  }
  DriveApi* d = st.o.drive ? st.o.drive(index) : nullptr;
  if (d == nullptr) {
    call.RespondError(absl::UnavailableError(
        StrCat("drive ", index, " of node ", st.o.node_id, " is offline")));
  }
  return d;
}

template <typename Msg>
bool Parse(net::RpcCall& call, Msg* m) {
  const std::string_view p = call.payload();
  if (m->ParseFromArray(p.data(), static_cast<int>(p.size()))) return true;
  call.RespondError(absl::InvalidArgumentError("malformed drive request"));
  return false;
}

io::Task<void> AnswerStatus(net::RpcCall call, io::Task<absl::Status> op) {
  const absl::Status s = co_await std::move(op);
  Answer(call, s);
}

io::Task<void> AnswerBytes(net::RpcCall call, io::Task<absl::StatusOr<std::string>> op) {
  absl::StatusOr<std::string> r = co_await std::move(op);
  if (r.ok()) {
    call.Respond(*std::move(r));
  } else {
    Fail(call, r.status());
  }
}

io::Task<void> AnswerBool(net::RpcCall call, io::Task<absl::StatusOr<bool>> op) {
  absl::StatusOr<bool> r = co_await std::move(op);
  if (!r.ok()) {
    Fail(call, r.status());
    co_return;
  }
  pb::DriveAnswer a;
  a.set_value(*r);
  call.Respond(a.SerializeAsString());
}

io::Task<void> AnswerUsage(net::RpcCall call, DriveApi* d) {
  absl::StatusOr<DriveUsage> r = co_await d->Usage();
  if (!r.ok()) {
    Fail(call, r.status());
    co_return;
  }
  pb::DriveAnswer a;
  a.set_free_bytes(r->free_bytes);
  call.Respond(a.SerializeAsString());
}

io::Task<void> AnswerReadDir(net::RpcCall call, DriveApi* d, std::string path) {
  absl::StatusOr<std::vector<DirEntry>> r = co_await d->ReadDir(path);
  if (!r.ok()) {
    Fail(call, r.status());
    co_return;
  }
  pb::DriveDirEntries out;
  for (const DirEntry& e : *r) {
    out.add_names(e.name);
    out.add_is_dir(e.is_dir);
  }
  call.Respond(out.SerializeAsString());
}

io::Task<void> AnswerWalk(net::RpcCall call, DriveApi* d, WalkRequest req) {
  absl::StatusOr<std::vector<WalkItem>> r = co_await d->Walk(std::move(req));
  if (!r.ok()) {
    Fail(call, r.status());
    co_return;
  }
  pb::DriveWalkPage out;
  for (const WalkItem& it : *r) {
    out.add_keys(it.key);
    out.add_is_prefix(it.is_prefix);
  }
  call.Respond(out.SerializeAsString());
}

io::Task<void> AnswerOpen(std::shared_ptr<State> st, net::RpcCall call, DriveApi* d,
                          std::string path, OpenMode mode) {
  absl::StatusOr<std::unique_ptr<FileHandle>> h = co_await d->OpenFile(path, mode);
  if (!h.ok()) {
    Fail(call, h.status());
    co_return;
  }
  pb::DriveOpened out;
  if (mode == OpenMode::kRead) {
    absl::StatusOr<uint64_t> size = (*h)->Size();
    if (!size.ok()) {
      Fail(call, size.status());
      co_return;
    }
    out.set_size(*size);
  }
  if (st->stopped) {
    call.RespondError(absl::UnavailableError("drive service stopping"));
    co_return;
  }
  const uint64_t id = st->next_handle++;
  State::Open& o = st->handles[id];
  o.file = std::shared_ptr<FileHandle>(std::move(*h));
  o.conn = call.connection().id;
  o.used_ns = st->reactor->now_ns();
  out.set_handle(id);
  call.Respond(out.SerializeAsString());
}

io::Task<void> AnswerFileRead(net::RpcCall call, std::shared_ptr<FileHandle> f, uint64_t offset,
                              uint32_t len) {
  std::string frame(net::RpcCall::kHeadroom + len, '\0');
  io::Reactor& r = *io::Reactor::Current();
  char* dst = frame.data() + net::RpcCall::kHeadroom;
  const int32_t n =
      co_await io::Op([&](io::Completion* c) { f->Read(r, dst, len, offset, c); });
  if (n < 0) {
    call.RespondError(ErrnoStatus(-n, "shard read"));
    co_return;
  }
  frame.resize(net::RpcCall::kHeadroom + static_cast<size_t>(n));
  call.RespondWithHeadroom(std::move(frame));
}

io::Task<void> AnswerFileWrite(net::RpcCall call, std::shared_ptr<FileHandle> f, uint64_t offset,
                               io::AlignedBuffer data, uint32_t len) {
  io::Reactor& r = *io::Reactor::Current();
  const std::byte* src = data.data();
  const int32_t n =
      co_await io::Op([&](io::Completion* c) { f->Write(r, src, len, offset, c); });
  if (n < 0) {
    call.RespondError(ErrnoStatus(-n, "shard write"));
    co_return;
  }
  std::string out;
  PutU32(&out, static_cast<uint32_t>(n));
  call.Respond(std::move(out));
}

io::Task<void> AnswerFileSync(net::RpcCall call, std::shared_ptr<FileHandle> f) {
  io::Reactor& r = *io::Reactor::Current();
  const int32_t n = co_await io::Op([&](io::Completion* c) { f->Sync(r, c); });
  if (n < 0) {
    call.RespondError(ErrnoStatus(-n, "shard fdatasync"));
    co_return;
  }
  call.Respond(std::string());
}

// The open handle a raw request names (its first 8 bytes), or null after answering why not.
std::shared_ptr<FileHandle> HandleFor(State& st, net::RpcCall& call, std::string_view* in) {
  uint64_t id = 0;
  if (!GetU64(in, &id)) {
    call.RespondError(absl::InvalidArgumentError("malformed drive request"));
    return nullptr;
  }
  auto it = st.handles.find(id);
  if (it == st.handles.end() || it->second.conn != call.connection().id) {
    call.RespondError(absl::NotFoundError(
        StrCat("no open shard file ", id, " (closed, or its lease ran out)")));
    return nullptr;
  }
  it->second.used_ns = st.reactor->now_ns();
  return it->second.file;
}

void Sweep(const std::shared_ptr<State>& st) {
  if (st->stopped) return;
  const int64_t now = st->reactor->now_ns();
  const int64_t lease = absl::ToInt64Nanoseconds(st->o.handle_lease);
  for (auto it = st->handles.begin(); it != st->handles.end();) {
    if (now - it->second.used_ns > lease) {
      st->handles.erase(it++);
    } else {
      ++it;
    }
  }
  std::weak_ptr<State> weak = st;
  st->sweep = st->reactor->After(absl::Seconds(10), [weak] {
    if (auto s = weak.lock()) Sweep(s);
  });
}

void Register(net::RpcServer& server, const std::shared_ptr<State>& st) {
  // Every method checks the caller first: another daemon of the cluster, or this one's user.
  auto on = [&server, st](uint16_t method,
                          std::function<void(State&, net::RpcCall&)> body) {
    server.Register(method, [st, body = std::move(body)](net::RpcCall call) {
      ++st->requests;
      if (!call.connection().admin) {
        call.RespondError(absl::PermissionDeniedError(
            "the drive RPC is for the cluster's daemons (their user, or the shared secret)"));
        return;
      }
      body(*st, call);
    });
  };
  on(kDriveHello, [](State& s, net::RpcCall& call) {
    pb::DriveHello hello;
    if (!Parse(call, &hello)) return;
    if (hello.layout_digest() != s.o.layout_digest) {
      call.RespondError(absl::FailedPreconditionError(StrCat(
          "node ", s.o.node_id, " runs cluster layout ", s.o.layout_digest, " but node ",
          hello.node_id(), " asks with ", hello.layout_digest(),
          ": the [[nodes]], drives, set size or parity differ between their configs")));
      return;
    }
    pb::DriveHelloAnswer a;
    a.set_layout_digest(s.o.layout_digest);
    a.set_node_id(s.o.node_id);
    a.set_drive_count(s.o.drive_count);
    call.Respond(a.SerializeAsString());
  });
  on(kDriveReadFile, [](State& s, net::RpcCall& call) {
    pb::DrivePath m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) io::Spawn(AnswerBytes(std::move(call), d->ReadFile(m.path())));
  });
  on(kDriveWriteFile, [](State& s, net::RpcCall& call) {
    pb::DriveWriteFile m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d == nullptr) return;
    io::Spawn(AnswerStatus(std::move(call),
                           d->WriteFile(m.path(), std::move(*m.mutable_data()), m.sync_dir())));
  });
  on(kDriveMakeDirs, [](State& s, net::RpcCall& call) {
    pb::DriveMakeDirs m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) {
      io::Spawn(AnswerStatus(std::move(call), d->MakeDirs(m.path(), m.parents_from())));
    }
  });
  on(kDriveReadDir, [](State& s, net::RpcCall& call) {
    pb::DrivePath m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) io::Spawn(AnswerReadDir(std::move(call), d, m.path()));
  });
  on(kDriveExists, [](State& s, net::RpcCall& call) {
    pb::DrivePath m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) io::Spawn(AnswerBool(std::move(call), d->Exists(m.path())));
  });
  on(kDriveRename, [](State& s, net::RpcCall& call) {
    pb::DriveRename m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) io::Spawn(AnswerStatus(std::move(call), d->Rename(m.from(), m.to())));
  });
  on(kDriveLinkInto, [](State& s, net::RpcCall& call) {
    pb::DriveLinkInto m;
    if (!Parse(call, &m)) return;
    if (m.from_size() != m.to_size()) {
      call.RespondError(absl::InvalidArgumentError("malformed drive request: unpaired links"));
      return;
    }
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d == nullptr) return;
    std::vector<LinkPair> links;
    for (int i = 0; i < m.from_size(); ++i) links.push_back({m.from(i), m.to(i)});
    io::Spawn(AnswerStatus(std::move(call), d->LinkInto(m.dir(), std::move(links))));
  });
  on(kDriveUnlink, [](State& s, net::RpcCall& call) {
    pb::DrivePath m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) io::Spawn(AnswerStatus(std::move(call), d->Unlink(m.path())));
  });
  on(kDriveRemoveDir, [](State& s, net::RpcCall& call) {
    pb::DrivePath m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) io::Spawn(AnswerStatus(std::move(call), d->RemoveDir(m.path())));
  });
  on(kDriveTrash, [](State& s, net::RpcCall& call) {
    pb::DrivePath m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) io::Spawn(AnswerStatus(std::move(call), d->Trash(m.path())));
  });
  on(kDriveSyncDir, [](State& s, net::RpcCall& call) {
    pb::DrivePath m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) io::Spawn(AnswerStatus(std::move(call), d->SyncDir(m.path())));
  });
  on(kDriveUsage, [](State& s, net::RpcCall& call) {
    pb::DrivePath m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) io::Spawn(AnswerUsage(std::move(call), d));
  });
  on(kDriveCommit, [](State& s, net::RpcCall& call) {
    pb::DriveCommit m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d == nullptr) return;
    CommitStep step;
    step.bucket = m.bucket();
    step.key = m.key();
    step.staged_dir = m.staged_dir();
    step.data_dir = m.data_dir();
    step.meta = std::move(*m.mutable_meta());
    step.keep_data_dirs.assign(m.keep_data_dirs().begin(), m.keep_data_dirs().end());
    step.sync_dir = m.sync_dir();
    io::Spawn(AnswerStatus(std::move(call), d->CommitObject(std::move(step))));
  });
  on(kDriveRemoveObject, [](State& s, net::RpcCall& call) {
    pb::DriveRemoveObject m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d != nullptr) {
      io::Spawn(AnswerStatus(std::move(call), d->RemoveObject(m.bucket(), m.key())));
    }
  });
  on(kDriveWalk, [](State& s, net::RpcCall& call) {
    pb::DriveWalk m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d == nullptr) return;
    WalkRequest req;
    req.bucket = m.bucket();
    req.prefix = m.prefix();
    req.delimiter = m.delimiter();
    req.marker = m.marker();
    req.limit = std::min<uint32_t>(m.limit(), 10000);
    io::Spawn(AnswerWalk(std::move(call), d, std::move(req)));
  });
  on(kDriveVerify, [](State& s, net::RpcCall& call) {
    pb::DriveVerify m;
    if (!Parse(call, &m)) return;
    DriveApi* d = DriveFor(s, call, m.drive());
    if (d == nullptr) return;
    VerifyRequest req;
    req.path = m.path();
    req.part_size = m.part_size();
    req.data_shards = m.data_shards();
    req.block_size = m.block_size();
    req.block_crcs.assign(m.block_crcs().begin(), m.block_crcs().end());
    io::Spawn(AnswerBool(std::move(call), d->VerifyFile(std::move(req))));
  });
  on(kDriveProbe, [](State& s, net::RpcCall& call) {
    pb::DrivePath m;
    if (!Parse(call, &m)) return;
    if (m.drive() >= s.o.paths.size()) {
      call.RespondError(absl::UnimplementedError("no drive folders to probe"));
      return;
    }
    // A few stat and readdir calls, as the engine's own start makes them.
    DriveProbe p = ProbeDrive(s.o.paths[m.drive()], FileBackendFactory());
    pb::DriveProbed out;
    out.set_state(static_cast<uint32_t>(p.state));
    out.set_detail(p.detail);
    out.set_path(p.path);
    if (p.state == DriveState::kOk) out.set_format_json(FormatJson(p.format));
    call.Respond(out.SerializeAsString());
  });
  on(kDriveFormat, [](State& s, net::RpcCall& call) {
    pb::DriveFormatRequest m;
    if (!Parse(call, &m)) return;
    if (m.drive() >= s.o.paths.size()) {
      call.RespondError(absl::UnimplementedError("no drive folders to format"));
      return;
    }
    pb::DriveFormat f;
    if (!ParseDriveFormat(m.format_json(), &f)) {
      call.RespondError(absl::InvalidArgumentError("not a drive identity"));
      return;
    }
    const std::string& path = s.o.paths[m.drive()];
    // Only a blank folder: a formatted or foreign one is never overwritten from afar.
    DriveProbe p = ProbeDrive(path, FileBackendFactory());
    if (p.state != DriveState::kUnformattedEmpty) {
      call.RespondError(absl::FailedPreconditionError(
          StrCat("drive ", path, " of node ", s.o.node_id, " is ", DriveStateName(p.state),
                 ", not blank: left as it is")));
      return;
    }
    Answer(call, Engine::WriteFormat(*p.fs, path, f));
  });
  std::weak_ptr<State> weak = st;
  on(kDriveOpen, [weak](State& s, net::RpcCall& call) {
    pb::DriveOpen m;
    if (!Parse(call, &m)) return;
    if (m.mode() > 1) {
      call.RespondError(absl::InvalidArgumentError("malformed drive request: open mode"));
      return;
    }
    DriveApi* d = DriveFor(s, call, m.drive());
    std::shared_ptr<State> self = weak.lock();
    if (d == nullptr || self == nullptr) return;
    const OpenMode mode = m.mode() == 0 ? OpenMode::kRead : OpenMode::kCreate;
    io::Spawn(AnswerOpen(std::move(self), std::move(call), d, m.path(), mode));
  });
  on(kDriveFileRead, [](State& s, net::RpcCall& call) {
    std::string_view in = call.payload();
    std::shared_ptr<FileHandle> f = HandleFor(s, call, &in);
    if (f == nullptr) return;
    uint64_t offset = 0;
    uint32_t len = 0;
    if (!GetU64(&in, &offset) || !GetU32(&in, &len) || len > s.o.max_block_bytes) {
      call.RespondError(absl::InvalidArgumentError("malformed shard read"));
      return;
    }
    io::Spawn(AnswerFileRead(std::move(call), std::move(f), offset, len));
  });
  on(kDriveFileWrite, [](State& s, net::RpcCall& call) {
    std::string_view in = call.payload();
    std::shared_ptr<FileHandle> f = HandleFor(s, call, &in);
    if (f == nullptr) return;
    uint64_t offset = 0;
    if (!GetU64(&in, &offset) || in.size() > s.o.max_block_bytes) {
      call.RespondError(absl::InvalidArgumentError("malformed shard write"));
      return;
    }
    const auto len = static_cast<uint32_t>(in.size());
    io::AlignedBuffer data(std::max<size_t>(len, 1));
    if (!data) {
      call.RespondError(absl::ResourceExhaustedError("out of memory for a shard write"));
      return;
    }
    std::memcpy(data.data(), in.data(), len);
    io::Spawn(AnswerFileWrite(std::move(call), std::move(f), offset, std::move(data), len));
  });
  on(kDriveFileSync, [](State& s, net::RpcCall& call) {
    std::string_view in = call.payload();
    std::shared_ptr<FileHandle> f = HandleFor(s, call, &in);
    if (f != nullptr) io::Spawn(AnswerFileSync(std::move(call), std::move(f)));
  });
  on(kDriveFileClose, [](State& s, net::RpcCall& call) {
    std::string_view in = call.payload();
    uint64_t id = 0;
    if (!GetU64(&in, &id)) {
      call.RespondError(absl::InvalidArgumentError("malformed drive request"));
      return;
    }
    auto it = s.handles.find(id);
    if (it != s.handles.end() && it->second.conn == call.connection().id) s.handles.erase(it);
    call.Respond(std::string());
  });
  server.OnDisconnect([weak](const net::ConnectionInfo& info) {
    std::shared_ptr<State> s = weak.lock();
    if (s == nullptr) return;
    for (auto it = s->handles.begin(); it != s->handles.end();) {
      if (it->second.conn == info.id) {
        s->handles.erase(it++);
      } else {
        ++it;
      }
    }
  });
}

}  // namespace

std::unique_ptr<DriveService> DriveService::Attach(net::RpcServer& server,
                                                   DriveServiceOptions options) {
  auto st = std::make_shared<State>();
  st->o = std::move(options);
  st->reactor = &server.reactor();
  Register(server, st);
  Sweep(st);
  return std::unique_ptr<DriveService>(new DriveService(std::move(st)));
}

DriveService::~DriveService() {
  state_->stopped = true;
  state_->reactor->CancelTimer(state_->sweep);
  state_->handles.clear();
}

uint64_t DriveService::requests() const { return state_->requests; }
size_t DriveService::open_handles() const { return state_->handles.size(); }

}  // namespace openlake::store

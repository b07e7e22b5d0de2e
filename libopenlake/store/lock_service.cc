// The lock RPC's serving side (dist_locks.h): this node's lock table. Every request is answered
// at once on the server's reactor; the table never queues a waiter, because waiting (and
// backing off) is the client's part, and a table that queued could not tell a waiter that died.
#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "store/dist_locks.h"
#include "store/lock_rpc.pb.h"

#include "openlake/strings.h"

namespace openlake::store {

struct LockService::State {
  LockServiceOptions o;
  io::Reactor* reactor = nullptr;
  struct Holder {
    std::string uid;
    uint32_t owner = 0;
    int64_t expires_ns = 0;
  };
  // One exclusive holder, or any number of shared ones. An entry with no holder left is
  // erased, so `table` names only resources someone holds.
  struct Entry {
    bool exclusive = false;
    std::vector<Holder> holders;
  };
  absl::flat_hash_map<std::string, Entry> table;
  size_t held = 0;
  Counters counters;
  io::TimerId sweep;
  bool stopped = false;
};

namespace {

using State = LockService::State;

template <typename Msg>
bool Parse(net::RpcCall& call, Msg* m) {
  const std::string_view p = call.payload();
  if (m->ParseFromArray(p.data(), static_cast<int>(p.size()))) return true;
  call.RespondError(absl::InvalidArgumentError("malformed lock request"));
  return false;
}

int64_t ExpiryFor(const State& st, uint32_t ttl_ms) {
  absl::Duration ttl = ttl_ms == 0 ? st.o.default_ttl : absl::Milliseconds(ttl_ms);
  ttl = std::min(ttl, st.o.max_ttl);
  return st.reactor->now_ns() + absl::ToInt64Nanoseconds(ttl);
}

// Drops the holders of `e` whose time ran out.
void DropExpired(State& st, State::Entry& e, int64_t now) {
  const auto expired = [now](const State::Holder& h) { return h.expires_ns <= now; };
  const auto first = std::remove_if(e.holders.begin(), e.holders.end(), expired);
  const auto n = static_cast<size_t>(e.holders.end() - first);
  e.holders.erase(first, e.holders.end());
  st.held -= n;
  st.counters.expirations += n;
}

State::Holder* FindHolder(State::Entry& e, std::string_view uid) {
  for (State::Holder& h : e.holders) {
    if (h.uid == uid) return &h;
  }
  return nullptr;
}

void OnLock(State& st, net::RpcCall& call) {
  pb::LockRequest m;
  if (!Parse(call, &m)) return;
  if (m.resource().empty() || m.uid().empty()) {
    call.RespondError(absl::InvalidArgumentError("lock request without a resource or a uid"));
    return;
  }
  State::Entry& e = st.table[m.resource()];
  DropExpired(st, e, st.reactor->now_ns());
  bool granted = false;
  if (State::Holder* h = FindHolder(e, m.uid())) {
    // The same acquisition asking again (its answer was lost, or it refreshes this way).
    h->expires_ns = ExpiryFor(st, m.ttl_ms());
    granted = true;
  } else if (e.holders.empty() || (!m.exclusive() && !e.exclusive)) {
    e.exclusive = m.exclusive();
    e.holders.push_back({m.uid(), m.owner(), ExpiryFor(st, m.ttl_ms())});
    ++st.held;
    granted = true;
  }
  if (e.holders.empty()) st.table.erase(m.resource());
  if (granted) {
    ++st.counters.grants;
  } else {
    ++st.counters.refusals;
  }
  pb::LockAnswer a;
  a.set_granted(granted);
  call.Respond(a.SerializeAsString());
}

void OnUnlock(State& st, net::RpcCall& call) {
  pb::UnlockRequest m;
  if (!Parse(call, &m)) return;
  auto it = st.table.find(m.resource());
  if (it != st.table.end()) {
    std::vector<State::Holder>& hs = it->second.holders;
    const auto gone = [&m](const State::Holder& h) { return h.uid == m.uid(); };
    const auto first = std::remove_if(hs.begin(), hs.end(), gone);
    st.held -= static_cast<size_t>(hs.end() - first);
    hs.erase(first, hs.end());
    if (hs.empty()) st.table.erase(it);
  }
  call.Respond(std::string());
}

void OnRefresh(State& st, net::RpcCall& call) {
  pb::RefreshRequest m;
  if (!Parse(call, &m)) return;
  if (m.resources_size() != m.uids_size()) {
    call.RespondError(absl::InvalidArgumentError("malformed refresh: unpaired resources"));
    return;
  }
  const int64_t now = st.reactor->now_ns();
  pb::RefreshAnswer a;
  for (int i = 0; i < m.resources_size(); ++i) {
    bool held = false;
    auto it = st.table.find(m.resources(i));
    if (it != st.table.end()) {
      DropExpired(st, it->second, now);
      if (State::Holder* h = FindHolder(it->second, m.uids(i))) {
        h->expires_ns = ExpiryFor(st, m.ttl_ms());
        held = true;
      }
      if (it->second.holders.empty()) st.table.erase(it);
    }
    a.add_held(held);
  }
  call.Respond(a.SerializeAsString());
}

void Sweep(const std::shared_ptr<State>& st) {
  if (st->stopped) return;
  const int64_t now = st->reactor->now_ns();
  for (auto it = st->table.begin(); it != st->table.end();) {
    DropExpired(*st, it->second, now);
    if (it->second.holders.empty()) {
      st->table.erase(it++);
    } else {
      ++it;
    }
  }
  std::weak_ptr<State> weak = st;
  st->sweep = st->reactor->After(st->o.sweep_interval, [weak] {
    if (auto s = weak.lock()) Sweep(s);
  });
}

void Register(net::RpcServer& server, const std::shared_ptr<State>& st) {
  // Every method checks the caller first: another daemon of the cluster, or this one's user.
  // A lock table that anyone could fill would let any client stall every writer.
  auto on = [&server, st](uint16_t method, void (*body)(State&, net::RpcCall&)) {
    server.Register(method, [st, body](net::RpcCall call) {
      if (!call.connection().admin) {
        call.RespondError(absl::PermissionDeniedError(
            "the lock RPC is for the cluster's daemons (their user, or the shared secret)"));
        return;
      }
      body(*st, call);
    });
  };
  on(kLockAcquire, &OnLock);
  on(kLockRelease, &OnUnlock);
  on(kLockRefresh, &OnRefresh);
}

}  // namespace

std::unique_ptr<LockService> LockService::Attach(net::RpcServer& server,
                                                 LockServiceOptions options) {
  auto st = std::make_shared<State>();
  st->o = std::move(options);
  st->reactor = &server.reactor();
  Register(server, st);
  Sweep(st);
  return std::unique_ptr<LockService>(new LockService(std::move(st)));
}

LockService::~LockService() {
  state_->stopped = true;
  state_->reactor->CancelTimer(state_->sweep);
  state_->table.clear();
}

const LockService::Counters& LockService::counters() const { return state_->counters; }
size_t LockService::held() const { return state_->held; }

}  // namespace openlake::store

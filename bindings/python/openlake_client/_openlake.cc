// _openlake: the Python binding of libopenlake's KV client (openlake/kv/client.h), and of its
// parallel S3 transfers (s3_transfer.cc, openlake/s3/transfer.h).
//
// Thin by design: argument conversion, the GIL released around every call that waits or copies,
// the slab exposed through the buffer protocol (no copies), and one place (RaiseStatus) that
// turns an absl::Status into a Python exception. The Python package openlake_client holds the
// logic (the vLLM connector); this module holds none.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "openlake/checksum.h"
#include "openlake/kv/client.h"
#include "openlake/node/status.h"
#include "openlake/s3/client.h"
#include "openlake/version.h"
#include "binding.h"

#ifndef OL_HAVE_CUDA
#define OL_HAVE_CUDA 0  // set to 1 by the build that links the GPU checksum (-Dcuda=enabled)
#endif
#if OL_HAVE_CUDA
#include "crc64_rows.h"  // the GPU checksum archive's interface (openlake_cuda_dep)
#endif

namespace py = pybind11;
using openlake::kv::BlockKey;
using openlake::kv::Client;
using openlake::kv::Namespace;

namespace {

// ---- Errors: the one place a Status becomes an exception. ---------------------------------

struct Errors {
  PyObject* base = nullptr;
  PyObject* not_found = nullptr;
  PyObject* unavailable = nullptr;
  PyObject* deadline = nullptr;
  PyObject* pool_full = nullptr;
  PyObject* precondition = nullptr;
  PyObject* invalid = nullptr;
  PyObject* permission = nullptr;
  PyObject* data_loss = nullptr;
};
Errors g_errors;

PyObject* NewError(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("openlake_client._openlake.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}

// Needs the GIL: never call it inside a gil_scoped_release.
[[noreturn]] void RaiseStatus(const absl::Status& st) {
  PyObject* type = g_errors.base;
  switch (st.code()) {
    case absl::StatusCode::kNotFound:
      type = g_errors.not_found;
      break;
    case absl::StatusCode::kUnavailable:
      type = g_errors.unavailable;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      type = g_errors.deadline;
      break;
    case absl::StatusCode::kResourceExhausted:
      type = g_errors.pool_full;
      break;
    case absl::StatusCode::kFailedPrecondition:
      type = g_errors.precondition;
      break;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      type = g_errors.invalid;
      break;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      type = g_errors.permission;
      break;
    case absl::StatusCode::kDataLoss:
      type = g_errors.data_loss;
      break;
    default:
      break;
  }
  const std::string msg(st.message());
  py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(type, "s", msg.c_str()));
  if (!exc) throw py::error_already_set();
  const std::string code = absl::StatusCodeToString(st.code());
  PyObject_SetAttrString(exc.ptr(), "code", py::str(code).ptr());
  // An S3 server's error code ("NoSuchKey", "SlowDown", ...), "" for anything else.
  PyObject_SetAttrString(exc.ptr(), "s3_code", py::str(openlake::s3::ErrorCodeOf(st)).ptr());
  PyErr_SetObject(type, exc.ptr());
  throw py::error_already_set();
}

using openlake_py::Unwrap;

void Check(const absl::Status& st) {
  if (!st.ok()) RaiseStatus(st);
}

// ---- Conversions. ----------------------------------------------------------------------------

BlockKey ToKey(const py::handle& obj) {
  if (!py::isinstance<py::bytes>(obj)) {
    throw py::type_error("block keys must be bytes");
  }
  std::string_view b = obj.cast<std::string_view>();
  if (b.empty() || b.size() > openlake::kv::kMaxKeyBytes) {
    throw py::value_error("a block key must be 1 to 32 bytes (hash longer keys down first)");
  }
  return BlockKey(b);
}

std::vector<BlockKey> ToKeys(const py::sequence& keys) {
  std::vector<BlockKey> out;
  out.reserve(py::len(keys));
  for (const py::handle k : keys) out.push_back(ToKey(k));
  return out;
}

// head: None, or the key of the chain's first block (when keys[0] is not it).
openlake::kv::GetOptions ToGetOptions(const py::object& head) {
  openlake::kv::GetOptions o;
  if (!head.is_none()) o.chain_head = ToKey(head);
  return o;
}

// blocks: a sequence (one per key) of sequences of (address, length) pieces.
template <typename PieceT, typename PtrT>
std::vector<std::vector<PieceT>> ToPieces(const py::sequence& blocks) {
  std::vector<std::vector<PieceT>> out(py::len(blocks));
  size_t i = 0;
  for (const py::handle b : blocks) {
    const py::sequence pieces = py::reinterpret_borrow<py::sequence>(b);
    out[i].reserve(py::len(pieces));
    for (const py::handle p : pieces) {
      const py::tuple t = py::reinterpret_borrow<py::tuple>(p);
      if (py::len(t) != 2) throw py::value_error("a piece is an (address, length) pair");
      const auto addr = t[0].cast<uintptr_t>();
      const auto len = t[1].cast<size_t>();
      if (addr == 0 && len != 0) throw py::value_error("a piece has a null address");
      out[i].push_back(PieceT{reinterpret_cast<PtrT>(addr), len});
    }
    ++i;
  }
  return out;
}

openlake::kv::LayoutFingerprint ToFingerprint(const py::dict& d) {
  openlake::kv::LayoutFingerprint fp;
  for (const auto& [k, v] : d) {
    const std::string key = py::str(k);
    if (key == "model")
      fp.model = py::str(v);
    else if (key == "dtype")
      fp.dtype = py::str(v);
    else if (key == "layout")
      fp.layout = py::str(v);
    else if (key == "extra")
      fp.extra = py::str(v);
    else if (key == "num_layers")
      fp.num_layers = v.cast<uint32_t>();
    else if (key == "num_kv_heads")
      fp.num_kv_heads = v.cast<uint32_t>();
    else if (key == "head_size")
      fp.head_size = v.cast<uint32_t>();
    else if (key == "block_tokens")
      fp.block_tokens = v.cast<uint32_t>();
    else if (key == "tp_rank")
      fp.tp_rank = v.cast<uint32_t>();
    else if (key == "tp_size")
      fp.tp_size = v.cast<uint32_t>();
    else if (key == "pp_rank")
      fp.pp_rank = v.cast<uint32_t>();
    else if (key == "pp_size")
      fp.pp_size = v.cast<uint32_t>();
    else
      throw py::value_error("unknown fingerprint field '" + key + "'");
  }
  return fp;
}

py::dict StatsDict(const openlake::kv::PoolStats& s) {
  py::dict d;
  d["capacity_bytes"] = s.capacity_bytes;
  d["segment_bytes"] = s.segment_bytes;
  d["segments_total"] = s.segments_total;
  d["segments_used"] = s.segments_used;
  d["used_bytes"] = s.used_bytes;
  d["committed_blocks"] = s.committed_blocks;
  d["reserved_slots"] = s.reserved_slots;
  d["pinned_slots"] = s.pinned_slots;
  d["namespaces"] = s.namespaces;
  d["sessions"] = s.sessions;
  d["lookups"] = s.lookups;
  d["lookup_keys"] = s.lookup_keys;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["commits"] = s.commits;
  d["evictions"] = s.evictions;
  d["expired_reservations"] = s.expired_reservations;
  d["expired_pins"] = s.expired_pins;
  d["reserve_failures"] = s.reserve_failures;
  d["bytes_in"] = s.bytes_in;
  d["bytes_out"] = s.bytes_out;
  d["hit_rate"] = s.hit_rate();
  d["disk_paths"] = s.disk_paths;
  d["disk_paths_online"] = s.disk_paths_online;
  d["disk_capacity_bytes"] = s.disk_capacity_bytes;
  d["disk_used_bytes"] = s.disk_used_bytes;
  d["disk_blocks"] = s.disk_blocks;
  d["dirty_blocks"] = s.dirty_blocks;
  d["disk_hits"] = s.disk_hits;
  d["spilled_blocks"] = s.spilled_blocks;
  d["spilled_bytes"] = s.spilled_bytes;
  d["promoted_blocks"] = s.promoted_blocks;
  d["promoted_bytes"] = s.promoted_bytes;
  d["spill_drops"] = s.spill_drops;
  d["disk_evictions"] = s.disk_evictions;
  d["disk_errors"] = s.disk_errors;
  d["disk_checksum_errors"] = s.disk_checksum_errors;
  d["recovered_blocks"] = s.recovered_blocks;
  d["recovery_seconds"] = s.recovery_seconds;
  d["remote_hits"] = s.remote_hits;
  d["remote_probe_hits"] = s.remote_probe_hits;
  d["pulls"] = s.pulls;
  d["pulled_blocks"] = s.pulled_blocks;
  d["pulled_bytes"] = s.pulled_bytes;
  d["pull_failures"] = s.pull_failures;
  d["pull_rejected_blocks"] = s.pull_rejected_blocks;
  d["probes"] = s.probes;
  d["announcements"] = s.announcements;
  d["peer_lookups"] = s.peer_lookups;
  d["peer_served_blocks"] = s.peer_served_blocks;
  d["cluster_nodes"] = s.cluster_nodes;
  d["pull_get_seconds"] = s.pull_get_seconds;
  py::list per;
  for (const auto& n : s.per_namespace) {
    py::dict e;
    e["name"] = n.name;
    e["id"] = n.id;
    e["block_bytes"] = n.block_bytes;
    e["blocks"] = n.blocks;
    e["fingerprint"] = n.fingerprint;
    per.append(e);
  }
  d["namespaces_detail"] = per;
  return d;
}

// ---- The client. ---------------------------------------------------------------------------

class PyClient {
 public:
  PyClient(const std::string& address, const std::string& secret, bool map_slab, double timeout,
           double connect_timeout, bool cluster) {
    openlake::kv::ClientOptions o;
    o.secret = secret;
    o.map_slab = map_slab;
    o.cluster = cluster;
    o.call_timeout = absl::Seconds(timeout);
    o.connect_timeout = absl::Seconds(connect_timeout);
    absl::StatusOr<std::unique_ptr<Client>> c;
    {
      py::gil_scoped_release nogil;
      c = Client::Connect(address, o);
    }
    client_ = Unwrap(std::move(c));
  }

  Client& c() {
    if (!client_) throw py::value_error("the client is closed");
    return *client_;
  }

  void Close() {
    py::gil_scoped_release nogil;
    client_.reset();
  }

  Namespace FindNamespace(const std::string& name) {
    absl::StatusOr<Namespace> r;
    {
      py::gil_scoped_release nogil;
      r = c().FindNamespace(name);
    }
    return Unwrap(std::move(r));
  }

  Namespace OpenNamespace(const std::string& name, const py::dict& fp, uint32_t block_bytes) {
    const auto f = ToFingerprint(fp);
    absl::StatusOr<Namespace> r;
    {
      py::gil_scoped_release nogil;
      r = c().OpenNamespace(name, f, block_bytes);
    }
    return Unwrap(std::move(r));
  }

  size_t Put(const Namespace& ns, const py::sequence& keys, const py::sequence& blocks,
             uint32_t first_depth) {
    auto k = ToKeys(keys);
    auto pieces = ToPieces<openlake::kv::ConstPiece, const void*>(blocks);
    openlake::kv::PutOptions o;
    o.first_depth = first_depth;
    absl::StatusOr<openlake::kv::PutResult> r;
    {
      py::gil_scoped_release nogil;
      r = c().Put(ns, k, pieces, o);
    }
    return Unwrap(std::move(r)).stored;
  }

  py::tuple Get(const Namespace& ns, const py::sequence& keys, const py::sequence& blocks,
                const py::object& head) {
    auto k = ToKeys(keys);
    auto pieces = ToPieces<openlake::kv::Piece, void*>(blocks);
    const openlake::kv::GetOptions o = ToGetOptions(head);
    absl::StatusOr<openlake::kv::GetResult> r;
    {
      py::gil_scoped_release nogil;
      r = c().Get(ns, k, pieces, o);
    }
    auto g = Unwrap(std::move(r));
    py::list states;
    for (auto s : g.state) states.append(static_cast<int>(s));
    return py::make_tuple(g.loaded, states);
  }

  py::tuple Exists(const Namespace& ns, const py::sequence& keys, bool detail,
                   const py::object& head) {
    auto k = ToKeys(keys);
    const openlake::kv::GetOptions o = ToGetOptions(head);
    absl::StatusOr<openlake::kv::ExistsResult> r;
    {
      py::gil_scoped_release nogil;
      r = c().Exists(ns, k, o);
    }
    auto e = Unwrap(std::move(r));
    py::list present;
    for (bool b : e.present) present.append(b);
    if (detail) return py::make_tuple(e.prefix, present, e.on_peers);
    return py::make_tuple(e.prefix, present);
  }

  py::list Reserve(const Namespace& ns, uint32_t count, bool allow_partial) {
    absl::StatusOr<std::vector<openlake::kv::SlotGrant>> r;
    {
      py::gil_scoped_release nogil;
      r = c().Reserve(ns, count, allow_partial);
    }
    py::list out;
    for (const auto& g : Unwrap(std::move(r))) {
      out.append(py::make_tuple(g.slot, g.offset, g.generation));
    }
    return out;
  }

  void Commit(const Namespace& ns, const py::sequence& entries) {
    std::vector<openlake::kv::CommitEntry> e;
    e.reserve(py::len(entries));
    for (const py::handle h : entries) {
      const py::tuple t = py::reinterpret_borrow<py::tuple>(h);
      if (py::len(t) != 4) throw py::value_error("commit entries are (slot, key, checksum, depth)");
      e.push_back(openlake::kv::CommitEntry{t[0].cast<uint64_t>(), ToKey(t[1]),
                                            t[2].cast<uint64_t>(), t[3].cast<uint32_t>()});
    }
    absl::Status st;
    {
      py::gil_scoped_release nogil;
      st = c().Commit(ns, e);
    }
    Check(st);
  }

  py::tuple Lookup(const Namespace& ns, const py::sequence& keys, const py::object& head) {
    auto k = ToKeys(keys);
    const openlake::kv::GetOptions o = ToGetOptions(head);
    absl::StatusOr<openlake::kv::Pins> r;
    {
      py::gil_scoped_release nogil;
      r = c().Lookup(ns, k, o);
    }
    auto p = Unwrap(std::move(r));
    py::list hits;
    for (const auto& h : p.hits) {
      hits.append(py::make_tuple(h.slot, h.offset, h.generation, h.checksum));
    }
    return py::make_tuple(p.batch, hits);
  }

  void Release(const std::vector<uint64_t>& pin_batches, const std::vector<uint64_t>& reserved,
               bool wait) {
    absl::Status st;
    {
      py::gil_scoped_release nogil;
      st = c().Release(pin_batches, reserved, wait);
    }
    Check(st);
  }

  bool StillValid(uint64_t slot, uint64_t generation) {
    return c().StillValid(openlake::kv::SlotHit{slot, 0, generation, 0});
  }

  uint32_t Remove(const Namespace& ns, const py::sequence& keys) {
    auto k = ToKeys(keys);
    absl::StatusOr<uint32_t> r;
    {
      py::gil_scoped_release nogil;
      r = c().Remove(ns, k);
    }
    return Unwrap(std::move(r));
  }

  void Reset(const Namespace& ns) {
    absl::Status st;
    {
      py::gil_scoped_release nogil;
      st = c().Reset(ns);
    }
    Check(st);
  }

  py::dict Stats() {
    absl::StatusOr<openlake::kv::PoolStats> r;
    {
      py::gil_scoped_release nogil;
      r = c().Stats();
    }
    return StatsDict(Unwrap(std::move(r)));
  }

  // The mapped slab as a writable memoryview (no copy). It keeps this client alive.
  py::memoryview SlabView() {
    if (!c().has_slab()) {
      RaiseStatus(absl::FailedPreconditionError("this client has not mapped the KV slab"));
    }
    return py::memoryview::from_memory(c().slab_base(), static_cast<ssize_t>(c().slab_bytes()),
                                       /*readonly=*/false);
  }

 private:
  std::unique_ptr<Client> client_;
};

// What the daemon at `address` says of itself (openlake/node/status.h): its node id, version,
// the KV pool's transport to its peers, and the cluster as it sees it.
py::dict NodeStatusOf(const std::string& address, const std::string& secret, double timeout_s) {
  absl::StatusOr<openlake::node::NodeStatus> st;
  {
    py::gil_scoped_release nogil;
    st = openlake::node::QueryStatus(address, {secret, absl::Seconds(timeout_s)});
  }
  if (!st.ok()) RaiseStatus(st.status());
  py::dict d;
  d["node_id"] = st->node_id;
  d["version"] = st->version;
  d["kv"] = st->kv;
  d["kv_slab_bytes"] = st->kv_slab_bytes;
  d["kv_ucx"] = st->kv_ucx;
  d["kv_ucx_tls"] = st->kv_ucx_tls;
  d["kv_ucx_devices"] = st->kv_ucx_devices;
  py::list peers;
  for (const auto& p : st->peers) {
    py::dict e;
    e["id"] = p.id;
    e["rpc_addr"] = p.rpc_addr;
    e["state"] = p.state;
    peers.append(e);
  }
  d["peers"] = peers;
  return d;
}

uint64_t Crc64Of(const py::buffer& data, uint64_t crc) {
  py::buffer_info info = data.request();
  const size_t len = static_cast<size_t>(info.size * info.itemsize);
  const void* p = info.ptr;
  py::gil_scoped_release nogil;
  return openlake::Crc64(p, len, crc);
}

// CRC-64 of many (address, length) ranges, spread over up to `threads` threads.
std::vector<uint64_t> Crc64Many(const std::vector<std::pair<uintptr_t, size_t>>& ranges,
                                unsigned threads) {
  std::vector<uint64_t> out(ranges.size());
  for (const auto& [a, n] : ranges) {
    if (a == 0 && n != 0) throw py::value_error("null address");
  }
  py::gil_scoped_release nogil;
  auto work = [&](size_t first, size_t step) {
    for (size_t i = first; i < ranges.size(); i += step) {
      out[i] = openlake::Crc64(reinterpret_cast<const void*>(ranges[i].first), ranges[i].second);
    }
  };
  if (threads <= 1 || ranges.size() <= 1) {
    work(0, 1);
    return out;
  }
  const unsigned n = std::min<unsigned>(threads, static_cast<unsigned>(ranges.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(work, t, n);
  work(0, n);
  for (auto& t : pool) t.join();
  return out;
}

uint64_t Crc64At(uintptr_t addr, size_t len, uint64_t crc) {
  if (addr == 0 && len != 0) throw py::value_error("null address");
  py::gil_scoped_release nogil;
  return openlake::Crc64(reinterpret_cast<const void*>(addr), len, crc);
}

#if OL_HAVE_CUDA
// CRC-64/XZ of `rows` rows of `row_bytes` bytes at a device address, on the GPU, queued on
// `stream` (a cudaStream_t as an integer: torch's Stream.cuda_stream); the results land in
// `rows` uint64 at out_address (device memory) when the stream gets there.
void Crc64RowsDevice(uintptr_t address, uint64_t row_bytes, uint64_t rows, uintptr_t out_address,
                     uintptr_t stream) {
  if ((address == 0 && rows * row_bytes != 0) || (out_address == 0 && rows != 0)) {
    throw py::value_error("null address");
  }
  int err = 0;
  {
    py::gil_scoped_release nogil;
    err = openlake::cuda::Crc64RowsDevice(reinterpret_cast<const void*>(address), row_bytes, rows,
                                          reinterpret_cast<uint64_t*>(out_address),
                                          reinterpret_cast<void*>(stream));
  }
  if (err != 0) {
    throw std::runtime_error(std::string("crc64_rows_device: CUDA error ") + std::to_string(err) +
                             ": " + openlake::cuda::Crc64RowsErrorString(err));
  }
}
#endif

}  // namespace

namespace openlake_py {
void Raise(const absl::Status& st) { RaiseStatus(st); }
}  // namespace openlake_py

PYBIND11_MODULE(_openlake, m) {
  m.doc() = "OpenLake KV pool client (libopenlake binding); see openlake_client";

  PyObject* base = NewError(m, "OpenLakeError", PyExc_RuntimeError,
                            "An OpenLake call failed; .code names the status code.");
  g_errors.base = base;
  auto bases = [&](PyObject* other) {
    return py::make_tuple(py::handle(base), py::handle(other)).release().ptr();
  };
  g_errors.not_found = NewError(m, "NotFoundError", bases(PyExc_KeyError), "Not found.");
  g_errors.unavailable =
      NewError(m, "UnavailableError", bases(PyExc_ConnectionError), "The daemon is unreachable.");
  g_errors.deadline =
      NewError(m, "DeadlineExceededError", bases(PyExc_TimeoutError), "No answer in time.");
  g_errors.pool_full =
      NewError(m, "PoolFullError", base, "The pool has no room: every slot is pinned or reserved.");
  g_errors.precondition =
      NewError(m, "PreconditionError", base,
               "Wrong state: a fingerprint mismatch, an expired reservation, no mapped slab, ...");
  g_errors.invalid =
      NewError(m, "InvalidArgumentError", bases(PyExc_ValueError), "A malformed request.");
  g_errors.permission =
      NewError(m, "PermissionDeniedError", bases(PyExc_PermissionError), "Authentication failed.");
  g_errors.data_loss = NewError(m, "DataLossError", base, "Stored bytes failed verification.");

  py::class_<Namespace>(m, "Namespace")
      .def_readonly("id", &Namespace::id)
      .def_readonly("digest", &Namespace::digest)
      .def_readonly("name", &Namespace::name)
      .def_readonly("block_bytes", &Namespace::block_bytes)
      .def_readonly("slot_bytes", &Namespace::slot_bytes)
      .def("__repr__", [](const Namespace& n) {
        return "<Namespace '" + n.name + "' id=" + std::to_string(n.id) +
               " block_bytes=" + std::to_string(n.block_bytes) + ">";
      });

  py::class_<PyClient>(m, "Client")
      .def(py::init<const std::string&, const std::string&, bool, double, double, bool>(),
           py::arg("address"), py::arg("secret") = "", py::arg("map_slab") = true,
           py::arg("timeout") = 10.0, py::arg("connect_timeout") = 5.0, py::arg("cluster") = true,
           "Connects to an openlaked ('host:port' or 'unix:/path'); maps the slab when local. "
           "With cluster=False, lookups and existence queries answer from that daemon's own "
           "tiers only, never from its cluster's other nodes.")
      .def("close", &PyClient::Close)
      .def_property_readonly("has_slab", [](PyClient& c) { return c.c().has_slab(); })
      .def_property_readonly("slab_bytes", [](PyClient& c) { return c.c().slab_bytes(); })
      .def_property_readonly(
          "slab_address",
          [](PyClient& c) { return reinterpret_cast<uintptr_t>(c.c().slab_base()); })
      .def_property_readonly("server_version", [](PyClient& c) { return c.c().server_version(); })
      .def_property_readonly("lease_seconds",
                             [](PyClient& c) { return absl::ToDoubleSeconds(c.c().lease()); })
      .def("open_namespace", &PyClient::OpenNamespace, py::arg("name"), py::arg("fingerprint"),
           py::arg("block_bytes"))
      .def("find_namespace", &PyClient::FindNamespace, py::arg("name"),
           "The namespace called `name` (NotFoundError when none), for existence queries.")
      .def_property_readonly("slab_segments_offset",
                             [](PyClient& c) { return c.c().slab_segments_offset(); })
      .def_property_readonly("slab_segment_bytes",
                             [](PyClient& c) { return c.c().slab_segment_bytes(); })
      .def("put", &PyClient::Put, py::arg("ns"), py::arg("keys"), py::arg("blocks"),
           py::arg("first_depth") = 0,
           "Stores blocks (each a list of (address, length) pieces); returns how many of the "
           "leading keys were stored.")
      .def("get", &PyClient::Get, py::arg("ns"), py::arg("keys"), py::arg("blocks"),
           py::arg("head") = py::none(),
           "Loads the leading present keys into the pieces; returns (loaded, states) with "
           "states 0 loaded, 1 missing, 2 corrupt. `head`: the key of the chain's first block "
           "when keys[0] is not it (a cluster finds a chain's owners by its head).")
      .def("exists", &PyClient::Exists, py::arg("ns"), py::arg("keys"), py::arg("detail") = false,
           py::arg("head") = py::none(),
           "(prefix, present): the leading keys the pool holds, and per key whether it holds "
           "it. With detail=True, (prefix, present, on_peers): the last on_peers keys of the "
           "prefix are on the cluster's other nodes (a load pulls them first).")
      .def("reserve", &PyClient::Reserve, py::arg("ns"), py::arg("count"),
           py::arg("allow_partial") = true)
      .def("commit", &PyClient::Commit, py::arg("ns"), py::arg("entries"))
      .def("lookup", &PyClient::Lookup, py::arg("ns"), py::arg("keys"),
           py::arg("head") = py::none())
      .def("release", &PyClient::Release, py::arg("pin_batches"),
           py::arg("reserved") = std::vector<uint64_t>{}, py::arg("wait") = true)
      .def("still_valid", &PyClient::StillValid, py::arg("slot"), py::arg("generation"))
      .def("remove", &PyClient::Remove, py::arg("ns"), py::arg("keys"),
           "Drops the blocks of these keys; returns how many were present.")
      .def("reset", &PyClient::Reset, py::arg("ns"))
      .def("stats", &PyClient::Stats)
      .def("slab_view", &PyClient::SlabView, py::keep_alive<0, 1>());

  m.def("crc64", &Crc64Of, py::arg("data"), py::arg("crc") = 0,
        "CRC-64/XZ of a buffer (the KV pool's block checksum).");
  m.def("crc64_at", &Crc64At, py::arg("address"), py::arg("length"), py::arg("crc") = 0,
        "CRC-64/XZ of host memory at an address.");
  m.def("crc64_many", &Crc64Many, py::arg("ranges"), py::arg("threads") = 1,
        "CRC-64/XZ of each (address, length) range, on up to `threads` threads.");
#if OL_HAVE_CUDA
  m.def("crc64_rows_device", &Crc64RowsDevice, py::arg("address"), py::arg("row_bytes"),
        py::arg("rows"), py::arg("out_address"), py::arg("stream") = 0,
        "Queues on `stream` the CRC-64/XZ of each of `rows` rows of `row_bytes` bytes at a CUDA "
        "device address into `rows` uint64 at out_address (device memory).");
#endif
  m.def("has_cuda_crc", [] { return OL_HAVE_CUDA != 0; },
        "Whether crc64_rows_device (the GPU checksum) was built in.");
  openlake_py::BindS3Transfer(m);
  m.def("version", [] { return std::string(openlake::Version()); });
  m.def("node_status", &NodeStatusOf, py::arg("address"), py::arg("secret") = "",
        py::arg("timeout") = 3.0,
        "What the openlaked at `address` says of itself: a dict with node_id, version, kv, "
        "kv_slab_bytes, kv_ucx (whether its KV pool pulls from peers over UCX), kv_ucx_tls and "
        "kv_ucx_devices ('' = UCX's own choice), and peers: the other members of its [[nodes]], "
        "each {id, rpc_addr, state} with state 'up', 'down' or 'unknown'.");
}

// S3Transfer: the Python face of openlake/s3/transfer.h, for the checkpoint writer and reader
// and the dataset reader (openlake_client.checkpoint, openlake_client.dataset). Objects are
// passed as buffers (bytes, bytearray, memoryview, numpy arrays, a tensor's untyped storage
// through memoryview): a PUT sends straight from the buffer and a GET lands straight in it,
// with the GIL released for the whole batch.
#include "binding.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/synchronization/mutex.h"

#include "openlake/s3/client.h"
#include "openlake/s3/transfer.h"

namespace py = pybind11;
namespace s3 = openlake::s3;

namespace openlake_py {
namespace {

void Check(const absl::Status& s) {
  if (!s.ok()) Raise(s);
}

// The bytes of a buffer, which must be C-contiguous.
std::pair<char*, size_t> BytesOf(const py::buffer& b, bool writable, py::buffer_info* keep) {
  *keep = b.request(writable);
  const py::buffer_info& info = *keep;
  py::ssize_t expect = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] > 1 && info.strides[d] != expect) {
      throw py::value_error("the buffer must be C-contiguous");
    }
    expect *= info.shape[d];
  }
  return {static_cast<char*>(info.ptr), static_cast<size_t>(info.size * info.itemsize)};
}

// The first failure of a batch, naming how many items failed.
absl::Status FirstFailure(const std::vector<absl::Status>& all, const std::vector<std::string>& keys) {
  size_t failed = 0;
  size_t first = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].ok()) continue;
    if (failed++ == 0) first = i;
  }
  if (failed == 0) return absl::OkStatus();
  std::string message = keys[first] + ": " + std::string(all[first].message());
  if (failed > 1) {
    message += " (and " + std::to_string(failed - 1) + " more of " + std::to_string(all.size()) +
               " items failed)";
  }
  absl::Status out(all[first].code(), message);
  // Keeps the S3 error code (openlake/s3/client.h's ErrorCodeOf reads it).
  all[first].ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

class PyTransfer {
 public:
  PyTransfer(const std::string& endpoint, const std::string& access_key,
             const std::string& secret_key, const std::string& region, int connections,
             size_t part_size, int retries, double timeout) {
    s3::TransferOptions o;
    o.client.endpoint = endpoint;
    o.client.credential = {access_key, secret_key};
    o.client.region = region;
    o.client.io_timeout = absl::Seconds(timeout);
    o.connections = connections;
    o.part_size = part_size;
    o.retries = retries;
    o.progress = [this](uint64_t done, uint64_t total) { Report(done, total); };
    absl::StatusOr<std::unique_ptr<s3::Transfer>> t;
    {
      py::gil_scoped_release nogil;
      t = s3::Transfer::Create(std::move(o));
    }
    t_ = Unwrap(std::move(t));
  }

  // [(key, buffer)] → [etag]
  std::vector<std::string> PutMany(const std::string& bucket, const py::list& items,
                                   py::object progress) {
    std::vector<py::buffer_info> keep(items.size());
    std::vector<s3::PutItem> puts;
    std::vector<std::string> keys;
    for (size_t i = 0; i < items.size(); ++i) {
      auto pair = items[i].cast<py::tuple>();
      if (pair.size() != 2) throw py::value_error("each item is (key, buffer)");
      auto [ptr, len] = BytesOf(pair[1].cast<py::buffer>(), false, &keep[i]);
      keys.push_back(pair[0].cast<std::string>());
      puts.push_back({keys.back(), std::string_view(ptr, len)});
    }
    std::vector<absl::StatusOr<std::string>> r;
    {
      ProgressScope scope(this, std::move(progress));
      py::gil_scoped_release nogil;
      r = t_->PutMany(bucket, puts);
    }
    std::vector<absl::Status> st;
    std::vector<std::string> out;
    for (auto& e : r) {
      st.push_back(e.status());
      out.push_back(e.ok() ? *e : std::string());
    }
    Check(FirstFailure(st, keys));
    return out;
  }

  // [(key, offset, writable buffer[, crc64])]: each buffer filled from the object at offset,
  // and checked against the CRC-64 where one is given (not None).
  void GetMany(const std::string& bucket, const py::list& items, py::object progress) {
    std::vector<py::buffer_info> keep(items.size());
    std::vector<s3::GetItem> gets;
    std::vector<std::string> keys;
    for (size_t i = 0; i < items.size(); ++i) {
      auto t = items[i].cast<py::tuple>();
      if (t.size() != 3 && t.size() != 4) {
        throw py::value_error("each item is (key, offset, writable buffer[, crc64])");
      }
      auto [ptr, len] = BytesOf(t[2].cast<py::buffer>(), true, &keep[i]);
      keys.push_back(t[0].cast<std::string>());
      gets.push_back({keys.back(), t[1].cast<uint64_t>(), absl::MakeSpan(ptr, len), {}});
      if (t.size() == 4 && !t[3].is_none()) gets.back().crc64 = t[3].cast<uint64_t>();
    }
    std::vector<absl::Status> r;
    {
      ProgressScope scope(this, std::move(progress));
      py::gil_scoped_release nogil;
      r = t_->GetMany(bucket, gets);
    }
    Check(FirstFailure(r, keys));
  }

  py::tuple Head(const std::string& bucket, const std::string& key) {
    absl::StatusOr<s3::ObjectHead> h;
    {
      py::gil_scoped_release nogil;
      h = Control([&](s3::Client& c) { return c.HeadObject(bucket, key); });
    }
    s3::ObjectHead v = Unwrap(std::move(h));
    return py::make_tuple(v.size, v.etag);
  }

  // Every key under the prefix, in order: [(key, size, etag)].
  std::vector<py::tuple> List(const std::string& bucket, const std::string& prefix) {
    std::vector<s3::ListedObject> all;
    absl::Status st;
    {
      py::gil_scoped_release nogil;
      s3::ListOptions lo;
      lo.prefix = prefix;
      while (true) {
        absl::StatusOr<s3::ListPage> page =
            Control([&](s3::Client& c) { return c.ListObjectsV2(bucket, lo); });
        if (!page.ok()) {
          st = page.status();
          break;
        }
        for (auto& o : page->objects) all.push_back(std::move(o));
        if (!page->truncated) break;
        lo.continuation_token = page->next_continuation_token;
      }
    }
    Check(st);
    std::vector<py::tuple> out;
    out.reserve(all.size());
    for (const auto& o : all) out.push_back(py::make_tuple(o.key, o.size, o.etag));
    return out;
  }

  void Delete(const std::string& bucket, const std::string& key) {
    absl::Status st;
    {
      py::gil_scoped_release nogil;
      st = Control([&](s3::Client& c) { return c.DeleteObject(bucket, key); });
    }
    Check(st);
  }

  void CreateBucket(const std::string& bucket) {
    absl::Status st;
    {
      py::gil_scoped_release nogil;
      st = Control([&](s3::Client& c) { return c.CreateBucket(bucket); });
    }
    Check(st);
  }

  py::dict Counters() const {
    const s3::Transfer::Counters c = t_->counters();
    py::dict d;
    d["requests"] = c.requests;
    d["retries"] = c.retries;
    d["bytes_sent"] = c.bytes_sent;
    d["bytes_received"] = c.bytes_received;
    return d;
  }

  int connections() const { return t_->options().connections; }
  size_t part_size() const { return t_->options().part_size; }

 private:
  // The progress callable of the batch under way (None: none).
  struct ProgressScope {
    ProgressScope(PyTransfer* t, py::object fn) : t(t) {
      absl::MutexLock l(&t->progress_mu_);
      t->progress_ = std::move(fn);
    }
    ~ProgressScope() {
      py::object old;
      {
        absl::MutexLock l(&t->progress_mu_);
        old = std::move(t->progress_);
        t->progress_ = py::none();
      }
    }
    PyTransfer* t;
  };

  // From a worker thread (the GIL not held).
  void Report(uint64_t done, uint64_t total) {
    py::gil_scoped_acquire gil;
    py::object fn;
    {
      absl::MutexLock l(&progress_mu_);
      fn = progress_;
    }
    if (!fn || fn.is_none()) return;
    try {
      fn(done, total);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("openlake_client S3Transfer progress callback");
    }
  }

  // A request on the transfer's control connection, one at a time.
  template <typename F>
  auto Control(F&& f) -> decltype(f(std::declval<s3::Client&>())) {
    absl::MutexLock l(&control_mu_);
    absl::StatusOr<s3::Client*> c = t_->control();
    if (!c.ok()) return c.status();
    return f(**c);
  }

  std::unique_ptr<s3::Transfer> t_;
  absl::Mutex control_mu_;
  absl::Mutex progress_mu_;
  py::object progress_ = py::none();
};

}  // namespace

void BindS3Transfer(py::module_& m) {
  py::class_<PyTransfer>(m, "S3Transfer")
      .def(py::init<const std::string&, const std::string&, const std::string&, const std::string&,
                    int, size_t, int, double>(),
           py::arg("endpoint"), py::arg("access_key"), py::arg("secret_key"),
           py::arg("region") = "us-east-1", py::arg("connections") = 8,
           py::arg("part_size") = size_t{16} << 20, py::arg("retries") = 3,
           py::arg("timeout") = 30.0,
           "Parallel S3 transfers to an endpoint ('host:port', plain http, path-style, SigV4): "
           "`connections` requests in flight, objects above `part_size` as multipart uploads "
           "whose parts travel at once, large reads split into ranges.")
      .def("put_many", &PyTransfer::PutMany, py::arg("bucket"), py::arg("items"),
           py::arg("progress") = py::none(),
           "Uploads [(key, buffer)] all at once; returns their ETags. Raises the first failure "
           "(its message counts the others); progress(done_bytes, total_bytes) is called as "
           "pieces complete.")
      .def("get_many", &PyTransfer::GetMany, py::arg("bucket"), py::arg("items"),
           py::arg("progress") = py::none(),
           "Fills each writable buffer of [(key, offset, buffer[, crc64])] from its object at "
           "offset, all at once; the object must hold every byte asked for. An item's crc64 "
           "(an int, or None) is checked as its last piece lands: DataLossError when the "
           "bytes read differ.")
      .def("head", &PyTransfer::Head, py::arg("bucket"), py::arg("key"),
           "(size, etag) of an object; NotFoundError when there is none.")
      .def("list", &PyTransfer::List, py::arg("bucket"), py::arg("prefix") = "",
           "Every object under the prefix, in key order: [(key, size, etag)].")
      .def("delete", &PyTransfer::Delete, py::arg("bucket"), py::arg("key"))
      .def("create_bucket", &PyTransfer::CreateBucket, py::arg("bucket"),
           "Creates the bucket; succeeds when it is yours already.")
      .def_property_readonly("connections", &PyTransfer::connections)
      .def_property_readonly("part_size", &PyTransfer::part_size)
      .def("counters", &PyTransfer::Counters,
           "requests, retries, bytes_sent and bytes_received so far.");
}

}  // namespace openlake_py

// A multipart/form-data body read as it streams (RFC 7578), for S3's POST object uploads
// (docs/s3.md, "POST uploads"): the fields before the file are read whole (small, bounded),
// then the file's content streams out piece by piece without being held, up to the closing
// delimiter; what follows the file is ignored, as S3 ignores it.
//
//   FormReader form(ex, boundary);
//   while (true) {
//     auto field = co_await form.NextField();      // a field, or the file (is_file)
//     if (!field.ok()) ...;                        // malformed, too large, or the peer left
//     if (!*field) ...;                            // the form ended without a file
//     if ((*field)->is_file) break;
//     use (*field)->name, (*field)->value;
//   }
//   while (true) { auto piece = co_await form.NextFilePiece(); ... empty at the file's end }
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "http/server.h"

#include "openlake/io/task.h"

namespace openlake::s3 {

// The boundary of a "multipart/form-data; boundary=..." Content-Type; nullopt when it is not
// one or names no valid boundary.
std::optional<std::string> FormBoundary(std::string_view content_type);

struct FormField {
  std::string name;      // as sent (S3 compares field names ignoring case)
  std::string value;     // a field's value; empty for the file
  std::string filename;  // the file's name in Content-Disposition, if any
  std::string content_type;  // the part's Content-Type
  bool is_file = false;  // the part named "file": its content comes from NextFilePiece
};

class FormReader {
 public:
  // `max_fields_bytes`: the fields before the file, all together.
  FormReader(http::Exchange& ex, std::string boundary, size_t max_fields_bytes = 1 << 20);

  // The next part: a field whole, or the file's head; nullopt when the form ended.
  io::Task<absl::StatusOr<std::optional<FormField>>> NextField();
  // The file's next bytes (a view valid until the next call); empty at its end.
  io::Task<absl::StatusOr<std::string_view>> NextFilePiece();

 private:
  io::Task<absl::Status> Fill();  // more raw bytes into buf_ (DataLoss at the body's end)
  absl::Status Malformed(std::string_view why) const;

  http::Exchange& ex_;
  std::string delimiter_;  // "\r\n--" + boundary
  size_t max_fields_bytes_;
  size_t fields_bytes_ = 0;
  std::string buf_;        // unread raw bytes
  std::string piece_;      // the file piece handed out last
  bool started_ = false;   // past the first delimiter
  bool ended_ = false;     // the closing delimiter was seen
  bool in_file_ = false;
  bool body_done_ = false;
};

}  // namespace openlake::s3

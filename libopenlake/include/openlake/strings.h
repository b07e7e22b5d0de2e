// File: openlake/strings.h
//
// String helpers for code built on Debian 12's Abseil, whose absl::string_view is its own class
// (not an alias of std::string_view): absl::StrCat does not take a std::string_view there.
// openlake::StrCat converts such arguments and forwards everything else to absl::StrCat
// unchanged; SV() and AV() convert between the two views; Hex writes bytes as lower-case
// hexadecimal. Header-only, so it adds nothing to the library's ABI.
//
//   std::string_view name = ...;
//   std::string msg = openlake::StrCat("bucket ", name, " has ", n, " objects");
//   std::string_view why = openlake::SV(status.message());
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace openlake {

template <typename T>
decltype(auto) StrCatArg(const T& v) {
  if constexpr (std::is_convertible_v<const T&, std::string_view> &&
                !std::is_convertible_v<const T&, absl::string_view>) {
    const std::string_view s(v);
    return absl::string_view(s.data(), s.size());
  } else {
    return (v);
  }
}

template <typename... Args>
std::string StrCat(const Args&... args) {
  return absl::StrCat(StrCatArg(args)...);
}

// std::string_view of an absl::string_view (e.g. Status::message()).
inline std::string_view SV(absl::string_view s) { return std::string_view(s.data(), s.size()); }
inline absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// `bytes` as lower-case hexadecimal, two digits per byte.
inline std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

}  // namespace openlake

#include "ec/reference.h"

#include <array>
#include <cstddef>

namespace openlake::ec::reference {
namespace {

struct Tables {
  std::array<uint8_t, 512> exp{};
  std::array<int, 256> log{};
  Tables() {
    int x = 1;
    for (int i = 0; i < 255; ++i) {
      exp[i] = static_cast<uint8_t>(x);
      log[x] = i;
      x <<= 1;
      if (x & 0x100) x ^= 0x11d;
    }
    for (int i = 255; i < 512; ++i) exp[i] = exp[i - 255];
  }
};
const Tables& T() {
  static const Tables t;
  return t;
}

}  // namespace

uint8_t Mul(uint8_t a, uint8_t b) {
  if (a == 0 || b == 0) return 0;
  return T().exp[T().log[a] + T().log[b]];
}

uint8_t Inv(uint8_t a) { return a == 0 ? 0 : T().exp[255 - T().log[a]]; }

std::vector<uint8_t> Generator(int k, int m) {
  std::vector<uint8_t> g(static_cast<size_t>((k + m) * k), 0);
  for (int i = 0; i < k; ++i) g[i * k + i] = 1;
  for (int i = k; i < k + m; ++i) {
    for (int j = 0; j < k; ++j) g[i * k + j] = Inv(static_cast<uint8_t>(i ^ j));
  }
  return g;
}

void Encode(int k, int m, const std::vector<std::vector<uint8_t>>& data,
            std::vector<std::vector<uint8_t>>* parity) {
  const std::vector<uint8_t> g = Generator(k, m);
  const size_t len = data.empty() ? 0 : data[0].size();
  parity->assign(static_cast<size_t>(m), std::vector<uint8_t>(len, 0));
  for (int i = 0; i < m; ++i) {
    for (size_t b = 0; b < len; ++b) {
      uint8_t v = 0;
      for (int j = 0; j < k; ++j) v ^= Mul(g[(k + i) * k + j], data[j][b]);
      (*parity)[i][b] = v;
    }
  }
}

bool Reconstruct(int k, int m, std::vector<std::vector<uint8_t>>* shards,
                 const std::vector<bool>& present) {
  const int n = k + m;
  std::vector<int> rows;
  for (int i = 0; i < n && static_cast<int>(rows.size()) < k; ++i) {
    if (present[i]) rows.push_back(i);
  }
  if (static_cast<int>(rows.size()) < k) return false;
  const std::vector<uint8_t> g = Generator(k, m);
  const size_t len = (*shards)[rows[0]].size();
  // Solve B · data = s for every byte column: Gaussian elimination on [B | s] over GF(2^8).
  std::vector<std::vector<uint8_t>> data(static_cast<size_t>(k), std::vector<uint8_t>(len));
  for (size_t col = 0; col < len; ++col) {
    std::vector<std::vector<uint8_t>> a(static_cast<size_t>(k), std::vector<uint8_t>(k + 1));
    for (int r = 0; r < k; ++r) {
      for (int c = 0; c < k; ++c) a[r][c] = g[rows[r] * k + c];
      a[r][k] = (*shards)[rows[r]][col];
    }
    for (int c = 0; c < k; ++c) {
      int p = c;
      while (p < k && a[p][c] == 0) ++p;
      if (p == k) return false;
      std::swap(a[p], a[c]);
      const uint8_t inv = Inv(a[c][c]);
      for (int x = 0; x <= k; ++x) a[c][x] = Mul(a[c][x], inv);
      for (int r = 0; r < k; ++r) {
        if (r == c || a[r][c] == 0) continue;
        const uint8_t f = a[r][c];
        for (int x = 0; x <= k; ++x) a[r][x] ^= Mul(f, a[c][x]);
      }
    }
    for (int r = 0; r < k; ++r) data[r][col] = a[r][k];
  }
  std::vector<std::vector<uint8_t>> parity;
  Encode(k, m, data, &parity);
  for (int i = 0; i < n; ++i) {
    if (!present[i]) (*shards)[i] = i < k ? data[i] : parity[i - k];
  }
  return true;
}

}  // namespace openlake::ec::reference

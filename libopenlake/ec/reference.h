// A plain C++ Reed–Solomon codec, the test oracle of ec::Codec (ISA-L's `_base` idea): GF(2^8)
// with the polynomial 0x11d by log/exp tables, the same Cauchy generator matrix, encoding by
// definition and reconstruction by Gaussian elimination. Slow and obvious on purpose.
#pragma once

#include <cstdint>
#include <vector>

namespace openlake::ec::reference {

uint8_t Mul(uint8_t a, uint8_t b);
uint8_t Inv(uint8_t a);

// (k + m) × k generator: identity, then Cauchy rows 1 / (i ^ j).
std::vector<uint8_t> Generator(int k, int m);

// parity[i] for data[0..k), each len bytes.
void Encode(int k, int m, const std::vector<std::vector<uint8_t>>& data,
            std::vector<std::vector<uint8_t>>* parity);

// Rebuilds every shard with present[i] false from the others; false when fewer than k remain.
bool Reconstruct(int k, int m, std::vector<std::vector<uint8_t>>* shards,
                 const std::vector<bool>& present);

}  // namespace openlake::ec::reference

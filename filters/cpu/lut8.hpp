#pragma once
// An 8-bit table applied to a run of samples (cpu/lut8.cpp): the 8-bit
// per-sample kinds that hold their 256 results (scale, gamma) as cv::LUT.
#include <cstdint>

namespace cbi::cpu {

// out[i] = table[in[i]] for i < n (table: 256 entries).
void lut8_row(const std::uint8_t* table, const std::uint8_t* in, std::uint8_t* out, int n);

}  // namespace cbi::cpu

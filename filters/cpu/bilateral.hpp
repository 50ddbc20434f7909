#pragma once
// The bilateral filter's CPU row form (cpu/bilateral.cpp), for the naive
// schedule.
#include "filters/kinds/bilateral.hpp"

namespace cbi::cpu {

// Output rows [y0, y1) of op, bit-identical to op(x, y) for each pixel:
// 8-bit and float with 1 or 3 channels where the CPU has AVX2. Returns false, having
// written nothing, for any other op or CPU.
template <class T>
bool bilateral_rows(const BilateralOp<T>& op, int y0, int y1);

}  // namespace cbi::cpu

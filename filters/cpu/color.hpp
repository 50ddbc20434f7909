#pragma once
// The CPU colour matrix and blend, a band of rows at a time (cpu/color.cpp).
#include "filters/ops.hpp"

namespace cbi::cpu {

// Runs op on rows [y0, y1): bit-identical to op(x, y) for every pixel of
// those rows. Any channel counts; 3->3, 3->1, 4->4 and 4->1 take the AVX2
// path where the CPU has AVX2.
template <class T>
void color_rows(const ColorOp<T>& op, int y0, int y1);

// Runs op on rows [y0, y1): bit-identical to op(x, y) for every pixel of
// those rows; AVX2 where the CPU has it.
template <class T>
void blend_rows(const BlendOp<T>& op, int y0, int y1);

}  // namespace cbi::cpu

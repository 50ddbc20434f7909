#pragma once
// The CPU colour matrix, blend and HSV/HLS, a band of rows at a time (cpu/color.cpp).
#include "filters/kinds/hsv.hpp"
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

// Runs op (hsv, hls) on rows [y0, y1): bit-identical to op(x, y) for every
// pixel of those rows; 8-bit 3- and 4-channel rows take the AVX2 path where
// the CPU has AVX2 and FMA.
template <class T>
void hsv_rows(const HsvOp<T>& op, int y0, int y1);

}  // namespace cbi::cpu

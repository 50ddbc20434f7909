#pragma once
// The passes of the CPU 8-bit Sobel (SobelOp<uint8_t>) in int16 lanes with
// OpenCV's universal intrinsics at AVX2 width (cpu/sobel8.cpp). Each
// returns how many leading outputs it wrote (0 where the CPU lacks AVX2);
// TileWorker does the rest with its generic loops, which give the same
// values: the sums are integers, exact in any order, and the finish does
// SobelOp::finish's float operations one for one.
#include <cstddef>
#include <cstdint>

namespace cbi::cpu {

// Row pass: out[i] = sum over t < k of w[t] * in[i + t * tap_stride], i < n.
// Exact in int16 for every Sobel kernel (KSIZE <= 7): |in| <= 255 and the
// weights' magnitudes sum to at most 64, so |sum| <= 16320.
int sobel8_row_sums(std::int16_t* out, const std::int16_t* in, std::ptrdiff_t tap_stride, const int* w, int k, int n);

// Whether a pass's gradients (row sums of weights wx, summed down with wy)
// fit the int16 lanes of the column passes below: 255 * sum|wx| * sum|wy|
// is 1020 for KSIZE 3 and 24480 for KSIZE 5, but 326400 for KSIZE 7.
inline bool sobel8_gradients_fit_int16(const int* wx, int kw, const int* wy, int kh) {
    int sx = 0, sy = 0;
    for (int t = 0; t < kw; ++t) sx += wx[t] < 0 ? -wx[t] : wx[t];
    for (int t = 0; t < kh; ++t) sy += wy[t] < 0 ? -wy[t] : wy[t];
    return 255 * sx * sy <= 32767;
}

// Column pass and finish of modes x and y: g = sum over j < k of
// w[j] * rows[i + j * pitch]; out[i] = min(|g|, 255), which is
// saturate_round(|float(g)|) for an integer g. Needs
// sobel8_gradients_fit_int16.
int sobel8_abs_columns(std::uint8_t* out, const std::int16_t* rows, std::ptrdiff_t pitch, const int* w, int k, int n);

// Column passes and finish of mode mag: gx from rows_x and wx (kx rows),
// gy from rows_y and wy (ky rows), both with row pitch `pitch`;
// out[i] = saturate_round(sqrtf(gx * gx + gy * gy)) in float, each product
// and the sum rounded separately (no FMA), as SobelOp::finish. Needs
// sobel8_gradients_fit_int16 for both passes.
int sobel8_magnitude_columns(std::uint8_t* out, const std::int16_t* rows_x, const int* wx, int kx,
                             const std::int16_t* rows_y, const int* wy, int ky, std::ptrdiff_t pitch, int n);

// Whether the sum of two passes' gradients (the Laplacian's d2x + d2y)
// fits the int16 lanes of sobel8_sum_abs_columns: 255 * (sum|wx0| *
// sum|wy0| + sum|wx1| * sum|wy1|), 8160 for KSIZE 3 and 32640 for KSIZE 5.
inline bool sobel8_gradient_sum_fits_int16(const int* wx0, int kx0, const int* wy0, int ky0, const int* wx1, int kx1,
                                           const int* wy1, int ky1) {
    const auto total = [](const int* w, int k) {
        int s = 0;
        for (int t = 0; t < k; ++t) s += w[t] < 0 ? -w[t] : w[t];
        return s;
    };
    return 255 * (total(wx0, kx0) * total(wy0, ky0) + total(wx1, kx1) * total(wy1, ky1)) <= 32767;
}

// Column passes and finish of the 8-bit Laplacian: g = gx + gy (gx from
// rows_x and wx, gy from rows_y and wy, as sobel8_magnitude_columns);
// out[i] = min(|g|, 255), which is saturate_round(|float(g)|) for an
// integer g. Needs sobel8_gradient_sum_fits_int16.
int sobel8_sum_abs_columns(std::uint8_t* out, const std::int16_t* rows_x, const int* wx, int kx,
                           const std::int16_t* rows_y, const int* wy, int ky, std::ptrdiff_t pitch, int n);

// Whether the passes above run vectorised on this CPU (AVX2) rather than
// writing nothing: the 8-bit sepfilter2d takes its integer path only then.
bool sobel8_vectorised();

// Column pass and finish of an 8-bit sepfilter2d whose taps are small
// multiples of powers of two (TileWorker's integer path): g = sum over j < k
// of w[j] * rows[i + j * pitch] in int16, out[i] = g / 2^shift rounded to
// nearest even and saturated to [0, 255]. The caller checks that every sum
// fits int16 with 2^shift to spare.
int int16_columns_u8(std::uint8_t* out, const std::int16_t* rows, std::ptrdiff_t pitch, const int* w, int k, int shift,
                     int n);

// The same from int16 rows with the column sums in int32 (pairs of rows
// through one multiply-add): for sums past int16; the caller checks that
// they fit int32.
int int32_columns_u8(std::uint8_t* out, const std::int16_t* rows, std::ptrdiff_t pitch, const int* w, int k, int shift,
                     int n);

}  // namespace cbi::cpu

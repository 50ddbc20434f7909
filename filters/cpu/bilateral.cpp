// The 8-bit and float bilateral filters a band of rows at a time, as
// OpenCV's bilateralFilter_8u/32f_Invoker: per tap a vector of pixels, 8-bit
// colour weights gathered from the distance table, float ones computed
// (exp_nonpositive lane by lane). The taps of the disc go in operator()'s
// order (row by row) with the same separately rounded products and sums, so
// each output equals op(x, y) bit for bit. 8-bit: AVX-512 where the CPU has
// it, AVX2 for the rest of a row (or all of it); float: AVX2.
#include "filters/cpu/opencv_avx2.hpp"

#include "filters/cpu/bilateral.hpp"

#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#if CBI_OPENCV_AVX2
#define CBI_BILATERAL_AVX2 1
#endif

namespace cbi::cpu {
namespace {

#if CBI_BILATERAL_AVX2
using Op8 = BilateralOp<std::uint8_t>;

// Pixels [0, returned x) of a 3-channel row as three float planes, from
// out[c] + offset on: 32 pixels a step.
CBI_AVX2 int deinterleave3_avx2(const std::uint8_t* in, float* const* out, int offset, int width) {
    using namespace cv;
    int x = 0;
    for (; x + 32 <= width; x += 32) {
        v_uint8x32 c[3];
        v_load_deinterleave(in + 3 * x, c[0], c[1], c[2]);
        for (int k = 0; k < 3; ++k) {
            v_uint16x16 h[2];
            v_expand(c[k], h[0], h[1]);
            for (int i = 0; i < 2; ++i) {
                v_uint32x8 q[2];
                v_expand(h[i], q[0], q[1]);
                for (int j = 0; j < 2; ++j)
                    v_store(out[k] + offset + x + 16 * i + 8 * j, v_cvt_f32(v_reinterpret_as_s32(q[j])));
            }
        }
    }
    return x;
}

// The source rows of a band as planar float rows padded by the radius on
// both sides (border samples through op.src.at), in a ring of 2r + 1 rows:
// each source row is converted once per band.
template <class T>
class PaddedRows {
public:
    PaddedRows(const BilateralOp<T>& op, int channels)
        : op_(op),
          channels_(channels),
          len_(op.dst.width + 2 * op.radius),
          rows_(2 * op.radius + 1),
          data_(static_cast<std::size_t>(rows_) * channels * len_) {}

    // Channel c of source row y (any y of the current window), at padded column 0.
    const float* plane(int y, int c) const {
        return data_.data() + (static_cast<std::size_t>(slot(y)) * channels_ + c) * len_;
    }

    void load(int y) {
        const int r = op_.radius, width = op_.src.view.width;
        const T* row = op_.src.row(y);
        float* out[3];
        for (int c = 0; c < channels_; ++c)
            out[c] = data_.data() + (static_cast<std::size_t>(slot(y)) * channels_ + c) * len_;
        int lo = len_, hi = len_;  // the interior [lo, hi): columns 0 .. width - 1
        if (row != nullptr) {
            lo = r, hi = r + width;
            const int done = channels_ == 3 ? deinterleave3(row, out, width) : 0;
            for (int x = done; x < width; ++x)
                for (int c = 0; c < channels_; ++c) out[c][r + x] = row[x * channels_ + c];
        }
        for (int xi = 0; xi < len_; ++xi)
            if (xi < lo || xi >= hi)
                for (int c = 0; c < channels_; ++c) out[c][xi] = op_.src.at(row, xi - r, c);
    }

private:
    int deinterleave3(const T* row, float* const* out, int width) const {
        if constexpr (std::is_same_v<T, std::uint8_t>)
            return deinterleave3_avx2(row, out, op_.radius, width);
        else
            return 0;
    }
    int slot(int y) const { return ((y % rows_) + rows_) % rows_; }
    const BilateralOp<T>& op_;
    int channels_, len_, rows_;
    std::vector<float> data_;
};

// Outputs [x, x + 8 B) of row y. tap[t * CN + c]: channel c's plane for
// tap t, at the tap's dx; centre[c]: the centre's. B vectors at once keep
// more gathers in flight.
template <int CN, int B>
CBI_AVX2 void bilateral_block(const Op8& op, const float* const* tap, const float* space, int taps,
                              const float* const* centre, std::uint8_t* out, int x) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v0[B][CN], sum[B][CN], wsum[B];
    for (int b = 0; b < B; ++b) {
        for (int c = 0; c < CN; ++c) {
            v0[b][c] = _mm256_loadu_ps(centre[c] + x + 8 * b);
            sum[b][c] = _mm256_setzero_ps();
        }
        wsum[b] = _mm256_setzero_ps();
    }
    for (int t = 0; t < taps; ++t) {
        const __m256 sw = _mm256_set1_ps(space[t]);
        for (int b = 0; b < B; ++b) {
            __m256 v[CN], d = _mm256_setzero_ps();
            for (int c = 0; c < CN; ++c) {  // integer differences: exact in float, in any order
                v[c] = _mm256_loadu_ps(tap[t * CN + c] + x + 8 * b);
                d = _mm256_add_ps(d, _mm256_and_ps(_mm256_sub_ps(v[c], v0[b][c]), abs_mask));
            }
            const __m256 cw = _mm256_i32gather_ps(op.color_weight, _mm256_cvttps_epi32(d), 4);
            const __m256 w = _mm256_mul_ps(sw, cw);
            for (int c = 0; c < CN; ++c) sum[b][c] = _mm256_add_ps(sum[b][c], _mm256_mul_ps(v[c], w));
            wsum[b] = _mm256_add_ps(wsum[b], w);
        }
    }
    for (int b = 0; b < B; ++b) {
        const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.f), wsum[b]);
        alignas(32) std::int32_t q[CN][8];
        for (int c = 0; c < CN; ++c)  // to nearest even; sums are >= 0 and at most 255 * wsum
            _mm256_store_si256(reinterpret_cast<__m256i*>(q[c]), _mm256_cvtps_epi32(_mm256_mul_ps(sum[b][c], inv)));
        for (int i = 0; i < 8; ++i)
            for (int c = 0; c < CN; ++c)
                out[(x + 8 * b + i) * CN + c] = static_cast<std::uint8_t>(q[c][i] > 255 ? 255 : q[c][i]);
    }
}

// bilateral_block on AVX-512: 16 pixels a vector, the same arithmetic lane
// by lane. Half the instructions of two AVX2 vectors, and 32 registers hold
// a block's sums without spilling.
#define CBI_AVX512 [[gnu::target("avx512f")]] inline
template <int CN>
CBI_AVX512 void bilateral_block512(const Op8& op, const float* const* tap, const float* space, int taps,
                                   const float* const* centre, std::uint8_t* out, int x) {
    __m512 v0[CN], sum[CN];
    for (int c = 0; c < CN; ++c) {
        v0[c] = _mm512_loadu_ps(centre[c] + x);
        sum[c] = _mm512_setzero_ps();
    }
    __m512 wsum = _mm512_setzero_ps();
    for (int t = 0; t < taps; ++t) {
        __m512 v[CN], d = _mm512_setzero_ps();
        for (int c = 0; c < CN; ++c) {  // integer differences: exact in float, in any order
            v[c] = _mm512_loadu_ps(tap[t * CN + c] + x);
            d = _mm512_add_ps(d, _mm512_castsi512_ps(_mm512_and_epi32(_mm512_castps_si512(_mm512_sub_ps(v[c], v0[c])),
                                                                      _mm512_set1_epi32(0x7fffffff))));
        }
        // The masked forms: the plain ones start from _mm512_undefined, which GCC 12 warns about.
        const __m512i idx = _mm512_maskz_cvttps_epi32(0xffff, d);
        const __m512 cw = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xffff, idx, op.color_weight, 4);
        const __m512 w = _mm512_mul_ps(_mm512_set1_ps(space[t]), cw);
        for (int c = 0; c < CN; ++c) sum[c] = _mm512_add_ps(sum[c], _mm512_mul_ps(v[c], w));
        wsum = _mm512_add_ps(wsum, w);
    }
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.f), wsum);
    alignas(64) std::int32_t q[CN][16];
    for (int c = 0; c < CN; ++c)  // to nearest even; sums are >= 0 and at most 255 * wsum
        _mm512_store_si512(q[c], _mm512_maskz_cvtps_epi32(0xffff, _mm512_mul_ps(sum[c], inv)));
    for (int i = 0; i < 16; ++i)
        for (int c = 0; c < CN; ++c) out[(x + i) * CN + c] = static_cast<std::uint8_t>(q[c][i] > 255 ? 255 : q[c][i]);
}

template <int CN>
CBI_AVX512 int bilateral_row_avx512(const Op8& op, const float* const* tap, const float* space, int taps,
                                    const float* const* centre, std::uint8_t* out, int width) {
    int x = 0;
    for (; x + 16 <= width; x += 16) bilateral_block512<CN>(op, tap, space, taps, centre, out, x);
    return x;
}

// Outputs [x, returned x) of a row, 16 and then 8 at a time.
template <int CN>
CBI_AVX2 int bilateral_row_avx2(const Op8& op, const float* const* tap, const float* space, int taps,
                                const float* const* centre, std::uint8_t* out, int x, int width) {
    for (; x + 16 <= width; x += 16) bilateral_block<CN, 2>(op, tap, space, taps, centre, out, x);
    for (; x + 8 <= width; x += 8) bilateral_block<CN, 1>(op, tap, space, taps, centre, out, x);
    return x;
}

using OpF = BilateralOp<float>;

// exp_nonpositive on 8 lanes: the same operations and constants, so the same bits.
CBI_AVX2 __m256 exp_nonpositive8(__m256 x) {
    const __m256 t = _mm256_mul_ps(x, _mm256_set1_ps(kExpLog2e));
    const __m256 j = _mm256_add_ps(t, _mm256_set1_ps(kExpRound));
    const __m256 f = _mm256_sub_ps(t, _mm256_add_ps(j, _mm256_set1_ps(-kExpRound)));
    __m256 p = _mm256_set1_ps(kExpP5);
    for (const float c : {kExpP4, kExpP3, kExpP2, kExpP1, 1.f})
        p = _mm256_add_ps(_mm256_mul_ps(p, f), _mm256_set1_ps(c));
    const __m256 e =
        _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(j), 23)));
    // Below kExpLowest: 0; NaN stays NaN.
    const __m256 in_range = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLowest), _CMP_GE_OQ);
    const __m256 nan = _mm256_and_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), x);
    return _mm256_blendv_ps(nan, e, in_range);
}

// Float outputs [x, x + 8 B) of row y, as bilateral_block: the centre's
// weight 1 first, then the taps (which leave the centre out).
template <int CN, int B>
CBI_AVX2 void bilateral_block_f32(const OpF& op, const float* const* tap, const float* space, int taps,
                                  const float* const* centre, float* out, int x) {
    const __m256 sign = _mm256_set1_ps(-0.f), zero = _mm256_setzero_ps(), coeff = _mm256_set1_ps(op.color_coeff);
    __m256 v0[B][CN], sum[B][CN], wsum[B];
    for (int b = 0; b < B; ++b) {
        for (int c = 0; c < CN; ++c) sum[b][c] = v0[b][c] = _mm256_loadu_ps(centre[c] + x + 8 * b);
        wsum[b] = _mm256_set1_ps(1.f);
    }
    for (int t = 0; t < taps; ++t) {
        const __m256 sw = _mm256_set1_ps(space[t]);
        for (int b = 0; b < B; ++b) {
            __m256 v[CN], d = zero;
            for (int c = 0; c < CN; ++c) {
                v[c] = _mm256_loadu_ps(tap[t * CN + c] + x + 8 * b);
                const __m256 diff = _mm256_sub_ps(v[c], v0[b][c]);
                // diff < 0 ? -diff : diff, as the op (NaN and -0 kept as they are)
                const __m256 a =
                    _mm256_blendv_ps(diff, _mm256_xor_ps(diff, sign), _mm256_cmp_ps(diff, zero, _CMP_LT_OQ));
                d = c == 0 ? a : _mm256_add_ps(d, a);
            }
            const __m256 w = _mm256_mul_ps(sw, exp_nonpositive8(_mm256_mul_ps(_mm256_mul_ps(d, d), coeff)));
            for (int c = 0; c < CN; ++c) sum[b][c] = _mm256_add_ps(sum[b][c], _mm256_mul_ps(v[c], w));
            wsum[b] = _mm256_add_ps(wsum[b], w);
        }
    }
    for (int b = 0; b < B; ++b) {
        const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.f), wsum[b]);
        alignas(32) float q[CN][8];
        for (int c = 0; c < CN; ++c) _mm256_store_ps(q[c], _mm256_mul_ps(sum[b][c], inv));
        for (int i = 0; i < 8; ++i)
            for (int c = 0; c < CN; ++c) out[(x + 8 * b + i) * CN + c] = q[c][i];
    }
}

// Rows [y0, y1) of an 8-bit or float op: its taps in operator()'s order
// (float leaves the centre out: its weight 1 goes first), each source row
// converted once into the ring, then the row's outputs a vector at a time
// and the op for the rest.
template <class T, int CN>
void rows(const BilateralOp<T>& op, int y0, int y1) {
    constexpr bool kFloat = std::is_same_v<T, float>;
    const int r = op.radius, width = op.dst.width;
    std::vector<int> tdy, tdx;
    std::vector<float> space;
    for (int dy = -r; dy <= r; ++dy) {
        const int h = op.half_width[dy < 0 ? -dy : dy];
        for (int dx = -h; dx <= h; ++dx) {
            if (kFloat && dx == 0 && dy == 0) continue;
            tdy.push_back(dy);
            tdx.push_back(dx);
            space.push_back(op.space_w(dx * dx + dy * dy, op.space_weight));
        }
    }
    const int taps = static_cast<int>(space.size());
    std::vector<const float*> tap(static_cast<std::size_t>(taps) * CN);
    PaddedRows<T> ring(op, CN);
    for (int y = y0 - r; y < y0 + r; ++y) ring.load(y);
    for (int y = y0; y < y1; ++y) {
        ring.load(y + r);
        for (int t = 0; t < taps; ++t)
            for (int c = 0; c < CN; ++c) tap[t * CN + c] = ring.plane(y + tdy[t], c) + r + tdx[t];
        const float* centre[CN];
        for (int c = 0; c < CN; ++c) centre[c] = ring.plane(y, c) + r;
        T* out = op.dst.template row<T>(y);
        int x = 0;
        if constexpr (kFloat) {
            for (; x + 16 <= width; x += 16)
                bilateral_block_f32<CN, 2>(op, tap.data(), space.data(), taps, centre, out, x);
            for (; x + 8 <= width; x += 8)
                bilateral_block_f32<CN, 1>(op, tap.data(), space.data(), taps, centre, out, x);
        } else {
            static const bool avx512 = __builtin_cpu_supports("avx512f");
            if (avx512) x = bilateral_row_avx512<CN>(op, tap.data(), space.data(), taps, centre, out, width);
            x = bilateral_row_avx2<CN>(op, tap.data(), space.data(), taps, centre, out, x, width);
        }
        for (; x < width; ++x) op(x, y);
    }
}
#endif

}  // namespace

template <class T>
bool bilateral_rows(const BilateralOp<T>& op, int y0, int y1) {
#if CBI_BILATERAL_AVX2
    if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, float>) {
        if (!has_avx2()) return false;
        if (op.src.view.channels == 3) return rows<T, 3>(op, y0, y1), true;
        if (op.src.view.channels == 1) return rows<T, 1>(op, y0, y1), true;
    }
#endif
    return false;
}

template bool bilateral_rows(const BilateralOp<std::uint8_t>&, int, int);
template bool bilateral_rows(const BilateralOp<std::uint16_t>&, int, int);
template bool bilateral_rows(const BilateralOp<float>&, int, int);

}  // namespace cbi::cpu

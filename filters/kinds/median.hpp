#pragma once
// median:K = cv::medianBlur(src, dst, K): each output sample the median of
// the K x K window of its channel, K odd 1..255 (1: a copy, as OpenCV).
// Bit-exact (a median is one of the samples). OpenCV's border is always
// replicate, so this kind's default border is replicate; a border the user
// gives applies as given (constant:V puts V into the window).
// Depths 8u, 16u, 32f at every K (OpenCV stops at K = 5 for 16u and 32f),
// 1, 3 or 4 channels.
//
// Per pixel (MedianOp): K 3 and 5 through selection networks in registers
// (20 and 132 compare-exchanges, filters/select.hpp; on the CPU, 8- and
// 16-bit pixels of 3 or 4 channels run all channels in one SSE2 register,
// and every other pixel channel by channel); larger K through radix
// selection over the window: on the CPU a 256-bin histogram per 8-bit digit
// (1 pass over the window for 8u, 2 for 16u, 4 for 32f), on the GPU 1-bit
// digits (O(1) memory per thread: 8, 16 or 32 passes, fewer when the
// window's smallest and largest keys share top bits). O(K^2) per pixel.
// The GPU's naive schedule runs K 3 and 5 a word of samples per thread
// (cuda/median.cuh): the same networks in SIMD lanes; 8-bit K >= 7 a
// histogram per sample column sliding down the rows: O(K) per pixel.
// The CPU's naive schedule runs whole rows instead (MedianOp::rows): K 3
// and 5 through the same networks on vectors of a row's samples, 8u and 16u
// at larger K through a histogram sliding along the row (cpu/rank.hpp; 16u
// in two levels), 32f the same over the samples' ranks among a band's
// distinct values (three levels): O(K) per pixel.
//
// Floats are ordered by the IEEE total order (filters/select.hpp): NaN
// samples sort above +inf (-NaN below -inf) and -0 below +0. OpenCV's
// min/max networks give NaN results that depend on the position in the
// row; cbi's do not.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "filters/cpu/color.hpp"
#include "filters/cpu/rank.hpp"
#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"
#include "filters/select.hpp"

namespace cbi {

struct MedianFilter {
    int ksize = 3;
    friend bool operator==(const MedianFilter&, const MedianFilter&) = default;
};

template <class T>
struct MedianOp {
    using Sample = T;
    // Rows of keys (rank_key) in the CPU's scratch: floats as uint32.
    using Scratch = std::conditional_t<std::is_same_v<T, float>, std::uint32_t, T>;
    AnyBorderSource<T> src;
    ImageView dst;
    int ksize;
    // A colour node fused into the loads (with_colour; the matrix in host
    // memory, outliving the op): src is that node's input, and the CPU's rows
    // convert each source row as they border it (extend), so the colour
    // image is never stored. A pointer keeps the op small for CUDA kernels.
    const StorageMatrix* colour = nullptr;

    // Whether the CPU's rows can read through a colour node: every path of
    // rows() but K = 1's copy borders its source rows in extend.
    bool takes_colour() const { return ksize >= 3; }
    MedianOp with_colour(const StorageMatrix& matrix) const {
        MedianOp op = *this;
        op.colour = &matrix;
        return op;
    }

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        T* out = dst.row<T>(y) + x * dst.channels;
        switch (ksize) {
            case 1: {
                const T* row = src.row(y);
                for (int c = 0; c < src.view.channels; ++c) out[c] = src.at(row, x, c);
                return;
            }
            case 3: network<3>(x, y, out); return;
            case 5: network<5>(x, y, out); return;
            default: by_radix(x, y, out); return;
        }
    }

    // K x K keys into registers, then the median network.
    template <int K>
    CBI_HOST_DEVICE void network(int x, int y, T* out) const {
        const T* rows[K];
        CBI_UNROLL
        for (int j = 0; j < K; ++j) rows[j] = src.row(y + j - K / 2);
#if defined(CBI_MEDIAN_LANES)
        if constexpr (sizeof(T) <= 2) {
            if (src.view.channels == 3) return network_lanes<K, 3>(x, rows, out);
            if (src.view.channels == 4) return network_lanes<K, 4>(x, rows, out);
        }
#endif
        for (int c = 0; c < src.view.channels; ++c) {
            std::uint32_t v[K * K];
            CBI_UNROLL
            for (int j = 0; j < K; ++j) {
                CBI_UNROLL
                for (int i = 0; i < K; ++i) v[j * K + i] = rank_key(src.at(rows[j], x + i - K / 2, c));
            }
            out[c] = from_rank_key<T>(median_of<K * K>(v));
        }
    }

#if defined(CBI_MEDIAN_LANES)
    // The CPU, 8- and 16-bit samples, 3 or 4 channels: the channels of a
    // pixel in the lanes of one register, one network for all of them (at
    // 8u:3, K = 5, 1M pixels on one core: 151 ms channel by channel, 90 ms
    // in lanes, 40 ms with the one-load gather inside the image).
    template <int K, int CN>
    void network_lanes(int x, const T* const* rows, T* out) const {
        const auto key = [](T v) { return static_cast<short>(static_cast<std::uint16_t>(v) ^ 0x8000u); };
        __m128i v[K * K];
        // Inside the image, with a pixel to spare on the right (3 channels
        // read 4 samples): one load per pixel, widened to the lanes.
        bool inside = x >= K / 2 && x + K / 2 + (CN == 3 ? 1 : 0) < src.view.width;
        for (int j = 0; j < K; ++j) inside = inside && rows[j] != nullptr;
        if (inside) {
            const __m128i bias = _mm_set1_epi16(static_cast<short>(0x8000));
            for (int j = 0; j < K; ++j)
                for (int i = 0; i < K; ++i) {
                    const T* p = rows[j] + (x + i - K / 2) * CN;
                    __m128i l;
                    if constexpr (sizeof(T) == 1) {
                        std::uint32_t w;
                        std::memcpy(&w, p, 4);
                        l = _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(w)), _mm_setzero_si128());
                    } else {
                        l = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
                    }
                    v[j * K + i] = _mm_xor_si128(l, bias);
                }
        } else
            for (int j = 0; j < K; ++j)
                for (int i = 0; i < K; ++i) {
                    const int xx = x + i - K / 2;
                    v[j * K + i] = _mm_set_epi16(0, 0, 0, 0, CN > 3 ? key(src.at(rows[j], xx, 3)) : short(0),
                                                 key(src.at(rows[j], xx, 2)), key(src.at(rows[j], xx, 1)),
                                                 key(src.at(rows[j], xx, 0)));
                }
        alignas(16) std::uint16_t m[8];
        _mm_store_si128(reinterpret_cast<__m128i*>(m), median_of_lanes<K * K>(v));
        for (int c = 0; c < CN; ++c) out[c] = static_cast<T>(m[c] ^ 0x8000u);
    }
#endif

    // The CPU's naive schedule: rows [y0, y1), each source row's keys
    // bordered once into a ring of K + 1 rows in `scratch`, then whole rows
    // at a time (cpu/rank.hpp; K = 5 two rows at once); other depths and
    // sizes pixel by pixel. Every path selects the same sample.
    void rows(int y0, int y1, Scratch* scratch) const {
        const int k = ksize, r = k / 2, cn = dst.channels;
        if constexpr (std::is_same_v<T, float>)
            if (k > 5) return rows_by_rank(y0, y1);
        if (!(k == 3 || k == 5 || (k > 5 && sizeof(Scratch) <= 2))) {
            for (int y = y0; y < y1; ++y)
                for (int x = 0; x < dst.width; ++x) (*this)(x, y);
            return;
        }
        const std::size_t pitch = row_pitch();
        // Ring slot of source row y0 - r + rel: rel % (k + 1), room for two output rows' windows.
        const auto slot = [&](int rel) { return scratch + static_cast<std::size_t>(rel % (k + 1)) * pitch; };
        for (int rel = 0; rel < k - 1; ++rel) extend(y0 - r + rel, slot(rel));
        const Scratch* rows[256];
        for (int y = y0; y < y1; ++y) {
            extend(y + r, slot(y - y0 + k - 1));
            for (int j = 0; j < k; ++j) rows[j] = slot(y - y0 + j);
            if (k == 5 && y + 1 < y1) {  // two rows at once: their windows share four rows
                extend(y + 1 + r, slot(y - y0 + k));
                rows[k] = slot(y - y0 + k);
                cpu::median5_row_pair(rows, cn, dst.row<T>(y), dst.row<T>(y + 1), dst.width * cn);
                ++y;
                continue;
            }
            T* out = dst.row<T>(y);
            if constexpr (sizeof(Scratch) <= 2)
                if (k > 5) {
                    cpu::median_histogram_row(k, rows, cn, out, dst.width);
                    continue;
                }
            cpu::median_network_row(k, rows, cn, out, dst.width * cn);
        }
    }
    // Float rows at K > 5: a band's keys bordered at once, their medians
    // through ranks (cpu::median_key_rows), then the floats back.
    void rows_by_rank(int y0, int y1) const {
        const int k = ksize, r = k / 2;
        const std::size_t pitch = row_pitch(), out_pitch = static_cast<std::size_t>(dst.width) * dst.channels;
        std::vector<std::uint32_t> keys, medians;  // the task's, reused by its bands
        for (int ya = y0; ya < y1; ya += row_grain()) {
            const int rows = std::min(row_grain(), y1 - ya);
            keys.resize((rows + k - 1) * pitch);
            for (int j = 0; j < rows + k - 1; ++j) extend(ya - r + j, keys.data() + j * pitch);
            medians.resize(rows * out_pitch);
            cpu::median_key_rows(k, keys.data(), pitch, dst.channels, dst.width, rows, medians.data(), out_pitch);
            for (int y = 0; y < rows; ++y) {
                float* out = dst.row<float>(ya + y);
                for (std::size_t s = 0; s < out_pitch; ++s) out[s] = from_rank_key<float>(medians[y * out_pitch + s]);
            }
        }
    }
    // Rows a task takes at once: a float band sorts its K - 1 rows of
    // border too, so it takes at least K rows.
    int row_grain() const {
        // Through a colour node a task converts its K - 1 rows of halo again: more rows per task.
        return (std::is_same_v<T, float> && ksize > 5) || colour != nullptr ? std::max(32, ksize) : 8;
    }
    // Samples of a bordered row of keys (K - 1 pixels more than the image,
    // 32 bytes of padding that vector loads may read).
    std::size_t row_pitch() const {
        return static_cast<std::size_t>(dst.width + ksize - 1) * dst.channels + 32 / sizeof(Scratch);
    }
    std::size_t scratch_samples() const {
        if (std::is_same_v<T, float> && ksize > 5) return 0;  // rows_by_rank keeps its own band
        return (ksize + 1) * row_pitch();
    }
    // Source row y's keys from pixel -K/2 to width + K/2 - 1, into e.
    void extend(int y, Scratch* e) const {
        if (colour != nullptr) return extend_coloured(y, e);
        const int r = ksize / 2, cn = src.view.channels, w = src.view.width;
        const T* row = src.row(y);
        for (int x = -r; x < w + r; ++x) {
            if (x == 0 && row != nullptr) {  // the image's own pixels at once
                if constexpr (std::is_same_v<T, float>)
                    for (int s = 0; s < w * cn; ++s) e[r * cn + s] = rank_key(row[s]);
                else
                    std::memcpy(e + r * cn, row, sizeof(T) * w * cn);
                x = w - 1;
                continue;
            }
            for (int c = 0; c < cn; ++c) e[(x + r) * cn + c] = static_cast<Scratch>(rank_key(src.at(row, x, c)));
        }
        for (int s = (w + 2 * r) * cn; s < static_cast<int>(row_pitch()); ++s) e[s] = 0;
    }

    // extend through the fused colour node: source row y (its row border
    // resolved on the source, as the stored colour image's would be)
    // converted into a row of the colour node's output, then bordered at
    // the ends as that image.
    void extend_coloured(int y, Scratch* e) const {
        const int r = ksize / 2, cn = dst.channels, w = src.view.width;
        const T* row = src.row(y);
        if (row == nullptr) {  // a constant border's row
            for (int s = 0; s < (w + 2 * r) * cn; ++s) e[s] = static_cast<Scratch>(rank_key(src.constant));
        } else {
            // 8- and 16-bit keys are the samples: converted in place; floats through a row of samples.
            static thread_local std::vector<T> floats;
            if constexpr (!std::is_same_v<T, Scratch>) floats.resize(static_cast<std::size_t>(w) * cn);
            T* converted = std::is_same_v<T, Scratch> ? reinterpret_cast<T*>(e + r * cn) : floats.data();
            ImageView in = src.view, out{reinterpret_cast<std::byte*>(converted), w, 1, cn, dst.depth, 0};
            in.data = reinterpret_cast<std::byte*>(const_cast<T*>(row)), in.height = 1;
            cpu::color_rows(ColorOp<T>{in, out, *colour}, 0, 1);
            if constexpr (!std::is_same_v<T, Scratch>)
                for (int s = 0; s < w * cn; ++s) e[r * cn + s] = rank_key(converted[s]);
            for (int x = -r; x < w + r; x += x == -1 ? w + 1 : 1) {  // the ends
                const int xx = border_index(src.mode, x, w);
                for (int c = 0; c < cn; ++c)
                    e[(x + r) * cn + c] = xx < 0 ? static_cast<Scratch>(rank_key(src.constant)) : e[(xx + r) * cn + c];
            }
        }
        for (int s = (w + 2 * r) * cn; s < static_cast<int>(row_pitch()); ++s) e[s] = 0;
    }

    // Any K: radix selection of the rank K*K/2 key.
    CBI_HOST_DEVICE void by_radix(int x, int y, T* out) const {
        const int r = ksize / 2;
        const int rank = ksize * ksize / 2;
        for (int c = 0; c < src.view.channels; ++c) {
            auto visit = [&](auto&& fn) {
                for (int j = -r; j <= r; ++j) {
                    const T* row = src.row(y + j);
                    for (int i = -r; i <= r; ++i) fn(rank_key(src.at(row, x + i, c)));
                }
            };
#if defined(__CUDA_ARCH__)
            std::uint32_t lo = 0xffffffffu, hi = 0;
            visit([&](std::uint32_t k) {
                lo = key_min(lo, k);
                hi = key_max(hi, k);
            });
            out[c] = from_rank_key<T>(radix_select<1>(visit, kRankKeyBits<T>, rank, lo, hi));
#else
            constexpr std::uint32_t all = kRankKeyBits<T> == 32 ? 0xffffffffu : (1u << kRankKeyBits<T>)-1u;
            out[c] = from_rank_key<T>(radix_select<8>(visit, kRankKeyBits<T>, rank, 0u, all));
#endif
        }
    }
};

template <>
struct FilterKind<MedianFilter> {
    static constexpr std::string_view name = "median", form = "median:K", params = "ksize";
    static constexpr std::string_view help =
        "median of the K x K window per channel; K odd, 1..255; default border replicate";
    static constexpr std::string_view opencv = "cv::medianBlur(src, dst, K) (OpenCV's border: always replicate)";
    static constexpr Category category = Category::window;
    static constexpr std::string_view examples[] = {"3", "5", "9"};
    static constexpr KindDefault defaults[] = {
        // naive: K 3 and 5 on their word kernel, 8-bit K >= 7 on histograms (cuda/median.cuh); the rest per pixel
        {true, 5, kAnyDepth, 0, "naive tile:32x8"},
        {true, 0, static_cast<int>(Depth::u8), 0, "naive tile:32x8"},
        {true, 0, kAnyDepth, 0, "tile:32x8 tile:16x16 column:32"},
        {false, 0, kAnyDepth, 0, "naive"},
    };

    static MedianFilter parse(std::string_view a) {
        MedianFilter f;
        if (!args::parse_int(a, f.ksize) || f.ksize < 1 || f.ksize > kMaxKernel || f.ksize % 2 == 0)
            args::invalid("median kernel size '" + std::string(a) + "' must be an odd integer from 1 to " +
                          std::to_string(kMaxKernel) + " (" + std::string(form) + ")");
        return f;
    }
    static std::string print(const MedianFilter& f) { return std::to_string(f.ksize); }
    static Footprint footprint(const MedianFilter& f) { return {f.ksize, f.ksize}; }
    // cv::medianBlur pads by replication whatever the caller asks.
    static Border default_border(const MedianFilter&) { return {BorderMode::replicate, 0}; }
    template <class T>
    static MedianOp<T> op(const MedianFilter& f, const ImageView& src, const Border& border, const ImageView& dst) {
        return {{src, saturate_round<T>(static_cast<float>(border.value)), border.mode}, dst, f.ksize};
    }
};

}  // namespace cbi

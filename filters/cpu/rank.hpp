#pragma once
// Row kernels of the CPU's rank filters (median, morphology), compiled for
// AVX2 and the baseline x86-64 (cpu/rank.cpp, CBI_CPU_CLONES). Host only:
// the kinds call them from their CPU row hooks (MedianOp::rows,
// MorphPassOp::rows). Samples are addressed as in an interleaved row: the
// neighbour i pixels to the right of sample s is s + i * channels.
#include <cstdint>

namespace cbi::cpu {

// out[s], s < n: the median of the k x k samples rows[j][s + i * cn]
// (j, i < k; k 3 or 5), through the selection network of filters/select.hpp
// on whole vectors of samples. Keys are the samples (8u, 16u) or their rank
// keys (32f: uint32, out gets the float back). Reads up to 32 bytes past
// rows[j][n - 1 + (k - 1) * cn].
template <class Key, class T>
void median_network_row(int k, const Key* const* rows, int cn, T* out, int n);
// Two rows of 5 x 5 medians at once: out0 from rows[0 .. 4], out1 from
// rows[1 .. 5] (the network's part over the four rows both read runs once).
template <class Key, class T>
void median5_row_pair(const Key* const* rows, int cn, T* out0, T* out1, int n);

// out: a row of `width` pixels, each sample the median of the k x k samples
// rows[j][(x + i) * cn + c] (any odd k), from a 256-bin histogram that
// slides along the row (Huang): 2k updates per sample.
void median_histogram_row(int k, const std::uint8_t* const* rows, int cn, std::uint8_t* out, int width);
// The same for 16-bit samples: the histogram with counts of blocks of 256
// values too, the median moving a block at a time where a block's count
// lets it; 2k updates of each level per sample.
void median_histogram_row(int k, const std::uint16_t* const* rows, int cn, std::uint16_t* out, int width);
// 32-bit keys (floats' rank keys): `rows` + k - 1 rows of bordered keys
// ((width + k - 1) * cn each, `pitch` apart) give `rows` rows of medians
// (width * cn keys, `out_pitch` apart). Each channel's keys are replaced by
// their ranks among the band's distinct keys (one sort), and a histogram of
// ranks in three levels (blocks of 256 and 65536) slides along each row:
// O(K) per sample plus the sort's share.
void median_key_rows(int k, const std::uint32_t* keys, std::size_t pitch, int cn, int width, int rows,
                     std::uint32_t* out, std::size_t out_pitch);

// out[s] = min (kMin) or max over j < count of rows[j][s], s < n.
template <class T, bool kMin>
void fold_rows(T* out, const T* const* rows, int count, int n);

// fold_rows of rows[0 .. count - 1] into out0 and of rows[1 .. count] into
// out1, the rows both read folded once.
template <class T, bool kMin>
void fold_rows_pair(T* out0, T* out1, const T* const* rows, int count, int n);

// out[s] = min or max of run[s + i * cn], i < w, s < n, by doubling runs in
// place (run holds n + (w - 1) * cn samples and is overwritten): log2(w) + 1
// passes instead of w.
template <class T, bool kMin>
void fold_run_doubling(T* out, T* run, int cn, int w, int n);

// Van Herk / Gil-Werman a row at a time, for windows of h rows over rows
// cut into blocks of h: fold_suffixes gives a block's suffixes,
// s[j] = min or max of rows[j .. m - 1], j < m; fold_window_row then
// extends the next block's prefix by one row, prefix = fold(prefix_in,
// row), and out = fold(suffix, prefix), a window's two halves: 3
// comparisons per sample whatever h. Whole rows in order, so they stream
// through the caches instead of a column of lanes walking down every row.
template <class T, bool kMin>
void fold_suffixes(T* const* s, const T* const* rows, int m, int n);
template <class T, bool kMin>
void fold_window_row(T* out, T* prefix, const T* prefix_in, const T* row, const T* suffix, int n);

}  // namespace cbi::cpu

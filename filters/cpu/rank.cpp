// The CPU's rank-filter row kernels (cpu/rank.hpp): GCC vector types of 32
// bytes, so that the AVX2 clone runs one instruction per min or max and the
// baseline clone two SSE2 ones.
#include "filters/cpu/rank.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "filters/cpu/separable.hpp"
#include "filters/select.hpp"

// 32-byte vectors as arguments of inlined helpers: no ABI crosses them.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cbi::cpu {
namespace {

template <class T>
struct Vec;
template <>
struct Vec<std::uint8_t> {
    typedef std::uint8_t type __attribute__((vector_size(32)));
};
template <>
struct Vec<std::uint16_t> {
    typedef std::uint16_t type __attribute__((vector_size(32)));
};
template <>
struct Vec<std::uint32_t> {
    typedef std::uint32_t type __attribute__((vector_size(32)));
};
template <>
struct Vec<float> {
    typedef float type __attribute__((vector_size(32)));
};
template <class T>
using V = typename Vec<T>::type;
template <class T>
inline constexpr int kLanes = 32 / static_cast<int>(sizeof(T));

template <class T>
CBI_CPU_INLINE V<T> load(const T* p) {
    V<T> v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
template <class T>
CBI_CPU_INLINE void store(T* p, V<T> v) {
    std::memcpy(p, &v, sizeof v);
}
template <class T>
CBI_CPU_INLINE void store_part(T* p, V<T> v, int count) {
    std::memcpy(p, &v, sizeof(T) * count);
}

// MorphPassOp::fold's comparison (the new value wins only when strictly
// smaller or larger), lane by lane.
template <bool kMin, class X>
CBI_CPU_INLINE X fold(X acc, X v) {
    if constexpr (kMin)
        return v < acc ? v : acc;
    else
        return acc < v ? v : acc;
}

template <int N, int I, class X>
CBI_CPU_INLINE void network_step(X* v) {
    constexpr int a = kMedianNetworkA<N, I>, b = kMedianNetworkB<N, I>;
    const X x = v[a], y = v[b];
    v[a] = x < y ? x : y;
    v[b] = x < y ? y : x;
}
// Comparators From + I of the network of N inputs.
template <int N, int From = 0, class X, int... I>
CBI_CPU_INLINE void network(X* v, std::integer_sequence<int, I...>) {
    (network_step<N, From + I>(v), ...);
}

// `count` medians (keys) to out: floats back from their rank keys.
template <class Key, class T>
CBI_CPU_INLINE void store_median(T* out, V<Key> m, int count) {
    if constexpr (std::is_same_v<T, float>) {
        // from_rank_key: keys with the top bit set were positive floats.
        typedef std::int32_t I32 __attribute__((vector_size(32)));
        const V<Key> neg = reinterpret_cast<V<Key>>(reinterpret_cast<I32>(m) >> 31);
        const V<Key> u = m ^ (~neg | 0x80000000u);
        V<float> f;
        std::memcpy(&f, &u, sizeof f);
        if (count == kLanes<Key>)
            store(out, f);
        else
            store_part(out, f, count);
    } else if (count == kLanes<Key>) {
        store(out, m);
    } else {
        store_part(out, m, count);
    }
}

template <int K, class Key, class T>
CBI_CPU_CLONES void network_row(const Key* const* rows, int cn, T* out, int n) {
    constexpr int L = kLanes<Key>;
    const Key* r[K];
    for (int j = 0; j < K; ++j) r[j] = rows[j];
    for (int s = 0; s < n; s += L) {
        V<Key> v[K * K];
        CBI_UNROLL
        for (int j = 0; j < K; ++j) {
            CBI_UNROLL
            for (int i = 0; i < K; ++i) v[j * K + i] = load(r[j] + s + i * cn);
        }
        network<K * K>(v, std::make_integer_sequence<int, kMedianNetwork<K * K>.count>{});
        store_median<Key>(out + s, v[kMedianNetwork<K * K>.median], std::min(L, n - s));
    }
}

// Two rows of medians, of rows[0 .. K - 1] into out0 and rows[1 .. K] into
// out1: the K - 1 rows both windows read go in first, so the network's
// comparators before median_network_prefix read only them and run once.
template <int K, class Key, class T>
CBI_CPU_CLONES void network_row_pair(const Key* const* rows, int cn, T* out0, T* out1, int n) {
    constexpr int L = kLanes<Key>, N = K * K, S = K * (K - 1);
    constexpr int p = median_network_prefix<N>(S), m = kMedianNetwork<N>.median;
    for (int s = 0; s < n; s += L) {
        V<Key> v[N], u[N];
        CBI_UNROLL
        for (int j = 1; j < K; ++j) {
            CBI_UNROLL
            for (int i = 0; i < K; ++i) v[(j - 1) * K + i] = load(rows[j] + s + i * cn);
        }
        CBI_UNROLL
        for (int i = 0; i < K; ++i) v[S + i] = load(rows[0] + s + i * cn), u[S + i] = load(rows[K] + s + i * cn);
        network<N>(v, std::make_integer_sequence<int, p>{});
        CBI_UNROLL
        for (int i = 0; i < S; ++i) u[i] = v[i];
        network<N, p>(v, std::make_integer_sequence<int, kMedianNetwork<N>.count - p>{});
        network<N, p>(u, std::make_integer_sequence<int, kMedianNetwork<N>.count - p>{});
        store_median<Key>(out0 + s, v[m], std::min(L, n - s));
        store_median<Key>(out1 + s, u[m], std::min(L, n - s));
    }
}

// The 3 x 3 median as the median of the largest column minimum, the median
// of the column medians and the smallest column maximum (each column of
// three sorted once for the three outputs that read it): 18 min/max per
// sample instead of the network's 40.
template <class Key, class T>
CBI_CPU_CLONES void median3_row(const Key* const* rows, int cn, T* out, int n) {
    constexpr int L = kLanes<Key>, kChunk = 16 * L;
    // Sorted columns of a chunk and the 2 * cn samples after it (cn <= 4 <= L).
    Key lo[kChunk + 2 * L] = {}, mid[kChunk + 2 * L] = {}, hi[kChunk + 2 * L] = {};
    const auto med3 = [](V<Key> a, V<Key> b, V<Key> c) {
        const V<Key> x = a < b ? a : b, y = a < b ? b : a;
        const V<Key> z = y < c ? y : c;
        return x < z ? z : x;
    };
    for (int s0 = 0; s0 < n; s0 += kChunk) {
        const int count = std::min(kChunk, n - s0), cols = count + 2 * cn;
        for (int t = 0; t < cols; t += L) {
            const V<Key> a = load(rows[0] + s0 + t), b = load(rows[1] + s0 + t), c = load(rows[2] + s0 + t);
            const V<Key> x = a < b ? a : b, y = a < b ? b : a;
            store(lo + t, x < c ? x : c);
            store(hi + t, y < c ? c : y);
            const V<Key> z = y < c ? y : c;
            store(mid + t, x < z ? z : x);
        }
        for (int s = 0; s < count; s += L) {
            const V<Key> l0 = load(lo + s), l1 = load(lo + s + cn), l2 = load(lo + s + 2 * cn);
            const V<Key> h0 = load(hi + s), h1 = load(hi + s + cn), h2 = load(hi + s + 2 * cn);
            const V<Key> l01 = l0 < l1 ? l1 : l0, h01 = h0 < h1 ? h0 : h1;
            const V<Key> m = med3(l01 < l2 ? l2 : l01, med3(load(mid + s), load(mid + s + cn), load(mid + s + 2 * cn)),
                                  h01 < h2 ? h01 : h2);
            store_median<Key>(out + s0 + s, m, std::min(L, count - s));
        }
    }
}

template <class T, bool kMin>
CBI_CPU_CLONES void fold_rows_impl(T* out, const T* const* rows, int count, int n) {
    constexpr int L = kLanes<T>;
    const auto vector = [&](int s) {
        V<T> acc = load(rows[0] + s);
        for (int j = 1; j < count; ++j) acc = fold<kMin>(acc, load(rows[j] + s));
        store(out + s, acc);
    };
    int s = 0;
    for (; s + L <= n; s += L) vector(s);
    // The rest as one vector ending at n, over outputs already made: min and
    // max are idempotent, and `out` is never a row shifted against another.
    if (s < n && n >= L) return vector(n - L);
    for (; s < n; ++s) {
        T acc = rows[0][s];
        for (int j = 1; j < count; ++j) acc = fold<kMin>(acc, rows[j][s]);
        out[s] = acc;
    }
}

template <class T, bool kMin>
CBI_CPU_CLONES void fold_rows_pair_impl(T* out0, T* out1, const T* const* rows, int count, int n) {
    constexpr int L = kLanes<T>;
    const auto vector = [&](int s) {
        V<T> common = load(rows[1] + s);
        for (int j = 2; j < count; ++j) common = fold<kMin>(common, load(rows[j] + s));
        store(out0 + s, fold<kMin>(load(rows[0] + s), common));
        store(out1 + s, fold<kMin>(common, load(rows[count] + s)));
    };
    int s = 0;
    for (; s + L <= n; s += L) vector(s);
    if (s < n && n >= L) return vector(n - L);  // as fold_rows_impl
    for (; s < n; ++s) {
        T common = rows[1][s];
        for (int j = 2; j < count; ++j) common = fold<kMin>(common, rows[j][s]);
        out0[s] = fold<kMin>(rows[0][s], common);
        out1[s] = fold<kMin>(common, rows[count][s]);
    }
}

// a[s] = fold(a[s], b[s]), s < n (a and b may overlap with b after a).
template <class T, bool kMin>
CBI_CPU_INLINE void fold_into(T* out, const T* a, const T* b, int n) {
    constexpr int L = kLanes<T>;
    int s = 0;
    for (; s + L <= n; s += L) store(out + s, fold<kMin>(load(a + s), load(b + s)));
    for (; s < n; ++s) out[s] = fold<kMin>(a[s], b[s]);
}

template <class T, bool kMin>
CBI_CPU_CLONES void doubling_impl(T* out, T* run, int cn, int w, int n) {
    // run[s] holds the fold of p samples from s; each pass doubles p (in
    // place: the vector at s reads only s and above, written later).
    int p = 1, len = n + (w - 1) * cn;
    while (2 * p <= w) {
        len -= p * cn;
        fold_into<T, kMin>(run, run, run + p * cn, len);
        p *= 2;
    }
    // Two runs of p overlapping cover the w samples (min and max are idempotent).
    fold_into<T, kMin>(out, run, run + (w - p) * cn, n);
}

// s[j] = the fold of rows[j .. m - 1], j < m, bottom up (s[m - 1] may be rows[m - 1]).
template <class T, bool kMin>
CBI_CPU_CLONES void suffix_impl(T* const* s, const T* const* rows, int m, int n) {
    if (s[m - 1] != rows[m - 1]) std::memcpy(s[m - 1], rows[m - 1], sizeof(T) * n);
    for (int j = m - 2; j >= 0; --j) fold_into<T, kMin>(s[j], rows[j], s[j + 1], n);
}

template <class T, bool kMin>
CBI_CPU_CLONES void window_impl(T* out, T* prefix, const T* prefix_in, const T* row, const T* suffix, int n) {
    constexpr int L = kLanes<T>;
    int s = 0;
    for (; s + L <= n; s += L) {
        const V<T> p = fold<kMin>(load(prefix_in + s), load(row + s));
        store(prefix + s, p);
        store(out + s, fold<kMin>(load(suffix + s), p));
    }
    for (; s < n; ++s) {
        const T p = fold<kMin>(prefix_in[s], row[s]);
        prefix[s] = p;
        out[s] = fold<kMin>(suffix[s], p);
    }
}

// Huang's histogram for values below `size`, sliding along a row: counts of
// each value and of blocks of 256 values (kCoarse: and of 65536, for sizes
// past 16 bits; a window's k * k <= 65025 samples fit 16 bits), the median
// m and the samples below it. The median moves by whole blocks where their
// counts leave it past (before) them. Taking out every sample put in leaves
// it ready for the next row.
template <bool kCoarse>
class SlidingMedian {
public:
    explicit SlidingMedian(std::size_t size)
        : fine_(size + 1), mid_(size / 256 + 1), coarse_(kCoarse ? size / 65536 + 1 : 0) {}
    void add(std::uint32_t v) {
        count(v, 1);
        below_ += static_cast<int>(v < m_);
    }
    void remove(std::uint32_t v) {
        count(v, -1);
        below_ -= static_cast<int>(v < m_);
    }
    // The sample of rank `rank` (from 0) among those in.
    std::uint32_t median(int rank) {
        while (below_ > rank) {
            if (kCoarse && (m_ & 0xFFFFu) == 0 && below_ - coarse_[(m_ >> 16) - 1] > rank)
                below_ -= coarse_[(m_ >> 16) - 1], m_ -= 65536;
            else if ((m_ & 0xFFu) == 0 && below_ - mid_[(m_ >> 8) - 1] > rank)
                below_ -= mid_[(m_ >> 8) - 1], m_ -= 256;
            else
                below_ -= fine_[--m_];
        }
        for (;;) {
            if (kCoarse && (m_ & 0xFFFFu) == 0 && below_ + coarse_[m_ >> 16] <= rank)
                below_ += coarse_[m_ >> 16], m_ += 65536;
            else if ((m_ & 0xFFu) == 0 && below_ + mid_[m_ >> 8] <= rank)
                below_ += mid_[m_ >> 8], m_ += 256;
            else if (below_ + fine_[m_] <= rank)
                below_ += fine_[m_++];
            else
                return m_;
        }
    }

private:
    void count(std::uint32_t v, int by) {
        fine_[v] = static_cast<std::uint16_t>(fine_[v] + by);
        mid_[v >> 8] = static_cast<std::uint16_t>(mid_[v >> 8] + by);
        if constexpr (kCoarse) coarse_[v >> 16] = static_cast<std::uint16_t>(coarse_[v >> 16] + by);
    }
    std::vector<std::uint16_t> fine_, mid_, coarse_;
    std::uint32_t m_ = 0;
    int below_ = 0;
};

// Medians of one channel of a row, k x k windows slid along x: at(j, x) is
// the value of window row j at column x (x < width + k - 1).
template <class Histogram, class At, class Out>
void slide_median_row(Histogram& h, int k, int width, const At& at, const Out& out) {
    const int rank = k * k / 2;
    for (int j = 0; j < k; ++j)
        for (int i = 0; i < k; ++i) h.add(at(j, i));
    out(0, h.median(rank));
    for (int x = 1; x < width; ++x) {
        for (int j = 0; j < k; ++j) h.remove(at(j, x - 1)), h.add(at(j, x - 1 + k));
        out(x, h.median(rank));
    }
    for (int j = 0; j < k; ++j)
        for (int i = 0; i < k; ++i) h.remove(at(j, width - 1 + i));
}

}  // namespace

template <class Key, class T>
void median_network_row(int k, const Key* const* rows, int cn, T* out, int n) {
    if (k == 3)
        median3_row(rows, cn, out, n);
    else
        network_row<5>(rows, cn, out, n);
}

void median_histogram_row(int k, const std::uint8_t* const* rows, int cn, std::uint8_t* out, int width) {
    const int rank = k * k / 2;
    for (int c = 0; c < cn; ++c) {
        std::uint16_t hist[256] = {};
        for (int j = 0; j < k; ++j)
            for (int i = 0; i < k; ++i) ++hist[rows[j][i * cn + c]];
        // m: the median; below: the samples under m (Huang: both follow the window).
        int m = 0, below = 0;
        while (below + hist[m] <= rank) below += hist[m++];
        out[c] = static_cast<std::uint8_t>(m);
        for (int x = 1; x < width; ++x) {
            const int gone = (x - 1) * cn + c, come = (x - 1 + k) * cn + c;
            for (int j = 0; j < k; ++j) {
                const int a = rows[j][gone], b = rows[j][come];
                --hist[a];
                ++hist[b];
                below += (b < m) - (a < m);
            }
            while (below > rank) below -= hist[--m];
            while (below + hist[m] <= rank) below += hist[m++];
            out[x * cn + c] = static_cast<std::uint8_t>(m);
        }
    }
}

void median_histogram_row(int k, const std::uint16_t* const* rows, int cn, std::uint16_t* out, int width) {
    static thread_local SlidingMedian<false> h(65536);  // per thread: every row would clear 128 KB again
    for (int c = 0; c < cn; ++c)
        slide_median_row(
            h, k, width, [&](int j, int x) { return rows[j][x * cn + c]; },
            [&](int x, std::uint32_t m) { out[x * cn + c] = static_cast<std::uint16_t>(m); });
}

void median_key_rows(int k, const std::uint32_t* keys, std::size_t pitch, int cn, int width, int rows,
                     std::uint32_t* out, std::size_t out_pitch) {
    const int in_rows = rows + k - 1, in_width = width + k - 1;
    const std::size_t n = static_cast<std::size_t>(in_rows) * in_width;
    // Per call, not per thread: a band at large K holds megabytes, which a long-lived process (Python)
    // would otherwise keep per worker thread.
    std::vector<std::uint64_t> order(n);
    std::vector<std::uint32_t> ranks(n), distinct;
    for (int c = 0; c < cn; ++c) {
        // The channel's keys in order, each with its place: ranks[place] = its rank among the distinct keys.
        for (int y = 0; y < in_rows; ++y)
            for (int x = 0; x < in_width; ++x) {
                const std::size_t place = static_cast<std::size_t>(y) * in_width + x;
                order[place] = static_cast<std::uint64_t>(keys[y * pitch + x * cn + c]) << 32 | place;
            }
        std::sort(order.begin(), order.end());
        distinct.clear();
        for (const std::uint64_t o : order) {
            const auto key = static_cast<std::uint32_t>(o >> 32);
            if (distinct.empty() || distinct.back() != key) distinct.push_back(key);
            ranks[static_cast<std::uint32_t>(o)] = static_cast<std::uint32_t>(distinct.size() - 1);
        }
        SlidingMedian<true> h(distinct.size());
        for (int y = 0; y < rows; ++y)
            slide_median_row(
                h, k, width, [&](int j, int x) { return ranks[static_cast<std::size_t>(y + j) * in_width + x]; },
                [&](int x, std::uint32_t m) { out[y * out_pitch + x * cn + c] = distinct[m]; });
    }
}

template <class T, bool kMin>
void fold_rows(T* out, const T* const* rows, int count, int n) {
    fold_rows_impl<T, kMin>(out, rows, count, n);
}

template <class T, bool kMin>
void fold_rows_pair(T* out0, T* out1, const T* const* rows, int count, int n) {
    fold_rows_pair_impl<T, kMin>(out0, out1, rows, count, n);
}

template <class T, bool kMin>
void fold_run_doubling(T* out, T* run, int cn, int w, int n) {
    doubling_impl<T, kMin>(out, run, cn, w, n);
}

template <class T, bool kMin>
void fold_suffixes(T* const* s, const T* const* rows, int m, int n) {
    suffix_impl<T, kMin>(s, rows, m, n);
}

template <class T, bool kMin>
void fold_window_row(T* out, T* prefix, const T* prefix_in, const T* row, const T* suffix, int n) {
    window_impl<T, kMin>(out, prefix, prefix_in, row, suffix, n);
}

template <class Key, class T>
void median5_row_pair(const Key* const* rows, int cn, T* out0, T* out1, int n) {
    network_row_pair<5>(rows, cn, out0, out1, n);
}

template void median_network_row(int, const std::uint8_t* const*, int, std::uint8_t*, int);
template void median_network_row(int, const std::uint16_t* const*, int, std::uint16_t*, int);
template void median_network_row(int, const std::uint32_t* const*, int, float*, int);
template void median5_row_pair(const std::uint8_t* const*, int, std::uint8_t*, std::uint8_t*, int);
template void median5_row_pair(const std::uint16_t* const*, int, std::uint16_t*, std::uint16_t*, int);
template void median5_row_pair(const std::uint32_t* const*, int, float*, float*, int);

#define CBI_RANK_FOLDS(T, kMin)                                                 \
    template void fold_rows<T, kMin>(T*, const T* const*, int, int);            \
    template void fold_rows_pair<T, kMin>(T*, T*, const T* const*, int, int);   \
    template void fold_run_doubling<T, kMin>(T*, T*, int, int, int);            \
    template void fold_suffixes<T, kMin>(T* const*, const T* const*, int, int); \
    template void fold_window_row<T, kMin>(T*, T*, const T*, const T*, const T*, int);
CBI_RANK_FOLDS(std::uint8_t, true)
CBI_RANK_FOLDS(std::uint8_t, false)
CBI_RANK_FOLDS(std::uint16_t, true)
CBI_RANK_FOLDS(std::uint16_t, false)
CBI_RANK_FOLDS(float, true)
CBI_RANK_FOLDS(float, false)
#undef CBI_RANK_FOLDS

}  // namespace cbi::cpu

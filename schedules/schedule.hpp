#pragma once
// Thread schedules: the mapping from a thread's linear index i in [0, w*h)
// to the pixel (x, y) it computes. Each mapping is a bijection onto the
// pixels. One definition, used by the CPU backend, the CUDA kernels, the
// tests, the cache analyser and the benchmarks.
//
// Indices are 32-bit: images are limited to 2^32 - 1 pixels
// (cbi::max_schedulable_pixels), far above the default --max-pixels of 2^28.
#include <cstdint>

#include "schedules/host_device.hpp"

namespace cbi {

struct Pixel {
    int x;
    int y;
};

inline constexpr std::uint64_t max_schedulable_pixels = 0xffffffffull;

// `naive`: thread i computes pixel i in row-major order.
struct NaiveSchedule {
    CBI_HOST_DEVICE Pixel map(std::uint32_t i, int width, int /*height*/) const {
        return {static_cast<int>(i % static_cast<std::uint32_t>(width)),
                static_cast<int>(i / static_cast<std::uint32_t>(width))};
    }
};

// `tile:WxH`: W x H tiles in row-major tile order, row-major inside a tile;
// tiles on the right and bottom edges are clipped. `column:W` is the special
// case H = image height (thesis eqs. 4.1-4.6); `zigzag` reverses odd rows.
struct TileSchedule {
    int tile_width;
    int tile_height;  // <= 0 means "the whole image height" (a column)
    bool zigzag = false;

    CBI_HOST_DEVICE Pixel map(std::uint32_t i, int width, int height) const {
        const std::uint32_t th_full = tile_height > 0 && tile_height < height ? static_cast<std::uint32_t>(tile_height)
                                                                              : static_cast<std::uint32_t>(height);
        const std::uint32_t w = static_cast<std::uint32_t>(width);
        const std::uint32_t band_size = th_full * w;  // pixels in one row of tiles
        const std::uint32_t band = i / band_size;
        const std::uint32_t band_y = band * th_full;
        const std::uint32_t h = static_cast<std::uint32_t>(height);
        const std::uint32_t th = h - band_y < th_full ? h - band_y : th_full;  // clipped band
        const std::uint32_t k = i - band * band_size;                          // index inside the band
        const std::uint32_t tw_full =  // a tile wider than the image is the image width
            tile_width < width ? static_cast<std::uint32_t>(tile_width) : w;
        const std::uint32_t tile_size = tw_full * th;  // eq. 4.1: I_h * w
        const std::uint32_t tile = k / tile_size;
        const std::uint32_t offset = tile * tw_full;                           // o
        const std::uint32_t tw = w - offset < tw_full ? w - offset : tw_full;  // eq. 4.2, as listing 5's min
        const std::uint32_t j = k - tile * tile_size;                          // eq. 4.3 (i mod I_h*w)
        std::uint32_t x = j % tw;                                              // eq. 4.4
        const std::uint32_t y = j / tw;                                        // eq. 4.5
        // Eq. 4.7 writes w' - x for the reversed rows, which would reach w';
        // we reverse odd rows as w' - 1 - x so even rows run left to right.
        if (zigzag && (y & 1u)) x = tw - 1u - x;
        return {static_cast<int>(offset + x), static_cast<int>(band_y + y)};
    }
};

// `column:W`, thesis eqs. 4.1-4.6 and listing 5: vertical strips W pixels
// wide, walked top to bottom, row-major inside the strip; the last strip is
// narrower when W does not divide the width.
inline constexpr TileSchedule column_schedule(int column_width) {
    return {column_width, 0, false};
}
// `zigzag:W`, eq. 4.7: as column:W with every odd row of a strip reversed.
inline constexpr TileSchedule zigzag_schedule(int column_width) {
    return {column_width, 0, true};
}
inline constexpr TileSchedule tile_schedule(int w, int h) {
    return {w, h, false};
}

// A traversal order over work units: the index maps above applied to the
// grid of a tile strategy's tiles or strips instead of pixels (as CUTLASS's
// threadblock swizzles do). Block (or CPU task) b computes the tile
// map(b, tiles_x, tiles_y). Row-major unless given: `sep:128x32+column:4`
// walks strips 4 tiles wide, top to bottom.
struct TileOrder {
    int width = 0;  // 0: row-major (naive); else tile:WxH of tiles, or column:W when height is 0
    int height = 0;
    bool zigzag = false;

    CBI_HOST_DEVICE Pixel map(std::uint32_t i, int tiles_x, int tiles_y) const {
        if (width <= 0) return NaiveSchedule{}.map(i, tiles_x, tiles_y);
        return TileSchedule{width, height, zigzag}.map(i, tiles_x, tiles_y);
    }
    CBI_HOST_DEVICE bool row_major() const { return width <= 0; }
    friend bool operator==(const TileOrder&, const TileOrder&) = default;
};

// `smem:WxH`: a CUDA block computes a W x H tile of outputs after staging
// the tile and its halo in shared memory with coalesced loads and running
// the separable passes there. Its visit order, used by the CPU backend and
// for the tile each block takes, is tile:WxH.
struct SmemTileSchedule : TileSchedule {};
inline constexpr SmemTileSchedule smem_schedule(int w, int h) {
    return {{w, h, false}};
}

// `sep:WxH`: a CUDA block computes a W x H output tile from a
// shared-memory stage of the tile plus halo, loaded row by row with
// coalesced loads; each thread then computes runs of 8 consecutive outputs
// from a register window, across x (row sums of each pass), then down y
// (column sums and finish). Box filters slide running sums along both axes,
// so their cost does not grow with k. Its visit order, used by the CPU
// backend and for the tile each block takes, is tile:WxH.
struct SepTileSchedule : TileSchedule {};
inline constexpr SepTileSchedule sep_schedule(int w, int h) {
    return {{w, h, false}};
}

// `stream:WxH`: the column-based iteration carried into
// registers. A CUDA block owns a strip W pixels wide and H rows tall and
// walks it top to bottom one input row at a time; each thread keeps the
// row sums of its last K rows in a ring (Halide's "slide" schedule):
// registers for 3x3, its own shared-memory slots for larger kernels. Its
// visit order, used by the CPU backend, is tile:WxH.
struct StreamSchedule : TileSchedule {};
inline constexpr StreamSchedule stream_schedule(int w, int h) {
    return {{w, h, false}};
}

// `vec:N`: pointwise filters with each CUDA thread computing N
// consecutive pixels of a row, loaded and stored as whole aligned words.
// Its visit order is naive's (row-major).
struct VecSchedule : NaiveSchedule {
    int pixels;  // N
};
inline constexpr VecSchedule vec_schedule(int n) {
    return {{}, n};
}

}  // namespace cbi

#pragma once
// Fusion of two stencils through a tile buffer: the node's
// stencil reads the output of the stencil before it (node.fused_stencil),
// which is computed tile by tile in a tile buffer and never stored.
//
// Run by the CUDA kernel for pairs on smem/sep (a block's threads share
// the tile buffer in shared memory, cuda/pair.cu); the tests run it with a
// team of CPU threads too. The CPU backend walks its fused nodes through
// line buffers instead (cpu/pair_lines.hpp).
//
// Tile (bx, by) owns the consumer's tile_w x tile_h output tile at
// (x0, y0) = (bx*tile_w, by*tile_h). The consumer needs the intermediate
// image on the region R = the tile plus its halo h2. Per tile, with all
// channels interleaved (sample s = x*C + c, taps C samples apart):
//  A. stage the first stencil's input for the part of R inside the image,
//     plus its own halo h1, through its border rule (and a fused colour
//     matrix, when there is one);
//  B. + C. the first stencil's row sums, then column sums and finish():
//     the intermediate samples of R's in-image part, stored as the sample
//     type T exactly as the unfused graph stores them;
//  D. R's samples outside the image that a stored output reads: the
//     consumer's border rule. For reflect101, reflect and replicate the
//     pixel that stands in for such a sample lies within h2 of the image
//     edge that R crosses, so inside R's in-image part; constant gives the
//     constant. (wrap would need the far side of the image: the executor
//     does not fuse it.)
//  E. + F. the consumer's row sums over R, column sums, finish(), stored.
// Every sum goes through weighted_sum in the per-pixel path's order, so the
// fused output is bit-identical to running the two nodes.
//
// Border rules and channel counts are run-time values here (one kernel per
// sample type and pair of filters): the build would otherwise grow by a
// factor of 20 for the border pairs.
#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <type_traits>

#include "filters/dispatch.hpp"
#include "filters/kinds/all.hpp"
#include "filters/ops.hpp"

namespace cbi {

// Tile buffer layout, computed on the host. The staged input and the first
// stencil's row sums are dead once the intermediate exists, so the
// consumer's row sums reuse their bytes.
struct ChainLayout {
    int tile_w, tile_h, channels;
    int h1, h2;              // halos of the first stencil and of the consumer
    int region_w, region_h;  // R: the tile plus h2 on each side
    std::size_t rows1_offset, inter_offset, bytes;
};

template <class Pre, class Op>
ChainLayout chain_layout(int tile_w, int tile_h, const Pre& pre, const Op& op) {
    using T = typename Op::Sample;
    ChainLayout L{};
    L.tile_w = tile_w, L.tile_h = tile_h, L.channels = op.dst.channels;
    L.h1 = stencil_halo(pre), L.h2 = stencil_halo(op);
    L.region_w = tile_w + 2 * L.h2, L.region_h = tile_h + 2 * L.h2;
    const std::size_t C = L.channels;
    const std::size_t stage_w = L.region_w + 2 * L.h1, stage_h = L.region_h + 2 * L.h1;
    L.rows1_offset = round_up<std::size_t>(stage_w * stage_h * C * sizeof(T), 16);
    const std::size_t first = L.rows1_offset + pre.passes() * stage_h * L.region_w * C * sizeof(typename Pre::Acc);
    const std::size_t consumer_rows =
        op.passes() * static_cast<std::size_t>(L.region_h) * tile_w * C * sizeof(typename Op::Acc);
    L.inter_offset = round_up<std::size_t>(std::max(first, consumer_rows), 16);
    L.bytes = L.inter_offset + static_cast<std::size_t>(L.region_w) * L.region_h * C * sizeof(T);
    return L;
}

// One thread on the CPU: the loops below visit every element in order.
struct SoloTeam {
    static constexpr int tx = 0, ty = 0, nx = 1, ny = 1;
    void sync() const {}
};

// Computes the consumer's output tile (tile_x, tile_y) with the tile buffer
// `buffer` (L.bytes, 16-byte aligned). `team` is the threads that share the
// buffer: (tx, ty) one of them, nx x ny their shape, sync() a barrier; each
// loop below is strided over them.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Pre, class Op, class Team>
CBI_HOST_DEVICE void chain_tile(const Pre& pre, const Op& op, const ChainLayout& L, unsigned char* buffer, int tile_x,
                                int tile_y, const Team& team) {
    using T = typename Op::Sample;
    using A1 = typename Pre::Acc;
    using A2 = typename Op::Acc;
    T* stage = reinterpret_cast<T*>(buffer);
    A1* rows1 = reinterpret_cast<A1*>(buffer + L.rows1_offset);
    A2* rows2 = reinterpret_cast<A2*>(buffer);  // reuses stage and rows1 (dead by then)
    T* inter = reinterpret_cast<T*>(buffer + L.inter_offset);
    const int C = L.channels, width = op.dst.width, height = op.dst.height;
    const int tx = team.tx, ty = team.ty, nx = team.nx, ny = team.ny;
    const int x0 = tile_x * L.tile_w, y0 = tile_y * L.tile_h;
    const int rx = x0 - L.h2, ry = y0 - L.h2;  // R's top-left corner in image coordinates
    // R's part inside the image: what the first stencil computes.
    const int ix0 = std::max(0, rx), ix1 = std::min(width, rx + L.region_w);
    const int iy0 = std::max(0, ry), iy1 = std::min(height, ry + L.region_h);
    const int pw = ix1 - ix0, ph = iy1 - iy0;
    const int stage_w = pw + 2 * L.h1, stage_h = ph + 2 * L.h1;
    const int region_n = L.region_w * C, pn = pw * C, tile_n = L.tile_w * C;

    // A. The first stencil's input, border-resolved (and coloured) by its source.
    for (int r = ty; r < stage_h; r += ny) {
        const auto* row = pre.src.row(iy0 - L.h1 + r);
        T* out = stage + r * stage_w * C;
        for (int px = tx; px < stage_w; px += nx)
            for (int c = 0; c < C; ++c) out[px * C + c] = pre.src.at(row, ix0 - L.h1 + px, c);
    }
    team.sync();
    // B. Its row sums.
    for (int p = 0; p < pre.passes(); ++p) {
        const int kw = pre.kw(p);
        const auto* wx = pre.wx(p);
        for (int r = ty; r < stage_h; r += ny)
            for (int s = tx; s < pn; s += nx) {
                const T* line = stage + r * stage_w * C + s + (L.h1 - kw / 2) * C;
                rows1[(p * stage_h + r) * pn + s] =
                    weighted_sum<A1>(wx, kw, [&](int i) { return to_acc<A1>(line[i * C]); });
            }
    }
    team.sync();
    // C. Its column sums: the intermediate image on R's in-image part.
    for (int r = ty; r < ph; r += ny)
        for (int s = tx; s < pn; s += nx) {
            A1 sums[Pre::kMaxPasses] = {};
            for (int p = 0; p < pre.passes(); ++p) {
                const int kh = pre.kh(p);
                const A1* column = rows1 + (p * stage_h + r + L.h1 - kh / 2) * pn + s;
                sums[p] = weighted_sum<A1>(pre.wy(p), kh, [&](int j) { return column[j * pn]; });
            }
            inter[(iy0 - ry + r) * region_n + (ix0 - rx) * C + s] = pre.finish(sums);
        }
    team.sync();
    // D. R outside the image (edge tiles only): the consumer's border rule,
    // for the samples a stored output reads (x < width + h2, y < height +
    // h2); the pixel standing in for one of those lies in R's in-image part.
    // Samples beyond them (a tile reaching past the image's far edge) feed
    // only outputs that are not stored: zero, never read from elsewhere.
    if (pw != L.region_w || ph != L.region_h) {
        for (int r = ty; r < L.region_h; r += ny)
            for (int px = tx; px < L.region_w; px += nx) {
                const int x = rx + px, y = ry + r;
                if (x >= 0 && x < width && y >= 0 && y < height) continue;
                T* out = inter + r * region_n + px * C;
                if (x >= width + L.h2 || y >= height + L.h2) {
                    for (int c = 0; c < C; ++c) out[c] = T(0);
                    continue;
                }
                const int bx = border_index(op.src.mode, x, width), by = border_index(op.src.mode, y, height);
                if (bx < 0 || by < 0) {
                    for (int c = 0; c < C; ++c) out[c] = op.src.constant;
                } else {
                    const T* in = inter + (by - ry) * region_n + (bx - rx) * C;
                    for (int c = 0; c < C; ++c) out[c] = in[c];
                }
            }
        team.sync();
    }
    // E. The consumer's row sums over R.
    for (int p = 0; p < op.passes(); ++p) {
        const int kw = op.kw(p);
        const auto* wx = op.wx(p);
        for (int r = ty; r < L.region_h; r += ny)
            for (int s = tx; s < tile_n; s += nx) {
                const T* line = inter + r * region_n + s + (L.h2 - kw / 2) * C;
                rows2[(p * L.region_h + r) * tile_n + s] =
                    weighted_sum<A2>(wx, kw, [&](int i) { return to_acc<A2>(line[i * C]); });
            }
    }
    team.sync();
    // F. Its column sums, finished and stored.
    const int out_n = std::min(L.tile_w, width - x0) * C;
    for (int r = ty; r < L.tile_h && y0 + r < height; r += ny) {
        T* out = op.dst.template row<T>(y0 + r) + x0 * C;
        for (int s = tx; s < out_n; s += nx) {
            A2 sums[Op::kMaxPasses] = {};
            for (int p = 0; p < op.passes(); ++p) {
                const int kh = op.kh(p);
                const A2* column = rows2 + (p * L.region_h + r + L.h2 - kh / 2) * tile_n + s;
                sums[p] = weighted_sum<A2>(op.wy(p), kh, [&](int j) { return column[j * tile_n]; });
            }
            out[s] = op.finish(sums);
        }
    }
}

// Builds both ops of a node with a fused_stencil (src: the first stencil's
// input, or the fused colour node's input) with run-time border rules, and
// calls f(first, consumer): one instantiation per sample type and pair of
// filters.
template <class F>
void with_chain_ops(const FilterRun& node, const ImageView& src, const ImageView& dst, F&& f) {
    const FusedStencil& first = *node.fused_stencil;
    if (first.border.mode == BorderMode::wrap || node.border.mode == BorderMode::wrap)
        throw std::logic_error("fused stencils do not take the wrap border");
    with_depth(src.depth, [&](auto sample) {
        using T = std::remove_cvref_t<decltype(sample)>;
        constexpr BorderMode any = BorderMode::reflect101;  // the sources carry the rule
        const ImageView intermediate{nullptr, dst.width, dst.height, dst.channels, dst.depth, 0};
        const auto constant = [](const Border& b) { return saturate_round<T>(static_cast<float>(b.value)); };
        const AnyBorderSource<T> consumer_source{intermediate, constant(node.border), node.border.mode};
        const auto with_first = [&](const auto& source) {
            with_stencil_op<T, any>(first.filter, source, intermediate, [&](const auto& pre) {
                with_stencil_op<T, any>(node.filter, consumer_source, dst, [&](const auto& op) { f(pre, op); });
            });
        };
        if (node.fused_color) {
            const ImageView colored{nullptr, src.width, src.height, dst.channels, src.depth, 0};
            const StorageMatrix matrix = storage_matrix(*node.fused_color, src.depth, src.channels);
            with_first(AnyBorderColorSource<T>{{colored, src, matrix, constant(first.border)}, first.border.mode});
        } else {
            with_first(AnyBorderSource<T>{src, constant(first.border), first.border.mode});
        }
    });
}

// The consumer's tile size: its smem:WxH or sep:WxH schedule.
inline TileSchedule chain_tile_size(const ScheduleSpec& spec) {
    TileSchedule tile{};
    bool tiled = false;
    with_schedule(spec, [&](auto schedule) {
        using S = decltype(schedule);
        if constexpr (std::is_same_v<S, SmemTileSchedule> || std::is_same_v<S, SepTileSchedule>) {
            tile = schedule;
            tiled = true;
        }
    });
    if (!tiled) throw std::logic_error("fused stencils need a smem:WxH or sep:WxH schedule, not " + spec.to_string());
    return tile;
}

// The tile buffer's size for `node` (a node with a fused_stencil) on an
// intermediate image of `channels` samples per pixel.
inline std::size_t chain_buffer_bytes(const FilterRun& node, Depth depth, int channels) {
    const TileSchedule tile = chain_tile_size(node.schedule);
    const ImageView probe{nullptr, 1, 1, channels, depth, 0};
    std::size_t bytes = 0;
    with_chain_ops(node, probe, probe, [&](const auto& pre, const auto& op) {
        bytes = chain_layout(tile.tile_width, tile.tile_height, pre, op).bytes;
    });
    return bytes;
}

}  // namespace cbi

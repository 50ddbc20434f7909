#pragma once
// The default table: the schedule a node runs when none is given (the CLI
// without --schedule, a graph node without one, a pipeline stage without
// @SCHEDULE), per backend, filter, kernel size, depth and channels, from
// cbi-bench runs (the table in defaults.cpp names each run). `auto` starts
// from the same rows: their schedules, fastest first, are its candidates.
#include <span>
#include <string_view>
#include <vector>

#include "filters/filter.hpp"
#include "pipeline/graph.hpp"

namespace cbi {

enum class OpKind : std::uint8_t { box, gaussian, sobel, laplacian, color, blend };
OpKind op_kind(const NodeOp& op);

// What the table's choice depends on besides the operation.
struct NodeFormat {
    Depth depth = Depth::u8;
    int channels = 3;       // of the node's input
    bool cuda = false;
};

struct DefaultRow {
    bool cuda;
    OpKind kind;
    int max_ksize;   // stencils with KSIZE <= this (0: any)
    int depth;       // -1: any, else static_cast<int>(Depth)
    int channels;    // 0: any
    std::string_view schedules;  // fastest first, space-separated; the first that supports the node wins
};

std::span<const DefaultRow> default_table();

// The first schedule of the first matching row that supports the node
// (cbi::supports); the per-pixel `naive` where no row does.
ScheduleSpec default_schedule(const NodeOp& op, const Border& border, const NodeFormat& format);

// `auto`'s candidates: every schedule of every matching row that supports
// the node, fastest first (the default first), without repeats.
std::vector<ScheduleSpec> default_candidates(const NodeOp& op, const Border& border, const NodeFormat& format);

}  // namespace cbi

#pragma once
// Pictures of a cache simulation (thesis section 3.2, figs. 3.1, 3.3, 4.4,
// 4.6): the spatial-temporal diagram and the visit-order view. OpenCV draws,
// PNGs are written atomically (temporary file, then rename).
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "apps/analyze/cache_sim.hpp"

namespace cbi::analyze {

// Caps on what a diagram may hold, in cells before scaling: one column per
// thread, one row per element address. Past these the picture is unreadable
// and the trace (one resident-set snapshot per thread) grows quadratically.
inline constexpr std::uint64_t max_diagram_threads = 4096;
inline constexpr std::uint64_t max_diagram_addresses = 16384;
inline constexpr int max_order_side = 4096;

// Empty when a diagram of workload `w` fits the caps, else the reason.
std::string diagram_too_large(const sim::Workload& w, int line_elems);

// Address vertical (0 at the bottom, arrays stacked and labelled), time
// horizontal (one column per thread in schedule order). Grey: lines resident
// after the thread; black: addresses the thread accessed; red: lines it
// fetched (drawn over its accesses, so red marks misses and black hits).
cv::Mat render_spacetime(const sim::Trace& trace, const std::string& title);

// The image (or C) painted by visit time, dark (first) to yellow (last);
// small images also get the path through the pixel centres.
cv::Mat render_order(const std::vector<Pixel>& order, int width, int height, const std::string& title);

// Encodes `image` as PNG into a temporary file next to `path` and renames it
// into place. Throws std::runtime_error("<path>: <reason>") on failure and
// leaves no partial file behind.
void write_png(const std::string& path, const cv::Mat& image);

}  // namespace cbi::analyze

#include "filters/cpu_backend.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "filters/dispatch.hpp"

namespace cbi {

void run_node_cpu(const Node& node, const ImageView& src, const ImageView& dst) {
    const int width = dst.width, height = dst.height;
    const auto n = static_cast<std::uint32_t>(dst.pixels());
    dispatch_node(node, src, dst, [&](auto schedule, const auto& op) {
        // Each task walks a contiguous run of schedule indices, so a column
        // schedule keeps a task inside one strip of the image.
        constexpr std::uint32_t grain = 4096;
        tbb::parallel_for(tbb::blocked_range<std::uint32_t>(0, n, grain), [&](const auto& range) {
            for (std::uint32_t i = range.begin(); i != range.end(); ++i) {
                const Pixel p = schedule.map(i, width, height);
                op(p.x, p.y);
            }
        });
    });
}

}  // namespace cbi

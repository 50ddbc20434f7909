#pragma once
// CPU backend: runs one node by visiting the schedule's index range, split
// across TBB tasks, so the schedule decides the visit order here too.
#include "filters/filter.hpp"

namespace cbi {

// src and dst must not overlap; dst has the node's output geometry.
void run_node_cpu(const Node& node, const ImageView& src, const ImageView& dst);

}  // namespace cbi

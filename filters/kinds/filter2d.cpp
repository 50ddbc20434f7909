#include "filters/kinds/filter2d.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>

#include "filters/filter.hpp"

namespace cbi {

using Kind = FilterKind<Filter2DFilter>;

namespace {

// The pivot (largest |tap|) and whether every tap is the product of its
// row's and column's taps through the pivot, to 1e-12 of the largest
// product: a kernel of rank 1.
bool rank_one(const Filter2DFilter& f, int& pr, int& pc) {
    const auto at = [&](int r, int c) { return f.taps[static_cast<std::size_t>(r) * f.width + c]; };
    pr = pc = 0;
    for (int r = 0; r < f.height; ++r)
        for (int c = 0; c < f.width; ++c)
            if (std::abs(at(r, c)) > std::abs(at(pr, pc))) pr = r, pc = c;
    const double p = at(pr, pc);
    if (p == 0) return false;
    const double tol = 1e-12 * p * p;
    for (int r = 0; r < f.height; ++r)
        for (int c = 0; c < f.width; ++c)
            if (std::abs(at(r, c) * p - at(r, pc) * at(pr, c)) > std::abs(tol)) return false;
    return true;
}

}  // namespace

Filter2DFilter Kind::parse(std::string_view a) {
    const auto rows = taps::parse_rows(name, a, form, kMaxKernel);
    if (rows.size() > static_cast<std::size_t>(kMaxKernel))
        args::invalid("filter2d kernel has " + std::to_string(rows.size()) + " rows, at most 255 (filter2d:ROWS)");
    std::vector<double> taps;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        if (rows[r].size() != rows[0].size())
            args::invalid("filter2d row " + std::to_string(r + 1) + " has " + std::to_string(rows[r].size()) +
                          " taps, row 1 has " + std::to_string(rows[0].size()) +
                          ": every row needs as many (filter2d:ROWS, rows separated by ';', taps by ',')");
        taps.insert(taps.end(), rows[r].begin(), rows[r].end());
    }
    return filter2d_filter(static_cast<int>(rows[0].size()), static_cast<int>(rows.size()), std::move(taps));
}

Filter2DFilter filter2d_filter(int width, int height, std::vector<double> taps) {
    Filter2DFilter f{width, height, std::move(taps), {}};
    f.weights.assign(f.taps.begin(), f.taps.end());
    return f;
}

std::string Kind::print(const Filter2DFilter& f) {
    taps::Rows rows(static_cast<std::size_t>(f.height));
    for (int r = 0; r < f.height; ++r)
        rows[r].assign(f.taps.begin() + static_cast<std::ptrdiff_t>(r) * f.width,
                       f.taps.begin() + static_cast<std::ptrdiff_t>(r + 1) * f.width);
    return taps::print_rows(rows);
}

Filter2DTaps filter2d_taps(const Filter2DFilter& f) {
    const auto n = static_cast<std::size_t>(f.width) * f.height;
    if (f.width < 1 || f.height < 1 || f.taps.size() != n || f.weights.size() != n)
        throw std::logic_error("filter2d kernel " + std::to_string(f.width) + "x" + std::to_string(f.height) +
                               " not made by filter2d_filter");
    return {f.width, f.height, f.weights.data()};
}

bool filter2d_rank_one(const Filter2DFilter& f, std::vector<double>& row, std::vector<double>& column) {
    int pr = 0, pc = 0;
    if (!rank_one(f, pr, pc)) return false;
    // kernel[r][c] = column[r] * row[c]: the pivot's row, and its column over the pivot.
    const double pivot = f.taps[static_cast<std::size_t>(pr) * f.width + pc];
    row.assign(f.taps.begin() + static_cast<std::ptrdiff_t>(pr) * f.width,
               f.taps.begin() + static_cast<std::ptrdiff_t>(pr + 1) * f.width);
    column.resize(static_cast<std::size_t>(f.height));
    for (int r = 0; r < f.height; ++r) column[r] = f.taps[static_cast<std::size_t>(r) * f.width + pc] / pivot;
    return true;
}

Expansion Kind::expand(const Filter2DFilter& f) {
    std::vector<double> row, column;
    if (!filter2d_rank_one(f, row, column)) return {};
    return {{{Filter{SepFilter2DFilter{row, column}}}}};
}

}  // namespace cbi

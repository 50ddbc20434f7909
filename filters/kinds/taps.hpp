#pragma once
// The tap lists of the user-kernel kinds (filter2d, sepfilter2d): rows
// separated by ';', taps by ','; numbers that print back bit for bit.
#include <string>
#include <string_view>
#include <vector>

namespace cbi::taps {

using Rows = std::vector<std::vector<double>>;

// "a,b,c;d,e,f" as rows of numbers: at least one row, each of 1 to
// `max_taps` finite numbers. Throws std::invalid_argument, one line naming
// `kind` and `form`, for an empty list, an empty or non-numeric tap or a
// row that is too long. Rows may differ in length (callers check shape).
Rows parse_rows(std::string_view kind, std::string_view text, std::string_view form, int max_taps);

// What parse_rows reads back as the same rows.
std::string print_rows(const Rows& rows);

// The sum of |tap| over all rows (a kernel's L1 gain).
double l1(const Rows& rows);

}  // namespace cbi::taps

#include "filters/kinds/taps.hpp"

#include <cmath>

#include "filters/kinds/args.hpp"

namespace cbi::taps {

Rows parse_rows(std::string_view kind, std::string_view text, std::string_view form, int max_taps) {
    const std::string where = " (" + std::string(form) + ")";
    if (text.empty())
        args::invalid(std::string(kind) + " needs taps: rows of comma-separated numbers separated by ';'" + where);
    Rows rows;
    for (const std::string_view row : args::split(text, ';')) {
        const auto fields = args::split(row, ',');
        if (static_cast<int>(fields.size()) > max_taps)
            args::invalid(std::string(kind) + " list '" + args::excerpt(row, 40) + "' has " +
                          std::to_string(fields.size()) + " taps, at most " + std::to_string(max_taps) + where);
        std::vector<double>& taps = rows.emplace_back();
        for (const std::string_view field : fields) {
            double v = 0;
            if (!args::parse_double(field, v))
                args::invalid(std::string(kind) + " tap '" + std::string(field) + "' in list " +
                              std::to_string(rows.size()) + " is not a number" + where);
            taps.push_back(v);
        }
    }
    return rows;
}

std::string print_rows(const Rows& rows) {
    std::string s;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        if (r) s += ';';
        for (std::size_t i = 0; i < rows[r].size(); ++i) s += (i ? "," : "") + args::number(rows[r][i]);
    }
    return s;
}

double l1(const Rows& rows) {
    double sum = 0;
    for (const auto& row : rows)
        for (const double v : row) sum += std::abs(v);
    return sum;
}

}  // namespace cbi::taps

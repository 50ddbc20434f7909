#include "filters/kinds/args.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <system_error>

namespace cbi::args {

void invalid(const std::string& message) {
    throw std::invalid_argument(message);
}

std::vector<std::string_view> split(std::string_view text, char sep) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (true) {
        const auto pos = text.find(sep, start);
        parts.push_back(text.substr(start, pos - start));
        if (pos == std::string_view::npos) return parts;
        start = pos + 1;
    }
}

bool parse_int(std::string_view text, int& out) {
    const std::string s(text);
    if (s.empty() || s.size() > 9) return false;
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (*end != '\0' || std::isspace(static_cast<unsigned char>(s[0]))) return false;
    out = static_cast<int>(v);
    return true;
}

bool parse_double(std::string_view text, double& out) {
    if (text.size() > 1 && text[0] == '+' && text[1] != '-') text.remove_prefix(1);
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, out);
    return !text.empty() && ec == std::errc{} && ptr == end && std::isfinite(out);
}

int parse_ksize(std::string_view kind, std::string_view text, int max_size) {
    int k = 0;
    if (!parse_int(text, k) || k < 1 || k > max_size || k % 2 == 0)
        invalid(std::string(kind) + " kernel size '" + std::string(text) + "' must be an odd integer from 1 to " +
                std::to_string(max_size));
    return k;
}

std::string number(double v) {
    char buf[32];  // the longest shortest form of a double is 24 characters
    const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, ec == std::errc{} ? ptr : buf);
}

void expect_fields(std::string_view kind, std::string_view args, const std::vector<std::string_view>& fields,
                   std::size_t min, std::size_t max, std::string_view form) {
    if (fields.size() < min || fields.size() > max)
        invalid(std::string(kind) + " '" + std::string(args) + "' is not of the form " + std::string(form));
}

std::string excerpt(std::string_view text, std::size_t max) {
    return text.size() <= max ? std::string(text) : std::string(text.substr(0, max)) + "...";
}

}  // namespace cbi::args

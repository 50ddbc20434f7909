#pragma once
// The argument grammar the kinds share: colon-separated fields, integers,
// numbers that print back bit for bit, odd kernel sizes. Errors are
// std::invalid_argument with one line naming the field and the form.
#include <string>
#include <string_view>
#include <vector>

namespace cbi::args {

[[noreturn]] void invalid(const std::string& message);

// Splits "a:b:c" at `sep` (an empty text gives one empty field).
std::vector<std::string_view> split(std::string_view text, char sep);

// A decimal integer, the whole text, at most 9 digits.
bool parse_int(std::string_view text, int& out);

// A finite decimal number, the whole text, correctly rounded (from_chars:
// no locale); a leading '+' is taken.
bool parse_double(std::string_view text, double& out);

// An odd kernel size 1..max_size, or invalid() naming `kind`.
int parse_ksize(std::string_view kind, std::string_view text, int max_size);

// The shortest text that reads back as exactly v: "1.23456789", "0.1", "-0".
std::string number(double v);

// `text` as an error message quotes it: whole up to `max` characters, else
// its first `max` and "..." (a 63x63 kernel's text is tens of KB).
std::string excerpt(std::string_view text, std::size_t max = 60);

// `fields` has at least `min` and at most `max` fields, else invalid()
// "KIND 'ARGS' is not of the form FORM".
void expect_fields(std::string_view kind, std::string_view args, const std::vector<std::string_view>& fields,
                   std::size_t min, std::size_t max, std::string_view form);

}  // namespace cbi::args

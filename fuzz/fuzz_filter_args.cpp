// Fuzz target: the filter argument parsers: every kind's
// (FilterKind<F>::parse, filters/kinds/), parse_filter, parse_border and
// parse_blend. The first byte picks the parser, the rest is its argument.
// Accepted arguments print (to_string) to a form that reads back as the
// same value, bit for bit.
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "pipeline/error.hpp"

namespace {

void filter_round_trip(const cbi::Filter& f) {
    const std::string printed = cbi::to_string(f);
    const cbi::Filter back = cbi_fuzz::reparse(printed, [](const std::string& t) { return cbi::parse_filter(t); });
    FUZZ_CHECK(cbi_fuzz::same(f, back), "'" + printed + "' reads back as a different filter");
    FUZZ_CHECK(cbi::to_string(back) == printed, "printing '" + printed + "' is not stable");
}

// The parser of kind number `index` in the kind list, on `arg`.
void kind_round_trip(std::size_t index, std::string_view arg) {
    std::size_t i = 0;
    cbi::for_each_kind([&]<class F>(std::type_identity<F>) {
        if (i++ == index) filter_round_trip(cbi::FilterKind<F>::parse(arg));
    });
}

void run(unsigned char which, std::string_view arg) {
    const std::size_t kinds = cbi::filter_kinds().size();
    const std::size_t pick = which % (kinds + 3);
    if (pick < kinds) return kind_round_trip(pick, arg);
    switch (pick - kinds) {
        case 0: filter_round_trip(cbi::parse_filter(arg)); break;
        case 1: {
            const cbi::Border b = cbi::parse_border(arg);
            const std::string printed = cbi::to_string(b);
            const auto back = cbi_fuzz::reparse(printed, [](const std::string& t) { return cbi::parse_border(t); });
            FUZZ_CHECK(cbi_fuzz::same(back, b), "border '" + printed + "' reads back differently");
            break;
        }
        case 2: {
            const cbi::BlendFilter b = cbi::parse_blend(arg);
            const std::string printed = cbi::to_string(b);  // "blend:A:B:C"
            FUZZ_CHECK(printed.rfind("blend:", 0) == 0, "blend prints as '" + printed + "'");
            const auto back =
                cbi_fuzz::reparse(printed, [](const std::string& t) { return cbi::parse_blend(t.substr(6)); });
            FUZZ_CHECK(cbi_fuzz::same(back, b), "blend '" + printed + "' reads back differently");
            break;
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1 || size > 512) return -1;
    try {
        run(data[0], cbi_fuzz::as_text(data + 1, size - 1));
    } catch (const std::invalid_argument&) {
    } catch (const cbi::Error&) {}
    return 0;
}

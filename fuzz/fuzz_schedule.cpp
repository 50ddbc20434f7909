// Fuzz target: the schedule parser (cbi::parse_schedule and
// cbi::parse_schedule_choice, as --schedule and "@SCHEDULE" read them).
// Accepted strings print back to a string that parses to the same value,
// and the registry entry of every parsed schedule exists.
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "pipeline/error.hpp"
#include "schedules/registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size > 256) return -1;
    const auto text = cbi_fuzz::as_text(data, size);
    try {
        const cbi::ScheduleSpec s = cbi::parse_schedule(text);
        const std::string printed = s.to_string();
        const auto back = cbi_fuzz::reparse(printed, [](const std::string& t) { return cbi::parse_schedule(t); });
        FUZZ_CHECK(back == s, "'" + printed + "' reads back as a different schedule");
        FUZZ_CHECK(cbi::schedule_entry(s).name == printed.substr(0, printed.find(':')),
                   "registry entry of '" + printed + "'");
    } catch (const std::invalid_argument&) {
    } catch (const cbi::Error&) {}
    try {
        const cbi::ScheduleChoice c = cbi::parse_schedule_choice(text);
        const std::string printed = cbi::to_string(c);
        const auto back =
            cbi_fuzz::reparse(printed, [](const std::string& t) { return cbi::parse_schedule_choice(t); });
        FUZZ_CHECK(back == c, "'" + printed + "' reads back as a different choice");
    } catch (const std::invalid_argument&) {
    } catch (const cbi::Error&) {}
    return 0;
}

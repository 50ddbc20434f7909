// cbi-filter's messages, --stats tables (report.hpp).
#include "report.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>

#include <opencv2/core/utils/logger.hpp>

namespace cbi_app {
namespace {
int g_message_fd = STDERR_FILENO;
}  // namespace

// ---------------------------------------------------------------- stderr
// cbi-filter's messages go to a private copy of stderr, and fd 2 itself to
// /dev/null: libpng ("libpng error: ..."), OpenCV's imdecode and TBB print
// straight to stderr, and an error must be exactly one line.
// CBI_LIBRARY_STDERR=1 keeps fd 2 (to see that chatter when debugging).

void silence_library_stderr() {
    cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
    if (const char* keep = std::getenv("CBI_LIBRARY_STDERR"); keep && std::string_view(keep) == "1") return;
    const int copy = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (copy >= 0 && null >= 0 && ::dup2(null, STDERR_FILENO) >= 0) {
        g_message_fd = copy;
    } else if (copy >= 0) {
        ::close(copy);
    }
    if (null >= 0) ::close(null);
}

// One write, so that lines of different threads never interleave.
void write_message(std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(g_message_fd, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

// The length of the well-formed UTF-8 sequence at the start of `s` (a
// character from U+00A0 on: C1 controls are not kept), or 0.
static std::size_t utf8_length(std::string_view s) {
    const auto b = [&](std::size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u; };
    const unsigned lead = b(0);
    const std::size_t n = lead >= 0xC2 && lead <= 0xDF   ? 2
                          : lead >= 0xE0 && lead <= 0xEF ? 3
                          : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                         : 0;
    if (n == 0) return 0;
    // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
    const unsigned lo = lead == 0xE0   ? 0xA0
                        : lead == 0xF0 ? 0x90
                                       : 0x80,
                   hi = lead == 0xED   ? 0x9F
                        : lead == 0xF4 ? 0x8F
                                       : 0xBF;
    if (b(1) < lo || b(1) > hi || (lead == 0xC2 && b(1) < 0xA0)) return 0;
    for (std::size_t i = 2; i < n; ++i)
        if (b(i) < 0x80 || b(i) > 0xBF) return 0;
    return n;
}

// Control characters (a newline in a file name, an escape sequence, C1
// controls) and bytes that are not UTF-8 are written as \n, \t, \xHH, so a
// message stays one line of text on the terminal.
std::string terminal_safe(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const char c = text[i];
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x80) {
            if (const std::size_t n = utf8_length(text.substr(i))) {
                out += text.substr(i, n);
                i += n;
                continue;
            }
        }
        if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else if (c == '\r')
            out += "\\r";
        else if (u < 0x20 || u >= 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        } else {
            out += c;
        }
        ++i;
    }
    return out;
}

void say(std::string_view kind, std::string_view message) {
    write_message(std::string(kProgram) + ": " + std::string(kind) + terminal_safe(message) + "\n");
}

bool messages_on_terminal() {
    return ::isatty(g_message_fd) == 1;
}

std::string format_stats(const cbi::BatchSummary& s) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(3);
    out << "stage          busy_s  lanes  busy/lanes_s\n";
    const cbi::StageStats* busiest = &s.stages.front();
    double all_busy = 0;
    for (const auto& st : s.stages) {
        out << std::left << std::setw(13) << st.name << std::right << std::setw(8) << st.busy_s << std::setw(7)
            << st.lanes << std::setw(14) << st.busy_s / st.lanes << "\n";
        if (st.busy_s / st.lanes > busiest->busy_s / busiest->lanes) busiest = &st;
        all_busy += st.busy_s;
    }
    const double bound = busiest->busy_s / busiest->lanes;
    out << "wall " << s.wall_s << " s, " << s.processed << " processed, " << std::setprecision(2) << s.images_per_s()
        << " images/s; jobs " << s.jobs << ", in flight " << s.in_flight << ", overlap " << (s.overlap ? "on" : "off")
        << "\n";
    // The first ratio shows the overlap (<= 1.15: the stages overlap);
    // the second compares with all stages sharing the worker threads.
    out << "wall / (busiest busy / lanes) = " << (bound > 0 ? s.wall_s / bound : 0) << " (" << busiest->name
        << "); wall / (all busy / jobs) = " << (all_busy > 0 ? s.wall_s / (all_busy / s.jobs) : 0) << "\n";
    if (s.jpeg_on_devices + s.jpeg_on_cpu > 0)
        out << "jpeg decodes: " << s.jpeg_on_devices << " on the devices, " << s.jpeg_on_cpu << " on the CPU ("
            << s.jpeg_on_cpu_after_device << " after the device's decoder refused or was starting)\n";
    for (const auto& d : s.devices) {
        out << "device " << d.name << ": " << d.images << " images, busy " << d.busy_s << " s";
        const cbi::PathTimes& p = d.path;
        if (d.images > 0 && p.decode_s + p.filter_s + p.result_s > 0) {
            const double ms = 1e3 / static_cast<double>(d.images);
            out << std::setprecision(2) << "; per image " << p.decode_s * ms << " ms JPEG decode, " << p.filter_s * ms
                << " filters, " << p.result_s * ms << " encode or download" << std::setprecision(3);
        }
        if (p.hw_batches > 0)
            out << "; hardware decoder " << p.hw_batches << " batches of " << std::setprecision(1)
                << static_cast<double>(p.hw_images) / p.hw_batches << std::setprecision(3);
        if (!d.lost.empty()) out << ", taken out: " << terminal_safe(d.lost);
        out << "\n";
    }
    return out.str();
}

Clock::time_point g_main_start;

double seconds_before_main() {
    std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
    std::string line;
    double up = 0;
    if (!std::getline(stat, line) || !(uptime >> up)) return 0;
    // Field 22 (starttime, clock ticks since boot) counts from after the ")" of the name.
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 22 && fields >> field; ++i) {}
    const double started = std::stod(field) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    const double since_main = std::chrono::duration<double>(Clock::now() - g_main_start).count();
    return std::max(0.0, up - started - since_main);
}

}  // namespace cbi_app

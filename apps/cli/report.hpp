#pragma once
// What cbi-filter prints: one-line messages on stderr (kept apart from the
// libraries' own chatter, made safe for a terminal), batch progress, and
// --stats for a batch and for one image. The library reports; this prints.
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeline/batch.hpp"
#include "pipeline/run_file.hpp"

namespace cbi_app {

inline constexpr const char* kProgram = "cbi-filter";

// cbi-filter's messages go to a private copy of stderr, and fd 2 itself to
// /dev/null (report.cpp says why); call first thing in main.
void silence_library_stderr();
// One write, so that lines of different threads never interleave.
void write_message(std::string_view text);
// Whether the messages go to a terminal (progress redraws a bar there).
bool messages_on_terminal();
// Control characters and bytes that are not UTF-8 written as \n, \t, \xHH.
std::string terminal_safe(std::string_view text);
// "cbi-filter: KIND MESSAGE", one line (kind: "error: ", "warning: ", "notice: ").
void say(std::string_view kind, std::string_view message);

// Progress on stderr: a bar redrawn in place on a terminal, a plain line
// every few seconds otherwise, nothing with --quiet. Failures always get
// their one-line error as they happen.
class ProgressReporter {
public:
    explicit ProgressReporter(bool quiet) : quiet_(quiet), tty_(messages_on_terminal()) {}

    void operator()(const cbi::BatchProgress& p) {
        if (p.item->status == cbi::ItemStatus::failed) {
            clear_bar();
            say("error: ", p.item->error);
        } else if (!p.item->warning.empty()) {
            clear_bar();
            say("warning: ", p.item->warning);
        }
        // Interrupted: no "done" line for an image that was not; the summary follows.
        if (quiet_ || p.item->status == cbi::ItemStatus::cancelled) return;
        const auto now = std::chrono::steady_clock::now();
        const bool last = p.done == p.total;
        if (!last && now - last_print_ < (tty_ ? std::chrono::milliseconds(100) : std::chrono::seconds(5))) return;
        if (last && !tty_) return;  // the summary line follows
        last_print_ = now;
        const double rate = p.elapsed_s > 0 ? static_cast<double>(p.done) / p.elapsed_s : 0;
        const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : 0;
        std::ostringstream line;
        line << std::fixed << std::setprecision(1);
        if (tty_) {
            constexpr int width = 30;
            const int filled = p.total ? static_cast<int>(width * p.done / p.total) : width;
            line << "\r\033[K[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << p.done << "/"
                 << p.total << "  " << rate << " img/s  ETA " << format_duration(eta);
            if (p.failed) line << "  " << p.failed << " failed";
            if (last) line << "\n";
            bar_shown_ = !last;
        } else {
            line << kProgram << ": " << p.done << "/" << p.total << " done, " << p.failed << " failed, " << rate
                 << " images/s, ETA " << format_duration(eta) << "\n";
        }
        write_message(line.str());
    }

private:
    static std::string format_duration(double s) {
        const long total = static_cast<long>(s + 0.5);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%ld:%02ld", total / 60, total % 60);
        return buf;
    }

public:
    void clear_bar() {
        if (bar_shown_) write_message("\r\033[K");
        bar_shown_ = false;
    }

private:
    bool quiet_, tty_, bar_shown_ = false;
    std::chrono::steady_clock::time_point last_print_ = std::chrono::steady_clock::now();
};

// --stats for a batch: each stage's busy time, the wall time, each device's share.
std::string format_stats(const cbi::BatchSummary& s);

// --stats for one image: how long each step took, and the time before main
// (loading libraries), read from /proc at 10 ms resolution. The exit after
// the last step (the device's teardown) is not counted here.
using Clock = std::chrono::steady_clock;
extern Clock::time_point g_main_start;  // set first thing in main

double seconds_before_main();

class Steps {
public:
    explicit Steps(bool on) : on_(on), last_(g_main_start) {}
    // The step that ends now.
    void operator()(const char* name) {
        if (!on_) return;
        const Clock::time_point now = Clock::now();
        rows_.emplace_back(name, std::chrono::duration<double>(now - last_).count());
        last_ = now;
    }
    // The steps of run_file, which followed the last one; the device the
    // run used is the line above the steps.
    void add(const cbi::FileReport& report) {
        if (!on_) return;
        device_ = report.device.cuda ? "cuda:" + std::to_string(report.device.index) : "cpu";
        for (const cbi::FileStep& step : report.steps) {
            rows_.emplace_back(step.name, step.seconds);
            last_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(step.seconds));
        }
    }
    void print() const {
        if (!on_) return;
        std::ostringstream out;
        out << "device " << device_ << "\n" << std::fixed << std::setprecision(3) << "step                  s\n";
        const auto row = [&](std::string_view name, double s) {
            out << std::left << std::setw(17) << name << std::right << std::setw(6) << s << "\n";
        };
        row("before main", seconds_before_main());
        for (const auto& [name, s] : rows_) row(name, s);
        row("main to here", std::chrono::duration<double>(last_ - g_main_start).count());
        std::cout << out.str();
    }

private:
    bool on_;
    Clock::time_point last_;
    std::vector<std::pair<const char*, double>> rows_;
    std::string device_;
};

}  // namespace cbi_app

#include "apps/analyze/diagram.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace cbi::analyze {
namespace {

const cv::Scalar white(255, 255, 255);
const cv::Scalar grey(190, 190, 190);
const cv::Scalar black(0, 0, 0);
const cv::Scalar red(30, 30, 220);         // BGR
const cv::Scalar separator(200, 120, 40);  // blue-ish, between arrays
constexpr int font = cv::FONT_HERSHEY_SIMPLEX;

std::uint64_t address_span(const std::vector<sim::ArrayInfo>& arrays) {
    return arrays.empty() ? 0 : arrays.back().base + arrays.back().elems;
}

}  // namespace

std::string diagram_too_large(const sim::Workload& w, int line_elems) {
    const auto span = address_span(sim::layout(w, line_elems));
    if (w.threads() > max_diagram_threads || span > max_diagram_addresses) {
        return "a diagram of " + std::to_string(w.threads()) + " threads x " + std::to_string(span) +
               " addresses exceeds the cap of " + std::to_string(max_diagram_threads) + " x " +
               std::to_string(max_diagram_addresses) + "; use a smaller --size";
    }
    return {};
}

cv::Mat render_spacetime(const sim::Trace& trace, const std::string& title) {
    const int cols = static_cast<int>(trace.threads.size());
    const int rows = static_cast<int>(address_span(trace.arrays));
    if (cols == 0 || rows == 0) throw std::invalid_argument("empty trace");
    // Cells a few pixels wide for small runs, one pixel for large ones.
    const int cw = std::clamp(1024 / cols, 1, 8);
    const int ch = std::clamp(1024 / rows, 1, 8);
    const int left = 70, top = 28, bottom = 34, right = 10;
    cv::Mat img(top + rows * ch + bottom, left + cols * cw + right, CV_8UC3, white);
    const int L = trace.line_elems;
    // Address a at the bottom of the plot for a = 0.
    auto cell = [&](int t, std::uint64_t a, int height_cells) {
        const int y = top + (rows - static_cast<int>(a) - height_cells) * ch;
        return cv::Rect(left + t * cw, y, cw, height_cells * ch);
    };
    auto line_cells = [&](int t, std::uint64_t line) {
        const std::uint64_t first = line * L;
        const int n = static_cast<int>(std::min<std::uint64_t>(L, rows - first));
        return cell(t, first, n);
    };
    for (int t = 0; t < cols; ++t) {
        const auto& rec = trace.threads[t];
        for (auto line : rec.resident) cv::rectangle(img, line_cells(t, line), grey, cv::FILLED);
        for (auto a : rec.accessed) cv::rectangle(img, cell(t, a, 1), black, cv::FILLED);
        for (auto line : rec.fetched) cv::rectangle(img, line_cells(t, line), red, cv::FILLED);
    }
    for (const auto& a : trace.arrays) {
        const int y_base = top + (rows - static_cast<int>(a.base)) * ch;
        const int y_end = top + (rows - static_cast<int>(a.base + a.elems)) * ch;
        cv::line(img, {left, y_base}, {left + cols * cw, y_base}, separator, 1);
        cv::putText(img, a.name, {4, (y_base + y_end) / 2 + 4}, font, 0.4, black, 1, cv::LINE_AA);
    }
    cv::rectangle(img, cv::Rect(left - 1, top - 1, cols * cw + 2, rows * ch + 2), black, 1);
    cv::putText(img, title, {left, 18}, font, 0.45, black, 1, cv::LINE_AA);
    cv::putText(img, "time (threads in schedule order) ->", {left, top + rows * ch + 16}, font, 0.4, black, 1,
                cv::LINE_AA);
    cv::putText(img, "red: fetched  black: accessed  grey: resident", {left, top + rows * ch + 30}, font, 0.4, black, 1,
                cv::LINE_AA);
    return img;
}

cv::Mat render_order(const std::vector<Pixel>& order, int width, int height, const std::string& title) {
    if (order.empty() || width <= 0 || height <= 0) throw std::invalid_argument("empty visit order");
    if (width > max_order_side || height > max_order_side)
        throw std::invalid_argument("visit-order view is limited to " + std::to_string(max_order_side) +
                                    " pixels a side");
    const int cell = std::clamp(512 / std::max(width, height), 1, 32);
    cv::Mat levels(height, width, CV_8UC1);
    const double n = static_cast<double>(order.size() > 1 ? order.size() - 1 : 1);
    for (std::size_t t = 0; t < order.size(); ++t) {
        levels.at<std::uint8_t>(order[t].y, order[t].x) = static_cast<std::uint8_t>(255.0 * t / n + 0.5);
    }
    cv::Mat colour;
    cv::applyColorMap(levels, colour, cv::COLORMAP_VIRIDIS);
    cv::Mat big;
    cv::resize(colour, big, {width * cell, height * cell}, 0, 0, cv::INTER_NEAREST);
    // The path is readable only while cells are large.
    if (cell >= 8) {
        auto centre = [&](Pixel p) { return cv::Point(p.x * cell + cell / 2, p.y * cell + cell / 2); };
        for (std::size_t t = 1; t < order.size(); ++t)
            cv::line(big, centre(order[t - 1]), centre(order[t]), white, 1, cv::LINE_AA);
        cv::circle(big, centre(order[0]), std::max(2, cell / 4), cv::Scalar(0, 0, 255), cv::FILLED, cv::LINE_AA);
    }
    const int top = 24;
    cv::Mat img(big.rows + top, std::max(big.cols, 320), CV_8UC3, white);
    big.copyTo(img(cv::Rect(0, top, big.cols, big.rows)));
    cv::putText(img, title, {2, 16}, font, 0.45, black, 1, cv::LINE_AA);
    return img;
}

void write_png(const std::string& path, const cv::Mat& image) {
    std::vector<std::uint8_t> bytes;
    bool encoded = false;
    try {
        encoded = cv::imencode(".png", image, bytes);
    } catch (const cv::Exception& e) {
        throw std::runtime_error(path + ": PNG encoding failed: " + e.err);
    }
    if (!encoded) throw std::runtime_error(path + ": PNG encoding failed");

    // Temporary file in the target directory, so the rename stays on one filesystem.
    const auto slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    if (base.empty()) throw std::runtime_error(path + ": not a file name");
    std::string tmp = dir + "/." + base + ".tmp-XXXXXX";
    const int fd = mkstemp(tmp.data());
    if (fd < 0) throw std::runtime_error(path + ": cannot create a temporary file: " + std::strerror(errno));
    auto fail = [&](const char* what) {
        const int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        throw std::runtime_error(path + ": " + what + ": " + std::strerror(err));
    };
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("write failed");
        }
        done += static_cast<std::size_t>(n);
    }
    if (::fchmod(fd, 0644) != 0) fail("chmod failed");
    if (::fsync(fd) != 0) fail("fsync failed");
    if (::close(fd) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        throw std::runtime_error(path + ": close failed: " + std::strerror(err));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        throw std::runtime_error(path + ": rename failed: " + std::strerror(err));
    }
}

}  // namespace cbi::analyze

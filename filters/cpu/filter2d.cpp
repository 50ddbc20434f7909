// filter2d's large kernels on the CPU's naive schedule: OpenCV's own
// cv::filter2D, which correlates through a DFT from 50-130 taps on (the
// direct sum costs a pass over the band per tap), a channel a task. Its result is OpenCV's:
// constant borders (filter2D takes no value) and wrap (its filter engine
// refuses it) pad the image first, as apps/reference's with_border does.
#include <tbb/parallel_for.h>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "filters/kinds/filter2d.hpp"

namespace cbi::cpu {
namespace {

int cv_depth(Depth d) {
    return d == Depth::u8 ? CV_8U : d == Depth::u16 ? CV_16U : CV_32F;
}

cv::Mat header(const ImageView& v) {
    return {v.height, v.width, CV_MAKETYPE(cv_depth(v.depth), v.channels), static_cast<void*>(v.data), v.stride};
}

}  // namespace

template <class T>
void filter2d_by_opencv(const Filter2DOp<T>& op) {
    const cv::Mat kernel(op.k.height, op.k.width, CV_32F, const_cast<float*>(op.k.w));
    const cv::Mat src = header(op.src.view);
    cv::Mat dst = header(op.dst);  // the right size and type: filter2D and merge write into it
    const BorderMode mode = op.src.mode;
    const auto plane = [&](const cv::Mat& s, cv::Mat& d) {
        if (mode != BorderMode::wrap && mode != BorderMode::constant) {
            cv::filter2D(s, d, -1, kernel, {-1, -1}, 0, opencv_border(mode));
            return;
        }
        // Every tap of an output lies in the padding; the padded image's own border reaches none.
        const int r = std::max(op.k.width, op.k.height) / 2 + 1;
        cv::Mat padded, full;
        cv::copyMakeBorder(s, padded, r, r, r, r, opencv_border(mode), cv::Scalar::all(op.src.constant));
        cv::filter2D(padded, full, -1, kernel, {-1, -1}, 0, cv::BORDER_REPLICATE);
        full(cv::Rect(r, r, s.cols, s.rows)).copyTo(d);
    };
    if (src.channels() == 1) return plane(src, dst);
    // OpenCV's DFT path runs on one thread and correlates each channel on its
    // own: a channel a task, the same result as one call (tested).
    std::vector<cv::Mat> planes, out(static_cast<std::size_t>(src.channels()));
    cv::split(src, planes);
    tbb::parallel_for(0, src.channels(), [&](int c) { plane(planes[c], out[c]); });
    cv::merge(out, dst);
}

template void filter2d_by_opencv(const Filter2DOp<std::uint8_t>&);
template void filter2d_by_opencv(const Filter2DOp<std::uint16_t>&);
template void filter2d_by_opencv(const Filter2DOp<float>&);

}  // namespace cbi::cpu

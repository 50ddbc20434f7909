#pragma once
// Zero-copy adapters between cbi image views and cv::Mat. The Mat (or the
// view) must outlive the object made from it.
#include <opencv2/core.hpp>

#include "pipeline/image.hpp"

namespace cbi {

// The OpenCV type (CV_8UC3, ...) for a depth and channel count.
int cv_type(Depth depth, int channels);

// A view of the Mat's pixels (a ROI stays strided). Throws
// std::invalid_argument for depths/channel counts cbi does not support.
ImageView view_of(const cv::Mat& mat);

// A Mat header over the view's pixels; no copy, no ownership.
cv::Mat as_mat(const ImageView& view);

}  // namespace cbi

// The OpenCV side of apps/bench/cpu_vs_opencv.sh: reads IN, applies the same
// filter N times with the OpenCV calls cbi's semantics are defined by
// (filters/filter.hpp), writes OUT. One process, as `cbi-filter IN
// --FILTER ... -o OUT` is one process. The pipelines: gray (`color:gray |
// gaussian:5 | sobel:mag`), dog and unsharp (apps/bench/pipelines/*.json).
//   opencv_passes IN OUT blur|gaussian|sobelx|sepia|gray|dog|unsharp N THREADS
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: opencv_passes IN OUT blur|gaussian|sobelx|sepia|gray|dog|unsharp N THREADS\n");
        return 2;
    }
    const std::string op = argv[3];
    const int passes = std::atoi(argv[4]);
    cv::setNumThreads(std::atoi(argv[5]));
    cv::Mat img = cv::imread(argv[1], cv::IMREAD_UNCHANGED);
    if (img.empty()) return 1;
    // sepia on (R,G,B): rows R', G', B' of cbi's preset, here in OpenCV's BGR order.
    const cv::Matx33f sepia_bgr(.131f, .534f, .272f,   // B' = .131 B + .534 G + .272 R
                                .168f, .686f, .349f,   // G'
                                .189f, .769f, .393f);  // R'
    for (int i = 0; i < passes; ++i) {
        cv::Mat out;
        if (op == "blur")
            cv::blur(img, out, {9, 9}, {-1, -1}, cv::BORDER_REFLECT_101);
        else if (op == "gaussian")
            cv::GaussianBlur(img, out, {9, 9}, 0, 0, cv::BORDER_REFLECT_101);
        else if (op == "sobelx") {
            cv::Mat g;
            cv::Sobel(img, g, CV_32F, 1, 0, 3, 1, 0, cv::BORDER_REFLECT_101);
            cv::convertScaleAbs(g, out);  // |gx|, rounded and saturated to 8 bits
        } else if (op == "sepia")
            cv::transform(img, out, sepia_bgr);
        else if (op == "gray") {
            cv::Mat g, gx, gy, m;
            cv::cvtColor(img, g, cv::COLOR_BGR2GRAY);
            cv::GaussianBlur(g, g, {5, 5}, 0, 0, cv::BORDER_REFLECT_101);
            cv::Sobel(g, gx, CV_32F, 1, 0, 3, 1, 0, cv::BORDER_REFLECT_101);
            cv::Sobel(g, gy, CV_32F, 0, 1, 3, 1, 0, cv::BORDER_REFLECT_101);
            cv::magnitude(gx, gy, m);
            m.convertTo(out, CV_8U);  // rounded to nearest even and saturated, as cbi's 8-bit magnitude
        } else if (op == "dog") {
            cv::Mat fine, coarse;
            cv::GaussianBlur(img, fine, {5, 5}, 0, 0, cv::BORDER_REFLECT_101);
            cv::GaussianBlur(img, coarse, {9, 9}, 0, 0, cv::BORDER_REFLECT_101);
            cv::addWeighted(fine, 4, coarse, -4, 128, out);
        } else if (op == "unsharp") {
            cv::Mat blurred;
            cv::GaussianBlur(img, blurred, {9, 9}, 0, 0, cv::BORDER_REFLECT_101);
            cv::addWeighted(img, 1.5, blurred, -0.5, 0, out);
        } else
            return 2;
        img = out;
    }
    return cv::imwrite(argv[2], img) ? 0 : 1;
}

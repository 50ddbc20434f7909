// The OpenCV side of apps/bench/cpu_vs_opencv.sh: reads IN, applies the same
// filter N times with the OpenCV calls cbi's semantics are defined by
// (filters/filter.hpp), writes OUT. One process, as `cbi-filter IN
// --FILTER ... -o OUT` is one process.
//   opencv_passes IN OUT blur|gaussian|sobelx|sepia N THREADS
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: opencv_passes IN OUT blur|gaussian|sobelx|sepia N THREADS\n");
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
        if (op == "blur") cv::blur(img, out, {9, 9}, {-1, -1}, cv::BORDER_REFLECT_101);
        else if (op == "gaussian") cv::GaussianBlur(img, out, {9, 9}, 0, 0, cv::BORDER_REFLECT_101);
        else if (op == "sobelx") {
            cv::Mat g;
            cv::Sobel(img, g, CV_32F, 1, 0, 3, 1, 0, cv::BORDER_REFLECT_101);
            cv::convertScaleAbs(g, out);  // |gx|, rounded and saturated to 8 bits
        } else if (op == "sepia") cv::transform(img, out, sepia_bgr);
        else return 2;
        img = out;
    }
    return cv::imwrite(argv[2], img) ? 0 : 1;
}

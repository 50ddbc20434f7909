// Writes the seed corpus of fuzz_image: one tiny image (5x3, a gradient)
// per format, depth and channel count that cbi reads, plus a few edge cases.
// Usage: fuzz_make_image_corpus OUT_DIR (the output is committed; rerun only
// to change it). OpenEXR needs OPENCV_IO_ENABLE_OPENEXR=1 in the environment.
#include <cstdio>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

namespace {

cv::Mat gradient(int type) {
    cv::Mat m(3, 5, type);
    const double scale = CV_MAT_DEPTH(type) == CV_8U ? 17 : CV_MAT_DEPTH(type) == CV_16U ? 4369 : 0.0625;
    for (int y = 0; y < m.rows; ++y)
        for (int x = 0; x < m.cols * m.channels(); ++x) {
            const double v = (x + 5 * y) % 16 * scale;
            switch (CV_MAT_DEPTH(type)) {
                case CV_8U: m.ptr<unsigned char>(y)[x] = cv::saturate_cast<unsigned char>(v); break;
                case CV_16U: m.ptr<unsigned short>(y)[x] = cv::saturate_cast<unsigned short>(v); break;
                default: m.ptr<float>(y)[x] = static_cast<float>(v); break;
            }
        }
    return m;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: fuzz_make_image_corpus OUT_DIR\n");
        return 2;
    }
    const std::string dir = argv[1];
    struct Item {
        const char* name;
        int type;
        std::vector<int> params;
    };
    const std::vector<Item> items = {
        {"8u1.png", CV_8UC1, {}},
        {"8u3.png", CV_8UC3, {}},
        {"8u4.png", CV_8UC4, {}},
        {"16u1.png", CV_16UC1, {}},
        {"16u4.png", CV_16UC4, {}},
        {"8u3.jpg", CV_8UC3, {cv::IMWRITE_JPEG_QUALITY, 50}},
        {"8u1.jpg", CV_8UC1, {}},
        {"8u3-progressive.jpg", CV_8UC3, {cv::IMWRITE_JPEG_PROGRESSIVE, 1}},
        {"8u3.tif", CV_8UC3, {}},
        {"16u1.tif", CV_16UC1, {}},
        {"32f3.tif", CV_32FC3, {}},
        {"8u4-lzw.tif", CV_8UC4, {cv::IMWRITE_TIFF_COMPRESSION, 5}},
        {"8u3.bmp", CV_8UC3, {}},
        {"8u1.bmp", CV_8UC1, {}},
        {"8u4.webp", CV_8UC4, {cv::IMWRITE_WEBP_QUALITY, 101}},
        {"8u3-lossy.webp", CV_8UC3, {cv::IMWRITE_WEBP_QUALITY, 50}},
        {"8u1.pgm", CV_8UC1, {}},
        {"16u1.pgm", CV_16UC1, {}},
        {"8u3.ppm", CV_8UC3, {}},
        {"8u1-ascii.pgm", CV_8UC1, {cv::IMWRITE_PXM_BINARY, 0}},
        {"8u4.pam", CV_8UC4, {}},
        {"32f3.pfm", CV_32FC3, {}},
        {"32f1.pfm", CV_32FC1, {}},
        {"32f3.exr", CV_32FC3, {}},
        {"32f3.hdr", CV_32FC3, {}},
        {"8u3.ras", CV_8UC3, {}},
    };
    int failed = 0;
    for (const auto& item : items) {
        const std::string path = dir + "/" + item.name;
        try {
            if (!cv::imwrite(path, gradient(item.type), item.params))
                throw std::runtime_error("imwrite returned false");
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s: %s\n", path.c_str(), e.what());
            ++failed;
        }
    }
    return failed ? 1 : 0;
}

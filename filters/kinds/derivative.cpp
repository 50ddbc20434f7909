#include "filters/kinds/derivative.hpp"

namespace cbi {
namespace {
// cv::getSobelKernel's construction of a 1-D kernel of a derivative order.
void sobel_kernel(int* k, int order, int size) {
    if (size == 1) {
        k[0] = 1;
        return;
    }
    if (size == 3) {
        const int tables[3][3] = {{1, 2, 1}, {-1, 0, 1}, {1, -2, 1}};
        for (int i = 0; i < 3; ++i) k[i] = tables[order][i];
        return;
    }
    int ker[8] = {1};
    for (int i = 0; i < size - order - 1; ++i) {  // smoothing: repeated [1 1]
        int old = ker[0];
        for (int j = 1; j <= size; ++j) {
            const int next = ker[j] + ker[j - 1];
            ker[j - 1] = old;
            old = next;
        }
    }
    for (int i = 0; i < order; ++i) {  // differencing: repeated [-1 1]
        int old = -ker[0];
        for (int j = 1; j <= size; ++j) {
            const int next = ker[j - 1] - ker[j];
            ker[j - 1] = old;
            old = next;
        }
    }
    for (int i = 0; i < size; ++i) k[i] = ker[i];
}
}  // namespace

SobelKernels derivative_kernels(int order, int ksize) {
    SobelKernels k{};
    k.deriv_size = ksize == 1 ? 3 : ksize;  // OpenCV widens a derivative of ksize 1 to 3
    k.smooth_size = ksize;
    sobel_kernel(k.deriv, order, k.deriv_size);
    sobel_kernel(k.smooth, 0, k.smooth_size);
    return k;
}

}  // namespace cbi

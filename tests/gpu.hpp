#pragma once
// For the GPU suites (CUDA builds only): REQUIRE_GPU() skips the calling test
// when no CUDA device is visible, else makes device 0 current.
#include <string>

#include <gtest/gtest.h>

#include "pipeline/cuda_runtime.hpp"

#define REQUIRE_GPU()                                                                      \
    do {                                                                                   \
        std::string why;                                                                   \
        if (::cbi::cuda_device_count(why) == 0) GTEST_SKIP() << "no CUDA device: " << why; \
        ::cbi::use_device(0);                                                              \
    } while (0)

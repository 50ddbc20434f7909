#pragma once
// A forbidden include for the layers test (tests/CMakeLists.txt).
#include "schedules/schedule.hpp"
#include "pipeline/image.hpp"

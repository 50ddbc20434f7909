#pragma once
// A forbidden include for the layers test (tests/CMakeLists.txt).
#include "pipeline/image.hpp"
#include "schedules/schedule.hpp"

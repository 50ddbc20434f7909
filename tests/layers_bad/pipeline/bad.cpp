// A forbidden include for the layers test (tests/CMakeLists.txt).
#include <cbi/apps/analyze/diagram.hpp>
#include "filters/ops.hpp"

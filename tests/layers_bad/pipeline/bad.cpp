// A forbidden include for the layers test (tests/CMakeLists.txt).
#include "filters/ops.hpp"
#include <cbi/apps/analyze/diagram.hpp>

#pragma once
// cbi::Error lives in the filters layer (filters/error.hpp), the lowest layer
// that throws it; this header keeps <cbi/pipeline/error.hpp> working for the
// pipeline, the apps and embedding applications.
#include "filters/error.hpp"

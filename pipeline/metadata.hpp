#pragma once
// Internal to pipeline/: what image_io.cpp asks of metadata.cpp.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/image_io.hpp"

namespace cbi::detail {

// Adds `metadata` to the encoded bytes of a `format` image with `channels`
// channels; on failure leaves them as they were and returns a warning
// naming `subject`.
std::string embed_metadata(std::vector<std::uint8_t>& encoded, std::string_view format, int channels,
                           const ImageMetadata& metadata, const std::string& subject);

}  // namespace cbi::detail

#pragma once
// JPEG byte surgery shared by the image-reading tests (CPU and GPU decoders).
#include <cstdint>
#include <vector>

namespace cbi::test {

// Inserts an APP1 Exif segment right after a JPEG's SOI: a big-endian TIFF
// structure whose IFD0 holds one Orientation (0x0112) entry, or `payload`
// as the segment's body when one is given.
std::vector<std::uint8_t> with_exif(const std::vector<std::uint8_t>& jpg, std::uint16_t orientation,
                                    std::vector<std::uint8_t> payload = {}) {
    if (payload.empty())
        payload = {'E',
                   'x',
                   'i',
                   'f',
                   0,
                   0,
                   'M',
                   'M',
                   0,
                   42,
                   0,
                   0,
                   0,
                   8,  // TIFF header, IFD0 at 8
                   0,
                   1,  // one entry
                   0x01,
                   0x12,
                   0,
                   3,
                   0,
                   0,
                   0,
                   1,
                   static_cast<std::uint8_t>(orientation >> 8),
                   static_cast<std::uint8_t>(orientation),
                   0,
                   0,  // SHORT, count 1, value
                   0,
                   0,
                   0,
                   0};  // no next IFD
    const std::size_t len = payload.size() + 2;
    std::vector<std::uint8_t> out(jpg.begin(), jpg.begin() + 2);
    out.insert(out.end(), {0xFF, 0xE1, static_cast<std::uint8_t>(len >> 8), static_cast<std::uint8_t>(len)});
    out.insert(out.end(), payload.begin(), payload.end());
    out.insert(out.end(), jpg.begin() + 2, jpg.end());
    return out;
}

}  // namespace cbi::test

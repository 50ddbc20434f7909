#include "filters/kinds/hsv.hpp"

#include "filters/error.hpp"

namespace cbi {

int HsvKindBase::channels_out(std::string_view name, int channels) {
    if (channels != 1 && channels != 3 && channels != 4)
        throw Error(std::string(name), "needs a 1-, 3- or 4-channel image, this one has " + std::to_string(channels));
    return channels == 4 ? 4 : 3;
}

void HsvKindBase::parse_none(std::string_view name, std::string_view a) {
    if (!a.empty())
        args::invalid(std::string(name) + " takes no arguments, not '" + std::string(a) + "' (" + std::string(name) +
                      ")");
}

}  // namespace cbi

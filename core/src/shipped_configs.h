// Manifests shipped in configs/ and compiled into gt_core
// (cmake/EmbedConfigs.cmake): the embedded default's dispatcher and workers,
// and the client's GT_COMPILE=1 stages, run what those files say.
#pragma once

#include <optional>
#include <string_view>

namespace gt {

// The text of configs/<name> as it was at build time; nullopt for a file
// that is not compiled in.
std::optional<std::string_view> ShippedConfig(std::string_view name);

}  // namespace gt

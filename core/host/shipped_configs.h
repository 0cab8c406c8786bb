// Manifests shipped in configs/ and compiled into gt_core
// (cmake/EmbedConfigs.cmake): the embedded default's dispatcher and workers,
// and the client's GT_COMPILE=1 stages, run what those files say.
#pragma once

#include <optional>
#include <string_view>

#include "gt/status.h"

namespace gt {

// The text of configs/<name> as it was at build time; nullopt for a file
// that is not compiled in.
std::optional<std::string_view> ShippedConfig(std::string_view name);

// Whether the environment asks for the hotpath and compile stages (the
// client's own, configs/client-compile.yaml, and the embedded dispatcher's):
// the switch GT_COMPILE decides when set; otherwise GT_WORKER_BATCH_SIZE set
// to anything but 1 does (seed 001's switch; its value is then the compile
// stage's batch_size, whose range that stage checks). A bad value of either
// is an error naming the variable (gt/settings.h), never silently eager.
Result<bool> CompileStagesFromEnv();

// True when GT_COMPILE is set to a switch's off value: the user asked for eager
// execution, so a client runs its compile scopes eagerly and sends no
// compile-scope markers. (With GT_COMPILE=1 a scope no compile stage carries
// out is an error at the next sync naming the missing stage; unset, a scope
// is compiled where a compile stage runs.)
Result<bool> CompileScopesEager();

}  // namespace gt

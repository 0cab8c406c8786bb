// Fuzz target: bytes as a pipeline manifest (manifest.h), as gt-dispatcher,
// gt-worker and `gt validate` read one. The parser must answer every input
// with a manifest or an InvalidArgument listing problems, never throw or
// crash; and ParseManifest and ValidateManifest must agree on whether the
// text is valid. Plugins named in it are looked up (the fuzz tree's
// modifiers and its stand-in sharding plugin), so their option tables are
// checked against the fuzzed options as well.
#include <cstdlib>
#include <string>

#include "fuzz_check.h"
#include "host/manifest.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("GT_PLUGIN_PATH", GT_FUZZ_PLUGIN_DIR, 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  Result<HostManifest> m = ParseManifest(yaml, "fuzz.yaml", std::nullopt);
  const std::vector<ManifestProblem> problems = ValidateManifest(yaml, std::nullopt);
  fuzz::Check(m.ok() == problems.empty(), "ParseManifest and ValidateManifest disagree");
  if (!m.ok()) {
    fuzz::Check(m.status().code() == Code::kInvalidArgument, "a bad manifest gave " + m.status().ToString());
    fuzz::Check(m.status().message().rfind("fuzz.yaml: ", 0) == 0, "the error does not name its source");
    return 0;
  }
  // A valid manifest is valid for the host it names.
  fuzz::Check(ParseManifest(yaml, "fuzz.yaml", m->host).ok(), "valid manifest refused for its own host");
  return 0;
}

// Fuzz target: bytes as the client's signal-config YAML (gt/config.h), the
// text of gt::load_config, GT_CONFIG and gt.load_config in Python, read by
// parse_config_string. It must never throw or crash; every problem is one
// line that starts with the source name; and what it accepts satisfies the
// rules it enforces (a non-empty signal name; worker indexes >= 0, each
// once; shard and replicated not both).
#include <set>
#include <string>

#include "fuzz_check.h"
#include "gt/config.h"

namespace {

void CheckAccepted(const std::string& name, const gt::SignalConfig& config) {
  gt::fuzz::Check(!name.empty(), "accepted a signal without a name");
  if (!config.shard) return;
  gt::fuzz::Check(!config.replicated, "accepted shard with replicated: true");
  std::set<int> seen;
  for (int w : config.shard->workers)
    gt::fuzz::Check(w >= 0 && seen.insert(w).second, "accepted worker " + std::to_string(w));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  const gt::ParsedConfigs parsed = gt::parse_config_string(yaml, "fuzz.yaml");
  for (const std::string& problem : parsed.problems) {
    gt::fuzz::Check(problem.rfind("fuzz.yaml:", 0) == 0, "problem without its source: " + problem);
    gt::fuzz::Check(problem.find('\n') == std::string::npos, "problem over several lines: " + problem);
  }
  for (const auto& [name, config] : parsed.signals) CheckAccepted(name, config);
  return 0;
}

// What the manifest_test files share: the test plugins' directory
// (GT_TEST_PLUGIN_DIR, tests/plugins/, built by tests/manifest_tests.cmake),
// put on GT_PLUGIN_PATH before main() so that no test loads anything
// without it, and the path of one plugin file there.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "gt/instruction.h"
#include "gt/plugin.h"
#include "gt/settings.h"
#include "host/host_metrics.h"
#include "host/manifest.h"
#include "host/pipeline.h"
#include "host/plugin_loader.h"
#include "host/shipped_configs.h"
#include "worker/worker.h"

namespace gt::manifest_test {

using ::testing::HasSubstr;

const std::string kTestPluginDir = GT_TEST_PLUGIN_DIR;

// The search path is read from the environment on every lookup; set it
// before main() so that no test can load anything without it.
const bool kPluginPathSet = [] {
  setenv("GT_PLUGIN_PATH", GT_TEST_PLUGIN_DIR, 1);
  return true;
}();

inline std::string TestPlugin(const std::string& file) { return kTestPluginDir + "/" + file; }

}  // namespace gt::manifest_test

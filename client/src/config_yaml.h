// The signal-config YAML reader (config_yaml.cc) and the validation both it
// and register_config use (config.cc): what gt/config.h's load_config and
// parse_config_string are made of.
//
// Thread-safety: plain functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "gt/config.h"

namespace gt::client_internal {

// Problems of `config` in itself, each as "PATH: what" with PATH under
// `where` (config.cc).
std::vector<std::string> ConfigProblems(const std::string& where, const SignalConfig& config);
// Each line on a line of its own, indented (config.cc).
std::string JoinLines(const std::vector<std::string>& lines);

// Reads `yaml` (named `source` in problems) into `root` and its signal
// configs; every problem found, one a line, each "SOURCE:LINE: PATH: what".
ParsedConfigs ParseConfigYaml(const std::string& yaml, const std::string& source, YAML::Node& root);
// Where a problem is: "SOURCE:LINE: PATH" (the line of `node`, 1-based).
std::string ProblemAt(const std::string& source, const YAML::Node& node, const std::string& path);
// `text` with its line breaks escaped: a problem is one line.
std::string OneLine(const std::string& text);
// "SOURCE: N problems:" and the problems, one a line.
std::string Summary(const std::string& source, const std::vector<std::string>& problems);

}  // namespace gt::client_internal

// Self-describing plugin options.
//
// A plugin declares each option exactly once, as an OptionSpec (name, type,
// default, unit, one-line doc, range, and the environment variable that
// overrides it). The host validates a manifest's options against those specs
// before the plugin sees them, fills in the defaults, applies the set
// environment overrides, and hands the plugin an immutable OptionValues. A
// plugin never reads the environment itself: `gt inspect` then shows every
// knob it has.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "gt/status.h"

namespace gt {

enum class OptionType : uint8_t { kBool, kInt, kDouble, kString };
std::string_view OptionTypeName(OptionType type);

struct OptionSpec {
  const char* name;
  OptionType type;
  const char* default_value;  // written as it would be in YAML
  const char* unit;           // "" when unitless
  const char* doc;            // one line
  double min;                 // kInt/kDouble range, inclusive
  double max;
  // Environment variable that, when set and not empty, replaces the
  // manifest's value (nullptr: none). Parsed as the option's type and range;
  // a bool as a switch (gt/settings.h, ParseSwitch).
  const char* env = nullptr;
};

using OptionValue = std::variant<bool, int64_t, double, std::string>;

// Parses `text` as `spec` demands and checks the range. The error names the
// option, the expected type and the text.
Result<OptionValue> ParseOptionValue(const OptionSpec& spec, std::string_view text);
// The value of `spec.env` when it is set and not empty, parsed; nullopt when
// it is unset (or the spec has none). The error names the variable. Read
// through gt/settings.h (EnvironmentText), as every GT_* variable is.
Result<std::optional<OptionValue>> ReadEnvOverride(const OptionSpec& spec);

// Validated option values, one per declared option.
class OptionValues {
 public:
  void Set(std::string name, OptionValue value) { values_[std::move(name)] = std::move(value); }

  // REQUIRES: `name` was declared with the matching type (the host guarantees
  // that every declared option is present).
  bool GetBool(std::string_view name) const { return std::get<bool>(At(name)); }
  int64_t GetInt(std::string_view name) const { return std::get<int64_t>(At(name)); }
  double GetDouble(std::string_view name) const { return std::get<double>(At(name)); }
  const std::string& GetString(std::string_view name) const { return std::get<std::string>(At(name)); }

  const std::map<std::string, OptionValue, std::less<>>& all() const { return values_; }

 private:
  const OptionValue& At(std::string_view name) const;
  std::map<std::string, OptionValue, std::less<>> values_;
};


}  // namespace gt

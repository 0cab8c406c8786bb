// gt's settings: every GT_* environment variable gt reads, declared once.
//
// Each variable has one row in one list (core/host/settings.cc, kSettings):
// its name, its type, its default written once, and one line saying what it
// does. The README's "Environment variables" table is that list
// (`gt env --markdown` prints it; tests/python/test_env_table.py compares
// the two both ways). The list is the only place gt calls getenv; the client,
// the hosts, the services, plugins (through OptionSpec::env, gt/options.h)
// and the Python package (gt._C._setting) read it through the functions
// below, with one parsing rule:
//   - a switch is on for 1, true, yes, on and off for 0, false, no, off (any
//     case); any other text is an error;
//   - an integer or a number of seconds must be one, within its range;
//   - an empty variable is an unset one.
// Every error names the variable and the text it holds.
//
// A value is read from the environment when it is asked for; each caller asks
// once, when its part starts (a session, a host, a manifest), so a test that
// sets a variable between two starts is seen.
//
// Thread-safety: plain functions over a constant list; they read the
// environment (getenv), which the caller must not change concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gt/status.h"

namespace gt {

enum class SettingType : uint8_t {
  kSwitch,   // on/off (SwitchSetting, SwitchIfSet)
  kInt,      // an integer within [min, max] (IntSetting)
  kSeconds,  // a number of seconds within [min, max] (SecondsSetting)
  kText,     // a file, a directory list, ...: taken as written (TextSetting)
};
std::string_view SettingTypeName(SettingType type);  // "switch", "int", "seconds", "text"

struct SettingSpec {
  const char* name;           // "GT_WORKERS"
  SettingType type;
  // The value when unset, as the README shows it; nullptr: none (unset means
  // "not given", or for a plugin option (`option` set) the option's default).
  const char* default_value;
  double min;                 // kInt / kSeconds range, inclusive
  double max;
  // The plugin option this variable overrides ("hotpath window"), whose spec
  // (gt/options.h) has the default and the range; nullptr: none. Such a
  // variable is parsed when the stage loads, by ReadEnvOverride.
  const char* option;
  const char* doc;            // one line: what it does (the README's effect column)
  // How an error describes a good value; nullptr: made from type and range.
  const char* expects = nullptr;
};

// Every GT_* variable gt reads, in the README's order.
std::span<const SettingSpec> AllSettings();
// The row of `name`; nullptr when gt declares no such variable.
const SettingSpec* FindSetting(std::string_view name);

// The text of environment variable `name`, any name (a plugin's own option
// variable included); nullopt when it is unset or empty.
std::optional<std::string> EnvironmentText(std::string_view name);

// Parses `text` as a switch. The error: "NAME: expected a switch (1, true,
// yes, on or 0, false, no, off), got 'TEXT'".
Result<bool> ParseSwitch(std::string_view name, std::string_view text);

// The value of a declared variable, or its default when it is unset.
// REQUIRES: `name` is in AllSettings() with the matching type (a programming
// error otherwise: asserted).
Result<bool> SwitchSetting(std::string_view name);
Result<std::optional<bool>> SwitchIfSet(std::string_view name);  // nullopt: unset
Result<int64_t> IntSetting(std::string_view name);  // REQUIRES: a default
Result<std::optional<int64_t>> IntIfSet(std::string_view name);  // nullopt: unset and no default
Result<double> SecondsSetting(std::string_view name);
std::optional<std::string> TextSetting(std::string_view name);  // nullopt: unset (no default)

// Checks every set variable of the list that no plugin option owns (those are
// checked when their stage loads); the first bad one's error. The client's
// first op and a service's start call it, so a bad value fails there,
// naming the variable, rather than where it is first used.
Status CheckSettings();

}  // namespace gt

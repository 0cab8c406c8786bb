// EXPECT_CONTAINS(text, part): passes when `text` contains `part`; prints
// both otherwise (an error message must name what was wrong).
#pragma once

#include <string>

#include <gtest/gtest.h>

namespace gt::testing {

inline ::testing::AssertionResult Contains(const char* text_expr, const char* part_expr, const std::string& text,
                                           const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text_expr << " = \"" << text << "\" does not contain " << part_expr
                                       << " = \"" << part << "\"";
}

}  // namespace gt::testing

#define EXPECT_CONTAINS(text, part) EXPECT_PRED_FORMAT2(::gt::testing::Contains, text, part)

// Comparing two gt tensors in tests: same shape, and every element within
// 1e-3 + 1e-4 * |want| (float32 results of the same program on different
// placements, whose sums are taken in another order).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gt/gt.h"

namespace gt::testing {

inline void ExpectClose(const gt::Tensor& got, const gt::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<float> g = got.to_vector<float>();
  std::vector<float> w = want.to_vector<float>();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], w[i], 1e-3 + 1e-4 * std::fabs(w[i])) << what << " element " << i;
}

}  // namespace gt::testing

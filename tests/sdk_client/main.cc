// The C++ quick start's program, checked: a matmul, an elementwise op and a
// reduction on the embedded default, printed, and compared with the same
// arithmetic done here. Exit status 0 when they agree.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "gt/gt.h"

int main() {
  const std::vector<float> av = {1, 2, 3, 4, 5, 6}, bv = {1, 0, -1, 2, 0.5f, 1};
  gt::Tensor a = gt::tensor<float>(av, {2, 3});
  gt::Tensor b = gt::tensor<float>(bv, {3, 2});
  std::vector<float> got = (a.matmul(b) + 1).relu().sum({1}).to_vector<float>();  // sync point
  std::vector<float> want(2, 0.0f);  // the same, by hand: row sums of relu(a @ b + 1)
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float dot = 0;
      for (int k = 0; k < 3; ++k) dot += av[i * 3 + k] * bv[k * 2 + j];
      want[i] += std::max(dot + 1, 0.0f);
    }
  bool equal = got.size() == want.size();
  for (size_t i = 0; equal && i < got.size(); ++i) equal = std::fabs(got[i] - want[i]) < 1e-5f;
  std::printf("sdk_client: [%g, %g] %s\n", got.size() > 0 ? got[0] : NAN, got.size() > 1 ? got[1] : NAN,
              equal ? "ok" : "WRONG");
  return equal ? 0 : 1;
}

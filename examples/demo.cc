// The README's first command runs this: a few tensor ops on the embedded
// default (a dispatcher and two workers in this process), printed.
#include <cstdio>

#include "gt/gt.h"

namespace {
void Print(const char* name, const gt::Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  std::printf("%-22s %s = [", name, gt::ShapeToString(t.shape()).c_str());
  for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.4f", i ? ", " : "", v[i]);
  std::printf("]\n");
}
}  // namespace

int main() {
  gt::Tensor a = gt::tensor<float>({1, 2, 3, 4}, {2, 2});
  gt::Tensor b = gt::tensor<float>({5, 6, 7, 8}, {2, 2});
  Print("a", a);
  Print("b", b);
  Print("a + b", a + b);
  Print("a @ b", a.matmul(b));
  Print("relu(a - 2.5)", (a - 2.5).relu());
  Print("(a * b).sum(axis 1)", (a * b).sum({1}));
  Print("sigmoid(a).mean()", a.sigmoid().mean());
  gt::Tensor x = gt::randn({256, 256}, gt::DType::kFloat32, /*seed=*/42);
  Print("(x @ x.T).max()", x.matmul(x.t()).max());
  try {
    gt::Tensor bad = a.matmul(gt::ones({3, 3}));
  } catch (const gt::Error& e) {
    std::printf("shape error caught at the call: %s\n", e.what());
  }
  return 0;
}

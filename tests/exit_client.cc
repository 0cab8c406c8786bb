// A client program that returns from main with work still pending, for
// exit_test.cc: the process must end with status 0, quietly, and at once,
// whatever was in flight (the session closes before exit() destroys what
// the embedded workers use).
//   exit_client MODE [ADDRESS]   ADDRESS: connect there instead of the embedded default
#include <cstdio>
#include <string>
#include <vector>

#include "gt/gt.h"
#include "gt/nn.h"

namespace {

// Destroyed by exit() after the session closed: its free must do nothing.
gt::Tensor kept_until_static_destruction;

int Run(const std::string& mode) {
  if (mode == "rand") {  // the first case: an op pending on a worker that was just synced
    gt::Tensor a = gt::randn({2});
    gt::sync();
    gt::Tensor b = gt::rand({2}) * 2;
  } else if (mode == "linear") {  // the second case: a second Linear's initialisation pending
    gt::nn::Linear m(4, 2);
    (void)m.parameters()[0].to_vector<float>();
    gt::nn::Linear m2(4, 2);
  } else if (mode == "backward") {
    gt::Tensor w = gt::randn({64, 64});
    w.requires_grad_();
    w.matmul(w).tanh().sum().backward();
  } else if (mode == "busy") {  // seconds of work queued behind the exit
    gt::Tensor x = gt::randn({512, 512});
    for (int i = 0; i < 200; ++i) x = x.matmul(x).tanh();
  } else if (mode == "static") {
    kept_until_static_destruction = gt::rand({8, 8}) + 1;
    gt::sync();
  } else {
    std::fprintf(stderr, "exit_client: unknown mode %s\n", mode.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: exit_client rand|linear|backward|busy|static [ADDRESS]\n");
    return 2;
  }
  if (argc > 2) gt::connect(argv[2]);
  return Run(argv[1]);
}

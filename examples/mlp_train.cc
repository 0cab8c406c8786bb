// The MLP training loop of gt's predecessor, in C++: a 784-256-10 network
// (Linear, relu, Linear) trained with SGD on a mean squared error, on
// synthetic data made remotely. Every op runs on gt's workers; the client
// records the tape and backward() replays it with ordinary gt ops.
//
//   build/bin/gt-example-mlp [epochs=100] [lr=0.01] [dispatcher address]
//
// Without an address it runs on the embedded default (a dispatcher and two
// workers in this process).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gt/gt.h"
#include "gt/nn.h"

namespace {

class Mlp {
 public:
  gt::Tensor forward(const gt::Tensor& x) const { return fc2_(fc1_(x).relu()); }
  std::vector<gt::Tensor> parameters() const {
    std::vector<gt::Tensor> p = fc1_.parameters();
    for (const gt::Tensor& t : fc2_.parameters()) p.push_back(t);
    return p;
  }

 private:
  gt::nn::Linear fc1_{784, 256, /*bias=*/true, /*seed=*/1};
  gt::nn::Linear fc2_{256, 10, /*bias=*/true, /*seed=*/2};
};

}  // namespace

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 100;
  const double lr = argc > 2 ? std::atof(argv[2]) : 0.01;
  if (argc > 3) gt::connect(argv[3]);

  // 512 samples; the targets come from a fixed random linear "teacher"
  // squashed by tanh, so there is something to learn.
  const int64_t samples = 512;
  gt::Tensor x_train = gt::randn({samples, 784}, gt::DType::kFloat32, /*seed=*/7);
  gt::Tensor teacher = gt::randn({784, 10}, gt::DType::kFloat32, /*seed=*/8) / std::sqrt(784.0);
  gt::Tensor y_train = x_train.matmul(teacher).tanh();

  Mlp model;
  gt::nn::SGD optimizer(model.parameters(), lr);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    gt::Tensor pred = model.forward(x_train);
    gt::Tensor loss = (pred - y_train).pow(2).mean();
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    if (epoch % 10 == 0 || epoch == epochs - 1) std::printf("epoch %3d  loss %.6f\n", epoch, loss.item());
  }
  return 0;
}

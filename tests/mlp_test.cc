// An MLP (784-256-10: Linear, relu, Linear) trained for 50 steps twice from
// the same initial weights on the same batches: by gt (gt::nn::Linear and
// its optimizers, gt's tape autograd, every op on a gt-worker process) and
// by LibTorch in this process with torch's own autograd and torch::optim.
// The loss must agree at every step.
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "aten_bridge.h"
#include "connected_cluster.h"
#include "gt/gt.h"
#include "gt/nn.h"

namespace {

using gt::testing::Fetch;
using gt::testing::Send;

constexpr int64_t kIn = 784, kHidden = 256, kClasses = 10, kBatch = 128, kBatches = 4, kSteps = 50;
constexpr double kLossTolerance = 1e-4;

at::Generator Gen(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

// Synthetic MNIST-shaped data: inputs, labels from a random linear teacher,
// and the labels one-hot (for the MSE variants).
struct Data {
  std::vector<at::Tensor> x, labels, one_hot;  // per batch
};

Data MakeData() {
  Data d;
  at::Tensor teacher = at::randn({kIn, kClasses}, Gen(1), at::kFloat);
  for (int64_t b = 0; b < kBatches; ++b) {
    at::Tensor x = at::randn({kBatch, kIn}, Gen(100 + b), at::kFloat);
    at::Tensor labels = x.matmul(teacher).argmax(1);
    d.x.push_back(x);
    d.labels.push_back(labels);
    d.one_hot.push_back(at::one_hot(labels, kClasses).to(at::kFloat));
  }
  return d;
}

// PyTorch's Linear initialisation: uniform(-1/sqrt(in), 1/sqrt(in)).
at::Tensor Uniform(at::IntArrayRef shape, int64_t in, uint64_t seed) {
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  return at::rand(shape, Gen(seed), at::kFloat) * (2 * bound) - bound;
}

struct Weights {
  at::Tensor w1 = Uniform({kHidden, kIn}, kIn, 11), b1 = Uniform({kHidden}, kIn, 12);
  at::Tensor w2 = Uniform({kClasses, kHidden}, kHidden, 13), b2 = Uniform({kClasses}, kHidden, 14);
};

enum class Loss { kCrossEntropy, kMse };
enum class Optimizer { kSgd, kAdam };

struct Config {
  std::string name;
  Loss loss;
  Optimizer optimizer;
  double lr;
  double momentum = 0;
  double weight_decay = 0;
};

// ---- the two trainers ---------------------------------------------------------------

std::vector<double> TrainWithGt(const Config& c, const Data& data, const Weights& init, Weights* final_weights) {
  gt::nn::Linear fc1(kIn, kHidden), fc2(kHidden, kClasses);
  // The same initial weights as LibTorch's.
  fc1.weight = Send(init.w1).requires_grad_();
  fc1.bias = Send(init.b1).requires_grad_();
  fc2.weight = Send(init.w2).requires_grad_();
  fc2.bias = Send(init.b2).requires_grad_();
  std::vector<gt::Tensor> params = fc1.parameters();
  for (const gt::Tensor& p : fc2.parameters()) params.push_back(p);

  std::vector<gt::Tensor> xs, targets;
  for (int64_t b = 0; b < kBatches; ++b) {
    xs.push_back(Send(data.x[b]));
    targets.push_back(Send(c.loss == Loss::kCrossEntropy ? data.labels[b] : data.one_hot[b]));
  }

  std::unique_ptr<gt::nn::SGD> sgd;
  std::unique_ptr<gt::nn::Adam> adam;
  if (c.optimizer == Optimizer::kSgd) sgd = std::make_unique<gt::nn::SGD>(params, c.lr, c.momentum, c.weight_decay);
  else adam = std::make_unique<gt::nn::Adam>(params, c.lr, 0.9, 0.999, 1e-8, c.weight_decay);

  std::vector<double> losses;
  for (int64_t step = 0; step < kSteps; ++step) {
    const gt::Tensor& x = xs[step % kBatches];
    const gt::Tensor& target = targets[step % kBatches];
    gt::Tensor logits = fc2(fc1(x).relu());
    gt::Tensor loss = c.loss == Loss::kCrossEntropy ? gt::nn::cross_entropy(logits, target)
                                                    : gt::nn::mse_loss(logits, target);
    loss.backward();
    if (sgd) sgd->step(), sgd->zero_grad();
    else adam->step(), adam->zero_grad();
    losses.push_back(loss.item());
  }
  *final_weights = {Fetch(fc1.weight), Fetch(fc1.bias), Fetch(fc2.weight), Fetch(fc2.bias)};
  return losses;
}

std::vector<double> TrainWithTorch(const Config& c, const Data& data, const Weights& init, Weights* final_weights) {
  std::vector<torch::Tensor> params = {init.w1.clone().set_requires_grad(true), init.b1.clone().set_requires_grad(true),
                                       init.w2.clone().set_requires_grad(true), init.b2.clone().set_requires_grad(true)};
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (c.optimizer == Optimizer::kSgd) {
    optimizer = std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
  } else {
    optimizer = std::make_unique<torch::optim::Adam>(
        params, torch::optim::AdamOptions(c.lr).betas({0.9, 0.999}).eps(1e-8).weight_decay(c.weight_decay));
  }
  std::vector<double> losses;
  for (int64_t step = 0; step < kSteps; ++step) {
    const torch::Tensor& x = data.x[step % kBatches];
    torch::Tensor hidden = torch::relu(x.matmul(params[0].t()) + params[1]);
    torch::Tensor logits = hidden.matmul(params[2].t()) + params[3];
    torch::Tensor loss = c.loss == Loss::kCrossEntropy
                             ? torch::nn::functional::cross_entropy(logits, data.labels[step % kBatches])
                             : torch::nn::functional::mse_loss(logits, data.one_hot[step % kBatches]);
    optimizer->zero_grad();
    loss.backward();
    optimizer->step();
    losses.push_back(loss.item<double>());
  }
  *final_weights = {params[0].detach(), params[1].detach(), params[2].detach(), params[3].detach()};
  return losses;
}

// ---- the suite ------------------------------------------------------------------------

class MlpTest : public ::testing::TestWithParam<Config> {
 protected:
  static void SetUpTestSuite() { gt::testing::ConnectedCluster::Start(); }

  static void TearDownTestSuite() { gt::testing::ConnectedCluster::Stop(); }

  void SetUp() override {
    ASSERT_TRUE(gt::testing::ConnectedCluster::ready()) << gt::testing::ConnectedCluster::NotReady();
  }

  void TearDown() override { EXPECT_TRUE(gt::testing::ConnectedCluster::cluster().AllAlive()) << "a host process died"; }

};


TEST_P(MlpTest, LossMatchesLibTorchEveryStep) {
  const Config& c = GetParam();
  const Data data = MakeData();
  const Weights init;
  Weights gt_final, torch_final;
  std::vector<double> gt_losses = TrainWithGt(c, data, init, &gt_final);
  std::vector<double> torch_losses = TrainWithTorch(c, data, init, &torch_final);
  ASSERT_EQ(gt_losses.size(), torch_losses.size());

  double worst = 0;
  for (size_t step = 0; step < gt_losses.size(); ++step) {
    double diff = std::abs(gt_losses[step] - torch_losses[step]);
    worst = std::max(worst, diff);
    EXPECT_LE(diff, kLossTolerance) << "step " << step << ": gt " << gt_losses[step] << ", LibTorch "
                                    << torch_losses[step];
  }
  RecordProperty("max_loss_difference", std::to_string(worst));
  std::printf("[ %s ] loss %.6f -> %.6f (LibTorch %.6f -> %.6f), max |difference| %.3g over %zu steps\n",
              c.name.c_str(), gt_losses.front(), gt_losses.back(), torch_losses.front(), torch_losses.back(), worst,
              gt_losses.size());
  EXPECT_LT(gt_losses.back(), 0.9 * gt_losses.front()) << "the MLP did not learn";

  // The parameters end up where LibTorch's do.
  const std::pair<const at::Tensor*, const at::Tensor*> pairs[] = {{&gt_final.w1, &torch_final.w1},
                                                                   {&gt_final.b1, &torch_final.b1},
                                                                   {&gt_final.w2, &torch_final.w2},
                                                                   {&gt_final.b2, &torch_final.b2}};
  for (const auto& [g, t] : pairs) {
    double max_diff = (*g - *t).abs().max().item<double>();
    EXPECT_LE(max_diff, 1e-4) << "parameter of shape " << g->sizes() << " differs by " << max_diff;
  }
  EXPECT_NO_THROW(gt::sync());
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, MlpTest,
    ::testing::Values(Config{"sgd_cross_entropy", Loss::kCrossEntropy, Optimizer::kSgd, 0.1},
                      Config{"sgd_mse", Loss::kMse, Optimizer::kSgd, 0.1},
                      Config{"sgd_momentum_weight_decay_cross_entropy", Loss::kCrossEntropy, Optimizer::kSgd, 0.05,
                             0.9, 1e-3},
                      Config{"adam_cross_entropy", Loss::kCrossEntropy, Optimizer::kAdam, 1e-3},
                      Config{"adam_weight_decay_mse", Loss::kMse, Optimizer::kAdam, 1e-3, 0, 1e-2}),
    [](const ::testing::TestParamInfo<Config>& info) { return info.param.name; });

}  // namespace

// MLP training-step benchmark: one SGD step of a 784-256-10 MLP (Linear,
// relu, Linear) on a batch of 128, forward + backward + update, with
// loss.item() every step as the sync point. gt's embedded default (gt::nn,
// the client's tape autograd, every op through dispatcher and worker) against
// LibTorch in this process (torch's autograd and torch::optim::SGD), the same
// initial weights and data, in the same run; reported as a ratio.
//
//   build/bin/gt-bench-mlp [reps=7] [steps=100] [gt|torch|both] [dispatcher address]
//
// "gt" or "torch" runs one side only (to profile it alone); an address runs
// gt against a running dispatcher instead of the embedded default (to read
// the worker's per-op metrics).
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gt/gt.h"
#include "gt/nn.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kIn = 784, kHidden = 256, kClasses = 10, kBatch = 128;
constexpr double kLr = 0.1;
constexpr int kRounds = 5;  // interleaved gt/LibTorch rounds; the median round is reported

at::Generator Gen(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

at::Tensor Uniform(at::IntArrayRef shape, int64_t in, uint64_t seed) {
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  return at::rand(shape, Gen(seed), at::kFloat) * (2 * bound) - bound;
}

gt::Tensor ToGt(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  gt::DType dtype = c.scalar_type() == at::kLong ? gt::DType::kInt64 : gt::DType::kFloat32;
  return gt::from_data(c.data_ptr(), c.nbytes(), gt::Shape(c.sizes().begin(), c.sizes().end()), dtype);
}

struct Problem {
  at::Tensor x = at::randn({kBatch, kIn}, Gen(1), at::kFloat);
  at::Tensor labels = at::randint(kClasses, {kBatch}, Gen(2), at::kLong);
  at::Tensor one_hot = at::one_hot(labels, kClasses).to(at::kFloat);
  at::Tensor w1 = Uniform({kHidden, kIn}, kIn, 3), b1 = Uniform({kHidden}, kIn, 4);
  at::Tensor w2 = Uniform({kClasses, kHidden}, kHidden, 5), b2 = Uniform({kClasses}, kHidden, 6);
};

enum class Loss { kCrossEntropy, kMse };

// A training loop that runs `steps` steps per call and returns the last loss.
// With `sync_every_step` it reads the loss (a sync point) after every step,
// as a training loop that logs or checks its loss does; otherwise only
// after the last one.
using Trainer = std::function<double(int steps)>;

Trainer GtTrainer(const Problem& p, Loss loss_kind, bool sync_every_step = true) {
  struct State {
    gt::nn::Linear fc1{kIn, kHidden}, fc2{kHidden, kClasses};
    gt::Tensor x, target;
    std::unique_ptr<gt::nn::SGD> sgd;
  };
  auto s = std::make_shared<State>();
  s->fc1.weight = ToGt(p.w1).requires_grad_();
  s->fc1.bias = ToGt(p.b1).requires_grad_();
  s->fc2.weight = ToGt(p.w2).requires_grad_();
  s->fc2.bias = ToGt(p.b2).requires_grad_();
  s->x = ToGt(p.x);
  s->target = ToGt(loss_kind == Loss::kCrossEntropy ? p.labels : p.one_hot);
  std::vector<gt::Tensor> params = s->fc1.parameters();
  for (const gt::Tensor& t : s->fc2.parameters()) params.push_back(t);
  s->sgd = std::make_unique<gt::nn::SGD>(params, kLr);
  return [s, loss_kind, sync_every_step](int steps) {
    double last = 0;
    for (int i = 0; i < steps; ++i) {
      gt::Tensor logits = s->fc2(s->fc1(s->x).relu());
      gt::Tensor loss = loss_kind == Loss::kCrossEntropy ? gt::nn::cross_entropy(logits, s->target)
                                                         : gt::nn::mse_loss(logits, s->target);
      loss.backward();
      s->sgd->step();
      s->sgd->zero_grad();
      if (sync_every_step || i == steps - 1) last = loss.item();
    }
    return last;
  };
}

Trainer TorchTrainer(const Problem& p, Loss loss_kind) {
  struct State {
    std::vector<torch::Tensor> params;
    std::unique_ptr<torch::optim::SGD> sgd;
  };
  auto s = std::make_shared<State>();
  s->params = {p.w1.clone().set_requires_grad(true), p.b1.clone().set_requires_grad(true),
               p.w2.clone().set_requires_grad(true), p.b2.clone().set_requires_grad(true)};
  s->sgd = std::make_unique<torch::optim::SGD>(s->params, torch::optim::SGDOptions(kLr));
  return [s, p, loss_kind](int steps) {
    double last = 0;
    for (int i = 0; i < steps; ++i) {
      const auto& w = s->params;
      torch::Tensor logits = torch::relu(p.x.matmul(w[0].t()) + w[1]).matmul(w[2].t()) + w[3];
      torch::Tensor loss = loss_kind == Loss::kCrossEntropy ? torch::nn::functional::cross_entropy(logits, p.labels)
                                                            : torch::nn::functional::mse_loss(logits, p.one_hot);
      s->sgd->zero_grad();
      loss.backward();
      s->sgd->step();
      last = loss.item<double>();
    }
    return last;
  };
}

// Median seconds per step over `reps` runs of `steps` steps, after a warm-up.
double SecondsPerStep(const Trainer& train, int reps, int steps) {
  train(5);
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    train(steps);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count() / steps);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Where a gt step's wall time goes when it syncs every step: issuing the
// step (the client records the forward, runs backward() and the optimizer,
// all without waiting) vs waiting in loss.item() for the worker to finish.
struct Breakdown {
  double issue_seconds, wait_seconds;  // medians
  double mean_step_seconds, p90_step_seconds;
};

Breakdown GtStepBreakdown(const Problem& p, Loss loss_kind, int steps) {
  gt::nn::Linear fc1{kIn, kHidden}, fc2{kHidden, kClasses};
  fc1.weight = ToGt(p.w1).requires_grad_();
  fc1.bias = ToGt(p.b1).requires_grad_();
  fc2.weight = ToGt(p.w2).requires_grad_();
  fc2.bias = ToGt(p.b2).requires_grad_();
  gt::Tensor x = ToGt(p.x), target = ToGt(loss_kind == Loss::kCrossEntropy ? p.labels : p.one_hot);
  gt::nn::SGD sgd({fc1.weight, fc1.bias, fc2.weight, fc2.bias}, kLr);
  std::vector<double> issue, wait, total;
  for (int i = 0; i < steps + 5; ++i) {
    auto start = Clock::now();
    gt::Tensor logits = fc2(fc1(x).relu());
    gt::Tensor loss = loss_kind == Loss::kCrossEntropy ? gt::nn::cross_entropy(logits, target)
                                                       : gt::nn::mse_loss(logits, target);
    loss.backward();
    sgd.step();
    sgd.zero_grad();
    auto issued = Clock::now();
    (void)loss.item();
    if (i < 5) continue;  // warm-up
    issue.push_back(std::chrono::duration<double>(issued - start).count());
    wait.push_back(std::chrono::duration<double>(Clock::now() - issued).count());
    total.push_back(issue.back() + wait.back());
  }
  std::sort(issue.begin(), issue.end());
  std::sort(wait.begin(), wait.end());
  std::sort(total.begin(), total.end());
  double sum = 0;
  for (double t : total) sum += t;
  return {issue[issue.size() / 2], wait[wait.size() / 2], sum / total.size(), total[total.size() * 9 / 10]};
}

// The cost of one sync point alone: item() of a 0-d tensor computed
// remotely, nothing else queued.
double SyncSeconds(int reps) {
  gt::Tensor a = gt::ones({});
  return SecondsPerStep([&](int n) {
    double v = 0;
    for (int i = 0; i < n; ++i) v += (a + 1.0).item();
    return v;
  }, reps, 200);
}

void PrintRow(const std::string& name, double gt_seconds, double torch_seconds) {
  std::printf("%-40s %11.3f ms %11.3f ms %9.2fx\n", name.c_str(), gt_seconds * 1e3, torch_seconds * 1e3,
              gt_seconds / torch_seconds);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 100;
  std::string only = argc > 3 ? argv[3] : "";
  if (only == "both") only.clear();
  if (argc > 4) gt::connect(argv[4]);
  const std::string where = argc > 4 ? std::string("dispatcher at ") + argv[4]
                                     : std::string("embedded default (dispatcher + ") +
                                           (std::getenv("GT_WORKERS") ? std::getenv("GT_WORKERS") : "2") + " workers)";
  std::printf("gt MLP benchmark: 784-256-10, batch %lld, SGD lr %.2g; gt on the %s, LibTorch %d intra-op threads; "
              "per step: median of %d runs of %d steps, median of %d interleaved rounds\n",
              static_cast<long long>(kBatch), kLr, where.c_str(), at::get_num_threads(), reps, steps, kRounds);
  const Problem problem;
  std::printf("%-40s %14s %14s %10s\n", "per training step", "gt", "libtorch", "ratio");
  for (Loss loss : {Loss::kCrossEntropy, Loss::kMse}) {
    const std::string name = loss == Loss::kCrossEntropy ? "cross_entropy" : "mse_loss";
    for (bool sync_every_step : {true, false}) {
      Trainer gt_train = GtTrainer(problem, loss, sync_every_step);
      Trainer torch_train = TorchTrainer(problem, loss);
      // Interleaved rounds, so that machine noise hits both alike.
      std::vector<double> g(kRounds), t(kRounds);
      for (int r = 0; r < kRounds; ++r) {
        if (only != "torch") g[r] = SecondsPerStep(gt_train, reps, steps);
        if (only != "gt") t[r] = SecondsPerStep(torch_train, reps, steps);
      }
      std::sort(g.begin(), g.end());
      std::sort(t.begin(), t.end());
      PrintRow(name + (sync_every_step ? ", loss.item() every step" : ", one sync per run"), g[kRounds / 2],
               t[kRounds / 2]);
      if (only.empty()) {
        // Both trained the same number of steps from the same start.
        double gt_loss = gt_train(1), torch_loss = torch_train(1);
        if (std::abs(gt_loss - torch_loss) > 1e-3)
          std::printf("  (losses differ: gt %.6f, LibTorch %.6f)\n", gt_loss, torch_loss);
      }
    }
  }
  if (only != "torch") {
    std::printf("gt step breakdown (medians over %d steps):\n", steps);
    for (Loss loss : {Loss::kCrossEntropy, Loss::kMse}) {
      Breakdown b = GtStepBreakdown(problem, loss, steps);
      std::printf("  %-16s median issue %6.3f ms, wait in loss.item() %6.3f ms; step mean %6.3f ms, p90 %6.3f ms\n",
                  loss == Loss::kCrossEntropy ? "cross_entropy" : "mse_loss", b.issue_seconds * 1e3,
                  b.wait_seconds * 1e3, b.mean_step_seconds * 1e3, b.p90_step_seconds * 1e3);
    }
    std::printf("  %-16s %6.3f ms\n", "one sync point (0-d add + item)", SyncSeconds(reps) * 1e3);
  }
  gt::shutdown();
  return 0;
}

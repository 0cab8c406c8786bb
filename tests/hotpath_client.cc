// A gt client program for hotpath_test: connects to the dispatcher at argv[1],
// runs program argv[2] and writes every value it fetched to argv[3] (raw
// float32, in fetch order). The same program against clusters with and
// without the hotpath/compile stages must write the same values.
//
//   mlp     N steps of a 2-layer MLP (forward, MSE, backward, SGD), one
//           loss.item() per step, then the parameters
//   ops     N iterations of a sequence that uses every op kind, fetched each time
//   shapes  MLP steps on batch 8, then on batch 16 (a shape change mid-run)
//   scope   the ops sequence once, inside a `compile` signal scope
//   config  the same, the scope's signal having `compile: true` in a YAML
//           config (the scope itself asks for nothing)
//   placing MLP steps, then N times a row-sharded scope over workers 0 and 1
//           that uses the trained weights, then MLP steps again with no config
//           (a client with stages of its own bypasses them once a config
//           places tensors)
//   placed  the MLP's parameters made in a row-sharded scope over workers 0
//           and 1, the config cleared, then N training steps
//   made    N times a `compile` scope that takes no tensor (it makes one),
//           its result then added to a tensor made before
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gt/config.h"
#include "gt/gt.h"
#include "gt/nn.h"

namespace {

std::vector<float> values;

void Record(const gt::Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  values.insert(values.end(), v.begin(), v.end());
}

struct MlpModel {
  gt::nn::Linear fc1{16, 32, true, 11}, fc2{32, 4, true, 12};
  std::vector<gt::Tensor> params;
  gt::nn::SGD sgd;
  MlpModel() : params(Params(fc1, fc2)), sgd(params, 0.05) {}
  static std::vector<gt::Tensor> Params(gt::nn::Linear& a, gt::nn::Linear& b) {
    std::vector<gt::Tensor> p = a.parameters();
    for (const gt::Tensor& t : b.parameters()) p.push_back(t);
    return p;
  }
  void Train(int steps, int64_t batch) {
    gt::Tensor x = gt::randn({batch, 16}, gt::DType::kFloat32, 21);
    gt::Tensor y = gt::randn({batch, 4}, gt::DType::kFloat32, 22);
    for (int s = 0; s < steps; ++s) {
      gt::Tensor loss = gt::nn::mse_loss(fc2.forward(fc1.forward(x).relu()), y);
      loss.backward();
      sgd.step();
      sgd.zero_grad();
      values.push_back(static_cast<float>(loss.item()));
    }
  }
};

void Mlp(int steps, std::vector<int64_t> batches) {
  MlpModel model;
  for (int64_t batch : batches) model.Train(steps, batch);
  for (const gt::Tensor& p : model.params) Record(p);
}

void Placing(int steps) {
  MlpModel model;
  model.Train(steps, 8);
  gt::register_config("rows", gt::SignalConfig{.shard = gt::ShardConfig{0, {0, 1}}});
  for (int s = 0; s < steps; ++s) {  // repeated: hot, were it not for the bypass
    gt::SignalScope scope("rows");
    gt::Tensor x = gt::randn({8, 16}, gt::DType::kFloat32, 31);
    Record((x.matmul(model.params[0].transpose(0, 1)) + model.params[1]).relu().sum({1}, false));
  }
  gt::clear_configs();
  model.Train(steps, 8);
  for (const gt::Tensor& p : model.params) Record(p);
}

// Every op kind: binary (tensor and scalar, both sides), comparisons,
// matmul, unary, softmax, reductions, movement, cat, creation, mutation.
gt::Tensor OpsStep(gt::Tensor& state, const gt::Tensor& w) {
  gt::Tensor a = state.matmul(w);                               // contract
  gt::Tensor b = (a + 1.5) * state - (2.0 / (a.abs() + 1));     // binary, scalar both sides
  gt::Tensor c = b.pow(2.0) + b.pow(a.abs().sqrt() * 0 + 1);   // pow with scalar and tensor
  gt::Tensor mask = c.gt(0.5) + c.lt(a) + c.ge(b) + c.le(1.0) + c.eq(c);  // comparisons
  gt::Tensor u = c.relu() + b.sigmoid() + a.tanh() + (b.abs() + 1).log() + (-(b.abs())).exp().neg().clone();
  gt::Tensor sm = u.softmax(1) + u.log_softmax(0);
  gt::Tensor r = sm.sum({1}, true) + sm.mean({0}, true) + sm.max({1}, true) - sm.min({0}, true);  // reduce
  gt::Tensor m = r.reshape({4, 8}).transpose(0, 1).permute({1, 0}).unsqueeze(0).squeeze(0);        // movement
  gt::Tensor sl = gt::cat({m.slice(1, 0, 4), m.slice(1, 4, 8)}, 1).select(0, 1).unsqueeze(0);
  gt::Tensor made = gt::zeros({4, 8}) + gt::ones({4, 8}) + gt::arange(0, 8).reshape({1, 8}) +
                    gt::randn({4, 8}, gt::DType::kFloat32, 5) + gt::rand({4, 8}, gt::DType::kFloat32, 6);
  gt::Tensor next = (m + sl + mask * 0.01 + made * 0.001).tanh();
  gt::Tensor scratch = gt::zeros({4, 8});
  scratch.fill_(0.25);
  scratch += next;
  state.copy_(scratch * 0.5);                                    // mutation of an input
  return next;
}

enum class Scope { kNone, kOption, kConfig };

void Ops(int steps, Scope scope_kind) {
  gt::Tensor state = gt::randn({4, 8}, gt::DType::kFloat32, 1);
  gt::Tensor w = gt::randn({8, 8}, gt::DType::kFloat32, 2) * 0.3;
  for (int s = 0; s < steps; ++s) {
    gt::Tensor out;
    if (scope_kind == Scope::kOption) {
      gt::SignalScope scope("step", gt::SignalOptions{.compile = true});
      out = OpsStep(state, w);
    } else if (scope_kind == Scope::kConfig) {
      gt::SignalScope scope("step");
      out = OpsStep(state, w);
    } else {
      out = OpsStep(state, w);
    }
    Record(out);
  }
  Record(state);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s ENDPOINT PROGRAM STEPS OUT\n", argv[0]);
    return 2;
  }
  try {
    gt::connect(argv[1]);
    const std::string program = argv[2];
    const int steps = std::atoi(argv[3]);
    if (program == "mlp") {
      Mlp(steps, {8});
    } else if (program == "shapes") {
      Mlp(steps, {8, 16});
    } else if (program == "ops") {
      Ops(steps, Scope::kNone);
    } else if (program == "scope") {
      Ops(steps, Scope::kOption);
    } else if (program == "config") {
      gt::load_config_string("step:\n  compile: true\n", "hotpath_client");
      Ops(steps, Scope::kConfig);
    } else if (program == "placing") {
      Placing(steps);
    } else if (program == "made") {
      gt::Tensor before = gt::randn({4, 4}, gt::DType::kFloat32, 41);
      for (int s = 0; s < steps; ++s) {
        gt::Tensor made;
        {
          gt::SignalScope scope("made", gt::SignalOptions{.compile = true});
          made = gt::ones({4, 4}) * 2 + 1;
        }
        Record((made + before).sum());
      }
    } else if (program == "placed") {
      gt::register_config("rows", gt::SignalConfig{.shard = gt::ShardConfig{0, {0, 1}}});
      std::unique_ptr<MlpModel> model;
      {
        gt::SignalScope scope("rows");
        model = std::make_unique<MlpModel>();
      }
      gt::clear_configs();
      model->Train(steps, 8);
      for (const gt::Tensor& p : model->params) Record(p);
    } else {
      std::fprintf(stderr, "unknown program %s\n", program.c_str());
      return 2;
    }
    gt::shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hotpath_client: %s\n", e.what());
    return 1;
  }
  std::ofstream out(argv[4], std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  return out ? 0 : 1;
}

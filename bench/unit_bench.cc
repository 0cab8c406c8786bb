// Compiled-unit strategies inside one backend, without hosts or wire: the
// 16-op arithmetic chain of compile_bench (c = a*1.5 + b, then 7 times
// c = (c*0.5 - a)*b + 0.25) on 1M floats, run
//   eager        as 34 single instructions through TorchBackend::Execute
//   interpreted  as one run_unit, interpreted op by op (unit_trial_runs 0)
//   graph        the unit's TorchScript graph on the TorchScript interpreter
//   fused        the graph through LibTorch's legacy CPU fuser
//   chosen       run_unit with the backend's measured choice (unit_trial_runs 3)
// and a transcendental chain (the same with tanh and exp) for contrast.
//
//   gt-bench-unit [steps] [malloc_keep_mib]
// malloc_keep_mib is the backend option (process-wide, so one value per run):
// 0 shows glibc's default behaviour.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "torch_backend.h"
#include "unit_graph.h"

namespace {

using gt::Instruction;
using gt::Op;
using gt::TensorId;
using Clock = std::chrono::steady_clock;

class NullSink final : public gt::ReplySink {
 public:
  void SendData(const Instruction&, gt::DType, const gt::Shape&, gt::BlobPtr) override {}
};

// Builds a body on placeholder ids: inputs 1 (a) and 2 (b), results from 3.
class Body {
 public:
  TensorId Binary(Op op, TensorId x, TensorId y) { return Add(op, {x, y}, gt::ScalarSide::kNone, 0); }
  TensorId Scalar(Op op, TensorId x, double s) { return Add(op, {x}, gt::ScalarSide::kRight, s); }
  TensorId Unary(Op op, TensorId x) { return Add(op, {x}, gt::ScalarSide::kNone, 0); }
  void Free(TensorId id) {
    Instruction inst;
    inst.op = Op::kFree;
    inst.client = 1;
    inst.operands = {id};
    body.push_back(inst);
  }
  std::vector<Instruction> body;

 private:
  TensorId Add(Op op, std::vector<TensorId> operands, gt::ScalarSide side, double scalar) {
    Instruction inst;
    inst.op = op;
    inst.client = 1;
    inst.operands = std::move(operands);
    inst.results = {next_};
    inst.attrs.scalar_side = side;
    inst.attrs.scalar = scalar;
    body.push_back(inst);
    return next_++;
  }
  TensorId next_ = 3;
};

// c = a*1.5 + b; 7 x c = (f(c)*0.5 - a)*b + 0.25, freeing what it drops.
std::vector<Instruction> Chain(bool transcendental) {
  Body b;
  TensorId t = b.Scalar(Op::kMul, 1, 1.5);
  TensorId c = b.Binary(Op::kAdd, t, 2);
  b.Free(t);
  for (int k = 0; k < 7; ++k) {
    TensorId x = c;
    if (transcendental) {
      x = b.Unary(k % 2 ? Op::kExp : Op::kTanh, c);
      b.Free(c);
    }
    TensorId m = b.Scalar(Op::kMul, x, 0.5);
    b.Free(x);
    TensorId s = b.Binary(Op::kSub, m, 1);
    b.Free(m);
    TensorId p = b.Binary(Op::kMul, s, 2);
    b.Free(s);
    c = b.Scalar(Op::kAdd, p, 0.25);
    b.Free(p);
  }
  return b.body;
}

Instruction Control(Op op, std::vector<TensorId> operands, std::vector<TensorId> results = {}) {
  Instruction inst;
  inst.op = op;
  inst.client = 1;
  inst.operands = std::move(operands);
  inst.results = std::move(results);
  return inst;
}

void Check(const gt::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    std::exit(1);
  }
}

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Inputs(gt::torch_backend::TorchBackend& backend, NullSink& sink) {
  for (TensorId id : {TensorId{1}, TensorId{2}}) {
    Instruction inst = Control(Op::kRand, {}, {id});
    inst.attrs.shape = {1 << 20};
    inst.attrs.dtype = gt::DType::kFloat32;
    inst.attrs.seed = id;
    Check(backend.Execute(inst, sink));
  }
}

// ms per step for `body` through the backend: eagerly, or as one unit.
double Backend(const std::vector<Instruction>& body, int steps, int64_t keep, int64_t trials, bool as_unit) {
  gt::torch_backend::TorchBackend backend({1, {}, keep, trials});
  NullSink sink;
  Inputs(backend, sink);
  gt::UnitTemplate unit{2, body};
  gt::Result<gt::UnitInterface> interface = gt::AnalyzeUnit(unit);
  Check(interface.status());
  Instruction define = Control(Op::kDefineUnit, {});
  define.attrs.seed = 42;
  define.payload = gt::EncodeUnit(unit);
  Check(backend.Execute(define, sink));
  const TensorId out = 1000;
  Instruction run = Control(Op::kRunUnit, {1, 2}, {out});
  run.attrs.seed = 42;
  std::vector<double> times;
  long faults = 0;
  for (int i = 0; i < steps + 5; ++i) {
    if (i == 5) faults = MinorFaults();
    const auto start = Clock::now();
    if (as_unit) {
      Check(backend.Execute(run, sink));
      Check(backend.Execute(Control(Op::kFree, {out}), sink));
    } else {
      for (const Instruction& inst : body) Check(backend.Execute(inst, sink));
      Check(backend.Execute(Control(Op::kFree, {interface->outputs[0]}), sink));
    }
    if (i >= 5) times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::printf("    (%.0f page faults per step)\n", static_cast<double>(MinorFaults() - faults) / steps);
  if (as_unit && trials > 0) {
    const gt::torch_backend::UnitStats s = backend.Units();
    for (size_t k = 0; k < static_cast<size_t>(gt::torch_backend::UnitStrategy::kCount); ++k)
      if (s.chosen[k]) std::printf("    (chose %s; compile %.3f s)\n",
                                   gt::torch_backend::StrategyName(static_cast<gt::torch_backend::UnitStrategy>(k)),
                                   s.compile_seconds);
  }
  return Median(times);
}

double Graph(const std::vector<Instruction>& body, int steps, gt::torch_backend::UnitStrategy strategy) {
  gt::UnitTemplate unit{2, body};
  gt::Result<gt::UnitInterface> interface = gt::AnalyzeUnit(unit);
  Check(interface.status());
  auto graph = gt::torch_backend::UnitGraph::Build(unit, *interface, strategy);
  Check(graph.status());
  at::Tensor a = at::rand({1 << 20}), b = at::rand({1 << 20});
  std::vector<double> times;
  for (int i = 0; i < steps + 5; ++i) {
    const auto start = Clock::now();
    std::vector<at::Tensor> out = (*graph)->Run({a, b});
    if (i >= 5) times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return Median(times);
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 30;
  const int64_t keep = argc > 2 ? std::atoll(argv[2]) : 256;
  std::printf("gt unit strategies inside one backend (1 intra-op thread), 1M floats, malloc_keep_mib %lld, "
              "median of %d steps, ms per step\n", static_cast<long long>(keep), steps);
  for (bool transcendental : {false, true}) {
    const std::vector<Instruction> body = Chain(transcendental);
    std::printf("%s chain (%zu instructions with frees)\n",
                transcendental ? "16-op arithmetic + 7 tanh/exp" : "16-op arithmetic", body.size());
    std::printf("  eager        %8.3f\n", Backend(body, steps, keep, 0, false));
    std::printf("  interpreted  %8.3f\n", Backend(body, steps, keep, 0, true));
    std::printf("  graph        %8.3f\n", Graph(body, steps, gt::torch_backend::UnitStrategy::kGraph));
    std::printf("  fused        %8.3f\n", Graph(body, steps, gt::torch_backend::UnitStrategy::kFused));
    std::printf("  chosen       %8.3f\n", Backend(body, steps, keep, 3, true));
  }
  return 0;
}

// The sharding stage's own cost per instruction, in-process: no hosts, no
// transport, the stage loaded from its plugin file like a host does and fed
// the instruction stream of the foundation benchmark's pipelined adds
// (`c = c + b`: an add, then the free of the previous c) for
//
//   a client without signal configs   (every dispatcher sees these most)
//   a client with one config          (each tensor gets a placement record,
//                                      whole on one worker)
//
// and, for scale, a stage that passes every instruction on (what building,
// handing over and dropping the instructions costs by itself). What a stage
// emits is counted and dropped. Each figure is the median of several runs
// after a warm-up, in nanoseconds per instruction.
#include <cstdio>
#include <memory>

#include <prometheus/registry.h>

#include "bench_timing.h"
#include "gt/instruction.h"
#include "gt/stage.h"
#include "host/plugin_loader.h"

namespace {

class Discard final : public gt::Emitter {
 public:
  void Emit(gt::Instruction&& inst) override {
    (void)inst;
    ++emitted;
  }
  size_t emitted = 0;
};

class PassThrough final : public gt::Stage {
 public:
  gt::Status Process(gt::Instruction&& inst, gt::Emitter& out) override {
    out.Emit(std::move(inst));
    return gt::Status::Ok();
  }
};

gt::Instruction Make(gt::Op op, gt::ClientId client, uint64_t seq, std::vector<gt::TensorId> results,
                     std::vector<gt::TensorId> operands) {
  gt::Instruction inst;
  inst.op = op;
  inst.client = client;
  inst.seq = seq;
  inst.results = std::move(results);
  inst.operands = std::move(operands);
  inst.attrs.shape = {64, 64};
  return inst;
}

// `adds` pipelined adds of client `client`, whose ids start after `*next`.
void Adds(gt::Stage& stage, gt::Emitter& out, gt::ClientId client, int adds, gt::TensorId* next) {
  const gt::TensorId b = (*next)++;
  gt::TensorId c = (*next)++;
  (void)stage.Process(Make(gt::Op::kOnes, client, c, {b}, {}), out);
  (void)stage.Process(Make(gt::Op::kOnes, client, c, {c}, {}), out);
  for (int i = 0; i < adds; ++i) {
    const gt::TensorId sum = (*next)++;
    (void)stage.Process(Make(gt::Op::kAdd, client, sum, {sum}, {c, b}), out);
    (void)stage.Process(Make(gt::Op::kFree, client, sum, {}, {c}), out);
    c = sum;
  }
  (void)stage.Process(Make(gt::Op::kFree, client, *next, {}, {b, c}), out);
  (void)stage.EndBatch(out);
}

}  // namespace

int main() {
  gt::Result<gt::LoadedPlugin> plugin = gt::FindPlugin("sharding");
  if (!plugin.ok()) {
    std::fprintf(stderr, "%s\n", plugin.status().ToString().c_str());
    return 1;
  }
  gt::OptionValues options;
  options.Set("rendezvous_host", std::string("127.0.0.1"));
  options.Set("rendezvous_port", int64_t{0});
  options.Set("explain", false);
  options.Set("auto_shard", false);
  prometheus::Registry registry;
  gt::StageContext context{gt::HostKind::kDispatcher, "bench", "sharding", &options, &registry};
  gt::Result<gt::PluginInstance<gt::Stage>> stage = gt::CreateStage(*plugin, context);
  if (!stage.ok()) {
    std::fprintf(stderr, "%s\n", stage.status().ToString().c_str());
    return 1;
  }
  Discard out;
  gt::Instruction membership;
  membership.op = gt::Op::kMembership;
  membership.attrs.shape = {0, 1};
  (void)(*stage)->Process(std::move(membership), out);
  gt::Instruction configure = Make(gt::Op::kConfigure, 2, 1, {}, {});
  configure.signal = "elsewhere";  // registered, never used: the client's tensors are recorded, whole
  configure.attrs.shape = {};
  (void)(*stage)->Process(std::move(configure), out);

  constexpr int kAdds = 20000;
  constexpr double kInstructions = 2.0 * kAdds + 3;
  std::printf("sharding stage, in-process: %d pipelined adds (add + free each), median of 9 runs\n", kAdds);
  gt::TensorId next = 1;
  auto report = [&](const char* what, gt::Stage& s, gt::ClientId client) {
    const double seconds = gt::bench::MedianSeconds(9, [&] { Adds(s, out, client, kAdds, &next); });
    std::printf("  %-34s %8.1f ns per instruction\n", what, seconds / kInstructions * 1e9);
  };
  PassThrough pass;
  report("pass-through stage (for scale):", pass, 1);
  report("sharding, client without configs:", **stage, 1);
  report("sharding, client with a config:", **stage, 2);
  return 0;
}

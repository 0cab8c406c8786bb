// The gt C++ client: PyTorch-like tensors whose data lives on gt workers.
//
//   gt::Tensor a = gt::randn({1000, 1000});
//   gt::Tensor b = gt::randn({1000, 1000});
//   std::vector<float> c = (a.matmul(b) + 1).to_vector<float>();
//
// Operations never wait: each call infers the result's shape and dtype
// locally (a mismatch throws gt::Error right there, naming both shapes),
// queues an instruction, and returns a handle. Instructions are sent in
// batches. Reading data (to_vector, item, copy_to) and gt::sync() are sync
// points: they flush, wait, and throw gt::Error for any remote op that failed
// since the previous sync point, naming that op. Destroying the last handle
// of a tensor frees it remotely.
//
// With no address configured the first op starts the embedded default: a
// dispatcher and gt::workers() workers inside this process. gt::connect()
// selects a running dispatcher instead.
//
// Thread-safety: all functions may be called from any thread; calls are
// serialized on the one session of the process.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "gt/config.h"
#include "gt/dtype.h"
#include "gt/instruction.h"
#include "gt/status.h"

namespace gt {

// What the client API throws.
class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

namespace client_internal {
struct TensorRecord;
struct TensorImpl;
struct TensorFactory;
}

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor; any op on it throws

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  DType dtype() const;
  int64_t numel() const { return NumElements(shape()); }
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  TensorId id() const;

  Tensor operator+(const Tensor& other) const;
  Tensor operator-(const Tensor& other) const;
  Tensor operator*(const Tensor& other) const;
  Tensor operator/(const Tensor& other) const;
  Tensor operator+(double s) const;
  Tensor operator-(double s) const;
  Tensor operator*(double s) const;
  Tensor operator/(double s) const;
  Tensor operator-() const { return neg(); }
  friend Tensor operator+(double s, const Tensor& t);
  friend Tensor operator-(double s, const Tensor& t);
  friend Tensor operator*(double s, const Tensor& t);
  friend Tensor operator/(double s, const Tensor& t);

  Tensor matmul(const Tensor& other) const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor neg() const;

  // `axes` empty reduces over every dimension.
  Tensor sum(std::vector<int64_t> axes = {}, bool keepdims = false) const;
  Tensor mean(std::vector<int64_t> axes = {}, bool keepdims = false) const;
  // Variance over `axes` (empty: all), divided by N - correction (1:
  // unbiased, 0: biased), as torch.var(dim, correction=, keepdim=).
  Tensor var(std::vector<int64_t> axes = {}, int64_t correction = 1, bool keepdims = false) const;
  Tensor max(std::vector<int64_t> axes = {}, bool keepdims = false) const;
  // Positions (int64) of the first maximum / minimum along `dim`, or in the
  // flattened tensor without one (a 0-d result; `keepdims` then ignored).
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdims = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdims = false) const;

  Tensor reshape(Shape shape) const;  // one dimension may be -1
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // swaps the last two dimensions
  Tensor permute(std::vector<int64_t> dims) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;  // every dimension of size 1
  Tensor squeeze(int64_t dim) const;
  // Python slice semantics on one dimension: negative bounds count from the
  // end, out-of-range bounds are clamped; REQUIRES: step > 0.
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes `dim`; negative index counts from the end
  std::vector<Tensor> split(int64_t size, int64_t dim = 0) const;  // pieces of `size` (the last may be smaller)
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;

  Tensor pow(double exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor abs() const;
  Tensor erf() const;
  Tensor clone() const;
  Tensor min(std::vector<int64_t> axes = {}, bool keepdims = false) const;
  // The larger / smaller of two tensors elementwise, broadcasting, with
  // PyTorch's type promotion (torch.maximum / torch.minimum; a NaN in either
  // gives NaN). max(other) / min(other) are the same, as torch.max(a, b):
  // templates only so that x.max({0}) still names the reduction over dim 0.
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  template <typename T, typename = std::enable_if_t<std::is_same_v<T, Tensor>>>
  Tensor max(const T& other) const { return maximum(other); }
  template <typename T, typename = std::enable_if_t<std::is_same_v<T, Tensor>>>
  Tensor min(const T& other) const { return minimum(other); }
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // Comparisons yield a bool mask, as PyTorch's.
  Tensor gt(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor gt(double s) const;
  Tensor lt(double s) const;
  Tensor ge(double s) const;
  Tensor le(double s) const;
  Tensor eq(double s) const;

  // In place: the remote tensor is changed, no new tensor is made.
  // REQUIRES (copy_): source broadcasts to this tensor's shape.
  Tensor& copy_(const Tensor& source);
  Tensor& fill_(double value);
  // This tensor times `factor` (broadcast to its shape), in place: one op
  // where the factor has this tensor's dtype, else copy_(*this * factor)
  // (the product cast back, as before).
  Tensor& mul_(const Tensor& factor);
  // This tensor plus `alpha` times `other` (broadcast to its shape), in
  // place: one op where `other` has this tensor's dtype, else
  // copy_(*this + other * alpha) (the sum cast back). sub_ is add_ with -alpha.
  Tensor& add_(const Tensor& other, double alpha = 1);
  Tensor& sub_(const Tensor& other, double alpha = 1) { return add_(other, -alpha); }

  // `value` where `mask` is true (nonzero), this tensor's elements elsewhere;
  // the mask broadcasts. value may be -inf (attention masks).
  Tensor masked_fill(const Tensor& mask, double value) const;
  // The lower (tril) / upper (triu) triangle of the last two dimensions,
  // from `diagonal` (0: the main one; > 0 above it), the rest zero.
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;

  // Indexing along `dim` by an int32/int64 index tensor, as PyTorch's
  // (the add forms out of place; repeated positions accumulate).
  Tensor index_select(int64_t dim, const Tensor& index) const;  // index 1-D
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source) const;
  Tensor gather(int64_t dim, const Tensor& index) const;  // index of this tensor's rank
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& source) const;
  Tensor& zero_() { return fill_(0); }
  Tensor& operator+=(const Tensor& other) { return add_(other); }
  Tensor& operator-=(const Tensor& other) { return sub_(other); }
  Tensor& operator*=(const Tensor& other) { return mul_(other); }
  Tensor& operator+=(double s);
  Tensor& operator-=(double s);
  Tensor& operator*=(double s);
  // copy_(result) for an in-place op named `what`, whose out-of-place
  // `result` was computed: InvalidArgument when PyTorch would refuse the
  // cast back (a float result into an integer tensor, a number into a bool).
  Tensor& assign_result_(const Tensor& result, const char* what);

  // Sync points.
  template <typename T>
  std::vector<T> to_vector() const;
  void copy_to(void* destination, size_t bytes) const;  // REQUIRES: bytes == numel * ElementSize(dtype)
  double item() const;                                  // REQUIRES: numel() == 1
  // The tensor's bytes (C order, numel * ElementSize(dtype)) in a buffer the
  // caller alone holds and may write to, for a reader that keeps them (the
  // Python client's numpy()). From a process cluster that is the frame
  // ZeroMQ received, without a copy; on the embedded default the frame is the
  // worker's own tensor memory, so it is copied once.
  BlobPtr fetch_bytes() const;

  // ---- autograd: a client-side tape; workers only compute -------------------
  // Ops on tensors that require grad (while grad mode is on) record how to
  // compute their inputs' gradients; backward() replays that record in
  // reverse, issuing ordinary gt ops, and accumulates into each leaf's grad.
  bool requires_grad() const;
  // REQUIRES: a leaf (not the result of a recorded op).
  Tensor& requires_grad_(bool enabled = true);
  bool is_leaf() const;
  Tensor grad() const;  // undefined until a backward() reaches this leaf
  void set_grad(const Tensor& grad);  // an undefined tensor clears it
  // Accumulates d(this)/d(leaf) into every leaf's grad. Without `gradient`
  // this must have one element (an error naming its shape otherwise). The
  // record is released afterwards unless `retain_graph`.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // The same remote data, cut from the record (requires_grad() false).
  Tensor detach() const;

  // The same handle? (Copies of a Tensor share everything, like Python names.)
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  friend struct client_internal::TensorFactory;
  // Hands `read` this tensor's fetched bytes (numel * ElementSize(dtype)),
  // valid only during the call: to_vector builds its result from them in one
  // pass instead of zero-filling a buffer and copying over it.
  void ReadBytes(const std::function<void(const void* bytes, size_t size)>& read) const;
  explicit Tensor(std::shared_ptr<client_internal::TensorImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<client_internal::TensorImpl> impl_;
};

// InvalidArgument, named after the in-place op `what`, when PyTorch refuses to
// write a `result` of that dtype into a `destination` tensor: a float into an
// integer one, a number into a bool one.
void check_in_place_cast(DType result, DType destination, const char* what);

Tensor randn(Shape shape, DType dtype = DType::kFloat32, uint64_t seed = 0);
Tensor zeros(Shape shape, DType dtype = DType::kFloat32);
Tensor ones(Shape shape, DType dtype = DType::kFloat32);
Tensor rand(Shape shape, DType dtype = DType::kFloat32, uint64_t seed = 0);  // uniform [0, 1)
Tensor arange(double start, double end, double step = 1, DType dtype = DType::kFloat32);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// cond ? a : b elementwise, broadcasting; cond is a bool tensor or a mask
// (nonzero: true). A scalar side takes the other side's dtype.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
// Tensor::maximum / Tensor::minimum as functions (torch.maximum / torch.minimum).
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// Copies `bytes` (row-major, `dtype`) into a new remote tensor.
Tensor from_data(const void* bytes, size_t size, Shape shape, DType dtype);
template <typename T>
Tensor tensor(const std::vector<T>& values, Shape shape);

// ---- grad mode, signal scopes, the tape ------------------------------------

// Grad mode is per thread, on by default. While off, no op is recorded.
bool is_grad_enabled();
void set_grad_enabled(bool enabled);
// Turns grad mode off for its lifetime (Python: `with gt.no_grad():`).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Signal scopes: every instruction issued inside carries the innermost name
// (sharding and compile stages act on it). Per thread; scopes nest.
//
// `compile`: the scope is a compile boundary. The client sends a hot_start
// marker when it opens and a hot_end marker when it closes (starting a new
// message first, so that a scope of up to 256 instructions travels in one),
// and a `compile` stage in the dispatcher or the workers turns what is
// between them into a compiled unit on first use, without waiting for the
// sequence to repeat. Without a `compile` stage the markers change nothing.
// A signal whose registered config says `compile: true` (YAML or
// SignalConfig) is a compile boundary in every scope, whatever this flag says.
//
// `backward`: the signal whose config the gradient computation of ops
// recorded in this scope runs under (backward() opens that scope around
// them); "" takes the `backward` field of this signal's config, if any.
// Pipeline parallelism: forward on one set of workers, backward on another.
struct SignalOptions {
  bool compile = false;
  std::string backward;
};
// Throws gt::Error (invalid_argument) naming the signal and the field when
// the scope's backward signal (given here or by its config) has no config
// registered: `signal 'fwd': backward: unknown signal 'bwd' ...`.
void signal_enter(const std::string& name, const SignalOptions& options = {});
// REQUIRES: `name` is the innermost open scope.
void signal_exit(const std::string& name);
std::string current_signal();  // "" outside any scope
// The backward signal of the innermost scope: its SignalOptions::backward,
// else its config's `backward`; "" for none or outside any scope.
std::string current_backward_signal();
class SignalScope {
 public:
  explicit SignalScope(std::string name, const SignalOptions& options = {}) : name_(std::move(name)) {
    signal_enter(name_, options);
  }
  ~SignalScope() { signal_exit(name_); }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  std::string name_;
};

// One recorded op of the autograd tape (gt.debug.get_tape()).
struct TapeEntry {
  uint64_t index;                // position since the process started
  std::string op;                // e.g. "matmul"
  TensorId output;
  std::vector<TensorId> inputs;  // tensor inputs (scalars are in the op)
  std::string signal;
  std::string backward_signal;   // the scope its gradient computation runs in; "" for the caller's
};
// The most recent recorded ops (at most 10000), oldest first.
std::vector<TapeEntry> tape();
void clear_tape();

// ---- stats: what the hosts' stages did (gt.debug.get_worker_stats()) -------
// Every figure is read from the host's own Prometheus registry, the one its
// /metrics endpoint serves (docs/METRICS.md defines each metric named here),
// and summed over the host's stages that export it. Counts are since the
// host started, over all its clients.

struct HotSequenceStats {
  std::string id;            // the `sequence` label: the sequence's 64-bit id, 16 hex digits
  std::string stage;         // the hotpath stage that found it
  int64_t length = 0;        // instructions (gt_hotpath_sequence_length)
  int64_t repetitions = 0;   // occurrences, those before it became hot included
                             // (gt_hotpath_sequence_occurrences_total)
};

struct MetricSample {
  std::string name;  // a counter or gauge; a histogram as <name>_count and <name>_sum
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct HostStats {
  std::string instance;             // the host's id (its `instance` label)
  std::string host;                 // "dispatcher", "worker", or "client" (this
                                    // client's own stages, GT_COMPILE=1 / GT_CLIENT_MANIFEST)
  std::vector<std::string> stages;  // its pipeline's stage names in order, the terminal last
  // gt_stage_instructions_received_total of the first stage: instructions
  // that entered the host.
  uint64_t instructions = 0;
  // ... of the terminal: routed to workers (dispatcher), executed by the
  // backend (worker; a run_unit counts once), sent to the dispatcher (client).
  uint64_t terminal_instructions = 0;
  // Compile stages (0 where none runs): instructions replaced by run_unit
  // (gt_compile_instructions_compiled_total) or passed on unchanged
  // (..._eager_total); run_unit instructions emitted, and of those the ones
  // whose unit was defined before (cache hits) or had to be (misses).
  uint64_t compiled = 0;
  uint64_t eager = 0;
  uint64_t units_run = 0;
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  // Hotpath stages: distinct sequences found hot (gt_hotpath_hot_sequences_total),
  // and those with their own series (at most 32 per stage), most repeated first.
  uint64_t hot_sequences_found = 0;
  std::vector<HotSequenceStats> hot_sequences;
  // The backend's compiled units (workers): define_unit instructions for a
  // unit it held already (hits) or not (misses), run_unit instructions
  // executed, seconds spent compiling (gt_backend_unit_compile_seconds_total),
  // and unit body instructions executed by strategy (interpreted, graph, fused).
  uint64_t unit_cache_hits = 0;
  uint64_t unit_cache_misses = 0;
  uint64_t unit_runs = 0;
  double compile_seconds = 0;
  std::map<std::string, uint64_t> unit_instructions;
  // Every gt_* sample of the host, for anything else.
  std::vector<MetricSample> samples;
};

struct WorkerStats {
  std::vector<HostStats> hosts;      // the dispatcher first, then each worker that answered,
                                     // in the order they registered, then this client's
                                     // own stages if it runs any
  std::vector<std::string> missing;  // ids of live workers that did not answer in time
};

// A sync point: waits for every queued op (throws gt::Error like sync() for
// any that failed), then asks the dispatcher for its own and every live
// worker's figures. Returns once every worker answered or `timeout_ms`
// passed (the dispatcher caps it at 60000); a worker that did not answer is
// named in `missing`. Throws gt::Error (unavailable) when the dispatcher
// does not answer within timeout_ms + 5 s.
WorkerStats worker_stats(int timeout_ms = 2000);

// Uses the dispatcher at `address` ("host:port", or a full tcp:// / ipc://
// endpoint, used exactly as given). "localhost:P" or "127.0.0.1:P" goes over
// the dispatcher's local ipc socket /tmp/gt-dispatcher-P.sock when a
// dispatcher of this user listens there (faster than loopback tcp; README
// "Running a cluster"), else over tcp; GT_LOCAL_IPC=0 keeps tcp. A sync
// point throws gt::Error (unavailable) naming `address` when no connection
// to it came within GT_CONNECT_TIMEOUT seconds (default 5; 0: never), and
// at once, from then on, when the connection closed.
// REQUIRES: before the first op of the process.
void connect(const std::string& address);
// Number of workers of the embedded default (default 2, or GT_WORKERS).
// REQUIRES: before the first op of the process.
void workers(int n);
// Waits for every queued op; throws gt::Error for any that failed.
void sync();
// Ends the session now: sends what is queued and a goodbye (the dispatcher
// frees this client's tensors) and stops the embedded cluster, joining its
// threads. Tensors still alive become unusable. Done at exit too, before
// exit() destroys anything (the main thread's exit guard, client/src/session.cc),
// so a program may return from main with work pending.
void shutdown();

// ---- templates -------------------------------------------------------------

template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  else static_assert(sizeof(T) == 0, "gt tensors hold float, double, int32_t or int64_t (bool: use copy_to)");
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  if (DTypeOf<T>() != dtype())
    throw Error(Code::kInvalidArgument, "to_vector: tensor is " + std::string(DTypeName(dtype())) + ", asked for " +
                                            std::string(DTypeName(DTypeOf<T>())));
  std::vector<T> out;
  ReadBytes([&out](const void* bytes, size_t size) {
    if (reinterpret_cast<std::uintptr_t>(bytes) % alignof(T) == 0) {
      const T* first = static_cast<const T*>(bytes);
      out.assign(first, first + size / sizeof(T));
    } else {  // a received frame may sit at any address
      out.resize(size / sizeof(T));
      std::memcpy(out.data(), bytes, size);
    }
  });
  return out;
}

template <typename T>
Tensor tensor(const std::vector<T>& values, Shape shape) {
  return from_data(values.data(), values.size() * sizeof(T), std::move(shape), DTypeOf<T>());
}

}  // namespace gt

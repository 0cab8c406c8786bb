#include "gt/distributed.h"

#include <algorithm>
#include <cstring>

#include "gt/layout.h"
#include "gt/op_attrs.h"
#include "session.h"
#include "tensor_impl.h"

namespace gt::distributed {
namespace {

using client_internal::Session;
using client_internal::TensorFactory;

Error Invalid(const std::string& message) { return Error(Code::kInvalidArgument, message); }

const client_internal::TensorRecord& Require(const Tensor& t, const char* what) {
  const client_internal::TensorRecord* r = TensorFactory::Record(t);
  if (!r) throw Invalid(std::string(what) + ": undefined tensor");
  return *r;
}

std::string Join(const std::vector<Placement>& placements) {
  std::string out = "[";
  for (size_t i = 0; i < placements.size(); ++i) out += (i ? ", " : "") + placements[i].ToString();
  return out + "]";
}

void CheckPlacements(const DeviceMesh& mesh, const std::vector<Placement>& placements, const std::string& where) {
  if (placements.size() != mesh.ndim())
    throw Invalid(where + "expected one placement per mesh axis (" + std::to_string(mesh.ndim()) + "), got " +
                  std::to_string(placements.size()));
  for (const Placement& p : placements)
    if (p.is_partial())
      throw Invalid(where + "Partial() cannot be asked for: a pending sum is what a contraction or a sum over a split "
                            "dim makes; redistribute one to Shard() or Replicate()");
}

bool Alike(const std::vector<Placement>& placements) {
  return std::all_of(placements.begin(), placements.end(), [&](const Placement& p) { return p == placements[0]; });
}

// Shard(dim) with dim counted from the front, checked against `t`'s rank.
int64_t ShardDim(const Tensor& t, const Placement& p, const std::string& where) {
  const int64_t rank = t.dim();
  const int64_t dim = p.dim < 0 ? p.dim + rank : p.dim;
  if (dim < 0 || dim >= rank)
    throw Invalid(where + "Shard dim " + std::to_string(p.dim) + " is out of range for a tensor of shape " +
                  ShapeToString(t.shape()));
  return dim;
}

// The target (gt/layout.h) a redistribute of `t` to `placements` on `mesh`
// names: placements alike on every axis are one split or one set of copies
// over the flattened mesh; different ones a layout per mesh axis.
layout::Layout Target(const Tensor& t, const DeviceMesh& mesh, const std::vector<Placement>& placements,
                      const char* what) {
  const std::string where = std::string(what) + "(" + mesh.ToString() + ", " + Join(placements) + "): ";
  CheckPlacements(mesh, placements, where);
  std::vector<Placement> counted = placements;  // Shard dims from the front: Shard(0) and Shard(-2) alike
  for (Placement& p : counted)
    if (p.is_shard()) p.dim = ShardDim(t, p, where);
  layout::Layout target;
  target.workers.assign(mesh.workers().begin(), mesh.workers().end());
  if (Alike(counted)) {
    target.kind = counted[0].is_shard() ? layout::Kind::kSplit : layout::Kind::kCopies;
    target.axis = counted[0].dim;
    return target;
  }
  target.kind = layout::Kind::kOnMesh;
  target.mesh_shape = mesh.shape();
  for (const Placement& p : counted) target.mesh_axes.push_back(layout::AxisPlacement{p.kind, p.dim});
  return target;
}

Tensor IssueRedistribute(const Tensor& t, const layout::Layout& target) {
  const client_internal::TensorRecord& r = Require(t, "redistribute");
  Instruction inst;
  inst.op = Op::kRedistribute;
  inst.attrs.axes = layout::EncodeTarget(target);
  inst.attrs.shape = r.meta.shape;
  inst.attrs.dtype = r.meta.dtype;
  inst.signal = current_signal();
  Tensor out = TensorFactory::Make(Session::Get()->Issue(inst, {&r}));
  client_internal::RecordForAutograd(Op::kRedistribute, inst.attrs, {t}, out);
  return out;
}

// The int64 values the dispatcher answered an inspect with.
std::vector<int64_t> Values(const client_internal::FetchedData& data) {
  if (data.dtype != DType::kInt64 || data.shape.size() != 1 || !data.bytes ||
      data.bytes->size() != static_cast<size_t>(data.shape[0]) * sizeof(int64_t))
    throw Error(Code::kInternal, "inspect: the dispatcher's answer is not an int64 vector");
  std::vector<int64_t> values(static_cast<size_t>(data.shape[0]));
  if (!values.empty()) std::memcpy(values.data(), data.bytes->data(), data.bytes->size());
  return values;
}

// What a decoder refused, as the client reports a bad answer.
Error Malformed(const Status& why) {
  return Error(Code::kInternal, "inspect: malformed answer from the dispatcher (" + why.message() + ")");
}

std::vector<int> Ints(const std::vector<int64_t>& v) { return std::vector<int>(v.begin(), v.end()); }

// What a decoded layout answer says, as the client's types.
Layout ToLayout(const layout::Layout& l) {
  std::vector<int> workers = Ints(l.workers);
  Layout out{DeviceMesh(workers), {Replicate()}, {}};
  switch (l.kind) {
    case layout::Kind::kWhole:
    case layout::Kind::kCopies: break;
    case layout::Kind::kPendingSum: out.placements = {Partial()}; break;
    case layout::Kind::kSplit:
      out.placements = {Shard(l.axis)};
      out.shard_sizes = l.sizes;
      break;
    case layout::Kind::kOnMesh: {
      const size_t columns = static_cast<size_t>(l.mesh_shape[1]);
      std::vector<std::vector<int>> rows;
      for (size_t i = 0; i < workers.size(); i += columns)
        rows.emplace_back(workers.begin() + static_cast<std::ptrdiff_t>(i),
                          workers.begin() + static_cast<std::ptrdiff_t>(i + columns));
      out.mesh = DeviceMesh(rows, {"0", "1"});
      out.placements.clear();
      for (const layout::AxisPlacement& a : l.mesh_axes)
        out.placements.push_back(a.kind == layout::AxisKind::kShard ? Shard(a.dim) : Placement{a.kind, 0});
      break;
    }
  }
  return out;
}

}  // namespace

// ---- placements and meshes ---------------------------------------------------

std::string Placement::ToString() const {
  switch (kind) {
    case Kind::kShard: return "Shard(dim=" + std::to_string(dim) + ")";
    case Kind::kReplicate: return "Replicate()";
    case Kind::kPartial: return "Partial(sum)";
  }
  return "?";
}

Placement Shard(int64_t dim) { return Placement{Placement::Kind::kShard, dim}; }
Placement Replicate() { return Placement{Placement::Kind::kReplicate, 0}; }
Placement Partial() { return Placement{Placement::Kind::kPartial, 0}; }

DeviceMesh::DeviceMesh(std::vector<int> workers, std::string axis_name) : axis_names_{std::move(axis_name)} {
  shape_ = {static_cast<int64_t>(workers.size())};
  AddRow(workers);
}

DeviceMesh::DeviceMesh(const std::vector<std::vector<int>>& workers, std::vector<std::string> axis_names)
    : axis_names_(std::move(axis_names)) {
  if (axis_names_.size() != 2)
    throw Invalid("DeviceMesh: expected 2 axis names for a 2-D mesh, got " + std::to_string(axis_names_.size()));
  if (axis_names_[0] == axis_names_[1]) throw Invalid("DeviceMesh: axis name '" + axis_names_[0] + "' is used twice");
  if (workers.empty()) throw Invalid("DeviceMesh: no workers");
  shape_ = {static_cast<int64_t>(workers.size()), static_cast<int64_t>(workers[0].size())};
  for (const std::vector<int>& row : workers) {
    if (row.size() != workers[0].size()) throw Invalid("DeviceMesh: rows of different lengths");
    AddRow(row);
  }
}

void DeviceMesh::AddRow(const std::vector<int>& row) {
  if (row.empty()) throw Invalid("DeviceMesh: no workers");
  for (int w : row) {
    if (w < 0) throw Invalid("DeviceMesh: negative worker index " + std::to_string(w));
    if (std::find(workers_.begin(), workers_.end(), w) != workers_.end())
      throw Invalid("DeviceMesh: worker " + std::to_string(w) + " appears twice");
    workers_.push_back(w);
  }
}

std::string DeviceMesh::ToString() const {
  std::string out = "DeviceMesh(";
  auto row = [&](size_t from, size_t n) {
    std::string r = "[";
    for (size_t i = 0; i < n; ++i) r += (i ? ", " : "") + std::to_string(workers_[from + i]);
    return r + "]";
  };
  if (ndim() == 1) {
    out += row(0, workers_.size());
  } else {
    out += "[";
    const size_t cols = static_cast<size_t>(shape_[1]);
    for (size_t i = 0; i < static_cast<size_t>(shape_[0]); ++i) out += (i ? ", " : "") + row(i * cols, cols);
    out += "]";
  }
  out += ", axes=(";
  for (size_t i = 0; i < axis_names_.size(); ++i) out += (i ? ", " : "") + axis_names_[i];
  return out + "))";
}

// ---- layouts -------------------------------------------------------------------

Tensor distribute_tensor(const Tensor& t, const DeviceMesh& mesh, const std::vector<Placement>& placements) {
  Require(t, "distribute_tensor");
  return IssueRedistribute(t, Target(t, mesh, placements, "distribute_tensor"));
}

Tensor redistribute(const Tensor& t, const DeviceMesh& mesh, const std::vector<Placement>& placements) {
  Require(t, "redistribute");
  return IssueRedistribute(t, Target(t, mesh, placements, "redistribute"));
}

Tensor full_tensor(const Tensor& t) {
  Require(t, "full_tensor");
  return IssueRedistribute(t, layout::Layout{layout::Kind::kWhole, 0, {-1}, {}, {}, {}});  // -1: where its first piece lives
}

Layout layout(const Tensor& t) {
  const client_internal::TensorRecord& r = Require(t, "layout");
  const std::vector<int64_t> v = Values(Session::Get()->Inspect(MakeInspect(InspectMode::kLayout), &r));
  Result<layout::Layout> decoded = layout::DecodeAnswer(v);
  if (!decoded.ok()) throw Malformed(decoded.status());
  return ToLayout(*decoded);
}

// ---- recording ------------------------------------------------------------------

void start_recording() { Session::Get()->Inspect(MakeInspect(InspectMode::kStartRecording), nullptr); }

namespace {

std::string ReduceName(ReduceOp reduce) {
  switch (reduce) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "sum";
}

// One recorded collective, with what the session noted of the ops it ran for.
CollectiveRecord ToRecord(const layout::RecordedCollective& e, Session& session) {
  CollectiveRecord c;
  c.seq = e.seq;
  c.made_by = e.made_by;
  c.kind = std::string(OpName(e.op));
  if (e.op == Op::kAllReduce) c.reduce = ReduceName(e.reduce);
  c.bytes = e.bytes;
  c.workers = Ints(e.workers);
  Session::Origin origin = session.OriginOf(c.made_by);
  c.op = std::move(origin.op);
  c.signal = std::move(origin.signal);
  c.backward = origin.backward;
  c.source = std::move(origin.source);
  if (c.made_by != c.seq) {
    Session::Origin needed = session.OriginOf(c.seq);
    c.needed_by = needed.op.empty() ? "" : needed.op + (needed.source.empty() ? "" : " at " + needed.source);
  }
  return c;
}

}  // namespace

std::vector<CollectiveRecord> stop_recording() {
  std::shared_ptr<Session> session = Session::Get();
  const std::vector<int64_t> v = Values(session->Inspect(MakeInspect(InspectMode::kStopRecording), nullptr));
  Result<layout::Recording> recording = layout::DecodeRecording(v);
  if (!recording.ok()) throw Malformed(recording.status());
  if (recording->dropped > 0)
    throw Error(Code::kResourceExhausted, "stop_recording: the dispatcher keeps at most 4 Mi values of a recording; " +
                                              std::to_string(recording->dropped) + " collectives past them were dropped (record "
                                              "a shorter block)");
  std::vector<CollectiveRecord> out;
  for (const layout::RecordedCollective& e : recording->entries) out.push_back(ToRecord(e, *session));
  return out;
}

void set_source_hook(std::function<std::string()> hook) { Session::Get()->SetSourceHook(std::move(hook)); }

SignalConfig signal_config(const DeviceMesh& mesh, const std::vector<Placement>& placements) {
  const std::string where = "placements " + Join(placements) + " on " + mesh.ToString() + ": ";
  CheckPlacements(mesh, placements, where);
  SignalConfig config;
  if (!Alike(placements)) {
    MeshConfig m{mesh.size(0), mesh.size(1), mesh.workers(), {}, mesh.axis_names()};
    for (const Placement& p : placements) m.shard_dims.push_back(p.is_shard() ? std::optional<int64_t>(p.dim) : std::nullopt);
    if (m.shard_dims[0] && m.shard_dims[0] == m.shard_dims[1])
      throw Invalid(where + "both mesh axes cut dim " + std::to_string(*m.shard_dims[0]));
    config.mesh = std::move(m);
  } else if (placements[0].is_shard()) {
    config.shard = ShardConfig{placements[0].dim, mesh.workers()};
  } else {
    config.replicated = true;
    config.replicas = mesh.workers();
  }
  return config;
}

}  // namespace gt::distributed

#include "piece_tags.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "gt/stage.h"
#include "mesh_pieces.h"

namespace gt::sharding {
namespace {

constexpr char kMagic0 = 'g', kMagic1 = 'S';
constexpr uint8_t kVersion = 1;

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void PutSigned(std::string& out, int64_t v) {
  PutVarint(out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

// Reads a tag front to back; the first failure sticks (and names the field).
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  uint64_t Varint(const char* field) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) return Fail(field, "ends early");
      const auto b = static_cast<uint8_t>(bytes_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return Fail(field, "has an overlong number");
  }
  int64_t Signed(const char* field) {
    const uint64_t v = Varint(field);
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
  }
  // A count of at most `bound`.
  size_t Count(const char* field, size_t bound) {
    const uint64_t n = Varint(field);
    if (n > bound) return Fail(field, "counts " + std::to_string(n) + ", more than " + std::to_string(bound));
    return static_cast<size_t>(n);
  }
  size_t pos() const { return pos_; }
  bool done() const { return pos_ == bytes_.size(); }
  const std::string& error() const { return error_; }

 private:
  uint64_t Fail(const char* field, const std::string& what) {
    if (error_.empty()) error_ = std::string(field) + " " + what;
    pos_ = bytes_.size();
    return 0;
  }
  std::string_view bytes_;
  size_t pos_ = 0;
  std::string error_;
};

Status Malformed(const std::string& what) { return InvalidArgument("malformed placement tag: " + what); }

}  // namespace

std::string EncodeRecord(TensorId logical, const Tensor& t) {
  const Placement& p = t.placement;
  std::string out;
  out.reserve(16 + 12 * p.ids.size() + 2 * t.meta.shape.size());
  PutVarint(out, logical);
  PutVarint(out, static_cast<uint64_t>(p.kind));
  PutVarint(out, p.workers.size());
  for (int w : p.workers) PutVarint(out, static_cast<uint64_t>(w));
  for (TensorId id : p.ids) PutVarint(out, id);
  PutSigned(out, p.axis);
  PutVarint(out, p.sizes.size());
  for (int64_t s : p.sizes) PutSigned(out, s);
  PutVarint(out, p.mesh_shape.size());
  for (int64_t d : p.mesh_shape) PutSigned(out, d);
  PutVarint(out, p.mesh_axes.size());
  for (const MeshAxis& a : p.mesh_axes) {
    PutVarint(out, static_cast<uint64_t>(a.kind));
    PutSigned(out, a.dim);
  }
  PutVarint(out, t.meta.shape.size());
  for (int64_t d : t.meta.shape) PutSigned(out, d);
  PutVarint(out, static_cast<uint64_t>(t.meta.dtype));
  return out;
}

std::string PieceTagOf(std::string_view record, size_t member) {
  std::string out{kMagic0, kMagic1, static_cast<char>(kVersion)};
  PutVarint(out, member);
  out.append(record);
  return out;
}

Result<DecodedTag> DecodePieceTag(std::string_view tag) {
  if (tag.size() > kMaxPieceTagBytes) return Malformed(std::to_string(tag.size()) + " bytes, over the bound");
  if (tag.size() < 3 || tag[0] != kMagic0 || tag[1] != kMagic1)
    return Malformed("it is not a sharding stage's tag");
  if (static_cast<uint8_t>(tag[2]) != kVersion)
    return Malformed("version " + std::to_string(static_cast<uint8_t>(tag[2])) + ", this dispatcher reads 1");
  Reader r(tag.substr(3));
  DecodedTag d;
  d.member = r.Count("member", kMaxTagWorkers);
  const size_t record_at = 3 + r.pos();
  d.logical = r.Varint("logical id");
  Placement& p = d.tensor.placement;
  const uint64_t kind = r.Varint("kind");
  if (kind > static_cast<uint64_t>(Placement::Kind::kMesh)) return Malformed("unknown kind " + std::to_string(kind));
  p.kind = static_cast<Placement::Kind>(kind);
  const size_t n = r.Count("workers", kMaxTagWorkers);
  for (size_t i = 0; i < n; ++i) p.workers.push_back(static_cast<int>(r.Count("worker", INT32_MAX)));
  for (size_t i = 0; i < n; ++i) p.ids.push_back(r.Varint("piece id"));
  p.axis = r.Signed("axis");
  const size_t sizes = r.Count("sizes", kMaxTagWorkers);
  for (size_t i = 0; i < sizes; ++i) p.sizes.push_back(r.Signed("size"));
  const size_t mesh = r.Count("mesh shape", 2);
  for (size_t i = 0; i < mesh; ++i) p.mesh_shape.push_back(r.Signed("mesh dim"));
  const size_t axes = r.Count("mesh axes", 2);
  for (size_t i = 0; i < axes; ++i) {
    MeshAxis a;
    const uint64_t k = r.Varint("mesh axis kind");
    if (k > static_cast<uint64_t>(MeshAxis::Kind::kPartial)) return Malformed("unknown mesh axis kind");
    a.kind = static_cast<MeshAxis::Kind>(k);
    a.dim = r.Signed("mesh axis dim");
    p.mesh_axes.push_back(a);
  }
  const size_t rank = r.Count("rank", kMaxTagRank);
  for (size_t i = 0; i < rank; ++i) d.tensor.meta.shape.push_back(r.Signed("dim"));
  const uint64_t dtype = r.Varint("dtype");
  if (!r.error().empty()) return Malformed(r.error());
  if (!r.done()) return Malformed("bytes after its end");
  if (dtype >= static_cast<uint64_t>(DType::kCount)) return Malformed("dtype " + std::to_string(dtype));
  d.tensor.meta.dtype = static_cast<DType>(dtype);
  if (d.member >= n) return Malformed("member " + std::to_string(d.member) + " of " + std::to_string(n) + " pieces");
  if (Status s = CheckRecord(d.logical, d.tensor); !s.ok()) return Malformed(s.message());
  d.record = tag.substr(record_at);
  return d;
}

Status CheckRecord(TensorId logical, const Tensor& t) {
  const Placement& p = t.placement;
  const Shape& shape = t.meta.shape;
  const std::string of = "tensor " + TensorName(logical) + ": ";
  if (logical >= kPhysicalIdBase) return InvalidArgument(of + "a client tensor's id is below " + TensorName(kPhysicalIdBase));
  if (p.workers.empty() || p.ids.size() != p.workers.size()) return InvalidArgument(of + "no pieces, or not one id per worker");
  if (std::set<int>(p.workers.begin(), p.workers.end()).size() != p.workers.size())
    return InvalidArgument(of + "a worker holds two of its pieces");
  for (TensorId id : p.ids)
    if (id < kPhysicalIdBase && id != logical) return InvalidArgument(of + "piece " + TensorName(id) + " is another client tensor");
  for (int64_t d : shape)
    if (d < 0) return InvalidArgument(of + "a negative dimension");
  const int64_t rank = static_cast<int64_t>(shape.size());
  switch (p.kind) {
    case Placement::Kind::kWhole:
      if (p.workers.size() != 1) return InvalidArgument(of + "whole, yet in " + std::to_string(p.workers.size()) + " pieces");
      break;
    case Placement::Kind::kSharded: {
      if (p.axis < 0 || p.axis >= rank || p.sizes.size() != p.workers.size())
        return InvalidArgument(of + "sharded on axis " + std::to_string(p.axis) + " of " + ShapeToString(shape) +
                               " with " + std::to_string(p.sizes.size()) + " sizes for " +
                               std::to_string(p.workers.size()) + " pieces");
      // Each size within the dim, so that no sum of at most kMaxTagWorkers wraps.
      const int64_t dim = shape[static_cast<size_t>(p.axis)];
      if (std::any_of(p.sizes.begin(), p.sizes.end(), [&](int64_t n) { return n < 0 || n > dim; }))
        return InvalidArgument(of + "a shard size outside 0.." + std::to_string(dim));
      int64_t total = 0;
      for (int64_t n : p.sizes)
        if (__builtin_add_overflow(total, n, &total)) return InvalidArgument(of + "shard sizes overflow");
      if (total != dim)
        return InvalidArgument(of + "shard sizes add up to " + std::to_string(total) + ", not " +
                               std::to_string(shape[static_cast<size_t>(p.axis)]));
      break;
    }
    case Placement::Kind::kMesh: {
      // Both sides bounded before the product: a forged pair whose product wraps must not pass.
      const auto side_ok = [](int64_t n) { return n > 0 && n <= static_cast<int64_t>(kMaxTagWorkers); };
      if (p.mesh_shape.size() != 2 || p.mesh_axes.size() != 2 || !side_ok(p.mesh_shape[0]) ||
          !side_ok(p.mesh_shape[1]) || p.mesh_shape[0] * p.mesh_shape[1] != static_cast<int64_t>(p.workers.size()))
        return InvalidArgument(of + "a mesh that is not rows x columns pieces with two axes");
      for (const MeshAxis& a : p.mesh_axes)
        if (a.shard() && (a.dim < 0 || a.dim >= rank)) return InvalidArgument(of + "a mesh Shard dim out of range");
      break;
    }
    case Placement::Kind::kReplicated:
    case Placement::Kind::kPartial: break;
  }
  return Status::Ok();
}

Shape PieceShape(const Tensor& t, size_t member) {
  const Placement& p = t.placement;
  if (p.sharded()) {
    Shape s = t.meta.shape;
    s[static_cast<size_t>(p.axis)] = p.sizes[member];
    return s;
  }
  if (p.mesh()) return LocalShape(t.meta.shape, p, member);
  return t.meta.shape;
}

}  // namespace gt::sharding

// Names and small helpers of the public value types (status, dtype, op,
// instruction, options, host and plugin kinds).
#include <array>
#include <charconv>
#include <cmath>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include <sys/mman.h>

#include "gt/dtype.h"
#include "gt/instruction.h"
#include "gt/op.h"
#include "gt/options.h"
#include "gt/plugin.h"
#include "gt/settings.h"
#include "gt/stage.h"
#include "gt/status.h"

namespace gt {

// ---- Status ----------------------------------------------------------------

namespace {
constexpr std::array<std::string_view, static_cast<size_t>(Code::kCount)> kCodeNames = {
    "ok",        "invalid_argument", "not_found",    "failed_precondition",
    "unavailable", "unimplemented",  "plugin_error", "internal", "resource_exhausted"};
}  // namespace

std::string_view CodeName(Code code) { return kCodeNames.at(static_cast<size_t>(code)); }

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

// ---- DType -----------------------------------------------------------------

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
  bool floating;
};
constexpr std::array<DTypeInfo, static_cast<size_t>(DType::kCount)> kDTypes = {{
    {DType::kFloat32, "float32", 4, true},
    {DType::kFloat64, "float64", 8, true},
    {DType::kInt32, "int32", 4, false},
    {DType::kInt64, "int64", 8, false},
    {DType::kBool, "bool", 1, false},
}};
constexpr bool DTypeTableInOrder() {
  for (size_t i = 0; i < kDTypes.size(); ++i)
    if (static_cast<size_t>(kDTypes[i].dtype) != i) return false;
  return true;
}
static_assert(DTypeTableInOrder(), "kDTypes rows must follow enum DType");
}  // namespace

size_t ElementSize(DType dtype) { return kDTypes.at(static_cast<size_t>(dtype)).size; }
std::string_view DTypeName(DType dtype) { return kDTypes.at(static_cast<size_t>(dtype)).name; }
bool IsFloatingPoint(DType dtype) { return kDTypes.at(static_cast<size_t>(dtype)).floating; }

std::optional<DType> ParseDType(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  // Rank as PyTorch does for these five: bool < int32 < int64 < float32 < float64.
  auto rank = [](DType t) {
    switch (t) {
      case DType::kBool: return 0;
      case DType::kInt32: return 1;
      case DType::kInt64: return 2;
      case DType::kFloat32: return 3;
      default: return 4;
    }
  };
  return rank(a) >= rank(b) ? a : b;
}

// ---- Op --------------------------------------------------------------------

namespace {
// ops.def's rows, placed at their wire numbers (rows are grouped by family,
// numbers by when the op was added).
constexpr std::array<OpInfo, static_cast<size_t>(Op::kCount)> MakeOpTable() {
  constexpr OpInfo kRows[] = {
#define GT_OP(op, wire, name, kind, arity, shape, dtype, grad, shard, flags, aten) \
  {Op::op, name, OpKind::kind, arity, ShapeRule::shape, DTypeRule::dtype, GradRule::grad, ShardRule::shard, flags, aten},
#include "gt/ops.def"
#undef GT_OP
  };
  std::array<OpInfo, static_cast<size_t>(Op::kCount)> table{};
  for (const OpInfo& row : kRows) table[static_cast<size_t>(row.op)] = row;
  return table;
}
constexpr std::array<OpInfo, static_cast<size_t>(Op::kCount)> kOpTable = MakeOpTable();
constexpr bool OpTableComplete() {
  for (size_t i = 0; i < kOpTable.size(); ++i)
    if (static_cast<size_t>(kOpTable[i].op) != i || kOpTable[i].name.empty()) return false;
  return true;
}
static_assert(OpTableComplete(), "every Op needs one row in gt/ops.def");
}  // namespace

const OpInfo& GetOpInfo(Op op) { return kOpTable.at(static_cast<size_t>(op)); }

bool OpReachesBackend(Op op) { return op != Op::kSync && op != Op::kConfigure && op != Op::kMembership; }

std::optional<Op> ParseOp(std::string_view name) {
  for (const auto& info : kOpTable)
    if (info.name == name) return info.op;
  return std::nullopt;
}

// ---- Instruction -----------------------------------------------------------

namespace {
// Where a copied blob lives. Large ones get their own mapping with
// transparent huge pages asked for (as NumPy does for its large arrays): the
// first write to each page of a fresh buffer faults, and a 64 MiB copy into
// 4 KiB pages spent longer in those faults than in the copy.
class BlobMemory {
 public:
  explicit BlobMemory(size_t size) : size_(size) {
    if (size >= kHugePage) {
      mapped_ = (size + kHugePage - 1) / kHugePage * kHugePage;
      void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) {
        (void)::madvise(p, mapped_, MADV_HUGEPAGE);  // advice only: without it, 4 KiB pages
        data_ = static_cast<std::byte*>(p);
        return;
      }
      mapped_ = 0;
    }
    data_ = new std::byte[size];  // uninitialized: the copy fills it
  }
  ~BlobMemory() {
    if (mapped_) ::munmap(data_, mapped_);
    else delete[] data_;
  }
  BlobMemory(const BlobMemory&) = delete;
  BlobMemory& operator=(const BlobMemory&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // 0: from new[]
};

class OwnedBlob final : public Blob {
 public:
  OwnedBlob(const void* bytes, size_t size) : memory_(size) {
    if (size) std::memcpy(memory_.data(), bytes, size);
  }
  const std::byte* data() const override { return memory_.data(); }
  size_t size() const override { return memory_.size(); }

 private:
  BlobMemory memory_;
};
}  // namespace

BlobPtr CopyToBlob(const void* bytes, size_t size) { return std::make_shared<OwnedBlob>(bytes, size); }

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d == 0) return 0;
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  // A shape from the wire may name more elements than int64 counts (no tensor
  // has that many): saturated, where the plain product was undefined.
  return overflow ? std::numeric_limits<int64_t>::max() : n;
}

std::string Instruction::Describe() const {
  std::ostringstream out;
  out << OpName(op) << " #" << seq;
  auto ids = [&out](const char* label, const std::vector<TensorId>& v) {
    if (v.empty()) return;
    out << ' ' << label << '=';
    for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << '%' << v[i];
  };
  ids("result", results);
  ids("operands", operands);
  if (!attrs.shape.empty() || KindOf(op) == OpKind::kCreate) out << " shape=" << ShapeToString(attrs.shape);
  if (KindOf(op) == OpKind::kCreate) out << " dtype=" << DTypeName(attrs.dtype);
  if (!attrs.axes.empty()) out << " axes=" << ShapeToString(attrs.axes);
  if (attrs.keepdims) out << " keepdims";
  if (op == Op::kFill) out << " value=" << attrs.scalar;
  if (attrs.scalar_side != ScalarSide::kNone)
    out << " scalar=" << attrs.scalar << (attrs.scalar_side == ScalarSide::kLeft ? "(left)" : "");
  if (op == Op::kSync) out << " sync_id=" << attrs.sync_id;
  if (op == Op::kHotStart || op == Op::kHotEnd) out << " signature=" << std::hex << attrs.seed << std::dec;
  if (op == Op::kDefineUnit || op == Op::kRunUnit) out << " unit=" << std::hex << attrs.seed << std::dec;
  if (!attrs.numbers.empty()) {
    out << " numbers=[";
    for (size_t i = 0; i < attrs.numbers.size(); ++i) out << (i ? ", " : "") << attrs.numbers[i];
    out << ']';
  }
  if (!signal.empty()) out << " signal=" << signal;
  if (worker >= 0) out << " worker=" << worker;
  return out.str();
}

// ---- Options ---------------------------------------------------------------

std::string_view OptionTypeName(OptionType type) {
  switch (type) {
    case OptionType::kBool: return "bool";
    case OptionType::kInt: return "int";
    case OptionType::kDouble: return "double";
    case OptionType::kString: return "string";
  }
  return "?";
}

namespace {
Status OutOfRange(const OptionSpec& spec, std::string_view text) {
  std::ostringstream m;
  m << "option '" << spec.name << "' = " << text << " is out of range [" << spec.min << ", " << spec.max << "]";
  return InvalidArgument(m.str());
}
Status WrongType(const OptionSpec& spec, std::string_view text) {
  return InvalidArgument("option '" + std::string(spec.name) + "' expects " +
                         std::string(OptionTypeName(spec.type)) + ", got '" + std::string(text) + "'");
}
}  // namespace

Result<OptionValue> ParseOptionValue(const OptionSpec& spec, std::string_view text) {
  switch (spec.type) {
    case OptionType::kBool:
      if (text == "true") return OptionValue(true);
      if (text == "false") return OptionValue(false);
      return WrongType(spec, text);
    case OptionType::kInt: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) return WrongType(spec, text);
      if (v < spec.min || v > spec.max) return OutOfRange(spec, text);
      return OptionValue(v);
    }
    case OptionType::kDouble: {
      std::string s(text);
      char* end = nullptr;
      double v = std::strtod(s.c_str(), &end);
      if (s.empty() || *end != '\0' || std::isnan(v)) return WrongType(spec, text);
      if (v < spec.min || v > spec.max) return OutOfRange(spec, text);
      return OptionValue(v);
    }
    case OptionType::kString:
      return OptionValue(std::string(text));
  }
  return Internal("unknown option type");
}

Result<std::optional<OptionValue>> ReadEnvOverride(const OptionSpec& spec) {
  std::optional<std::string> text = spec.env != nullptr ? EnvironmentText(spec.env) : std::nullopt;
  if (!text) return std::optional<OptionValue>();
  if (spec.type == OptionType::kBool) {
    Result<bool> on = ParseSwitch("$" + std::string(spec.env), *text);
    if (!on.ok()) return on.status();
    return std::optional<OptionValue>(*on);
  }
  Result<OptionValue> parsed = ParseOptionValue(spec, *text);
  if (!parsed.ok()) return InvalidArgument("$" + std::string(spec.env) + ": " + parsed.status().message());
  return std::optional<OptionValue>(std::move(*parsed));
}

const OptionValue& OptionValues::At(std::string_view name) const {
  auto it = values_.find(name);
  assert(it != values_.end() && "option not declared by this plugin");
  return it->second;
}


// ---- Host and plugin kinds -------------------------------------------------

std::string_view HostKindName(HostKind kind) {
  switch (kind) {
    case HostKind::kDispatcher:
      return "dispatcher";
    case HostKind::kClient:
      return "client";
    default:
      return "worker";
  }
}

std::string_view PluginKindName(PluginKind kind) {
  return kind == PluginKind::kBackend ? "backend" : "modifier";
}

}  // namespace gt

#include "gt/checkpoint_plan.h"

#include <charconv>
#include <filesystem>

namespace gt::checkpoint {
namespace {

// No tensor gt can hold has more elements (2^48): larger numbers in a plan are hostile.
constexpr int64_t kMaxElements = int64_t{1} << 48;

// Reads the line's fields one at a time; the path is the rest of the line.
class Fields {
 public:
  Fields(std::string_view line, size_t number) : rest_(line), number_(number) {}

  Status Number(int64_t& out) {
    const size_t end = rest_.find(' ');
    const std::string_view token = rest_.substr(0, end);
    auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), out);
    if (ec != std::errc() || ptr != token.data() + token.size() || out < 0)
      return Error("expected a number >= 0, got '" + std::string(token) + "'");
    rest_ = end == std::string_view::npos ? std::string_view() : rest_.substr(end + 1);
    return Status::Ok();
  }
  Status Numbers(size_t n, Shape& out) {
    out.resize(n);
    for (int64_t& v : out)
      if (Status s = Number(v); !s.ok()) return s;
    return Status::Ok();
  }
  Status Path(std::string& out) {
    if (rest_.empty()) return Error("no path");
    // The check is on the text; open() would stop at a NUL and a control
    // character has no place in a checkpoint's file name.
    for (char c : rest_)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return Error("the path holds a control character");
    out = std::string(rest_);
    return Status::Ok();
  }
  Status Error(const std::string& what) const {
    return InvalidArgument("checkpoint plan line " + std::to_string(number_) + ": " + what);
  }

 private:
  std::string_view rest_;
  size_t number_;
};

Status ParseRead(Fields& f, PlanLine& line) {
  int64_t ndim = 0;
  if (Status s = f.Number(ndim); !s.ok()) return s;
  if (ndim > 64) return f.Error("more than 64 dims");
  for (Shape* v : {&line.file_shape, &line.from, &line.to, &line.size})
    if (Status s = f.Numbers(static_cast<size_t>(ndim), *v); !s.ok()) return s;
  // Compared without sums and multiplied with overflow checks: a hostile plan's
  // numbers near 2^63 must not wrap into a box that looks inside its file.
  int64_t elements = 1;
  for (int64_t d = 0; d < ndim; ++d) {
    if (line.file_shape[d] > kMaxElements || line.size[d] > line.file_shape[d] ||
        line.from[d] > line.file_shape[d] - line.size[d])
      return f.Error("the box leaves its file's shape");
    if (line.to[d] > kMaxElements || line.size[d] > kMaxElements - line.to[d])
      return f.Error("the box leaves its piece's shape");
    if (__builtin_mul_overflow(elements, line.file_shape[d], &elements) || elements > kMaxElements)
      return f.Error("the file's shape holds more than 2^48 elements");
  }
  return f.Path(line.path);
}

Status ParseLine(std::string_view text, size_t number, PlanLine& line) {
  const size_t space = text.find(' ');
  const std::string_view verb = text.substr(0, space);
  Fields f(space == std::string_view::npos ? std::string_view() : text.substr(space + 1), number);
  if (verb == "metadata") {
    line.kind = PlanLine::Kind::kMetadata;
    return f.Path(line.path);
  }
  if (verb != "write" && verb != "read") return f.Error("unknown verb '" + std::string(verb) + "'");
  line.kind = verb == "write" ? PlanLine::Kind::kWrite : PlanLine::Kind::kRead;
  if (Status s = f.Number(line.piece); !s.ok()) return s;
  return line.kind == PlanLine::Kind::kRead ? ParseRead(f, line) : f.Path(line.path);
}

void AppendNumbers(std::string& out, const Shape& values) {
  for (int64_t v : values) out += " " + std::to_string(v);
}

}  // namespace

Result<Plan> ParsePlan(std::string_view text) {
  Plan plan;
  size_t number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    PlanLine parsed;
    if (Status s = ParseLine(line, ++number, parsed); !s.ok()) return s;
    plan.lines.push_back(std::move(parsed));
    if (plan.lines.back().kind == PlanLine::Kind::kMetadata) {  // the rest is its text
      plan.content = std::string(text);
      break;
    }
  }
  return plan;
}

std::string FormatPlan(const Plan& plan) {
  std::string out;
  for (const PlanLine& line : plan.lines) {
    switch (line.kind) {
      case PlanLine::Kind::kMetadata: out += "metadata " + line.path + "\n" + plan.content; return out;
      case PlanLine::Kind::kWrite: out += "write " + std::to_string(line.piece); break;
      case PlanLine::Kind::kRead:
        out += "read " + std::to_string(line.piece) + " " + std::to_string(line.size.size());
        for (const Shape* v : {&line.file_shape, &line.from, &line.to, &line.size}) AppendNumbers(out, *v);
        break;
    }
    out += " " + line.path + "\n";
  }
  return out;
}

Result<std::string> ResolveUnder(const std::string& root, const std::string& path) {
  namespace fs = std::filesystem;
  if (root.empty()) return InvalidArgument("checkpoints are off: the dispatcher's checkpoint_root is empty");
  const fs::path base = fs::path(root).lexically_normal();
  const fs::path full = (fs::path(path).is_absolute() ? fs::path(path) : base / path).lexically_normal();
  const fs::path inside = full.lexically_relative(base);
  if (inside.empty() || *inside.begin() == "..")
    return InvalidArgument("checkpoint path " + path + " is outside the dispatcher's checkpoint_root " + root);
  return full.string();
}

}  // namespace gt::checkpoint

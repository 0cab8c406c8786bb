#include "checkpoint_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "gt/checkpoint_plan.h"

namespace gt::torch_backend {
namespace {

using checkpoint::Plan;
using checkpoint::PlanLine;

Status Failed(const std::string& what, const std::string& path, int error) {
  return Unavailable("cannot " + what + " " + path + ": " + std::strerror(error));
}

Result<Plan> PlanOf(const Instruction& inst) {
  if (!inst.payload) return InvalidArgument(inst.Describe() + ": carries no checkpoint plan");
  return checkpoint::ParsePlan(
      std::string_view(reinterpret_cast<const char*>(inst.payload->data()), inst.payload->size()));
}

// A piece file ends with this trailer: "gtc1" and the CRC-32 of the bytes
// before it (little-endian), so that a read of the whole file can tell a
// damaged one. Ranged reads (another placement) read only their bytes and
// cannot check it.
constexpr size_t kTrailerBytes = 8;
constexpr char kTrailerMagic[4] = {'g', 't', 'c', '1'};

// zlib's CRC-32 (Python's zlib.crc32), continuing from `crc`.
uint32_t Crc32(const void* data, size_t size, uint32_t crc = 0) {
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), size));
}

std::array<char, kTrailerBytes> TrailerOf(uint32_t crc) {
  std::array<char, kTrailerBytes> out{};
  std::memcpy(out.data(), kTrailerMagic, 4);
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  return out;
}

bool WriteAll(int fd, const char* at, size_t left, int& error) {
  while (left > 0) {
    const ssize_t n = ::write(fd, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : EIO;
      return false;
    }
    at += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

// `size` bytes at `data` (and the piece trailer when `trailer`) to `path`,
// through a temporary name renamed when whole.
Status WriteFile(const std::string& path, const void* data, size_t size, bool trailer) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::filesystem::create_directories(parent, ec);
  if (ec) return Unavailable("cannot create directory " + parent.string() + ": " + ec.message());
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  // A fresh file, never through a link planted at the temporary name (the
  // root may be shared): a stale one is removed, and O_EXCL | O_NOFOLLOW
  // refuse whatever appears in between.
  ::unlink(temporary.c_str());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Failed("write", path, errno);
  int error = 0;
  const std::array<char, kTrailerBytes> end = TrailerOf(trailer ? Crc32(data, size) : 0);
  bool ok = WriteAll(fd, static_cast<const char*>(data), size, error) &&
            (!trailer || WriteAll(fd, end.data(), end.size(), error));
  if (::close(fd) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && ::rename(temporary.c_str(), path.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (ok) return Status::Ok();
  ::unlink(temporary.c_str());
  return Failed("write", path, error);
}

// Row-major strides, in elements.
Shape StridesOf(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Reads `size` bytes at `offset` of `fd` into `to`; a short file is an error.
Status ReadAt(int fd, char* to, size_t size, off_t offset, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::pread(fd, to, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Failed("read", path, errno);
    if (n == 0) return InvalidArgument(path + " ends before byte " + std::to_string(offset + static_cast<off_t>(size)));
    to += n;
    offset += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

// The trailer at `offset` of a piece file whose bytes have CRC-32 `crc`.
Status CheckTrailer(int fd, uint64_t offset, uint32_t crc, const std::string& path) {
  std::array<char, kTrailerBytes> end{};
  if (Status s = ReadAt(fd, end.data(), end.size(), static_cast<off_t>(offset), path); !s.ok()) return s;
  if (end != TrailerOf(crc))
    return InvalidArgument(path + " is damaged: its bytes do not match the CRC-32 its save wrote (or it is not a "
                                  "gt checkpoint's piece)");
  return Status::Ok();
}

// The box of `line` from its file into `into` (contiguous, on the CPU): one
// read per run of contiguous bytes, the dims the box covers whole in both
// tensors folded into the run, so only the bytes needed are read.
Status ReadBox(const PlanLine& line, at::Tensor& into) {
  const Shape dst_shape(into.sizes().begin(), into.sizes().end());
  const size_t ndim = line.size.size();
  if (dst_shape.size() != ndim) return InvalidArgument(line.path + ": the plan's box has the wrong number of dims");
  for (size_t d = 0; d < ndim; ++d)
    if (line.size[d] > dst_shape[d] || line.to[d] > dst_shape[d] - line.size[d])  // no sum: it could wrap
      return InvalidArgument(line.path + ": the plan's box leaves the piece");
  const size_t element = into.element_size();
  const int fd = ::open(line.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Failed("read", line.path, errno);
  struct stat st {};
  const uint64_t data_bytes = static_cast<uint64_t>(NumElements(line.file_shape)) * element;
  const uint64_t expected = data_bytes + kTrailerBytes;
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != expected) {
    ::close(fd);
    return InvalidArgument(line.path + " holds " + std::to_string(st.st_size) + " bytes, expected " +
                    std::to_string(expected) + " for a piece of shape " + ShapeToString(line.file_shape) + " and its trailer" +
                    " (cut short, or not this checkpoint's file)");
  }
  size_t k = ndim == 0 ? 0 : ndim - 1;  // dims k.. are one run
  while (k > 0 && line.size[k] == line.file_shape[k] && line.size[k] == dst_shape[k]) --k;
  const int64_t run = NumElements(Shape(line.size.begin() + static_cast<int64_t>(k), line.size.end()));
  const Shape src_strides = StridesOf(line.file_shape), dst_strides = StridesOf(dst_shape);
  Shape index(k, 0);  // over dims 0..k-1 of the box
  char* base = static_cast<char*>(into.data_ptr());
  // A box that is the whole file is read in file order: its CRC is checked.
  const bool whole = line.size == line.file_shape;
  uint32_t crc = 0;
  Status status = Status::Ok();
  for (bool more = NumElements(line.size) > 0; more && status.ok();) {
    int64_t src = 0, dst = 0;
    for (size_t d = 0; d < ndim; ++d) {
      const int64_t i = d < k ? index[d] : 0;
      src += (line.from[d] + i) * src_strides[d];
      dst += (line.to[d] + i) * dst_strides[d];
    }
    status = ReadAt(fd, base + dst * static_cast<int64_t>(element), static_cast<size_t>(run) * element,
                    static_cast<off_t>(src * static_cast<int64_t>(element)), line.path);
    if (whole && status.ok()) crc = Crc32(base + dst * static_cast<int64_t>(element), static_cast<size_t>(run) * element, crc);
    more = false;
    for (size_t d = k; d-- > 0;) {  // the next index, last dim fastest
      if (++index[d] < line.size[d]) {
        more = true;
        break;
      }
      index[d] = 0;
    }
  }
  if (status.ok() && whole) status = CheckTrailer(fd, data_bytes, crc, line.path);
  ::close(fd);
  return status;
}

Status SendMetadata(const Instruction& inst, const std::string& path, ReplySink& replies) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return NotFound("no checkpoint metadata at " + path + " (no checkpoint there, or its save did not finish)");
  if (fd < 0) return Failed("read", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Failed("read", path, errno);
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  const Status read = ReadAt(fd, text.data(), text.size(), 0, path);
  ::close(fd);
  if (!read.ok()) return read;
  replies.SendData(inst, DType::kBool, {static_cast<int64_t>(text.size())}, CopyToBlob(text.data(), text.size()));
  return Status::Ok();
}

}  // namespace

Status CheckpointWrite(const Instruction& inst, const at::Tensor* piece) {
  Result<Plan> plan = PlanOf(inst);
  if (!plan.ok()) return plan.status();
  if (!piece) {
    if (plan->lines.size() != 1) return InvalidArgument(inst.Describe() + ": expected one metadata line");
    return WriteFile(plan->lines[0].path, plan->content.data(), plan->content.size(), false);
  }
  const at::Tensor bytes = piece->to(at::kCPU).contiguous();
  for (const PlanLine& line : plan->lines)
    if (Status s = WriteFile(line.path, bytes.data_ptr(), bytes.numel() * bytes.element_size(), true); !s.ok())
      return s;
  return Status::Ok();
}

Status CheckpointRead(const Instruction& inst, const at::Tensor* piece, ReplySink& replies) {
  Result<Plan> plan = PlanOf(inst);
  if (!plan.ok()) return plan.status();
  if (!piece) {
    if (plan->lines.size() != 1) return InvalidArgument(inst.Describe() + ": expected one metadata line");
    return SendMetadata(inst, plan->lines[0].path, replies);
  }
  at::Tensor dest = *piece;  // a handle: the piece's storage is filled in place
  const bool in_place = dest.is_contiguous() && dest.device().is_cpu();
  at::Tensor into = in_place ? dest : at::empty(dest.sizes(), dest.options().device(at::kCPU));
  for (const PlanLine& line : plan->lines)
    if (Status s = ReadBox(line, into); !s.ok()) return s;
  if (!in_place) dest.copy_(into);
  return Status::Ok();
}

}  // namespace gt::torch_backend

// Test support: moving tensors between gt and in-process ATen, for the suites
// that check gt against LibTorch (autograd_test, mlp_test). Header-only so
// that only the suites that link LibTorch pay for it.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "gt/gt.h"

namespace gt::testing {

inline at::ScalarType ToAten(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return at::kFloat;
    case DType::kFloat64: return at::kDouble;
    case DType::kInt32: return at::kInt;
    case DType::kInt64: return at::kLong;
    case DType::kBool: return at::kBool;
    case DType::kCount: break;
  }
  throw Error(Code::kInvalidArgument, "no ATen type for dtype " + std::to_string(static_cast<int>(dtype)));
}

inline std::optional<DType> FromAten(at::ScalarType type) {
  for (size_t i = 0; i < static_cast<size_t>(DType::kCount); ++i)
    if (ToAten(static_cast<DType>(i)) == type) return static_cast<DType>(i);
  return std::nullopt;
}

inline Shape ShapeOf(const at::Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end()); }

// A new remote tensor holding `t`'s values (op from_bytes).
inline Tensor Send(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  std::optional<DType> dtype = FromAten(c.scalar_type());
  if (!dtype) throw Error(Code::kInvalidArgument, "test input has a non-gt dtype");
  return from_data(c.data_ptr(), c.nbytes(), ShapeOf(c), *dtype);
}

// `t`'s values (a sync point).
inline at::Tensor Fetch(const Tensor& t) {
  at::Tensor out = at::empty(t.shape(), at::TensorOptions().dtype(ToAten(t.dtype())));
  t.copy_to(out.data_ptr(), out.nbytes());
  return out;
}

}  // namespace gt::testing

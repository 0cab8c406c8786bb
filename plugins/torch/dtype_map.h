// The one place gt's element types (DType) and ATen's (at::ScalarType) meet.
//
// Thread-safety: constant tables and pure functions.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstddef>
#include <optional>

#include "gt/dtype.h"

namespace gt::torch_backend {

struct DTypeMapping {
  DType dtype;
  at::ScalarType scalar_type;
};
inline constexpr std::array<DTypeMapping, static_cast<size_t>(DType::kCount)> kDTypeMap = {{
    {DType::kFloat32, at::kFloat},
    {DType::kFloat64, at::kDouble},
    {DType::kInt32, at::kInt},
    {DType::kInt64, at::kLong},
    {DType::kBool, at::kBool},
}};
constexpr bool DTypeMapInOrder() {
  for (size_t i = 0; i < kDTypeMap.size(); ++i)
    if (static_cast<size_t>(kDTypeMap[i].dtype) != i) return false;
  return true;
}
static_assert(DTypeMapInOrder(), "kDTypeMap rows must follow enum DType");

// False for a value outside enum DType (it comes off the wire unchecked).
inline bool IsValid(DType dtype) { return static_cast<size_t>(dtype) < kDTypeMap.size(); }

// REQUIRES: IsValid(dtype).
inline at::ScalarType ToScalarType(DType dtype) { return kDTypeMap[static_cast<size_t>(dtype)].scalar_type; }

// The gt dtype of `scalar_type`, or none when gt cannot express it (e.g. int8).
inline std::optional<DType> FromScalarType(at::ScalarType scalar_type) {
  for (const auto& row : kDTypeMap)
    if (row.scalar_type == scalar_type) return row.dtype;
  return std::nullopt;
}

}  // namespace gt::torch_backend

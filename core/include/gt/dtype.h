// Element types a gt tensor may have. A closed set shared by client, hosts and
// backends; the numeric values are part of the wire format (see wire.proto).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gt {

enum class DType : uint8_t {
  kFloat32 = 0,  // the default, as in PyTorch
  kFloat64 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kBool = 4,
  kCount
};

// Bytes per element.
size_t ElementSize(DType dtype);
// "float32", "float64", "int32", "int64", "bool".
std::string_view DTypeName(DType dtype);
// Inverse of DTypeName; nullopt for anything else.
std::optional<DType> ParseDType(std::string_view name);
bool IsFloatingPoint(DType dtype);
// The type PyTorch promotes a binary op on (a, b) to.
DType PromoteTypes(DType a, DType b);

}  // namespace gt

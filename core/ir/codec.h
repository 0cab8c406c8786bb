// Conversion between gt::Instruction and its wire encoding (wire.proto).
//
// Decoding validates everything a peer could get wrong (unknown op or dtype,
// payload frame out of range) and returns InvalidArgument naming the field;
// it never trusts a count or index from the wire.
#pragma once

#include <vector>

#include "gt/instruction.h"
#include "gt/status.h"
#include "wire.pb.h"

namespace gt {

// Appends `inst` to `out`. If it has a payload, the payload is appended to
// `payloads` and referenced by position.
void EncodeInstruction(const Instruction& inst, wire::Instruction* out, std::vector<BlobPtr>* payloads);

// Decodes one instruction; `payloads` are the data frames of its message.
Result<Instruction> DecodeInstruction(const wire::Instruction& in, const std::vector<BlobPtr>& payloads);

// The error report of op `ref` that failed with `status` on `host`.
wire::OpError MakeOpError(const OpRef& ref, const Status& status, const std::string& host);
Status OpErrorToStatus(const wire::OpError& error);

}  // namespace gt

// Conversion between gt::Instruction and its wire encoding (wire.proto).
//
// Decoding validates everything a peer could get wrong (unknown op or dtype,
// payload frame out of range) and returns InvalidArgument naming the field;
// it never trusts a count or index from the wire.
#pragma once

#include <string>
#include <string_view>
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

// The error report of op `ref` that failed with `status` on `host`. Its
// message is made valid UTF-8 (WireText): a message may quote a peer's bytes,
// and a proto3 string that is not UTF-8 makes the whole envelope unparsable.
wire::OpError MakeOpError(const OpRef& ref, const Status& status, const std::string& host);

// `text` with every byte that is not part of a valid UTF-8 sequence written
// as \xNN: what may go in a wire string field.
std::string WireText(std::string_view text);
Status OpErrorToStatus(const wire::OpError& error);

}  // namespace gt

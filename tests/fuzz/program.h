// The dispatcher target's input format: a client's batch as a byte code in
// which every byte string is a valid program. Each field takes one byte
// (a count, then that many items), read in this order per instruction:
//
//   op        Op value mod (kCount + 1); kCount is an unknown op on the wire
//   flags     bit 0 keepdims; bits 1-2 scalar side (3: unknown on the wire);
//             bit 3 repeat the previous instruction's seq (else seq + 1)
//   signal    mod 4: none, "s1", "s2", "s3"
//   results   count mod 3, then ids; operands: count mod 4, then ids
//   shape     count mod 5, then dims; dtype: DType mod (kCount + 1)
//   axes      count mod 5, then int8 each
//   scalar    one of kValues; seed, sync_id: the byte itself
//   numbers   count mod 4, then kValues entries
//   worker    < 0xf0: -1 (the router chooses); else worker (byte & 3)
//   payload   mod 4: none; bytes (a length byte, then that many); the
//             name of a signal (a signal byte); a unit (inputs mod 8, a
//             count mod 8, then that many instructions, payloads ignored)
//
// An id byte is id (byte mod 32), or kPhysicalIdBase + (byte & 31) from
// 0xe0 up; a dim byte is 0..7 below 0xf0, -1 up to 0xfb, then 2^20, 2^31,
// 2^40, 2^62. Missing bytes read as 0. make_seeds.cc writes programs with
// WriteProgram, the inverse of ReadProgram for values the code can express.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gt/instruction.h"

namespace gt::fuzz {

enum class PayloadKind : uint8_t { kNone = 0, kBytes = 1, kSignalName = 2, kUnit = 3 };

// One instruction of a program, with its payload still unencoded.
struct ProgramOp {
  Instruction inst;  // payload unset; seq assigned by ReadProgram
  bool repeat_seq = false;
  PayloadKind payload = PayloadKind::kNone;
  std::string bytes;               // kBytes; kSignalName: the name
  uint32_t unit_inputs = 0;        // kUnit
  std::vector<ProgramOp> unit;     // kUnit: the template's body (no payloads)
};

// The doubles a scalar or number byte picks from (index = byte mod 16).
extern const double kValues[16];

// At most `max_ops` instructions; stops where the bytes end.
std::vector<ProgramOp> ReadProgram(const uint8_t* data, size_t size, size_t max_ops);
// The instructions a client sends for `program`: seqs from 1, payloads
// encoded (a unit with EncodeUnit).
std::vector<Instruction> ToInstructions(const std::vector<ProgramOp>& program);
// Inverse of ReadProgram. Aborts on a value the byte code cannot express.
std::string WriteProgram(const std::vector<ProgramOp>& program);

}  // namespace gt::fuzz

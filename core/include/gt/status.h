// Status and Result<T>: how every expected failure in gt is reported.
//
// Data-path code (hosts, stages, backends, codecs) never throws for bad input:
// it returns a Status or Result<T> whose message names the input at fault.
// Exceptions stay inside a plugin; the host converts any that escape into
// Code::kPluginError.
//
// Thread-safety: values; safe to copy and move between threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gt {

// A closed set of failure kinds. Also used as the `kind` label of the
// per-stage error counter, so every value must stay bounded and stable.
enum class Code {
  kOk = 0,
  kInvalidArgument,     // malformed message, bad attribute, shape/dtype mismatch
  kNotFound,            // unknown tensor id, unknown plugin, unknown option
  kFailedPrecondition,  // operand produced by an op that failed
  kUnavailable,         // no worker, dead worker, transport down
  kUnimplemented,       // op not supported by this backend, or a stage this host does not run
  kPluginError,         // a plugin threw or broke its contract
  kInternal,            // a bug in gt
  kResourceExhausted,   // a per-client quota: live tensors, in-flight instructions, resident bytes
  kCount
};

// Stable lower-case name of a code ("invalid_argument", ...).
std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", or "ok".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {Code::kFailedPrecondition, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {Code::kUnimplemented, std::move(m)}; }
inline Status PluginError(std::string m) { return {Code::kPluginError, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }

// Either a T or a non-OK Status (std::expected-style; C++20 lacks it).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "Result built from an OK status carries no value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok()
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace gt

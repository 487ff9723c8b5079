// Errors as values: Status and Result<T>.
//
// A Status is either OK or carries a code, a reason and a message. Codes follow the canonical
// gRPC/Abseil codes so the server can map them onto HTTP and gRPC statuses unchanged; the
// reason is flurry's own, finer classification that callers and tests can branch on.
//
// An OK Status holds no allocation: returning OK from the hot path costs one null pointer.
// Status and Result are values; a single instance is not safe for concurrent mutation.
#pragma once

#include <cassert>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace flurry {

// Canonical codes, numerically equal to gRPC's.
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

// Why an operation failed, more precisely than the code. Stable: tests and clients branch on it.
enum class Reason : int {
  kNone = 0,
  kBadInput,             // outside input was malformed (layout text, ID text, options)
  kClockBehind,          // the clock is further behind the last issued time than allowed
  kClockBeforeEpoch,     // the clock reads a time before the layout's epoch
  kTimeExhausted,        // the layout's time field has run out
  kHorizonNotPersisted,  // the horizon could not be made durable in time
  kBatchTooLarge,        // a batch cannot be issued within max_lead
  kShutDown,             // the generator was closed
  kStateMismatch,        // persisted state belongs to another layout or node
  kIo,                   // an I/O operation failed
  kLeaseLost,            // the node ID's lease belongs to another owner now
  kNoFreeNode,           // every node ID of the layout is leased
  kSuspended,            // issuing is paused (e.g. the lease could not be renewed in time)
  kWouldBlock,           // only for callers that asked not to block: the call would have to
                         // sleep or wait for I/O; call again allowing it (e.g. on a worker)
  kRegistryRegressed,    // the registry went backwards: a fencing token or horizon below what
                         // this process saw accepted (a replaced, emptied or restored registry)
};

// Returns the canonical upper-case name, e.g. "INVALID_ARGUMENT".
[[nodiscard]] std::string_view to_string(StatusCode code) noexcept;
// Returns a stable upper-case name, e.g. "CLOCK_BEHIND".
[[nodiscard]] std::string_view to_string(Reason reason) noexcept;

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;  // OK
  Status(StatusCode code, Reason reason, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  [[nodiscard]] bool ok() const noexcept { return rep_ == nullptr; }
  [[nodiscard]] StatusCode code() const noexcept { return rep_ ? rep_->code : StatusCode::kOk; }
  [[nodiscard]] Reason reason() const noexcept { return rep_ ? rep_->reason : Reason::kNone; }
  // Empty for OK.
  [[nodiscard]] const std::string& message() const noexcept;
  // True when the same call may succeed later without any change by the caller
  // (UNAVAILABLE, ABORTED, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED).
  [[nodiscard]] bool retryable() const noexcept;
  // "OK" or "CODE (REASON): message".
  [[nodiscard]] std::string to_string() const;

  // Returns a copy whose message is `prefix + ": " + message()`. OK stays OK.
  [[nodiscard]] Status with_prefix(std::string_view prefix) const;

 private:
  struct Rep {
    StatusCode code;
    Reason reason;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

inline Status OkStatus() noexcept {
  return Status();
}
inline Status InvalidArgument(std::string message) {
  return Status(StatusCode::kInvalidArgument, Reason::kBadInput, std::move(message));
}

// Either a value or a non-OK Status. Constructing a Result from an OK Status is a bug
// (asserted in debug builds, and turned into an INTERNAL error otherwise).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) {
      assert(false && "Result constructed from an OK Status");
      v_ = Status(StatusCode::kInternal, Reason::kNone, "Result constructed from an OK Status");
    }
  }

  [[nodiscard]] bool ok() const noexcept { return std::holds_alternative<T>(v_); }
  // OK when a value is held. The reference lives as long as this Result.
  [[nodiscard]] const Status& status() const noexcept {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }

  // Precondition: ok().
  [[nodiscard]] T& value() & { return std::get<T>(v_); }
  [[nodiscard]] const T& value() const& { return std::get<T>(v_); }
  [[nodiscard]] T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace flurry

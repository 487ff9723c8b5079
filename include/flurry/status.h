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
  kUnauthenticated = 16,
};

// Why an operation failed, more precisely than the code. Stable: tests and clients branch on the
// names (to_string). Each reason is used under exactly one code, its canonical code, written
// beside it and returned by canonical_code(); Status(Reason, message) takes the code from the
// reason, so a reason cannot appear under another code.
enum class Reason : int {
  kNone = 0,  // (any code) no finer reason than the code: Status(StatusCode, message)

  // Input.
  kBadInput,       // INVALID_ARGUMENT: outside input was malformed (layout text, ID text, options,
                   // request parameters, HTTP framing)
  kBatchTooLarge,  // INVALID_ARGUMENT: a batch cannot be issued within max_lead

  // The clock and the layout's time field.
  kClockBehind,       // UNAVAILABLE: the clock is further behind the last issued time than
                      // allowed (retryable: it catches up)
  kClockBeforeEpoch,  // FAILED_PRECONDITION: the clock reads a time before the layout's epoch
  kTimeExhausted,     // FAILED_PRECONDITION: the layout's time field has run out

  // The generator.
  kHorizonNotPersisted,  // UNAVAILABLE: the horizon could not be made durable in time
  kShutDown,             // UNAVAILABLE: the generator or service was closed or is stopping
  kSuspended,            // UNAVAILABLE: issuing is paused (e.g. the lease keeper cannot run)
  kWouldBlock,           // UNAVAILABLE: only for callers that asked not to block: the call would
                         // have to sleep or wait for I/O; call again allowing it (on a worker)

  // Stored state.
  kIo,              // UNAVAILABLE: an I/O operation failed (a file, the registry database)
  kStateMismatch,   // FAILED_PRECONDITION: persisted state belongs to another layout or node
  kCorrupt,         // DATA_LOSS: stored state is unreadable or inconsistent (a torn or edited
                    // file, an impossible registry row); never read as "nothing saved"
  kStoreRegressed,  // UNAVAILABLE: a segment store went below what it handed this host before
                    // (max_id moved down, a restored backup, a tag deleted or re-created);
                    // refused until the store is repaired above that floor (retryable)

  // Node IDs and their leases.
  kNoFreeNode,         // RESOURCE_EXHAUSTED: every node ID of the layout is leased (retryable:
                       // one frees up when a lease expires)
  kLeaseExpiring,      // UNAVAILABLE: the lease was not renewed in time, so issuing is
                       // suspended until a renewal succeeds (retryable)
  kLeaseLost,          // FAILED_PRECONDITION: the node ID's lease belongs to another owner now
                       // (final for that lease: claim a node ID again; is_lease_gone())
  kRegistryRegressed,  // FAILED_PRECONDITION: the registry went backwards: a fencing token or
                       // horizon below what this process saw accepted (a replaced, emptied or
                       // restored registry); final for that lease, like kLeaseLost
  kReclaimingNode,     // UNAVAILABLE: the service's lease is gone for good (kLeaseLost or
                       // kRegistryRegressed, the message says which) and it is claiming a node
                       // ID again (retryable)
  kLeaseLive,          // FAILED_PRECONDITION: an operator's release of a node ID refused because
                       // a live lease holds it (release it by force, which fences the holder)
  kNodeInUse,          // FAILED_PRECONDITION: another process on this host issues as this node
                       // ID under the same layout (host_guard.h); the message names it

  // Credentials (bearer tokens and their scopes, flurry/ops/authorizer.h).
  kTokenMissing,  // UNAUTHENTICATED: HTTP 401, no credential, or not "Bearer <token>"
  kTokenUnknown,  // UNAUTHENTICATED: HTTP 401, a token this server does not accept
  kScopeMissing,  // PERMISSION_DENIED: HTTP 403, the token lacks the scope the call needs, or no
                  // configured token has it

  // HTTP requests the server does not serve (canonical codes as grpc-gateway maps them).
  kMethodNotAllowed,   // UNIMPLEMENTED: HTTP 405, a method other than GET and HEAD
  kExpectationFailed,  // UNIMPLEMENTED: HTTP 417, an Expect other than 100-continue
  kBodyTooLarge,       // RESOURCE_EXHAUSTED: HTTP 413, a body over body_limit
  kHeaderTooLarge,     // RESOURCE_EXHAUSTED: HTTP 431, a header over header_limit
  kResponseBudget,     // RESOURCE_EXHAUSTED: HTTP 503, the responses being built or queued
                       // already hold response_budget bytes (retryable: they drain)

  // The timestamp oracle (flurry/timestamp_oracle.h) and strict segment tags.
  kNotLeader,  // UNAVAILABLE: another process leads the oracle; ask it (HTTP 307 to it, gRPC
               // ErrorInfo metadata leader_http and leader_grpc)
  kNoLeader,   // UNAVAILABLE: no process leads the oracle now (an election or a failover is
               // under way; retryable)
  kTsoOff,     // NOT_FOUND: this server does not run the oracle (flurry serve --tso)
};
// One more than the largest Reason: every value in [0, kReasonCount) is a Reason.
inline constexpr int kReasonCount = static_cast<int>(Reason::kTsoOff) + 1;

// The one code `reason` is used under (see the list above). kNone has none: UNKNOWN.
[[nodiscard]] constexpr StatusCode canonical_code(Reason reason) noexcept {
  switch (reason) {
    case Reason::kNone:
      return StatusCode::kUnknown;
    case Reason::kBadInput:
    case Reason::kBatchTooLarge:
      return StatusCode::kInvalidArgument;
    case Reason::kClockBehind:
    case Reason::kHorizonNotPersisted:
    case Reason::kShutDown:
    case Reason::kSuspended:
    case Reason::kWouldBlock:
    case Reason::kIo:
    case Reason::kLeaseExpiring:
    case Reason::kReclaimingNode:
    case Reason::kStoreRegressed:
    case Reason::kNotLeader:
    case Reason::kNoLeader:
      return StatusCode::kUnavailable;
    case Reason::kTsoOff:
      return StatusCode::kNotFound;
    case Reason::kClockBeforeEpoch:
    case Reason::kTimeExhausted:
    case Reason::kStateMismatch:
    case Reason::kLeaseLost:
    case Reason::kRegistryRegressed:
    case Reason::kLeaseLive:
    case Reason::kNodeInUse:
      return StatusCode::kFailedPrecondition;
    case Reason::kCorrupt:
      return StatusCode::kDataLoss;
    case Reason::kNoFreeNode:
    case Reason::kBodyTooLarge:
    case Reason::kHeaderTooLarge:
    case Reason::kResponseBudget:
      return StatusCode::kResourceExhausted;
    case Reason::kMethodNotAllowed:
    case Reason::kExpectationFailed:
      return StatusCode::kUnimplemented;
    case Reason::kTokenMissing:
    case Reason::kTokenUnknown:
      return StatusCode::kUnauthenticated;
    case Reason::kScopeMissing:
      return StatusCode::kPermissionDenied;
  }
  return StatusCode::kUnknown;
}

// Returns the canonical upper-case name, e.g. "INVALID_ARGUMENT".
[[nodiscard]] std::string_view to_string(StatusCode code) noexcept;
// Returns a stable upper-case name, e.g. "CLOCK_BEHIND".
[[nodiscard]] std::string_view to_string(Reason reason) noexcept;

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;  // OK
  // An error for `reason`, under its canonical code. `reason` must not be kNone (asserted; it
  // becomes UNKNOWN otherwise).
  Status(Reason reason, std::string message);
  // An error without a finer reason (Reason::kNone). kOk makes an OK Status (no message).
  Status(StatusCode code, std::string message);
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
  // (UNAVAILABLE, ABORTED, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED), except a request body or
  // header over its limit (BODY_TOO_LARGE, HEADER_TOO_LARGE: HTTP 413 and 431), which fails
  // again until the caller makes it smaller.
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
  explicit Status(std::unique_ptr<Rep> rep) noexcept : rep_(std::move(rep)) {}
  std::unique_ptr<Rep> rep_;
};

inline Status OkStatus() noexcept {
  return Status();
}
// INVALID_ARGUMENT / BAD_INPUT.
// For log lines: code=... reason=... message="..." (reason= only when there is one; the message
// quoted, at most 1024 bytes).
[[nodiscard]] std::string describe(const Status& status);

inline Status InvalidArgument(std::string message) {
  return Status(Reason::kBadInput, std::move(message));
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
      v_ = Status(StatusCode::kInternal, "Result constructed from an OK Status");
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

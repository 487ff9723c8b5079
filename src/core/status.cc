#include "flurry/status.h"

#include "core/quote.h"

namespace flurry {

std::string_view to_string(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCancelled:
      return "CANCELLED";
    case StatusCode::kUnknown:
      return "UNKNOWN";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kAborted:
      return "ABORTED";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
    case StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

std::string_view to_string(Reason reason) noexcept {
  switch (reason) {
    case Reason::kNone:
      return "NONE";
    case Reason::kBadInput:
      return "BAD_INPUT";
    case Reason::kClockBehind:
      return "CLOCK_BEHIND";
    case Reason::kClockBeforeEpoch:
      return "CLOCK_BEFORE_EPOCH";
    case Reason::kTimeExhausted:
      return "TIME_EXHAUSTED";
    case Reason::kHorizonNotPersisted:
      return "HORIZON_NOT_PERSISTED";
    case Reason::kBatchTooLarge:
      return "BATCH_TOO_LARGE";
    case Reason::kShutDown:
      return "SHUT_DOWN";
    case Reason::kWouldBlock:
      return "WOULD_BLOCK";
    case Reason::kRegistryRegressed:
      return "REGISTRY_REGRESSED";
    case Reason::kStateMismatch:
      return "STATE_MISMATCH";
    case Reason::kCorrupt:
      return "CORRUPT";
    case Reason::kStoreRegressed:
      return "STORE_REGRESSED";
    case Reason::kIo:
      return "IO";
    case Reason::kLeaseExpiring:
      return "LEASE_EXPIRING";
    case Reason::kLeaseLost:
      return "LEASE_LOST";
    case Reason::kReclaimingNode:
      return "RECLAIMING_NODE";
    case Reason::kLeaseLive:
      return "LEASE_LIVE";
    case Reason::kNotLeader:
      return "NOT_LEADER";
    case Reason::kNoLeader:
      return "NO_LEADER";
    case Reason::kTsoOff:
      return "TSO_OFF";
    case Reason::kNodeInUse:
      return "NODE_IN_USE";
    case Reason::kNoFreeNode:
      return "NO_FREE_NODE";
    case Reason::kSuspended:
      return "SUSPENDED";
    case Reason::kTokenMissing:
      return "TOKEN_MISSING";
    case Reason::kTokenUnknown:
      return "TOKEN_UNKNOWN";
    case Reason::kScopeMissing:
      return "SCOPE_MISSING";
    case Reason::kMethodNotAllowed:
      return "METHOD_NOT_ALLOWED";
    case Reason::kExpectationFailed:
      return "EXPECTATION_FAILED";
    case Reason::kBodyTooLarge:
      return "BODY_TOO_LARGE";
    case Reason::kHeaderTooLarge:
      return "HEADER_TOO_LARGE";
    case Reason::kResponseBudget:
      return "RESPONSE_BUDGET";
  }
  return "NONE";
}

Status::Status(Reason reason, std::string message)
    : rep_(std::make_unique<Rep>(Rep{canonical_code(reason), reason, std::move(message)})) {
  assert(reason != Reason::kNone && "Status(Reason, message) needs a reason");
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) {
    rep_ = std::make_unique<Rep>(Rep{code, Reason::kNone, std::move(message)});
  }
}

Status::Status(const Status& other)
    : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
  return *this;
}

const std::string& Status::message() const noexcept {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

// The one retry classification of the project: the transports' retry advice (HTTP's
// Retry-After, gRPC's retry delay: flurry/ops/retry.h) derives from it. CANCELLED is not
// retryable: it says the caller went away (the server's: the client cancelled the call or its
// stream broke; a client's: the call was aborted or the client closed, which the same call cannot
// undo), so there is no one to retry for.
bool Status::retryable() const noexcept {
  // Resending the same oversized request fails the same way.
  if (reason() == Reason::kBodyTooLarge || reason() == Reason::kHeaderTooLarge) return false;
  switch (code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kAborted:
    case StatusCode::kResourceExhausted:
    case StatusCode::kDeadlineExceeded:
      return true;
    case StatusCode::kCancelled:  // the caller went away: no one to retry for
    default:
      return false;
  }
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  std::string out(flurry::to_string(code()));
  if (reason() != Reason::kNone) {
    out += " (";
    out += flurry::to_string(reason());
    out += ")";
  }
  out += ": ";
  out += message();
  return out;
}

Status Status::with_prefix(std::string_view prefix) const {
  if (ok()) return Status();
  return Status(
      std::make_unique<Rep>(Rep{code(), reason(), std::string(prefix) + ": " + message()}));
}

std::string describe(const Status& status) {
  std::string out = "code=" + std::string(to_string(status.code()));
  if (status.reason() != Reason::kNone) out += " reason=" + std::string(to_string(status.reason()));
  return out + " message=" + internal::quote(status.message(), 1024);
}

}  // namespace flurry

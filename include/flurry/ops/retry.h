// Whether a failure tells the caller to try again, and after how long: the one table both
// transports read (HTTP's Retry-After header, gRPC's retry delay).
#pragma once

#include <chrono>

#include "flurry/status.h"

namespace flurry::ops {

struct RetryAdvice {
  bool retry = false;             // the same request may succeed later, unchanged
  std::chrono::seconds after{0};  // how long to wait first (when retry)
};

// Retry after 1 s: UNAVAILABLE, ABORTED, DEADLINE_EXCEEDED, CANCELLED, and RESOURCE_EXHAUSTED
// except BODY_TOO_LARGE and HEADER_TOO_LARGE (the same request would be refused again). No retry
// for anything else, OK included: FAILED_PRECONDITION (TIME_EXHAUSTED, LEASE_LOST, ...) says the
// node cannot serve, and waiting on it does not help.
[[nodiscard]] RetryAdvice retry_advice(const Status& status) noexcept;

}  // namespace flurry::ops

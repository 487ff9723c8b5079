// Whether a failure tells the caller to try again, and after how long: the advice both transports
// read (HTTP's Retry-After header, gRPC's retry delay). Whether is not decided here: it is
// Status::retryable() (flurry/status.h), the one retry classification of the project; this adds
// only how long to wait.
#pragma once

#include <chrono>

#include "flurry/status.h"

namespace flurry::ops {

struct RetryAdvice {
  bool retry = false;             // the same request may succeed later, unchanged
  std::chrono::seconds after{0};  // how long to wait first (when retry)
};

// How long a retryable failure asks the caller to wait first.
inline constexpr std::chrono::seconds kRetryAfter{1};

// Retry after kRetryAfter when status.retryable(); no retry otherwise (OK included).
// Thread-safe (a pure function).
[[nodiscard]] RetryAdvice retry_advice(const Status& status) noexcept;

}  // namespace flurry::ops

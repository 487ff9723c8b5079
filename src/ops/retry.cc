#include "ops/retry.h"

namespace flurry::ops {

RetryAdvice retry_advice(const Status& status) noexcept {
  if (!status.retryable()) return {};
  return {true, kRetryAfter};
}

}  // namespace flurry::ops

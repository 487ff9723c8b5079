#include "flurry/ops/retry.h"

namespace flurry::ops {

RetryAdvice retry_advice(const Status& status) noexcept {
  constexpr RetryAdvice kLater{true, std::chrono::seconds(1)};
  switch (status.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kAborted:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kCancelled:
      return kLater;
    case StatusCode::kResourceExhausted:
      // A body or header over its limit is refused again however long the caller waits.
      if (status.reason() == Reason::kBodyTooLarge || status.reason() == Reason::kHeaderTooLarge) {
        return {};
      }
      return kLater;
    default:
      return {};
  }
}

}  // namespace flurry::ops

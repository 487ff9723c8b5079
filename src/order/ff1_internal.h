// Internal: test access to FF1's two arithmetic paths. The unit tests check that the big-number
// path (used for long strings) agrees with the 64/128-bit path on every length both can run.
#pragma once

#include <cstdint>
#include <span>

#include "flurry/ff1.h"
#include "flurry/status.h"

namespace flurry::internal {

struct Ff1Access {
  // Ff1::encrypt (encrypt = true) or decrypt, on the big-number path even where the 64-bit path
  // would run.
  [[nodiscard]] static Status crypt_bignum(const Ff1& ff1, std::span<const std::uint8_t> in,
                                           std::span<std::uint8_t> out,
                                           std::span<const std::uint8_t> tweak, bool encrypt);
};

}  // namespace flurry::internal

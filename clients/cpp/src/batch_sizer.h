// The C++ client's refill sizes (docs/clients.md, "Snowflake IDs: the prefetch buffer"): doubled
// while batches run low, halved when IDs expire. Not thread-safe (the client uses it under its
// refill lock).
#pragma once

#include <cstdint>

namespace flurry::client_internal {

// Batch sizing: the refill sizes between min_batch and min(max_batch, server_max_batch).
class BatchSizer {
 public:
  BatchSizer(std::uint32_t min_batch, std::uint32_t max_batch, std::uint32_t server_max_batch);
  // The first refill: the smallest size.
  [[nodiscard]] std::uint32_t first() noexcept { return size_ = lo_; }
  // The previous batch ran low without expiring: double.
  [[nodiscard]] std::uint32_t low() noexcept;
  // IDs were dropped for age since the previous refill: halve.
  [[nodiscard]] std::uint32_t expired() noexcept;
  [[nodiscard]] std::uint32_t largest() const noexcept { return hi_; }

 private:
  std::uint32_t lo_;
  std::uint32_t hi_;
  std::uint32_t size_;
};

}  // namespace flurry::client_internal

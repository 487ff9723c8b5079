#include "batch_sizer.h"

#include <algorithm>

namespace flurry::client_internal {

BatchSizer::BatchSizer(std::uint32_t min_batch, std::uint32_t max_batch,
                       std::uint32_t server_max_batch)
    : lo_(std::min(min_batch, std::min(max_batch, server_max_batch))),
      hi_(std::min(max_batch, server_max_batch)),
      size_(lo_) {}

std::uint32_t BatchSizer::low() noexcept {
  size_ = static_cast<std::uint32_t>(std::min<std::uint64_t>(std::uint64_t{size_} * 2, hi_));
  return size_;
}

std::uint32_t BatchSizer::expired() noexcept {
  size_ = std::max(size_ / 2, lo_);
  return size_;
}

}  // namespace flurry::client_internal

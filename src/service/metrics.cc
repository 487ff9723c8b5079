#include "service/metrics.h"

namespace flurry::service {
namespace {

std::atomic<std::size_t> next_slot{0};

}  // namespace

std::size_t this_thread_shard() noexcept {
  thread_local const std::size_t slot =
      next_slot.fetch_add(1, std::memory_order_relaxed) % kCounterShards;
  return slot;
}

std::uint64_t ShardedCounter::total() const noexcept {
  std::uint64_t n = 0;
  for (const Shard& s : shards_) n += s.n.load(std::memory_order_relaxed);
  return n;
}

}  // namespace flurry::service

// Counting on the request path without a shared lock: the service counts the IDs it issues here,
// and the transports build their per-route and per-method counters on the same sharding.
//
// Counters live in cache-line-aligned shards; each thread adds to the shard its thread-local slot
// picks, with relaxed atomic adds, so there is no shared lock and (with as many shards as
// threads) no shared cache line on the request path. Reading sums the shards.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace flurry::service {

// How many shards a sharded counter keeps.
inline constexpr std::size_t kCounterShards = 16;

// The calling thread's shard, 0 <= n < kCounterShards: fixed for the thread's life, handed out
// round-robin as threads first ask. Thread-safe.
[[nodiscard]] std::size_t this_thread_shard() noexcept;

// One monotonic count many threads add to at once. Thread-safe; add() is lock-free.
class ShardedCounter {
 public:
  ShardedCounter() = default;
  ShardedCounter(const ShardedCounter&) = delete;
  ShardedCounter& operator=(const ShardedCounter&) = delete;

  void add(std::uint64_t n) noexcept {
    shards_[this_thread_shard()].n.fetch_add(n, std::memory_order_relaxed);
  }
  // The sum of every add() so far (relaxed: an add() racing with it may or may not be in).
  [[nodiscard]] std::uint64_t total() const noexcept;

 private:
  struct alignas(64) Shard {
    std::atomic<std::uint64_t> n{0};
  };
  std::array<Shard, kCounterShards> shards_{};
};

}  // namespace flurry::service

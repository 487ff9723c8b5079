// The textbook snowflake: Twitter's 2010 IdWorker as it is reimplemented everywhere. It is the
// reference that flurry's generator is measured beside (bench/generator_bench.cc and
// `flurry bench --reference`), never a way to issue IDs: it has none of flurry's guarantees
// (a clock that steps back makes it refuse, a restart within the same millisecond repeats IDs).
//
// One mutex; every call reads the fine realtime clock in milliseconds; within the same
// millisecond it increments the sequence and, when the sequence wraps, spins re-reading the
// clock until the next millisecond. Thread-safe.
#pragma once

#include <time.h>

#include <cstdint>

#include "flurry/mutex.h"

namespace flurry::reference {

class TextbookSnowflake {
 public:
  static constexpr std::int64_t kEpochMs = 1'735'689'600'000;  // 2025-01-01T00:00:00Z

  // IDs are (ms - epoch) << (node_bits + seq_bits) | node << seq_bits | seq. node_bits + seq_bits
  // must be below 63; node must fit node_bits.
  TextbookSnowflake(int node_bits, int seq_bits, std::uint64_t node) noexcept
      : seq_bits_(seq_bits),
        time_shift_(node_bits + seq_bits),
        seq_mask_((std::uint64_t{1} << seq_bits) - 1),
        node_part_(node << seq_bits) {}

  // False when the clock moved backwards (nothing issued).
  bool next(std::uint64_t& id) {
    flurry::MutexLock lock(mu_);
    std::int64_t ms = now_ms();
    if (ms < last_ms_) return false;
    if (ms == last_ms_) {
      seq_ = (seq_ + 1) & seq_mask_;
      if (seq_ == 0) {
        while ((ms = now_ms()) <= last_ms_) {
        }
      }
    } else {
      seq_ = 0;
    }
    last_ms_ = ms;
    id = static_cast<std::uint64_t>(ms - kEpochMs) << time_shift_ | node_part_ | seq_;
    return true;
  }

  [[nodiscard]] int seq_bits() const noexcept { return seq_bits_; }

 private:
  static std::int64_t now_ms() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
  }

  flurry::Mutex mu_;
  const int seq_bits_;
  const int time_shift_;
  const std::uint64_t seq_mask_;
  const std::uint64_t node_part_;
  std::int64_t last_ms_ FLURRY_GUARDED_BY(mu_) = -1;
  std::uint64_t seq_ FLURRY_GUARDED_BY(mu_) = 0;
};

}  // namespace flurry::reference

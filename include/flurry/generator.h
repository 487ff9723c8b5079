// The snowflake generator: lock-free, batch-reserving, honest about time, restart-safe.
//
// State is one atomic word holding the next (generation, tick, seq) to issue, packed as one
// integer so that "seq overflow borrows the next tick" is plain addition. Issuing n IDs is one
// compare-and-swap that reserves the contiguous range [max(next, now), +n). No mutex and no I/O
// on that path. The slow paths may sleep (throttling, a clock wait) or write the store
// (extending the durable horizon, a clock-generation switch); a caller that must not block (an
// event loop) passes Blocking::kNever and is told WOULD_BLOCK instead. health(), stats(),
// suspend() and resume() never wait for a store write in progress.
//
// Guarantees (see docs/design.md, "The guarantees"):
//  * Unique: no (generation, tick, node, seq) is issued twice by generators sharing a
//    HorizonStore, one after the other, whatever the clock does.
//  * Monotonic: IDs strictly increase, across restarts too. The one exception is the `clock`
//    rollback policy, which trades monotonicity for availability by design: after a large step
//    back it continues at the current time under another clock generation.
//  * Honest time: an ID's time field is never more than max_lead ahead of the clock.
//  * Fail closed: when uniqueness cannot be proven the call fails with a typed Status; it never
//    returns a guess.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <thread>

#include "flurry/clock.h"
#include "flurry/horizon.h"
#include "flurry/layout.h"
#include "flurry/mutex.h"
#include "flurry/status.h"

namespace flurry {

// What to do when the clock is further behind the last issued time than max_lead.
enum class RollbackPolicy {
  kWait,   // sleep until the clock catches up, at most max_wait; fail at once if it would be longer
  kFail,   // fail at once (UNAVAILABLE, CLOCK_BEHIND)
  kClock,  // layouts with a clock field: continue at the current time in another clock
           // generation whose high-water mark lies below it (docs/design.md, "When the clock steps
           // back")
};

// Whether a call may sleep or wait for the HorizonStore.
enum class Blocking {
  kAllowed,  // sleep through throttling and clock waits, write the horizon inline when needed
  kNever,    // never: fail with UNAVAILABLE / WOULD_BLOCK instead, having issued nothing, so the
             // caller can call again with kAllowed where blocking does no harm (a worker thread)
};

// "wait", "fail", "clock".
[[nodiscard]] Result<RollbackPolicy> parse_rollback_policy(std::string_view text);
[[nodiscard]] std::string_view to_string(RollbackPolicy policy) noexcept;

struct GeneratorOptions {
  // The node ID: the node fields' values concatenated (see IdParts). Must be < node_count().
  std::uint64_t node = 0;
  // How far the time field may run ahead of the clock. Absorbs small clock steps backwards and
  // bursts above the rate limit. Measured in whole layout units (rounded down).
  Nanos max_lead = std::chrono::seconds(1);
  RollbackPolicy rollback = RollbackPolicy::kWait;
  // Longest a single call sleeps under RollbackPolicy::kWait.
  Nanos max_wait = std::chrono::seconds(3);
  // How far ahead of max(now, last issued) the durable horizon is kept. A crash costs a restart
  // at most this much waiting (or a clock-generation switch). Must be greater than max_lead.
  Nanos horizon_window = std::chrono::seconds(2);
  // Run a thread that extends the horizon every horizon_window/4 so the hot path never waits
  // for the store. Without it the horizon is extended inside the call that reaches it (and by
  // maintain()).
  bool background_horizon = true;
};

// Counters of slow-path events (the fast path counts nothing). Monotonic over the generator's
// life.
struct GeneratorStats {
  std::uint64_t throttle_waits = 0;      // calls that slept because demand exceeded the rate
  std::uint64_t rollback_waits = 0;      // calls that slept for a clock step back (policy wait)
  std::uint64_t rollback_failures = 0;   // calls refused for a clock step back
  std::uint64_t clock_switches = 0;      // clock generations switched to (policy clock)
  std::uint64_t horizon_saves = 0;       // successful horizon writes
  std::uint64_t horizon_failures = 0;    // failed horizon writes
  std::int64_t lead_ticks = 0;           // next tick to issue minus the clock's tick, now
  std::int64_t horizon_ahead_ticks = 0;  // durable horizon minus the clock's tick, now
  std::uint64_t generation = 0;          // the clock generation in use
};

class Generator {
 public:
  // The checks create() makes of `options` before it touches anything: node in range,
  // max_lead and max_wait not negative, kClock only with a clock field, horizon_window greater
  // than max_lead by at least one unit of the layout. INVALID_ARGUMENT saying which.
  [[nodiscard]] static Status check_options(const Layout& layout, const GeneratorOptions& options);

  // Validates the options against the layout (node range, window > max_lead, kClock only with
  // a clock field, a live layout), loads the store's record (refusing one written for another
  // layout or node: FAILED_PRECONDITION, STATE_MISMATCH) and positions the generator above it.
  // RESOURCE_EXHAUSTED when the background_horizon thread cannot be created (the system's
  // reason in the message); nothing is thrown. `clock` and `store` must outlive the generator.
  [[nodiscard]] static Result<std::unique_ptr<Generator>> create(Layout layout,
                                                                 GeneratorOptions options,
                                                                 Clock& clock, HorizonStore& store);

  // Calls close(); its status is lost, so call close() yourself to see it.
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // One ID. Thread-safe and lock-free unless a slow path is needed. Errors:
  //   UNAVAILABLE / CLOCK_BEHIND            clock too far back (per policy), retryable
  //   UNAVAILABLE / HORIZON_NOT_PERSISTED   the store failed, retryable
  //   FAILED_PRECONDITION / the store's reason   the store refused for good (LEASE_LOST,
  //                                         REGISTRY_REGRESSED, STATE_MISMATCH): passed through
  //   FAILED_PRECONDITION / TIME_EXHAUSTED  the layout's time field has run out
  //   FAILED_PRECONDITION / CLOCK_BEFORE_EPOCH
  //   UNAVAILABLE / SHUT_DOWN               after close()
  //   UNAVAILABLE / WOULD_BLOCK             only with Blocking::kNever
  // and the suspension status given to suspend().
  [[nodiscard]] Result<std::uint64_t> next(Blocking blocking = Blocking::kAllowed);

  // Fills `out` with out.size() IDs reserved in one step: contiguous in (tick, seq) space and
  // increasing. Same errors as next(), plus INVALID_ARGUMENT / BATCH_TOO_LARGE when
  // out.size() > max_batch(). On error nothing was issued and `out` is unspecified.
  [[nodiscard]] Status next_batch(std::span<std::uint64_t> out,
                                  Blocking blocking = Blocking::kAllowed);

  // Reserves `count` IDs in one step, as next_batch() does, and returns the first. For a layout
  // with only time above seq and seq in the lowest bits (no node or clock field: the `tso`
  // preset) they are the consecutive integers first..first+count-1, so nothing is written out.
  // FAILED_PRECONDITION for any other layout; otherwise next_batch()'s errors.
  [[nodiscard]] Result<std::uint64_t> next_range(std::uint64_t count,
                                                 Blocking blocking = Blocking::kAllowed);

  // The largest batch that fits within max_lead: (max_lead_ticks + 1) * 2^seq_bits.
  [[nodiscard]] std::uint64_t max_batch() const noexcept { return max_batch_; }

  // Extends the durable horizon when less than half a window is left. Called by the background
  // thread; call it yourself when background_horizon is false. Returns the store's error.
  [[nodiscard]] Status maintain();

  // OK while the generator can prove uniqueness now: not closed, the last horizon write
  // succeeded, and the clock is within max_lead of the last issued time.
  [[nodiscard]] Status health() const;

  [[nodiscard]] GeneratorStats stats() const;

  // Pauses issuing: until resume(), calls fail with `why` (which must not be OK) and health()
  // reports it, and the horizon is not extended. For a lease keeper that can no longer prove the
  // node ID is still this process's. A reservation already past its checks may still complete.
  void suspend(Status why);
  // Undoes suspend(). No effect when not suspended.
  void resume();

  // Stops issuing (later calls fail with SHUT_DOWN), stops the background thread and saves the
  // horizon tightly at the last issued tick, so a clean restart need not wait. Idempotent.
  [[nodiscard]] Status close();

  [[nodiscard]] const Layout& layout() const noexcept { return layout_; }
  [[nodiscard]] const GeneratorOptions& options() const noexcept { return options_; }

 private:
  Generator(Layout layout, GeneratorOptions options, Clock& clock, HorizonStore& store);

  // Packed state: generation << gen_shift_ | tick << seq_bits_ | seq.
  [[nodiscard]] std::uint64_t pack(std::uint64_t gen, std::uint64_t tick) const noexcept {
    return gen << gen_shift_ | tick << seq_bits_;
  }
  [[nodiscard]] std::int64_t tick_of(std::uint64_t packed) const noexcept {
    return static_cast<std::int64_t>((packed >> seq_bits_) & tick_mask_);
  }
  [[nodiscard]] std::uint64_t gen_of(std::uint64_t packed) const noexcept {
    return packed >> gen_shift_;
  }
  [[nodiscard]] std::int64_t now_ticks() const noexcept;
  // The tick of the last ID issued before `next` in its generation, or -1.
  [[nodiscard]] std::int64_t last_issued_tick(std::uint64_t next) const noexcept;

  // next() when reserve_one_fast() declined.
  [[nodiscard]] Result<std::uint64_t> next_slow(Blocking blocking);
  // Reserves one ID with a fetch_add when the state is far from every limit; false when
  // reserve() must decide (nothing was issued then).
  [[nodiscard]] bool reserve_one_fast(std::uint64_t& packed) noexcept;
  // Reserves n IDs; on success `first` is the packed value of the first one.
  [[nodiscard]] Status reserve(std::uint64_t n, std::uint64_t& first, Blocking blocking);
  void emit(std::uint64_t first, std::span<std::uint64_t> out) const noexcept;
  // The ID for one packed (generation, tick, seq) value.
  [[nodiscard]] std::uint64_t compose(std::uint64_t packed) const noexcept {
    return static_cast<std::uint64_t>(tick_of(packed)) << time_shift_ |
           gen_of(packed) << clock_shift_ | node_bits_in_id_ | (packed & seq_mask_) << seq_shift_;
  }

  // Slow paths; each returns OK when the caller should retry the reservation.
  [[nodiscard]] Status on_clock_behind(std::uint64_t cur, std::int64_t now, Blocking blocking);
  [[nodiscard]] Status on_throttle(std::uint64_t last, Blocking blocking);
  [[nodiscard]] Status on_horizon(std::uint64_t last, Blocking blocking);
  // The suspension or closed status, or OK. Takes state_mu_.
  [[nodiscard]] Status stopped_status() const FLURRY_EXCLUDES(state_mu_);
  [[nodiscard]] Status switch_generation_locked(std::uint64_t cur) FLURRY_REQUIRES(mu_);
  [[nodiscard]] Status save_locked(const HorizonRecord& record) FLURRY_REQUIRES(mu_)
      FLURRY_EXCLUDES(state_mu_);
  [[nodiscard]] Status extend_locked(std::int64_t from_tick) FLURRY_REQUIRES(mu_)
      FLURRY_EXCLUDES(state_mu_);
  // Points horizon_ at view_horizon_ (nowhere while closed or suspended).
  void publish_horizon_locked() FLURRY_REQUIRES(state_mu_);
  void background_loop() FLURRY_EXCLUDES(bg_mu_);

  const Layout layout_;
  const GeneratorOptions options_;
  Clock& clock_;
  // clock_ when it is the system clock, read without an indirect call; null otherwise.
  const SystemClock* const system_clock_;
  HorizonStore& store_;

  // Derived once from the layout and options.
  int seq_bits_ = 0;
  int gen_shift_ = 0;
  std::uint64_t tick_mask_ = 0;
  std::uint64_t seq_mask_ = 0;
  std::int64_t max_tick_ = 0;  // last tick the time field can hold
  std::int64_t max_lead_ticks_ = 0;
  std::int64_t window_ticks_ = 0;
  std::uint64_t max_batch_ = 0;
  std::uint64_t node_bits_in_id_ = 0;  // the node ID spread over its fields
  int time_shift_ = 0;
  int seq_shift_ = 0;
  int clock_shift_ = 0;

  // next_ from close() on. Packed states use at most 62 bits, and fetch_adds after close() only
  // move next_ further up, so every value from here on reads as closed.
  static constexpr std::uint64_t kClosed = std::uint64_t{1} << 63;
  [[nodiscard]] static bool is_closed(std::uint64_t packed) noexcept { return packed >= kClosed; }
  // What reserve_one_fast() needs left below every limit before it adds to next_: more than the
  // threads that can be between their check and their fetch_add at once (Linux runs at most
  // 2^22 threads), so those can never push next_ past a limit.
  static constexpr std::uint64_t kFastHeadroom = std::uint64_t{1} << 22;
  // The values at the end of each generation that reserve() never issues: kFastHeadroom when
  // reserve_one_fast() can run for this layout and max_lead, else 0 (reserve_one_fast()).
  std::uint64_t tail_reserve_ = 0;
  alignas(64) std::atomic<std::uint64_t> next_{0};
  // Highest packed value that may be issued: pack(gen, horizon_tick) | seq_mask. Zero-width
  // reservations never pass it for another generation (checked on the generation bits).
  alignas(64) std::atomic<std::uint64_t> horizon_{0};

  // Serializes the slow paths that write the store; held during that I/O.
  alignas(64) mutable Mutex mu_;
  HorizonRecord record_ FLURRY_GUARDED_BY(mu_);  // what the store holds

  // Short critical sections only, never held during I/O or a sleep, so that health(), stats(),
  // suspend() and resume() answer at once whatever the store is doing.
  mutable Mutex state_mu_;
  Status persist_error_ FLURRY_GUARDED_BY(state_mu_);  // last save error, OK after a success
  Status suspended_ FLURRY_GUARDED_BY(state_mu_);      // why issuing is paused, OK when not
  // record_.generation, as last saved
  std::uint64_t view_generation_ FLURRY_GUARDED_BY(state_mu_) = 0;
  // record_'s horizon in that generation
  std::int64_t view_horizon_ FLURRY_GUARDED_BY(state_mu_) = -1;
  std::atomic<bool> closed_{false};

  std::atomic<std::uint64_t> throttle_waits_{0};
  std::atomic<std::uint64_t> rollback_waits_{0};
  std::atomic<std::uint64_t> rollback_failures_{0};
  std::atomic<std::uint64_t> clock_switches_{0};
  std::atomic<std::uint64_t> horizon_saves_{0};
  std::atomic<std::uint64_t> horizon_failures_{0};

  Mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool bg_stop_ FLURRY_GUARDED_BY(bg_mu_) = false;
  std::thread bg_;
};

}  // namespace flurry

#include "flurry/generator.h"

#include <algorithm>
#include <string>
#include <system_error>

#include "core/numbers.h"
#include "flurry/timefmt.h"

namespace flurry {
namespace {

// A horizon value that no reservation passes: its generation bits match no real generation
// (packed states use at most 62 bits).
constexpr std::uint64_t kNoHorizon = ~std::uint64_t{0};

Status closed_status() {
  return Status(Reason::kShutDown, "the generator is closed");
}

Status would_block(std::string_view what) {
  return Status(Reason::kWouldBlock,
                "issuing needs to " + std::string(what) + "; call again allowing it to block");
}

}  // namespace

Result<RollbackPolicy> parse_rollback_policy(std::string_view text) {
  if (text == "wait") return RollbackPolicy::kWait;
  if (text == "fail") return RollbackPolicy::kFail;
  if (text == "clock") return RollbackPolicy::kClock;
  return InvalidArgument("bad rollback policy \"" + std::string(text) +
                         "\": use wait, fail or clock");
}

std::string_view to_string(RollbackPolicy policy) noexcept {
  switch (policy) {
    case RollbackPolicy::kWait:
      return "wait";
    case RollbackPolicy::kFail:
      return "fail";
    case RollbackPolicy::kClock:
      return "clock";
  }
  return "wait";
}

Generator::Generator(Layout layout, GeneratorOptions options, Clock& clock, HorizonStore& store)
    : layout_(std::move(layout)),
      options_(options),
      clock_(clock),
      system_clock_(dynamic_cast<const SystemClock*>(&clock)),
      store_(store) {
  const int time_bits = layout_.time_field().bits;
  seq_bits_ = layout_.seq_field().bits;
  gen_shift_ = seq_bits_ + time_bits;
  tick_mask_ = (std::uint64_t{1} << time_bits) - 1;
  seq_mask_ = (std::uint64_t{1} << seq_bits_) - 1;
  max_tick_ = static_cast<std::int64_t>(tick_mask_);
  max_lead_ticks_ = options_.max_lead / layout_.unit();
  window_ticks_ = options_.horizon_window / layout_.unit();
  // (max_lead_ticks + 1) whole ticks of sequence, capped well inside 64 bits.
  const int lead_bits = std::min(62 - seq_bits_, 40);
  const std::uint64_t lead_ticks = std::min<std::uint64_t>(
      static_cast<std::uint64_t>(max_lead_ticks_) + 1, std::uint64_t{1} << lead_bits);
  max_batch_ = lead_ticks << seq_bits_;
  // reserve_one_fast() runs only with kFastHeadroom values below the max_lead limit, so only
  // when max_lead spans more than that.
  if (lead_ticks << seq_bits_ > kFastHeadroom) tail_reserve_ = kFastHeadroom;
  time_shift_ = layout_.time_field().shift;
  seq_shift_ = layout_.seq_field().shift;
  clock_shift_ = layout_.clock_field() ? layout_.clock_field()->shift : 0;
  IdParts parts;
  parts.node = options_.node;
  node_bits_in_id_ = layout_.compose(parts).value();  // node range checked by create()
}

Status Generator::check_options(const Layout& layout, const GeneratorOptions& options) {
  if (options.node >= layout.node_count()) {
    return InvalidArgument("node " + std::to_string(options.node) +
                           " is out of range: this layout has node IDs 0-" +
                           std::to_string(layout.node_count() - 1));
  }
  if (options.max_lead < Nanos(0) || options.max_wait < Nanos(0)) {
    return InvalidArgument("max_lead and max_wait must not be negative");
  }
  if (options.rollback == RollbackPolicy::kClock && layout.clock_field() == nullptr) {
    return InvalidArgument(
        "rollback policy \"clock\" needs a layout with a clock field (e.g. "
        "the multiclock preset)");
  }
  if (options.horizon_window / layout.unit() <= options.max_lead / layout.unit()) {
    return InvalidArgument("horizon_window (" + internal::millis_text(options.horizon_window) +
                           ") must exceed max_lead (" + internal::millis_text(options.max_lead) +
                           ") by at least one time unit of the layout");
  }
  return OkStatus();
}

Result<std::unique_ptr<Generator>> Generator::create(Layout layout, GeneratorOptions options,
                                                     Clock& clock, HorizonStore& store) {
  if (Status st = check_options(layout, options); !st.ok()) return st;
  if (Status alive = layout.check_alive(clock.now()); !alive.ok()) return alive;

  std::unique_ptr<Generator> g(new Generator(std::move(layout), options, clock, store));
  g->closed_ = true;  // until positioned: a failed create() must not save anything on destruction
  const std::string layout_text = g->layout_.to_string();
  const std::uint64_t generations = g->layout_.clock_generations();

  // The record is set in g->record_ under mu_ below, once it is known to be usable.
  HorizonRecord initial;
  Result<HorizonRecord> loaded = store.load();
  if (loaded.ok()) {
    // Layouts compare by structure: a record of `worker:10` is one of `node:10`.
    if (!Layout::same_structure(loaded->layout, layout_text) || loaded->node != options.node ||
        loaded->horizons.size() != generations) {
      return Status(Reason::kStateMismatch,
                    "the horizon in " + store.describe() + " was written for node " +
                        std::to_string(loaded->node) + " with layout \"" + loaded->layout +
                        "\", not node " + std::to_string(options.node) + " with \"" + layout_text +
                        "\"; IDs of the two could collide, so use another state directory");
    }
    initial = std::move(loaded).value();
  } else if (loaded.status().code() == StatusCode::kNotFound) {
    initial =
        HorizonRecord{layout_text, options.node, 0, std::vector<std::int64_t>(generations, -1)};
  } else {
    return loaded.status().with_prefix("cannot read the horizon");
  }

  const std::uint64_t gen = initial.generation;
  const std::int64_t persisted = initial.horizons[gen];
  if (persisted >= g->max_tick_) {
    return Status(Reason::kTimeExhausted, "the persisted horizon in " + store.describe() +
                                              " has reached the end of the layout's time field");
  }
  const std::int64_t now = g->now_ticks();
  const std::int64_t start = std::max({now, persisted + 1, std::int64_t{0}});
  g->next_.store(g->pack(gen, static_cast<std::uint64_t>(start)), std::memory_order_release);
  {
    MutexLock lock(g->mu_);
    g->record_ = std::move(initial);
    {
      MutexLock state(g->state_mu_);
      g->closed_ = false;
      g->view_generation_ = gen;
      g->view_horizon_ = persisted;
      g->publish_horizon_locked();
    }
    // Make the first calls fast, unless the clock is behind (then the rollback policy decides,
    // and pushing the horizon further ahead would only make it worse).
    if (start - now <= g->max_lead_ticks_ + 1) {
      if (Status st = g->extend_locked(start); !st.ok()) {
        g->closed_ = true;
        return st;
      }
    }
  }
  if (options.background_horizon) {
    try {
      g->bg_ = std::thread([p = g.get()] { p->background_loop(); });
    } catch (const std::system_error& e) {
      // Nothing was issued: close() saves the horizon tight below the first tick this generator
      // would have issued (it was just extended a window ahead), so the next start need not wait.
      const Status closed = g->close();
      return Status(StatusCode::kResourceExhausted,
                    "cannot start the background horizon thread: " + std::string(e.what()) +
                        (closed.ok() ? std::string()
                                     : "; the horizon was not saved back: " + closed.message()));
    }
  }
  return g;
}

Generator::~Generator() {
  (void)close();
}

std::int64_t Generator::last_issued_tick(std::uint64_t next) const noexcept {
  const std::uint64_t offset = next - (gen_of(next) << gen_shift_);
  if (offset == 0) return -1;
  return static_cast<std::int64_t>((offset - 1) >> seq_bits_);
}

// Inline: it is on the hot path.
inline std::int64_t Generator::now_ticks() const noexcept {
  // SystemClock is final and its now() inline: a direct clock_gettime, no indirect call. Any
  // other clock (the tests' fakes among them) is asked through the interface.
  return layout_.ticks_at(system_clock_ != nullptr ? system_clock_->now() : clock_.now());
}

// One ID with a single read-modify-write of next_ and no retry: with two threads a
// compare-and-swap that lost a race must load and try again, a fetch_add never has to. It
// applies in the common state only, far from every limit, and leaves the rest to reserve().
//
// Why every guarantee still holds:
//  * Unique: fetch_add hands each value of next_ to one caller, and reserve() moves next_ past
//    what it reserves in one compare-and-swap, so the two paths never hand out the same value.
//  * Increasing in real time: next_ only grows (but for the clock policy's switch and close()),
//    and v is the value of next_ when this call took it, above every ID returned before.
//  * Honest time, the durable horizon, the end of the time field: v is issued only when it lies
//    in [cur, limit], and limit is the lowest of the published horizon, the last value max_lead
//    ahead of this call's clock reading, and the value before the generation's final one.
//  * Closed, suspended: a closed generator's next_ is kClosed or above and a suspended one's
//    horizon is kNoHorizon, so neither passes the checks; a fetch_add that races with close()
//    gets a value >= kClosed, above limit (as suspend() allows, a call already past its checks
//    may complete).
//  * The clock-generation switch: a value taken after the switch lies in another generation,
//    below cur or above limit.
//  * A value that fails the check after the fetch_add is never issued: a harmless gap. Such
//    values cannot push next_ far past a limit: a call increments next_ only after it saw at
//    least kFastHeadroom values left below every limit, so once next_ is that close to a limit
//    (by this path or by reserve(), which may take it right up to one meanwhile) only the calls
//    between their check and their fetch_add can still add, one each, and there are fewer of
//    them than kFastHeadroom (no Linux system runs more than 2^22 threads).
//  * So next_ never carries into the generation bits: reserve() leaves the last tail_reserve_
//    (= kFastHeadroom) values of a generation unissued whenever this path can run, and those
//    late calls fit in them. (A carry would put next_ in the next generation above its horizon,
//    where reserve() could only retry for ever.) Past max_lead or the horizon they leave next_
//    by fewer than 2^22 values, which reserve() meets as it meets any state there: throttling,
//    extending the horizon, or, should the overshoot cross more than the one tick it allows, as
//    a clock behind (waiting or refusing: fail closed, never a duplicate).
[[gnu::always_inline]] inline bool Generator::reserve_one_fast(std::uint64_t& packed) noexcept {
  const std::int64_t now = now_ticks();
  const std::uint64_t cur = next_.load(std::memory_order_acquire);
  const std::uint64_t h = horizon_.load(std::memory_order_acquire);
  // Closed; before the epoch; a tick the clock has left (reserve() moves next_ up to the clock);
  // suspended, or the horizon of another generation.
  if (is_closed(cur) || now < 0 || tick_of(cur) < now || gen_of(h) != gen_of(cur)) return false;
  const std::uint64_t gen_base = gen_of(cur) << gen_shift_;
  const std::uint64_t lead_tick =
      static_cast<std::uint64_t>(std::min(now + max_lead_ticks_, max_tick_));
  const std::uint64_t final_value = gen_base | tick_mask_ << seq_bits_ | seq_mask_;
  const std::uint64_t limit =
      std::min({h, gen_base | lead_tick << seq_bits_ | seq_mask_, final_value - 1 - tail_reserve_});
  if (cur > limit || limit - cur < kFastHeadroom) return false;
  const std::uint64_t v = next_.fetch_add(1, std::memory_order_acq_rel);
  if (v < cur || v > limit) return false;
  packed = v;
  return true;
}

Result<std::uint64_t> Generator::next(Blocking blocking) {
  std::uint64_t packed = 0;
  if (reserve_one_fast(packed)) [[likely]] {
    return compose(packed);
  }
  return next_slow(blocking);
}

// Out of line, so that next() stays small on its fast path.
[[gnu::noinline]] Result<std::uint64_t> Generator::next_slow(Blocking blocking) {
  std::uint64_t packed = 0;
  if (Status st = reserve(1, packed, blocking); !st.ok()) return st;
  return compose(packed);
}

Status Generator::next_batch(std::span<std::uint64_t> out, Blocking blocking) {
  if (out.empty()) return OkStatus();
  if (out.size() > max_batch_) {
    return Status(Reason::kBatchTooLarge,
                  "a batch of " + std::to_string(out.size()) + " IDs cannot be issued within " +
                      "max_lead; the most this layout and max_lead allow at once is " +
                      std::to_string(max_batch_));
  }
  std::uint64_t first = 0;
  if (Status st = reserve(out.size(), first, blocking); !st.ok()) return st;
  emit(first, out);
  return OkStatus();
}

Result<std::uint64_t> Generator::next_range(std::uint64_t count, Blocking blocking) {
  if (seq_shift_ != 0 || layout_.node_count() != 1 || layout_.clock_generations() != 1) {
    return Status(StatusCode::kFailedPrecondition,
                  "IDs of layout " + layout_.to_string() +
                      " are not consecutive integers: a range needs a layout of time and seq only");
  }
  if (count == 0 || count > max_batch_) {
    return Status(Reason::kBatchTooLarge, "a range of " + std::to_string(count) +
                                              " IDs cannot be issued: ranges hold 1 to " +
                                              std::to_string(max_batch_));
  }
  std::uint64_t first = 0;
  if (Status st = reserve(count, first, blocking); !st.ok()) return st;
  return compose(first);
}

Status Generator::reserve(std::uint64_t n, std::uint64_t& first, Blocking blocking) {
  for (;;) {
    // One clock reading serves every CAS retry: after a lost race it is only older, which
    // overstates the lead (safe) and understates the time by the length of the race.
    const std::int64_t now = now_ticks();
    std::uint64_t cur = next_.load(std::memory_order_acquire);
    Status slow;
    for (;;) {
      if (is_closed(cur)) {
        return closed_status();
      }
      const std::int64_t cur_tick = tick_of(cur);
      // The state is ahead of the clock by more than max_lead (+1 for a tick borrowed by a
      // full sequence): the clock stepped back, or a restart began above a horizon still in the
      // future.
      if (cur_tick - now > max_lead_ticks_ + 1) {
        slow = on_clock_behind(cur, now, blocking);
        break;
      }
      if (now > max_tick_) {
        return Status(Reason::kTimeExhausted,
                      "the layout's time field ran out on " + format_time(layout_.end()));
      }
      std::uint64_t base = cur;
      if (now > cur_tick) {
        base = (gen_of(cur) << gen_shift_) | static_cast<std::uint64_t>(now) << seq_bits_;
      }
      const std::uint64_t last = base + n - 1;
      // The final (tick, seq) of a generation is never issued, so next_ never carries into the
      // generation bits; nor are the tail_reserve_ values before it (reserve_one_fast()).
      if (gen_of(last + 1 + tail_reserve_) != gen_of(cur)) {
        return Status(Reason::kTimeExhausted, "the layout's time field is exhausted (it ends " +
                                                  format_time(layout_.end()) + ")");
      }
      if (tick_of(last) - now > max_lead_ticks_) {
        slow = on_throttle(last, blocking);
        break;
      }
      const std::uint64_t h = horizon_.load(std::memory_order_acquire);
      if (last > h || gen_of(last) != gen_of(h)) {
        slow = on_horizon(last, blocking);
        break;
      }
      if (next_.compare_exchange_weak(cur, last + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        first = base;
        return OkStatus();
      }
    }
    if (!slow.ok()) return slow;
  }
}

void Generator::emit(std::uint64_t first, std::span<std::uint64_t> out) const noexcept {
  const std::uint64_t stride = std::uint64_t{1} << seq_shift_;
  std::uint64_t p = first;
  std::size_t k = 0;
  while (k < out.size()) {
    const std::uint64_t seq = p & seq_mask_;
    const std::size_t run =
        static_cast<std::size_t>(std::min<std::uint64_t>(out.size() - k, seq_mask_ - seq + 1));
    const std::uint64_t id0 = compose(p);
    std::uint64_t* dst = out.data() + k;
    for (std::size_t i = 0; i < run; ++i) dst[i] = id0 + i * stride;
    k += run;
    p += run;
  }
}

Status Generator::on_clock_behind(std::uint64_t cur, std::int64_t now, Blocking blocking) {
  const TimePoint clock_now = clock_.now();
  if (now < 0) {
    rollback_failures_.fetch_add(1, std::memory_order_relaxed);
    return Status(Reason::kClockBeforeEpoch, "the clock reads " + format_time(clock_now) +
                                                 ", before the layout's epoch " +
                                                 format_time(layout_.epoch()));
  }
  const TimePoint issued = layout_.time_of(static_cast<std::uint64_t>(tick_of(cur)));
  const std::string behind =
      "the clock (" + format_time(clock_now) + ") is " + internal::millis_text(issued - clock_now) +
      " behind the last issued time (" + format_time(issued) + "), more than max_lead (" +
      internal::millis_text(options_.max_lead) + ")";
  switch (options_.rollback) {
    case RollbackPolicy::kFail:
      rollback_failures_.fetch_add(1, std::memory_order_relaxed);
      return Status(Reason::kClockBehind, behind + "; rollback policy fail refuses to issue");
    case RollbackPolicy::kWait: {
      const std::int64_t target = tick_of(cur) - 1 - max_lead_ticks_;
      const TimePoint deadline = layout_.time_of(static_cast<std::uint64_t>(target));
      if (deadline - clock_now > options_.max_wait) {
        rollback_failures_.fetch_add(1, std::memory_order_relaxed);
        return Status(Reason::kClockBehind, behind + "; catching up would take " +
                                                internal::millis_text(deadline - clock_now) +
                                                ", longer than max_wait (" +
                                                internal::millis_text(options_.max_wait) + ")");
      }
      if (blocking == Blocking::kNever) return would_block("wait for the clock to catch up");
      rollback_waits_.fetch_add(1, std::memory_order_relaxed);
      clock_.sleep_until(deadline);
      return OkStatus();
    }
    case RollbackPolicy::kClock: {
      if (blocking == Blocking::kNever) return would_block("switch the clock generation");
      MutexLock lock(mu_);
      return switch_generation_locked(cur);
    }
  }
  return OkStatus();
}

Status Generator::switch_generation_locked(std::uint64_t cur) {
  if (closed_.load(std::memory_order_acquire)) return closed_status();
  const std::uint64_t now_value = next_.load(std::memory_order_acquire);
  const std::int64_t now = now_ticks();
  // Another thread may have switched already, or the clock caught up.
  if (now_value != cur && (is_closed(now_value) || gen_of(now_value) != gen_of(cur) ||
                           tick_of(now_value) - now <= max_lead_ticks_ + 1)) {
    return OkStatus();
  }
  if (now < 0 || now > max_tick_) return OkStatus();  // reserve() reports these
  const std::uint64_t current = gen_of(cur);
  std::optional<std::uint64_t> best;
  for (std::uint64_t g = 0; g < record_.horizons.size(); ++g) {
    if (g == current || record_.horizons[g] >= now) continue;
    if (!best || record_.horizons[g] < record_.horizons[*best]) best = g;
  }
  if (!best) {
    rollback_failures_.fetch_add(1, std::memory_order_relaxed);
    return Status(Reason::kClockBehind,
                  "the clock (" + format_time(clock_.now()) +
                      ") is behind the last issued time of every one of the " +
                      std::to_string(record_.horizons.size()) +
                      " clock generations; no generation can continue without repeating IDs");
  }
  HorizonRecord r = record_;
  r.generation = *best;
  r.horizons[*best] = std::min(now + window_ticks_, max_tick_);
  // Durable before use: a crash after this line restarts in the new generation above it.
  if (Status st = save_locked(r); !st.ok()) return st;  // publishes the new horizon
  next_.store(pack(*best, static_cast<std::uint64_t>(now)), std::memory_order_release);
  clock_switches_.fetch_add(1, std::memory_order_relaxed);
  return OkStatus();
}

Status Generator::on_throttle(std::uint64_t last, Blocking blocking) {
  if (blocking == Blocking::kNever) return would_block("wait for the rate limit");
  throttle_waits_.fetch_add(1, std::memory_order_relaxed);
  clock_.sleep_until(layout_.time_of(static_cast<std::uint64_t>(tick_of(last) - max_lead_ticks_)));
  return OkStatus();
}

Status Generator::stopped_status() const {
  if (closed_.load(std::memory_order_acquire)) return closed_status();
  MutexLock state(state_mu_);
  return suspended_;
}

Status Generator::on_horizon(std::uint64_t last, Blocking blocking) {
  if (Status st = stopped_status(); !st.ok()) return st;
  if (blocking == Blocking::kNever) return would_block("extend the durable horizon");
  const std::uint64_t failures_before = horizon_failures_.load(std::memory_order_acquire);
  MutexLock lock(mu_);
  if (Status st = stopped_status(); !st.ok()) return st;
  if (horizon_failures_.load(std::memory_order_acquire) != failures_before) {
    // A write failed while this call waited for the lock: report it rather than queue another
    // write behind it (the background thread, or the next call, tries again).
    MutexLock state(state_mu_);
    if (!persist_error_.ok()) return persist_error_;
  }
  const std::uint64_t h = horizon_.load(std::memory_order_acquire);
  if (last <= h && gen_of(last) == gen_of(h)) return OkStatus();  // extended meanwhile
  const std::uint64_t cur = next_.load(std::memory_order_acquire);
  if (is_closed(cur) || gen_of(cur) != gen_of(last) || gen_of(last) != record_.generation) {
    return OkStatus();  // state changed: retry from the top
  }
  return extend_locked(std::max(now_ticks(), tick_of(last)));
}

Status Generator::extend_locked(std::int64_t from_tick) {
  HorizonRecord r = record_;
  const std::int64_t wanted = std::min(from_tick + window_ticks_, max_tick_);
  if (wanted <= r.horizons[r.generation]) {
    MutexLock state(state_mu_);
    publish_horizon_locked();
    return OkStatus();
  }
  r.horizons[r.generation] = wanted;
  return save_locked(r);
}

// The store is written without state_mu_, so health() and suspend() never wait for it.
Status Generator::save_locked(const HorizonRecord& record) {
  Status st = store_.save(record);
  MutexLock state(state_mu_);
  if (!st.ok()) {
    horizon_failures_.fetch_add(1, std::memory_order_release);
    // A store that refuses for good (the node is no longer this generator's: a lost lease, a
    // registry that went backwards; state of another layout) keeps its code and reason, so
    // readiness says what happened and is_lease_gone() recognises it.
    const std::string what = "cannot persist the horizon to " + store_.describe();
    persist_error_ = st.code() == StatusCode::kFailedPrecondition && st.reason() != Reason::kNone
                         ? st.with_prefix(what)
                         : Status(Reason::kHorizonNotPersisted, what + ": " + st.message());
    return persist_error_;
  }
  horizon_saves_.fetch_add(1, std::memory_order_relaxed);
  record_ = record;
  view_generation_ = record.generation;
  view_horizon_ = record.horizons[record.generation];
  persist_error_ = OkStatus();
  publish_horizon_locked();
  return OkStatus();
}

void Generator::publish_horizon_locked() {
  const std::int64_t h = view_horizon_;
  if (!suspended_.ok() || closed_.load(std::memory_order_acquire) || h < 0) {
    horizon_.store(kNoHorizon, std::memory_order_release);
    return;
  }
  horizon_.store(pack(view_generation_, static_cast<std::uint64_t>(h)) | seq_mask_,
                 std::memory_order_release);
}

Status Generator::maintain() {
  MutexLock lock(mu_);
  if (Status st = stopped_status(); !st.ok()) return OkStatus();
  const std::uint64_t cur = next_.load(std::memory_order_acquire);
  if (is_closed(cur) || gen_of(cur) != record_.generation) return OkStatus();
  const std::int64_t now = now_ticks();
  const std::int64_t cur_tick = tick_of(cur);
  // Behind the clock, or before the epoch: extending would only push the problem further.
  if (now < 0 || cur_tick - now > max_lead_ticks_ + 1) return OkStatus();
  const std::int64_t from = std::max(now, cur_tick);
  bool persisted = false;
  {
    MutexLock state(state_mu_);
    persisted = persist_error_.ok();
  }
  if (persisted && record_.horizons[record_.generation] - from >= window_ticks_ / 2 + 1) {
    return OkStatus();
  }
  return extend_locked(from);
}

void Generator::background_loop() {
  const auto period = std::clamp<Nanos>(options_.horizon_window / 4, std::chrono::milliseconds(1),
                                        std::chrono::seconds(1));
  MutexLock lock(bg_mu_);
  while (!bg_stop_) {
    lock.wait_for(bg_cv_, period, [this]() FLURRY_REQUIRES(bg_mu_) { return bg_stop_; });
    if (bg_stop_) break;
    lock.unlock();
    (void)maintain();  // failures are recorded in persist_error_ and reported by health()
    lock.lock();
  }
}

Status Generator::health() const {
  if (closed_.load(std::memory_order_acquire)) return closed_status();
  MutexLock lock(state_mu_);
  if (!suspended_.ok()) return suspended_;
  if (!persist_error_.ok()) return persist_error_;
  const std::uint64_t cur = next_.load(std::memory_order_acquire);
  const std::int64_t now = now_ticks();
  if (now < 0) {
    return Status(Reason::kClockBeforeEpoch, "the clock reads a time before the layout's epoch");
  }
  if (tick_of(cur) - now > max_lead_ticks_ + 1) {
    return Status(
        Reason::kClockBehind,
        "the clock is " +
            internal::millis_text(layout_.time_of(static_cast<std::uint64_t>(tick_of(cur))) -
                                  clock_.now()) +
            " behind the last issued time, more than max_lead");
  }
  return OkStatus();
}

void Generator::suspend(Status why) {
  if (why.ok()) why = Status(Reason::kSuspended, "issuing is suspended");
  MutexLock lock(state_mu_);
  suspended_ = std::move(why);
  publish_horizon_locked();  // the hot path now falls into on_horizon, which reports it
}

void Generator::resume() {
  MutexLock lock(state_mu_);
  suspended_ = OkStatus();
  publish_horizon_locked();
}

GeneratorStats Generator::stats() const {
  GeneratorStats s;
  s.throttle_waits = throttle_waits_.load(std::memory_order_relaxed);
  s.rollback_waits = rollback_waits_.load(std::memory_order_relaxed);
  s.rollback_failures = rollback_failures_.load(std::memory_order_relaxed);
  s.clock_switches = clock_switches_.load(std::memory_order_relaxed);
  s.horizon_saves = horizon_saves_.load(std::memory_order_relaxed);
  s.horizon_failures = horizon_failures_.load(std::memory_order_relaxed);
  MutexLock lock(state_mu_);
  const std::uint64_t cur = next_.load(std::memory_order_acquire);
  const std::int64_t now = now_ticks();
  if (!is_closed(cur)) s.lead_ticks = tick_of(cur) - now;
  s.generation = view_generation_;
  s.horizon_ahead_ticks = view_horizon_ - now;
  return s;
}

Status Generator::close() {
  {
    MutexLock lock(bg_mu_);
    bg_stop_ = true;
  }
  bg_cv_.notify_all();
  if (bg_.joinable()) bg_.join();

  MutexLock lock(mu_);
  if (closed_.exchange(true, std::memory_order_acq_rel)) return OkStatus();
  // After the exchange no reservation can succeed: every CAS expects a value it loaded before.
  const std::uint64_t final_next = next_.exchange(kClosed, std::memory_order_acq_rel);
  horizon_.store(kNoHorizon, std::memory_order_release);
  HorizonRecord r = record_;
  const std::uint64_t gen = gen_of(final_next);
  if (gen != r.generation) return OkStatus();  // cannot happen; keep the wider horizon
  // Tight horizon: every issued tick is at or below it, and it is not below the previous
  // process's horizon because this one started above that.
  r.horizons[gen] = std::min(r.horizons[gen], last_issued_tick(final_next));
  if (r == record_) return OkStatus();
  return save_locked(r);
}

}  // namespace flurry

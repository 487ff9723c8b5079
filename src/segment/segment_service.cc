// SegmentService: see include/flurry/segment_service.h and docs/segments.md.
//
// How one tag's current range is served with one atomic add, and why no ID is handed out twice:
//
// The tag's `cursor_` packs the low 24 bits of an epoch (which range) and an index (the low 40
// bits: how many IDs of that range were claimed). A caller claims n IDs with one fetch_add(n):
// the index ranges different callers get within one epoch are disjoint by the nature of
// fetch_add. The range's parameters (first ID, delta, count) for epoch e live in ring_[e % 4],
// written only under the tag's mutex, seqlock-style: the record's epoch (all 64 bits) is set to
// "being written" first, then the parameters, then the new epoch (release); the cursor is then
// set to (e mod 2^24) << 40 (release), and then `published_` to e (release). A caller reads
// `published_` before its fetch_add and accepts the claim only when the cursor's 24 bits are
// published_'s and the record's full epoch is published_, before and after reading the
// parameters. The epoch therefore never wraps onto a live value: a caller stalled across 2^24
// switches (or across four) finds a record whose 64-bit epoch is not the one it read, and gives
// up the claimed indexes (a gap, never a duplicate). Why published_ is enough: the cursor store
// of e happens before published_ = e, so a fetch_add after reading e sees epoch e or a later
// one; a later one with the same 24 bits carries a record of another 64-bit epoch. The index
// never wraps into the epoch: callers stop adding once the index passes 2^39 and take the mutex
// instead, and ranges hold at most 2^38 IDs.
//
// Switching to the next range and fetching it happen under the tag's mutex (`mu_`), never the
// store call itself: stores are called from the service's one background thread (prefetch and
// retries) or, for a tag's first lookup, by the caller. Waiting callers and the background thread
// wait on the injected MonotonicClock, woken through stop tokens, so tests run on a fake clock.
#include "flurry/segment_service.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/private_files.h"
#include "core/quote.h"
#include "cursor.h"
#include "segment_floor.h"
#include "stores.h"
#include "tag_index.h"

namespace flurry {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr int kIndexBits = internal::kSegmentIndexBits;
constexpr std::uint64_t kIndexMask = internal::kSegmentIndexMask;
// Callers stop claiming with fetch_add once the index passes this (see the top of the file).
constexpr std::uint64_t kIndexGuard = std::uint64_t{1} << 39;
constexpr std::uint64_t kWriting = ~std::uint64_t{0};
constexpr std::size_t kRing = 4;
// The background thread's retry delays after a store error.
constexpr milliseconds kFirstBackoff{50};
constexpr milliseconds kMaxBackoff{2000};

// One range's parameters, as callers of its epoch read them.
struct RangeRecord {
  std::atomic<std::uint64_t> epoch{kWriting};
  std::atomic<std::uint64_t> first{0};
  std::atomic<std::uint64_t> delta{1};
  std::atomic<std::uint64_t> count{0};
  // The index whose claim starts the prefetch of the next range.
  std::atomic<std::uint64_t> prefetch_index{0};
};

// A range as fetched, before and after it becomes current.
struct Range {
  SegmentAllocation alloc;
  std::uint64_t first = 0;  // the first ID: the smallest x >= start with x % delta == remainder
  std::uint64_t count = 0;  // IDs in the range
  std::uint64_t step = 0;   // the step asked for
  std::size_t store = 0;    // index of the store it came from
  std::int64_t fetched_unix_ms = 0;
  MonoTime fetched_at{};
  microseconds fetch_duration{0};
};

Range make_range(const SegmentAllocation& a) {
  Range r;
  r.alloc = a;
  const std::uint64_t delta = std::max<std::uint64_t>(a.delta, 1);
  const std::uint64_t rem = a.start % delta;
  std::uint64_t first = a.start - rem + a.remainder % delta;
  if (first < a.start) first += delta;
  r.first = first;
  r.count = first < a.end ? (a.end - 1 - first) / delta + 1 : 0;
  return r;
}

Status shut_down() {
  return Status(Reason::kShutDown, "the segment service is stopping");
}

// Most tags remembered as unknown at once; beyond it the expired ones go, then all of them.
constexpr std::size_t kMaxUnknownTags = 65536;

// What a node knows of one store's residue for a tag.
struct Residue {
  enum class State { kUnknown, kAbsent, kKnown } state = State::kUnknown;
  std::uint64_t delta = 1;
  std::uint64_t remainder = 0;
};

// The proof that the stores of a tag can never issue one ID twice: every store that holds the tag
// has one delta, at least the number of stores, and a remainder of its own. A store whose residue
// is unknown (it did not answer and this host remembers none) fails the proof. OK with one store.
Status prove_residues(std::string_view tag, const std::vector<std::string>& names,
                      const std::vector<Residue>& residues) {
  const std::size_t n = names.size();
  if (n <= 1) return OkStatus();
  const auto refuse = [&](std::string why) {
    std::string listed;
    for (std::size_t s = 0; s < n; ++s) {
      listed += (s > 0 ? "; " : "") + names[s] + ": ";
      switch (residues[s].state) {
        case Residue::State::kUnknown:
          listed += "unknown";
          break;
        case Residue::State::kAbsent:
          listed += "no such tag";
          break;
        case Residue::State::kKnown:
          listed += "delta " + std::to_string(residues[s].delta) + " remainder " +
                    std::to_string(residues[s].remainder);
          break;
      }
    }
    return Status(StatusCode::kFailedPrecondition,
                  "segment tag " + internal::quote(tag) + " is refused: its " + std::to_string(n) +
                      " stores could issue the same ID: " + why + " (" + listed +
                      "). Every store of a tag needs one delta of at least " + std::to_string(n) +
                      " and a remainder of its own (create the tag through a server or `flurry "
                      "segment create` with all the stores)");
  };
  const Residue* first = nullptr;
  for (std::size_t s = 0; s < n; ++s) {
    const Residue& r = residues[s];
    if (r.state == Residue::State::kUnknown) {
      return refuse("store " + names[s] +
                    " did not answer and this host remembers no residue of it");
    }
    if (r.state != Residue::State::kKnown) continue;
    if (r.delta < n) {
      return refuse("store " + names[s] + " has delta " + std::to_string(r.delta) +
                    ", below the number of stores");
    }
    if (first != nullptr && r.delta != first->delta) {
      return refuse("the stores do not agree on one delta");
    }
    if (first == nullptr) first = &r;
    for (std::size_t t = 0; t < s; ++t) {
      if (residues[t].state == Residue::State::kKnown && residues[t].remainder == r.remainder) {
        return refuse("stores " + names[t] + " and " + names[s] + " share remainder " +
                      std::to_string(r.remainder));
      }
    }
  }
  return OkStatus();
}

}  // namespace

Status check_segment_options(const SegmentOptions& o) {
  if (!(o.prefetch_at > 0.0 && o.prefetch_at < 1.0)) {
    return InvalidArgument("segment prefetch share must be above 0 and below 1, got " +
                           std::to_string(o.prefetch_at));
  }
  if (o.target_duration <= milliseconds::zero()) {
    return InvalidArgument("segment target duration must be positive");
  }
  if (o.max_step < 1 || o.max_step > kMaxSegmentStep) {
    return InvalidArgument("segment max step must be 1 to " + std::to_string(kMaxSegmentStep) +
                           ", got " + std::to_string(o.max_step));
  }
  if (o.max_wait < milliseconds::zero()) {
    return InvalidArgument("segment max wait must not be negative");
  }
  if (o.max_batch < 1 || o.max_batch > kMaxSegmentStep) {
    return InvalidArgument("segment max batch must be 1 to " + std::to_string(kMaxSegmentStep) +
                           ", got " + std::to_string(o.max_batch));
  }
  if (o.unknown_tag_ttl <= milliseconds::zero()) {
    return InvalidArgument("segment unknown-tag TTL must be positive");
  }
  if (o.regression_log_interval < milliseconds::zero()) {
    return InvalidArgument("segment regression log interval must not be negative");
  }
  return OkStatus();
}

class SegmentService::Impl {
 public:
  class Tag;

  Impl(std::vector<std::unique_ptr<SegmentStore>> stores, SegmentOptions options, Clocks clocks)
      : stores_(std::move(stores)),
        options_(std::move(options)),
        clocks_(clocks),
        floors_(options_.floor_dir, options_.host_dir) {
    for (const auto& s : stores_) names_.push_back(s->describe());
  }
  ~Impl() { stop(); }

  void stop();
  // The keys of store `s`'s floors (segment_floor.h): its identity as the store tells it, asked
  // of the store with kAllowed (errors as the store's calls), or what it knows with kNever.
  Result<internal::SegmentFloorKeys> floor_keys(std::size_t s, Blocking blocking);
  Result<Tag*> find(std::string_view name, Blocking blocking);
  Result<SegmentTagInfo> stored_tag(std::string_view name);
  Status create_tag(const SegmentTagSpec& spec);
  Result<std::vector<SegmentTagInfo>> list_tags();
  // Queues a fetch of `tag`'s next range, to start no earlier than `not_before`.
  void schedule(Tag* tag, MonoTime not_before);
  [[nodiscard]] bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }

  std::vector<std::unique_ptr<SegmentStore>> stores_;
  std::vector<std::string> names_;
  const SegmentOptions options_;
  const Clocks clocks_;

  // The writer lock of the tags: adding one, and listing them. Lookups by name go through
  // `index_` and take no lock.
  mutable std::mutex tags_mu_;
  std::map<std::string, std::unique_ptr<Tag>, std::less<>> tags_;  // owns the tags
  internal::TagIndex<Tag> index_;                                  // the same tags, lock-free
  internal::SegmentFloors floors_;
  std::atomic<std::uint64_t> store_reads_{0};
  std::atomic<std::uint64_t> unknown_hits_{0};

  // Forgets that `name` was unknown (it was just created).
  void forget_unknown(std::string_view name);

 private:
  // A first lookup under way: callers of the same tag wait for it instead of reading the stores.
  struct Lookup {
    bool done = false;
    Status status;
    Tag* tag = nullptr;
    std::condition_variable cv;
  };

  void fetch_loop(std::stop_token st);
  // Reads every store for `name` and makes its buffers; no lock held across the reads.
  Result<Tag*> look_up(std::string_view name);
  [[nodiscard]] bool known_unknown(std::string_view name);
  void remember_unknown(std::string_view name);

  std::mutex lookups_mu_;  // guards lookups_ and every Lookup
  std::unordered_map<std::string, std::shared_ptr<Lookup>> lookups_;
  std::mutex unknown_mu_;
  std::unordered_map<std::string, MonoTime> unknown_;  // tag -> until when it is known unknown

  std::atomic<bool> stopping_{false};
  std::mutex queue_mu_;
  std::deque<std::pair<Tag*, MonoTime>> queue_;
  std::stop_source wake_;  // replaced each time the fetcher sleeps; stopped to wake it
  std::jthread fetcher_;   // under queue_mu_; started by the first schedule()
};

class SegmentService::Impl::Tag final : public SegmentCounter {
 public:
  Tag(Impl& service, std::string name, std::size_t store, std::uint64_t base_step,
      std::vector<Residue> residues)
      : service_(service),
        name_(std::move(name)),
        max_batch_(service.options_.max_batch),
        base_step_(base_step),
        step_(base_step),
        preferred_store_(store),
        residues_(std::move(residues)) {
    ring_[0].epoch.store(0, std::memory_order_release);  // epoch 0: an empty range
  }

  Status next(std::span<std::uint64_t> out, Blocking blocking) override;
  [[nodiscard]] const std::string& tag() const noexcept override { return name_; }
  Result<SegmentRange> range(std::uint64_t size, Blocking blocking);
  // The background thread's work: fetch the next range and make it available.
  void fetch();
  [[nodiscard]] SegmentTagState state() const;
  void wake_waiters_locked();
  [[nodiscard]] std::mutex& mutex() noexcept { return mu_; }

 private:
  // Claims up to `want` indexes of the current epoch with one fetch_add. Returns how many IDs
  // were written to `out` (from the front); sets `exhausted` when the range has no more.
  std::size_t claim(std::span<std::uint64_t> out, bool& exhausted, bool& prefetch);
  // next() once the current range could not serve the whole request, or a prefetch is due.
  [[gnu::noinline]] Status next_slow(std::span<std::uint64_t> out, std::size_t filled,
                                     bool prefetch, Blocking blocking);
  // Under mu_: makes next_ the current range. Precondition: next_.
  void switch_locked();
  // Under mu_: asks the background thread for the next range unless one is on its way.
  void want_next_locked();
  // Under mu_: waits (unlocking) until a fetch completes, the deadline passes or the service
  // stops. Returns false on the deadline.
  bool wait_locked(std::unique_lock<std::mutex>& lock, MonoTime deadline);
  Status unavailable_locked(std::uint64_t asked) const;
  std::uint64_t next_step_locked(MonoTime now) const;

  Impl& service_;
  const std::string name_;
  const std::uint64_t max_batch_;

  // Under mu_: OK when a range of store `s` with this residue keeps the tag's residue proof.
  Status check_residue_locked(std::size_t s, const SegmentAllocation& got);

  // The hot path's state.
  alignas(64) std::atomic<std::uint64_t> cursor_{0};
  alignas(64) std::atomic<std::uint64_t> published_{0};  // the current 64-bit epoch
  RangeRecord ring_[kRing];

  // Everything below under mu_.
  mutable std::mutex mu_;
  std::uint64_t epoch_ = 0;
  std::optional<Range> current_;
  std::optional<Range> next_;
  bool fetching_ = false;  // queued or under way
  std::uint64_t base_step_;
  std::uint64_t step_;  // the step of the last fetch
  std::size_t preferred_store_;
  milliseconds backoff_{0};
  std::vector<std::stop_source*> waiters_;
  std::uint64_t retired_ids_ = 0;  // IDs of the ranges before the current one
  std::string last_error_;
  std::vector<Residue> residues_;  // per store, as proven at first use and by each range
  // Why the last fetch failed when retrying soon cannot help (STORE_REGRESSED, residues): callers
  // with empty buffers get it at once. Cleared by the next range.
  std::optional<Status> refusal_;
  std::optional<MonoTime> last_regression_report_;
  // Failed fetches not yet reported (on_fetch_failed): the first one's store and status, and
  // how many store attempts failed since the last report.
  std::optional<std::pair<std::size_t, Status>> unreported_failure_;
  std::uint64_t unreported_failures_ = 0;
  std::optional<MonoTime> last_failure_report_;

  // Counters (read without mu_ for metrics).
  std::atomic<std::uint64_t> skipped_{0};
  std::atomic<std::uint64_t> ranges_fetched_{0};
  std::atomic<std::uint64_t> store_errors_{0};
  std::atomic<std::uint64_t> waits_{0};
  std::atomic<std::uint64_t> unavailable_{0};
  std::atomic<std::uint64_t> store_regressed_{0};
  std::atomic<std::int64_t> fetch_time_us_{0};
};

// ---- The hot path ----

inline std::size_t SegmentService::Impl::Tag::claim(std::span<std::uint64_t> out, bool& exhausted,
                                                    bool& prefetch) {
  exhausted = false;
  prefetch = false;
  const std::uint64_t n = out.size();
  if ((cursor_.load(std::memory_order_relaxed) & kIndexMask) >= kIndexGuard) {
    exhausted = true;
    return 0;
  }
  const std::uint64_t published = published_.load(std::memory_order_acquire);
  const std::uint64_t v = cursor_.fetch_add(n, std::memory_order_acq_rel);
  const std::uint64_t epoch = v >> kIndexBits;
  const std::uint64_t index = v & kIndexMask;
  RangeRecord& r = ring_[epoch % kRing];
  const std::uint64_t e1 = r.epoch.load(std::memory_order_acquire);
  const std::uint64_t first = r.first.load(std::memory_order_relaxed);
  const std::uint64_t delta = r.delta.load(std::memory_order_relaxed);
  const std::uint64_t count = r.count.load(std::memory_order_relaxed);
  const std::uint64_t prefetch_index = r.prefetch_index.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  const std::uint64_t e2 = r.epoch.load(std::memory_order_relaxed);
  if (!internal::segment_claim_is_current(published, v, e1, e2)) {
    // The record was rewritten while this caller was descheduled: the claimed indexes cannot be
    // turned into IDs any more. They are lost (a gap), never issued twice.
    skipped_.fetch_add(n, std::memory_order_relaxed);
    exhausted = true;
    return 0;
  }
  if (index >= count) {
    exhausted = true;
    return 0;
  }
  const std::uint64_t got = std::min(n, count - index);
  std::uint64_t id = first + index * delta;
  for (std::uint64_t i = 0; i < got; ++i, id += delta) out[i] = id;
  exhausted = got < n;
  prefetch = index <= prefetch_index && prefetch_index < index + n;
  return got;
}

Status SegmentService::Impl::Tag::next(std::span<std::uint64_t> out, Blocking blocking) {
  if (out.empty() || out.size() > max_batch_) [[unlikely]] {
    return InvalidArgument("count must be 1 to " + std::to_string(max_batch_) + ", got " +
                           std::to_string(out.size()));
  }
  bool exhausted = false;
  bool prefetch = false;
  const std::size_t filled = claim(out, exhausted, prefetch);
  if (filled == out.size() && !prefetch) [[likely]] {
    return OkStatus();
  }
  return next_slow(out, filled, prefetch, blocking);
}

Status SegmentService::Impl::Tag::next_slow(std::span<std::uint64_t> out, std::size_t filled,
                                            bool prefetch, Blocking blocking) {
  if (prefetch) {
    std::lock_guard lock(mu_);
    want_next_locked();
  }
  if (filled == out.size()) return OkStatus();
  bool exhausted = false;

  // The slow path: the current range ran out (or was never fetched).
  std::unique_lock lock(mu_);
  const MonoTime deadline = service_.clocks_.monotonic.now() + service_.options_.max_wait;
  bool waited = false;
  while (filled < out.size()) {
    if (service_.stopping()) {
      skipped_.fetch_add(filled, std::memory_order_relaxed);
      return shut_down();
    }
    filled += claim(out.subspan(filled), exhausted, prefetch);
    if (prefetch) want_next_locked();
    if (filled == out.size()) break;
    if (next_) {
      switch_locked();
      continue;
    }
    want_next_locked();
    if (refusal_) {
      skipped_.fetch_add(filled, std::memory_order_relaxed);
      unavailable_.fetch_add(1, std::memory_order_relaxed);
      return *refusal_;
    }
    if (blocking == Blocking::kNever) {
      skipped_.fetch_add(filled, std::memory_order_relaxed);
      return Status(Reason::kWouldBlock, "segment tag " + internal::quote(name_) +
                                             ": both buffers are empty; waiting for the store");
    }
    if (!waited) {
      waited = true;
      waits_.fetch_add(1, std::memory_order_relaxed);
    }
    if (!wait_locked(lock, deadline) && !next_) {
      skipped_.fetch_add(filled, std::memory_order_relaxed);
      unavailable_.fetch_add(1, std::memory_order_relaxed);
      return unavailable_locked(out.size());
    }
  }
  return OkStatus();
}

Result<SegmentRange> SegmentService::Impl::Tag::range(std::uint64_t size, Blocking blocking) {
  if (size < 1 || size > service_.options_.max_batch) {
    return InvalidArgument("size must be 1 to " + std::to_string(service_.options_.max_batch) +
                           ", got " + std::to_string(size));
  }
  std::unique_lock lock(mu_);
  const MonoTime deadline = service_.clocks_.monotonic.now() + service_.options_.max_wait;
  bool waited = false;
  for (;;) {
    if (service_.stopping()) return shut_down();
    if (current_) {
      // The largest range this tag can give: its step over delta (the next fetch's step).
      const std::uint64_t delta = std::max<std::uint64_t>(current_->alloc.delta, 1);
      const std::uint64_t most = std::max(current_->count, std::max(step_, base_step_) / delta);
      if (size > most) {
        return Status(StatusCode::kOutOfRange,
                      "size " + std::to_string(size) + " exceeds the " + std::to_string(most) +
                          " IDs of one range of segment tag " + internal::quote(name_) +
                          " (its step over its delta)");
      }
      const std::uint64_t v = cursor_.load(std::memory_order_relaxed);
      const std::uint64_t index = v & kIndexMask;
      if (index < current_->count && current_->count - index >= size) {
        // Claim exactly `size` with one fetch_add; a concurrent next() may have claimed some in
        // between, so check what came back.
        const std::uint64_t got = cursor_.fetch_add(size, std::memory_order_acq_rel) & kIndexMask;
        if (got + size <= current_->count) {
          const std::uint64_t start = current_->first + got * delta;
          if (got <= ring_[epoch_ % kRing].prefetch_index.load(std::memory_order_relaxed) &&
              ring_[epoch_ % kRing].prefetch_index.load(std::memory_order_relaxed) < got + size) {
            want_next_locked();
          }
          return SegmentRange{start, start + size * delta, delta};
        }
        if (got < current_->count) {
          skipped_.fetch_add(current_->count - got, std::memory_order_relaxed);
        }
      } else if (index < current_->count) {
        // The rest is too short: take it out of circulation and move on to the next range.
        const std::uint64_t got =
            cursor_.fetch_add(kIndexGuard, std::memory_order_acq_rel) & kIndexMask;
        if (got < current_->count) {
          skipped_.fetch_add(current_->count - got, std::memory_order_relaxed);
        }
      }
    }
    if (next_) {
      switch_locked();
      continue;
    }
    want_next_locked();
    if (refusal_) {
      unavailable_.fetch_add(1, std::memory_order_relaxed);
      return *refusal_;
    }
    if (blocking == Blocking::kNever) {
      return Status(Reason::kWouldBlock, "segment tag " + internal::quote(name_) +
                                             ": both buffers are empty; waiting for the store");
    }
    if (!waited) {
      waited = true;
      waits_.fetch_add(1, std::memory_order_relaxed);
    }
    if (!wait_locked(lock, deadline) && !next_) {
      unavailable_.fetch_add(1, std::memory_order_relaxed);
      return unavailable_locked(size);
    }
  }
}

// ---- Switching, fetching, waiting ----

void SegmentService::Impl::Tag::switch_locked() {
  const std::uint64_t v = cursor_.load(std::memory_order_relaxed);
  if (current_) retired_ids_ += std::min(v & kIndexMask, current_->count);
  current_ = std::move(next_);
  next_.reset();
  ++epoch_;  // 64 bits: never wraps
  RangeRecord& r = ring_[epoch_ % kRing];
  r.epoch.store(kWriting, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  r.first.store(current_->first, std::memory_order_relaxed);
  r.delta.store(std::max<std::uint64_t>(current_->alloc.delta, 1), std::memory_order_relaxed);
  r.count.store(current_->count, std::memory_order_relaxed);
  const auto share = static_cast<std::uint64_t>(
      std::floor(static_cast<double>(current_->count) * service_.options_.prefetch_at));
  r.prefetch_index.store(share, std::memory_order_relaxed);
  r.epoch.store(epoch_, std::memory_order_release);
  cursor_.store(internal::segment_cursor_start(epoch_), std::memory_order_release);
  published_.store(epoch_, std::memory_order_release);
  // A range too small to reach its prefetch index by a claim still needs its successor.
  if (share == 0) want_next_locked();
}

void SegmentService::Impl::Tag::want_next_locked() {
  if (fetching_ || next_ || service_.stopping()) return;
  fetching_ = true;
  service_.schedule(this, service_.clocks_.monotonic.now() + backoff_);
}

bool SegmentService::Impl::Tag::wait_locked(std::unique_lock<std::mutex>& lock, MonoTime deadline) {
  if (service_.clocks_.monotonic.now() >= deadline) return false;
  std::stop_source woken;
  waiters_.push_back(&woken);
  lock.unlock();
  const bool reached = service_.clocks_.monotonic.wait_until(deadline, woken.get_token());
  lock.lock();
  std::erase(waiters_, &woken);
  return !reached;
}

void SegmentService::Impl::Tag::wake_waiters_locked() {
  for (std::stop_source* w : waiters_) w->request_stop();
}

Status SegmentService::Impl::Tag::unavailable_locked(std::uint64_t asked) const {
  std::string msg = "segment tag " + internal::quote(name_) + ": no IDs for " +
                    std::to_string(asked) + " within " +
                    std::to_string(service_.options_.max_wait.count()) +
                    " ms: both buffers are empty and the store has not answered";
  if (refusal_) return *refusal_;
  if (!last_error_.empty()) msg += " (last store error: " + last_error_ + ")";
  return Status(Reason::kIo, std::move(msg));
}

std::uint64_t SegmentService::Impl::Tag::next_step_locked(MonoTime now) const {
  const SegmentOptions& o = service_.options_;
  if (!current_) return step_;
  // Leaf's rule: how long the range before this fetch lasted decides the next step.
  const auto lasted = now - current_->fetched_at;
  std::uint64_t step = step_;
  if (lasted < o.target_duration) {
    if (step <= o.max_step / 2) {
      step *= 2;
    } else {
      step = std::max(step, o.max_step);
    }
  } else if (lasted > 2 * o.target_duration) {
    step = std::max(step / 2, base_step_);
  }
  return std::clamp<std::uint64_t>(step, base_step_, std::max(base_step_, kMaxSegmentStep));
}

Status SegmentService::Impl::Tag::check_residue_locked(std::size_t s,
                                                       const SegmentAllocation& got) {
  if (service_.stores_.size() <= 1) return OkStatus();
  Residue& mine = residues_[s];
  if (mine.state == Residue::State::kKnown && mine.delta == got.delta &&
      mine.remainder == got.remainder) {
    return OkStatus();
  }
  // The store's residue changed since the proof (or it gained the tag): prove it again.
  std::vector<Residue> trial = residues_;
  trial[s] = Residue{Residue::State::kKnown, got.delta, got.remainder};
  if (Status st = prove_residues(name_, service_.names_, trial); !st.ok()) return st;
  residues_ = std::move(trial);
  return OkStatus();
}

void SegmentService::Impl::Tag::fetch() {
  std::uint64_t step = 0;
  std::size_t first_store = 0;
  {
    std::lock_guard lock(mu_);
    if (next_) {
      fetching_ = false;
      return;
    }
    step = next_step_locked(service_.clocks_.monotonic.now());
    // With a delta, a range shorter than delta may hold no ID at all.
    if (current_) step = std::max(step, current_->alloc.delta);
    first_store = preferred_store_;
  }
  const std::size_t n = service_.stores_.size();
  std::string errors;
  // A regression, a residue proof that failed or an unreadable floor: callers learn of it at once.
  std::optional<Status> refusal;
  std::optional<std::pair<std::size_t, Status>> first_failure;
  std::uint64_t failure_count = 0;
  const auto failed = [&](std::size_t s, const Status& st) {
    store_errors_.fetch_add(1, std::memory_order_relaxed);
    ++failure_count;
    if (!first_failure) first_failure.emplace(s, st);
    if (!errors.empty()) errors += "; ";
    errors += service_.names_[s] + ": " + st.to_string();
    if (st.reason() == Reason::kStoreRegressed) {
      store_regressed_.fetch_add(1, std::memory_order_relaxed);
      if (!refusal || refusal->reason() != Reason::kStoreRegressed) refusal = st;
    } else if ((st.code() == StatusCode::kFailedPrecondition ||
                st.code() == StatusCode::kDataLoss) &&
               !refusal) {
      // Residues that fail the proof, an unreadable floor: waiting does not help.
      refusal = st;
    }
  };
  for (std::size_t k = 0; k < n; ++k) {
    if (service_.stopping()) break;
    const std::size_t s = (first_store + k) % n;
    const std::string& where = service_.names_[s];
    // Never below what this store gave this host (segment_floor.h), under any of its keys.
    Result<internal::SegmentFloorKeys> keys = service_.floor_keys(s, Blocking::kAllowed);
    if (!keys.ok()) {
      failed(s, keys.status());
      continue;
    }
    Result<internal::SegmentFloorEntry> floor = service_.floors_.get(*keys, name_);
    if (!floor.ok()) {
      failed(s, floor.status());
      continue;
    }
    const MonoTime started = service_.clocks_.monotonic.now();
    Result<SegmentAllocation> got = service_.stores_[s]->allocate(name_, step, floor->floor);
    const MonoTime done = service_.clocks_.monotonic.now();
    if (!got.ok()) {
      if (got.status().code() == StatusCode::kNotFound && floor->floor > 0) {
        failed(s,
               Status(Reason::kStoreRegressed,
                      "segment store " + where + " went backwards: tag " + internal::quote(name_) +
                          " is gone from it, though it gave this host " + "IDs up to " +
                          std::to_string(floor->floor) +
                          "; nothing was allocated. Create the tag again with start at least " +
                          std::to_string(floor->floor) +
                          "; this node serves the tag again at its next attempt"));
      } else {
        failed(s, got.status());
      }
      continue;
    }
    if (got->start < floor->floor) {
      // A store that did not honour the floor: the range is lost, never used.
      failed(s, internal::segment_store_regressed(where, name_, got->start, floor->floor));
      continue;
    }
    {
      std::lock_guard lock(mu_);
      if (Status st = check_residue_locked(s, *got); !st.ok()) {
        failed(s, st);
        continue;
      }
    }
    // Durable before any ID of the range is handed out.
    if (Status st = service_.floors_.raise(*keys, name_, got->end, got->delta, got->remainder);
        !st.ok()) {
      failed(s, st.with_prefix("cannot remember the range of " + where + " (it is not used)"));
      continue;
    }
    Range r = make_range(*got);
    r.step = step;
    r.store = s;
    r.fetched_unix_ms =
        duration_cast<milliseconds>(service_.clocks_.wall.now().time_since_epoch()).count();
    r.fetched_at = done;
    r.fetch_duration = duration_cast<microseconds>(done - started);
    ranges_fetched_.fetch_add(1, std::memory_order_relaxed);
    fetch_time_us_.fetch_add(r.fetch_duration.count(), std::memory_order_relaxed);
    std::lock_guard lock(mu_);
    base_step_ = std::max<std::uint64_t>(got->base_step, 1);
    step_ = step;
    preferred_store_ = s;
    backoff_ = milliseconds::zero();
    refusal_.reset();
    next_ = std::move(r);
    fetching_ = false;
    wake_waiters_locked();
    return;
  }
  bool report = false;
  std::optional<std::pair<std::size_t, Status>> failure_report;
  std::uint64_t failures_reported = 0;
  {
    std::lock_guard lock(mu_);
    last_error_ = errors.empty() ? "the service is stopping" : errors;
    if (first_failure) {
      // Rate-limited per tag: the first failure since the last report, with the count.
      const MonoTime now = service_.clocks_.monotonic.now();
      if (!unreported_failure_) unreported_failure_ = first_failure;
      unreported_failures_ += failure_count;
      if (!last_failure_report_ ||
          now - *last_failure_report_ >= service_.options_.regression_log_interval) {
        last_failure_report_ = now;
        failure_report = std::exchange(unreported_failure_, std::nullopt);
        failures_reported = std::exchange(unreported_failures_, 0);
      }
    }
    if (refusal) {
      refusal_ = refusal->reason() == Reason::kStoreRegressed
                     ? Status(Reason::kStoreRegressed, "segment tag " + internal::quote(name_) +
                                                           " is refused: " + last_error_)
                     : *refusal;
    } else {
      refusal_.reset();
    }
    const MonoTime now = service_.clocks_.monotonic.now();
    if (refusal_ && refusal_->reason() == Reason::kStoreRegressed &&
        (!last_regression_report_ ||
         now - *last_regression_report_ >= service_.options_.regression_log_interval)) {
      last_regression_report_ = now;
      report = true;
    }
    fetching_ = false;
    backoff_ =
        backoff_ == milliseconds::zero() ? kFirstBackoff : std::min(backoff_ * 2, kMaxBackoff);
    // Waiters learn of the failure now (they see last_error_ when they give up); the retry
    // follows after the backoff.
    wake_waiters_locked();
    want_next_locked();
    if (report && service_.options_.on_store_regressed) {
      // Called under mu_ so that the status is the one just set; the callback only logs.
      service_.options_.on_store_regressed(*refusal_);
    }
  }
  if (failure_report && service_.options_.on_fetch_failed) {
    service_.options_.on_fetch_failed(name_, service_.names_[failure_report->first],
                                      failure_report->second, failures_reported);
  }
}

SegmentTagState SegmentService::Impl::Tag::state() const {
  std::lock_guard lock(mu_);
  SegmentTagState s;
  s.tag = name_;
  const std::uint64_t index = cursor_.load(std::memory_order_relaxed) & kIndexMask;
  auto info = [&](const Range& r, std::uint64_t used) {
    SegmentBufferInfo b;
    b.start = r.alloc.start;
    b.end = r.alloc.end;
    b.delta = r.alloc.delta;
    b.remainder = r.alloc.remainder;
    b.size = r.count;
    b.remaining = r.count - std::min(used, r.count);
    b.step = r.step;
    b.store = service_.names_[r.store];
    b.fetched_unix_ms = r.fetched_unix_ms;
    b.fetch_duration = r.fetch_duration;
    return b;
  };
  std::uint64_t used_now = 0;
  if (current_) {
    s.current = info(*current_, index);
    used_now = std::min(index, current_->count);
    s.remaining += s.current->remaining;
  }
  if (next_) {
    s.next = info(*next_, 0);
    s.remaining += s.next->remaining;
  }
  s.fetching = fetching_;
  s.step = current_ ? next_step_locked(service_.clocks_.monotonic.now()) : step_;
  s.base_step = base_step_;
  s.ids_skipped = skipped_.load(std::memory_order_relaxed);
  const std::uint64_t claimed = retired_ids_ + used_now;
  s.ids_issued = claimed - std::min(claimed, s.ids_skipped);
  s.ranges_fetched = ranges_fetched_.load(std::memory_order_relaxed);
  s.store_errors = store_errors_.load(std::memory_order_relaxed);
  s.waits = waits_.load(std::memory_order_relaxed);
  s.unavailable = unavailable_.load(std::memory_order_relaxed);
  s.store_regressed = store_regressed_.load(std::memory_order_relaxed);
  s.fetch_time_total = microseconds(fetch_time_us_.load(std::memory_order_relaxed));
  s.last_error = last_error_;
  return s;
}

// ---- The service ----

void SegmentService::Impl::schedule(Tag* tag, MonoTime not_before) {
  std::lock_guard lock(queue_mu_);
  queue_.emplace_back(tag, not_before);
  wake_.request_stop();
  // The background thread starts with the first fetch: a server whose tags are never used runs
  // none. stop() sets stopping_ before it takes queue_mu_, so none starts after it.
  if (!fetcher_.joinable() && !stopping()) {
    try {
      fetcher_ = std::jthread([this](std::stop_token st) { fetch_loop(st); });
    } catch (const std::system_error&) {
      // No thread now (resources exhausted): the fetch stays queued for the thread the next
      // schedule() starts; until then the tag's callers wait up to max_wait, then UNAVAILABLE.
    }
  }
}

void SegmentService::Impl::fetch_loop(std::stop_token st) {
  std::stop_callback on_stop(st, [this] {
    std::lock_guard lock(queue_mu_);
    wake_.request_stop();
  });
  while (!st.stop_requested()) {
    Tag* due = nullptr;
    MonoTime earliest = MonoTime::max();
    std::stop_token woken;
    {
      std::lock_guard lock(queue_mu_);
      const MonoTime now = clocks_.monotonic.now();
      for (auto it = queue_.begin(); it != queue_.end(); ++it) {
        if (it->second <= now) {
          due = it->first;
          queue_.erase(it);
          break;
        }
        earliest = std::min(earliest, it->second);
      }
      if (due == nullptr) {
        if (st.stop_requested()) return;
        wake_ = std::stop_source();
        woken = wake_.get_token();
      }
    }
    if (due != nullptr) {
      due->fetch();
      continue;
    }
    const MonoTime now = clocks_.monotonic.now();
    const MonoTime until = earliest == MonoTime::max() ? now + std::chrono::hours(1) : earliest;
    (void)clocks_.monotonic.wait_until(until, woken);
  }
}

void SegmentService::Impl::stop() {
  if (stopping_.exchange(true, std::memory_order_acq_rel)) return;
  std::jthread fetcher;
  {
    std::lock_guard lock(queue_mu_);
    fetcher = std::move(fetcher_);
  }
  fetcher.request_stop();
  if (fetcher.joinable()) fetcher.join();
  std::lock_guard lock(tags_mu_);
  for (auto& [name, tag] : tags_) {
    (void)name;
    std::lock_guard tag_lock(tag->mutex());
    tag->wake_waiters_locked();
  }
}

bool SegmentService::Impl::known_unknown(std::string_view name) {
  std::lock_guard lock(unknown_mu_);
  const auto it = unknown_.find(std::string(name));
  if (it == unknown_.end()) return false;
  if (clocks_.monotonic.now() >= it->second) {
    unknown_.erase(it);
    return false;
  }
  unknown_hits_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void SegmentService::Impl::remember_unknown(std::string_view name) {
  const MonoTime now = clocks_.monotonic.now();
  std::lock_guard lock(unknown_mu_);
  if (unknown_.size() >= kMaxUnknownTags) {
    std::erase_if(unknown_, [now](const auto& entry) { return now >= entry.second; });
    if (unknown_.size() >= kMaxUnknownTags) unknown_.clear();
  }
  unknown_[std::string(name)] = now + options_.unknown_tag_ttl;
}

void SegmentService::Impl::forget_unknown(std::string_view name) {
  std::lock_guard lock(unknown_mu_);
  unknown_.erase(std::string(name));
}

static Status no_such_tag(std::string_view name) {
  return Status(StatusCode::kNotFound, "no segment tag " + internal::quote(name) +
                                           " (create it first: POST /v1/segments or "
                                           "`flurry segment create`)");
}

Result<SegmentService::Impl::Tag*> SegmentService::Impl::find(std::string_view name,
                                                              Blocking blocking) {
  if (Tag* tag = index_.find(name)) return tag;
  if (Status st = check_segment_tag(name); !st.ok()) return st;
  if (stopping()) return shut_down();
  if (known_unknown(name)) return no_such_tag(name);
  if (blocking == Blocking::kNever) {
    return Status(Reason::kWouldBlock,
                  "segment tag " + internal::quote(name) + " must be looked up in the store");
  }
  // One store read per tag however many callers ask at once; other tags are not held up.
  std::shared_ptr<Lookup> lookup;
  bool leader = false;
  {
    std::unique_lock lock(lookups_mu_);
    auto [it, inserted] = lookups_.try_emplace(std::string(name));
    if (inserted && known_unknown(name)) {
      // A lookup that finished between the check above and this lock remembered the answer.
      lookups_.erase(it);
      return no_such_tag(name);
    }
    if (inserted) it->second = std::make_shared<Lookup>();
    lookup = it->second;
    leader = inserted;
    if (!leader) {
      lookup->cv.wait(lock, [&] { return lookup->done; });
      if (lookup->tag != nullptr) return lookup->tag;
      return lookup->status;
    }
  }
  Result<Tag*> got = look_up(name);
  std::lock_guard lock(lookups_mu_);
  lookup->done = true;
  if (got.ok()) {
    lookup->tag = *got;
  } else {
    lookup->status = got.status();
  }
  lookups_.erase(std::string(name));
  lookup->cv.notify_all();
  return got;
}

Result<internal::SegmentFloorKeys> SegmentService::Impl::floor_keys(std::size_t s,
                                                                    Blocking blocking) {
  Result<SegmentStoreIdentity> id = stores_[s]->identity(blocking);
  if (!id.ok()) return id.status();
  // Two of the stores with one store ID are one store copied: their floors would be one.
  for (std::size_t o = 0; o < stores_.size() && !id->store_id.empty(); ++o) {
    if (o == s) continue;
    Result<SegmentStoreIdentity> other = stores_[o]->identity(Blocking::kNever);
    if (other.ok() && other->store_id == id->store_id) {
      return Status(StatusCode::kFailedPrecondition,
                    "segment stores " + names_[s] + " and " + names_[o] + " carry one store ID (" +
                        id->store_id +
                        "): one is a copy of the other, and this host's floors of the two would "
                        "be one; make the second store anew (an empty file or database) instead "
                        "of copying the first");
    }
  }
  return internal::segment_floor_keys(*id, names_[s]);
}

Result<SegmentService::Impl::Tag*> SegmentService::Impl::look_up(std::string_view name) {
  {
    // Under the writer lock: a tag added while find() missed it is found here.
    std::lock_guard lock(tags_mu_);
    if (auto it = tags_.find(name); it != tags_.end()) return it->second.get();
  }
  const std::size_t n = stores_.size();
  std::vector<Residue> residues(n);
  std::optional<std::size_t> holder;
  std::uint64_t base_step = 1;
  std::string errors;
  bool unavailable = false;
  std::optional<Status> regressed;
  const auto note = [&](std::size_t s, const Status& st) {
    if (!errors.empty()) errors += "; ";
    errors += names_[s] + ": " + st.to_string();
  };
  for (std::size_t s = 0; s < n; ++s) {
    store_reads_.fetch_add(1, std::memory_order_relaxed);
    Result<SegmentTagInfo> info = stores_[s]->tag(name);
    if (info.ok()) {
      residues[s] = Residue{Residue::State::kKnown, info->delta, info->remainder};
      if (!holder) {
        holder = s;
        base_step = std::max<std::uint64_t>(info->step, 1);
      }
      continue;
    }
    note(s, info.status());
    // What this host remembers of the store: a tag it gave ranges of cannot have vanished. A
    // store that is down is known by what it told before, or by its address.
    Result<internal::SegmentFloorKeys> keys = floor_keys(s, Blocking::kNever);
    Result<internal::SegmentFloorEntry> floor =
        keys.ok() ? floors_.get(*keys, name) : Result<internal::SegmentFloorEntry>(keys.status());
    if (!floor.ok()) {
      unavailable = true;
      note(s, floor.status());
      continue;
    }
    if (floor->delta > 0) {
      residues[s] = Residue{Residue::State::kKnown, floor->delta, floor->remainder};
    }
    if (info.status().code() == StatusCode::kNotFound) {
      if (floor->floor > 0) {
        regressed = Status(Reason::kStoreRegressed,
                           "segment store " + names_[s] + " went backwards: tag " +
                               internal::quote(name) + " is gone from it, though it gave this " +
                               "host IDs up to " + std::to_string(floor->floor) +
                               "; create the tag again with start at least " +
                               std::to_string(floor->floor));
      } else if (floor->delta == 0) {
        residues[s].state = Residue::State::kAbsent;
      }
    } else {
      unavailable = true;
    }
  }
  if (!holder) {
    if (regressed) return *regressed;
    if (unavailable) {
      return Status(Reason::kIo, "segment tag " + internal::quote(name) +
                                     ": no store could be asked for it (" + errors + ")");
    }
    remember_unknown(name);
    return no_such_tag(name);
  }
  if (Status st = prove_residues(name, names_, residues); !st.ok()) return st;
  if (n > 1) {
    // Remember each store's residue, so that a restart proves the tag while a store is down.
    for (std::size_t s = 0; s < n; ++s) {
      if (residues[s].state != Residue::State::kKnown) continue;
      Result<internal::SegmentFloorKeys> keys = floor_keys(s, Blocking::kNever);
      if (!keys.ok()) return keys.status();
      if (Status st = floors_.raise(*keys, name, 0, residues[s].delta, residues[s].remainder);
          !st.ok()) {
        return st;
      }
    }
  }
  auto tag =
      std::make_unique<Tag>(*this, std::string(name), *holder, base_step, std::move(residues));
  std::lock_guard lock(tags_mu_);
  // Another caller may have added it since the check above (a lookup of the same name
  // concurrent with one that just finished): keep the first, so one Tag serves the name.
  auto [it, inserted] = tags_.try_emplace(std::string(name), std::move(tag));
  if (inserted) index_.insert(it->second.get());
  return it->second.get();
}

Result<SegmentTagInfo> SegmentService::Impl::stored_tag(std::string_view name) {
  if (Status st = check_segment_tag(name); !st.ok()) return st;
  if (known_unknown(name)) return no_such_tag(name);
  std::string errors;
  bool unavailable = false;
  for (std::size_t s = 0; s < stores_.size(); ++s) {
    store_reads_.fetch_add(1, std::memory_order_relaxed);
    Result<SegmentTagInfo> info = stores_[s]->tag(name);
    if (info.ok()) return info;
    if (info.status().code() != StatusCode::kNotFound) unavailable = true;
    if (!errors.empty()) errors += "; ";
    errors += names_[s] + ": " + info.status().to_string();
  }
  if (unavailable) {
    return Status(Reason::kIo, "segment tag " + internal::quote(name) +
                                   ": no store could be asked for it (" + errors + ")");
  }
  remember_unknown(name);
  return no_such_tag(name);
}

Status SegmentService::Impl::create_tag(const SegmentTagSpec& spec) {
  if (Status st = check_segment_tag_spec(spec); !st.ok()) return st;
  const std::size_t n = stores_.size();
  if (n > 1 && (spec.delta != 1 || spec.remainder != 0)) {
    return InvalidArgument("delta and remainder are set per store: with " + std::to_string(n) +
                           " stores, store k gets delta " + std::to_string(n) +
                           " and remainder k; leave them out");
  }
  for (std::size_t s = 0; s < n; ++s) {
    SegmentTagSpec one = spec;
    if (n > 1) {
      one.delta = n;
      one.remainder = s;
    }
    if (Status st = stores_[s]->create_tag(one); !st.ok()) {
      return n > 1 ? st.with_prefix(names_[s]) : st;
    }
  }
  forget_unknown(spec.tag);
  return OkStatus();
}

Result<std::vector<SegmentTagInfo>> SegmentService::Impl::list_tags() {
  std::map<std::string, SegmentTagInfo> all;
  std::string errors;
  std::size_t answered = 0;
  for (std::size_t s = 0; s < stores_.size(); ++s) {
    Result<std::vector<SegmentTagInfo>> got = stores_[s]->list_tags();
    if (!got.ok()) {
      if (!errors.empty()) errors += "; ";
      errors += names_[s] + ": " + got.status().to_string();
      continue;
    }
    ++answered;
    for (SegmentTagInfo& t : *got) all.try_emplace(t.tag, std::move(t));
  }
  if (answered == 0) return Status(Reason::kIo, "no segment store answered (" + errors + ")");
  std::vector<SegmentTagInfo> out;
  out.reserve(all.size());
  for (auto& [name, info] : all) out.push_back(std::move(info));
  return out;
}

// ---- SegmentService ----

Result<std::unique_ptr<SegmentService>> SegmentService::create(
    std::vector<std::unique_ptr<SegmentStore>> stores, SegmentOptions options, Clocks clocks) {
  if (stores.empty()) return InvalidArgument("segment mode needs at least one store");
  for (const auto& s : stores) {
    if (s == nullptr) return InvalidArgument("a segment store is null");
  }
  if (Status st = check_segment_options(options); !st.ok()) return st;
  if (!options.floor_dir.empty()) {
    // Usable now rather than at the first range: a planted link or a foreign directory is a
    // refused start, not a 503 on every tag later.
    internal::PrivateDirLock probe;
    if (Status st = probe.lock(options.floor_dir); !st.ok()) {
      return st.with_prefix("the segment store floors");
    }
  }
  return std::unique_ptr<SegmentService>(
      new SegmentService(std::make_unique<Impl>(std::move(stores), options, clocks)));
}

SegmentService::SegmentService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SegmentService::~SegmentService() = default;

Status SegmentService::next(std::string_view tag, std::span<std::uint64_t> out, Blocking blocking) {
  Result<Impl::Tag*> t = impl_->find(tag, blocking);
  if (!t.ok()) return t.status();
  return (*t)->next(out, blocking);
}

Result<SegmentCounter*> SegmentService::counter(std::string_view tag, Blocking blocking) {
  Result<Impl::Tag*> t = impl_->find(tag, blocking);
  if (!t.ok()) return t.status();
  return static_cast<SegmentCounter*>(*t);
}

Result<SegmentRange> SegmentService::range(std::string_view tag, std::uint64_t size,
                                           Blocking blocking) {
  Result<Impl::Tag*> t = impl_->find(tag, blocking);
  if (!t.ok()) return t.status();
  return (*t)->range(size, blocking);
}

Status SegmentService::create_tag(const SegmentTagSpec& spec) {
  return impl_->create_tag(spec);
}

Result<std::vector<SegmentTagInfo>> SegmentService::list_tags() {
  return impl_->list_tags();
}

Result<std::uint64_t> SegmentService::stored_max_id(std::string_view tag) {
  std::optional<std::uint64_t> highest;
  for (std::size_t s = 0; s < impl_->stores_.size(); ++s) {
    Result<SegmentTagInfo> row = impl_->stores_[s]->tag(tag);
    if (!row.ok()) {
      if (row.status().code() == StatusCode::kNotFound) continue;
      return row.status().with_prefix(impl_->names_[s]);
    }
    highest = std::max(highest.value_or(0), row->max_id);
  }
  if (!highest) {
    return Status(StatusCode::kNotFound, "no segment store has tag " + internal::quote(tag));
  }
  return *highest;
}

Result<SegmentTagInfo> SegmentService::stored_tag(std::string_view tag) {
  return impl_->stored_tag(tag);
}

SegmentService::LookupCounts SegmentService::lookup_counts() const noexcept {
  return {impl_->store_reads_.load(std::memory_order_relaxed),
          impl_->unknown_hits_.load(std::memory_order_relaxed)};
}

Result<SegmentTagState> SegmentService::inspect(std::string_view tag) const {
  std::lock_guard lock(impl_->tags_mu_);
  auto it = impl_->tags_.find(tag);
  if (it == impl_->tags_.end()) {
    return Status(StatusCode::kNotFound,
                  "segment tag " + internal::quote(tag) + " has not been served by this node");
  }
  return it->second->state();
}

std::vector<SegmentTagState> SegmentService::inspect_all() const {
  std::vector<SegmentTagState> out;
  std::lock_guard lock(impl_->tags_mu_);
  out.reserve(impl_->tags_.size());
  for (const auto& [name, tag] : impl_->tags_) out.push_back(tag->state());
  return out;
}

const SegmentOptions& SegmentService::options() const noexcept {
  return impl_->options_;
}

std::vector<std::string> SegmentService::store_names() const {
  return impl_->names_;
}

}  // namespace flurry

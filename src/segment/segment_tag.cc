// SegmentService, one tag's hot path: the double buffer (segment_service_impl.h lists the
// other files; include/flurry/segment_service.h and docs/segments.md the contract).
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
//
// Strict tags (segment_service.h): every range carries the leadership term it was fetched for,
// and its record carries it too, read inside the seqlock. A claim whose record's term is not the
// request's gives its indexes up (a gap) and goes to the slow path, which under mu_ retires a
// current range of an earlier term (the rest of it is never handed out), drops a next range of an
// earlier term and fetches again, or refuses when the tag serves a later term already. A range
// of term T is fetched only after a request of term T asked for it, so it was allocated after T
// began: above every number another leader answered before T.
#include <algorithm>
#include <cmath>

#include "core/quote.h"
#include "segment_service_impl.h"

namespace flurry {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using namespace internal;

Range internal::make_range(const SegmentAllocation& a) {
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

SegmentService::Impl::Tag::Tag(Impl& service, SegmentTag name, std::size_t store,
                               std::uint64_t base_step, std::vector<Residue> residues, bool strict)
    : service_(service),
      name_(std::move(name)),
      strict_(strict),
      base_step_(base_step),
      step_(base_step),
      preferred_store_(store),
      residues_(std::move(residues)) {
  ring_[0].epoch.store(0, std::memory_order_release);  // epoch 0: an empty range
}

// ---- The hot path ----

inline std::size_t SegmentService::Impl::Tag::claim(std::span<std::uint64_t> out, bool& exhausted,
                                                    bool& prefetch, std::uint64_t term) {
  exhausted = false;
  prefetch = false;
  const std::uint64_t n = out.size();
  if ((cursor_.load(std::memory_order_relaxed) & kIndexMask) >= kIndexGuard) {
    exhausted = true;
    return 0;
  }
  const std::uint64_t published = published_.load(std::memory_order_acquire);
  if (term != 0 && ring_[published % kRing].term.load(std::memory_order_relaxed) != term)
      [[unlikely]] {
    // Strict tags: a range of another term, seen before claiming anything (the slow path
    // retires it or refuses the request); the check after the claim covers a switch between.
    exhausted = true;
    return 0;
  }
  const std::uint64_t v = cursor_.fetch_add(n, std::memory_order_acq_rel);
  const std::uint64_t epoch = v >> kIndexBits;
  const std::uint64_t index = v & kIndexMask;
  RangeRecord& r = ring_[epoch % kRing];
  const std::uint64_t e1 = r.epoch.load(std::memory_order_acquire);
  const std::uint64_t first = r.first.load(std::memory_order_relaxed);
  const std::uint64_t delta = r.delta.load(std::memory_order_relaxed);
  const std::uint64_t count = r.count.load(std::memory_order_relaxed);
  const std::uint64_t prefetch_index = r.prefetch_index.load(std::memory_order_relaxed);
  const std::uint64_t range_term = r.term.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  const std::uint64_t e2 = r.epoch.load(std::memory_order_relaxed);
  if (!internal::segment_claim_is_current(published, v, e1, e2)) {
    // The record was rewritten while this caller was descheduled: the claimed indexes cannot be
    // turned into IDs any more. They are lost (a gap), never issued twice.
    skipped_.fetch_add(n, std::memory_order_relaxed);
    exhausted = true;
    return 0;
  }
  if (range_term != term) [[unlikely]] {
    // Strict tags: the range belongs to another leadership term. The indexes claimed inside it
    // are lost (a gap); the slow path retires the range or refuses the request.
    if (index < count) {
      const std::uint64_t lost = std::min(n, count - index);
      skipped_.fetch_add(lost, std::memory_order_relaxed);
      if (range_term < term) stale_term_ids_.fetch_add(lost, std::memory_order_relaxed);
    }
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

Status SegmentService::Impl::Tag::next(IdCount count, std::span<std::uint64_t> out,
                                       Blocking blocking, std::uint64_t term) {
  if (!strict_) {
    term = 0;
  } else if (term == 0 || service_.stores_.size() > 1) [[unlikely]] {
    return strict_tag_needs_leader(name_.view());
  }
  out = out.first(count.value());
  bool exhausted = false;
  bool prefetch = false;
  const std::size_t filled = claim(out, exhausted, prefetch, term);
  if (filled == out.size() && !prefetch) [[likely]] {
    return OkStatus();
  }
  return next_slow(out, filled, prefetch, blocking, term);
}

Status SegmentService::Impl::Tag::retire_stale_locked(std::uint64_t term) {
  if (!strict_ || !current_ || current_->term == term) return OkStatus();
  if (current_->term > term) {
    return Status(StatusCode::kUnavailable, "segment tag " + internal::quote(name_.view()) +
                                                ": leadership term " + std::to_string(term) +
                                                " is over (the tag serves term " +
                                                std::to_string(current_->term) + " now)");
  }
  // Fetched in an earlier term: another leader may have handed out higher numbers since, so
  // the rest of the range is never handed out. Once: the cursor then stays at or past the
  // range's end until the next switch (claims of the old term add at most kMaxIdCount each).
  if ((cursor_.load(std::memory_order_relaxed) & kIndexMask) < current_->count) {
    const std::uint64_t got =
        cursor_.fetch_add(kIndexGuard, std::memory_order_acq_rel) & kIndexMask;
    if (got < current_->count) {
      skipped_.fetch_add(current_->count - got, std::memory_order_relaxed);
      stale_term_ids_.fetch_add(current_->count - got, std::memory_order_relaxed);
    }
  }
  return OkStatus();
}

Status SegmentService::Impl::Tag::next_slow(std::span<std::uint64_t> out, std::size_t filled,
                                            bool prefetch, Blocking blocking, std::uint64_t term) {
  if (prefetch) {
    MutexLock lock(mu_);
    want_next_locked(term);
  }
  if (filled == out.size()) return OkStatus();
  bool exhausted = false;

  // The slow path: the current range ran out (or was never fetched).
  MutexLock lock(mu_);
  const MonoTime deadline = service_.clocks_.monotonic.now() + service_.options_.max_wait;
  bool waited = false;
  while (filled < out.size()) {
    if (service_.stopping()) {
      skipped_.fetch_add(filled, std::memory_order_relaxed);
      return segment_service_stopping();
    }
    if (Status st = retire_stale_locked(term); !st.ok()) {
      skipped_.fetch_add(filled, std::memory_order_relaxed);
      return st;
    }
    filled += claim(out.subspan(filled), exhausted, prefetch, term);
    if (prefetch) want_next_locked(term);
    if (filled == out.size()) break;
    if (Status st = await_next_locked(blocking, deadline, waited, out.size(), term); !st.ok()) {
      // The IDs claimed so far are not handed out: a gap, never a duplicate.
      skipped_.fetch_add(filled, std::memory_order_relaxed);
      return st;
    }
  }
  return OkStatus();
}

Result<SegmentRange> SegmentService::Impl::Tag::range(IdCount count, Blocking blocking,
                                                      std::uint64_t term) {
  if (!strict_) {
    term = 0;
  } else if (term == 0 || service_.stores_.size() > 1) {
    return strict_tag_needs_leader(name_.view());
  }
  const std::uint64_t size = count.value();
  MutexLock lock(mu_);
  const MonoTime deadline = service_.clocks_.monotonic.now() + service_.options_.max_wait;
  bool waited = false;
  for (;;) {
    if (service_.stopping()) return segment_service_stopping();
    if (Status st = retire_stale_locked(term); !st.ok()) return st;
    if (current_) {
      // The largest range this tag can give: its step over delta (the next fetch's step).
      const std::uint64_t delta = std::max<std::uint64_t>(current_->alloc.delta, 1);
      const std::uint64_t most = std::max(current_->count, std::max(step_, base_step_) / delta);
      if (size > most) {
        return Status(StatusCode::kOutOfRange,
                      "size " + std::to_string(size) + " exceeds the " + std::to_string(most) +
                          " IDs of one range of segment tag " + internal::quote(name_.view()) +
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
            want_next_locked(term);
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
    if (Status st = await_next_locked(blocking, deadline, waited, size, term); !st.ok()) {
      return st;
    }
  }
}

Status SegmentService::Impl::Tag::await_next_locked(Blocking blocking, MonoTime deadline,
                                                    bool& waited, std::uint64_t asked,
                                                    std::uint64_t term) {
  if (next_ && next_->term < term) {
    // Fetched for an earlier term (a prefetch that began before this term, say): never used.
    stale_term_ids_.fetch_add(next_->count, std::memory_order_relaxed);
    next_.reset();
  }
  if (next_) {
    switch_locked();
    return OkStatus();
  }
  want_next_locked(term);
  if (refusal_) {
    unavailable_.fetch_add(1, std::memory_order_relaxed);
    return *refusal_;
  }
  if (blocking == Blocking::kNever) {
    return Status(Reason::kWouldBlock, "segment tag " + internal::quote(name_.view()) +
                                           ": both buffers are empty; waiting for the store");
  }
  if (!waited) {
    waited = true;
    waits_.fetch_add(1, std::memory_order_relaxed);
  }
  if (!wait_locked(deadline) && !next_) {
    unavailable_.fetch_add(1, std::memory_order_relaxed);
    return unavailable_locked(asked);
  }
  return OkStatus();
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
  r.term.store(current_->term, std::memory_order_relaxed);
  r.epoch.store(epoch_, std::memory_order_release);
  cursor_.store(internal::segment_cursor_start(epoch_), std::memory_order_release);
  published_.store(epoch_, std::memory_order_release);
  // A range too small to reach its prefetch index by a claim still needs its successor.
  if (share == 0) want_next_locked();
}

void SegmentService::Impl::Tag::want_next_locked(std::uint64_t term) {
  wanted_term_ = std::max(wanted_term_, term);
  if (fetching_ || next_ || service_.stopping()) return;
  fetching_ = true;
  service_.schedule(this, service_.clocks_.monotonic.now() + backoff_);
}

bool SegmentService::Impl::Tag::wait_locked(MonoTime deadline) {
  if (service_.clocks_.monotonic.now() >= deadline) return false;
  std::stop_source woken;
  waiters_.push_back(&woken);
  // Unlocked while waiting: the fetch that wakes this caller takes mu_ to publish its range.
  mu_.unlock();
  const bool reached = service_.clocks_.monotonic.wait_until(deadline, woken.get_token());
  mu_.lock();
  std::erase(waiters_, &woken);
  return !reached;
}

void SegmentService::Impl::Tag::wake_waiters_locked() {
  for (std::stop_source* w : waiters_) w->request_stop();
}

void SegmentService::Impl::Tag::wake_waiters() {
  MutexLock lock(mu_);
  wake_waiters_locked();
}

Status SegmentService::Impl::Tag::unavailable_locked(std::uint64_t asked) const {
  std::string msg = "segment tag " + internal::quote(name_.view()) + ": no IDs for " +
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

SegmentTagState SegmentService::Impl::Tag::state() const {
  MutexLock lock(mu_);
  SegmentTagState s;
  s.tag = name_.name();
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
  s.strict = strict_;
  s.term = current_ ? current_->term : 0;
  s.stale_term_ids = stale_term_ids_.load(std::memory_order_relaxed);
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

}  // namespace flurry

// SegmentService: fetching a tag's ranges from its stores, never below this host's floors and
// only with residues that keep the tag's proof, and the first lookup of a tag in every store
// (segment_service_impl.h lists the other files).
#include <algorithm>

#include "core/quote.h"
#include "segment_service_impl.h"
#include "stores.h"

namespace flurry {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using namespace internal;

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
  if (Status st = prove_residues(name_.view(), service_.names_, trial); !st.ok()) return st;
  residues_ = std::move(trial);
  return OkStatus();
}

void SegmentService::Impl::Tag::fetch() {
  std::uint64_t step = 0;
  std::size_t first_store = 0;
  std::uint64_t term = 0;
  {
    MutexLock lock(mu_);
    // Strict tags: the term of the latest request that asked (it began before this fetch).
    term = wanted_term_;
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
    Result<internal::SegmentFloorEntry> floor = service_.floors_.get(*keys, name_.view());
    if (!floor.ok()) {
      failed(s, floor.status());
      continue;
    }
    const MonoTime started = service_.clocks_.monotonic.now();
    Result<SegmentAllocation> got = service_.stores_[s]->allocate(name_, step, floor->floor);
    const MonoTime done = service_.clocks_.monotonic.now();
    if (!got.ok()) {
      if (got.status().code() == StatusCode::kNotFound && floor->floor > 0) {
        failed(s, Status(Reason::kStoreRegressed,
                         "segment store " + where + " went backwards: tag " +
                             internal::quote(name_.view()) +
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
      failed(s, internal::segment_store_regressed(where, name_.view(), got->start, floor->floor));
      continue;
    }
    {
      MutexLock lock(mu_);
      if (Status st = check_residue_locked(s, *got); !st.ok()) {
        failed(s, st);
        continue;
      }
    }
    // Durable before any ID of the range is handed out.
    if (Status st =
            service_.floors_.raise(*keys, name_.view(), got->end, got->delta, got->remainder);
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
    r.term = term;
    ranges_fetched_.fetch_add(1, std::memory_order_relaxed);
    fetch_time_us_.fetch_add(r.fetch_duration.count(), std::memory_order_relaxed);
    MutexLock lock(mu_);
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
    MutexLock lock(mu_);
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
      refusal_ =
          refusal->reason() == Reason::kStoreRegressed
              ? Status(Reason::kStoreRegressed, "segment tag " + internal::quote(name_.view()) +
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
    service_.options_.on_fetch_failed(name_.view(), service_.names_[failure_report->first],
                                      failure_report->second, failures_reported);
  }
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

Result<SegmentService::Impl::Tag*> SegmentService::Impl::look_up(const SegmentTag& tag) {
  const std::string_view name = tag.view();
  {
    // Under the writer lock: a tag added while find() missed it is found here.
    MutexLock lock(tags_mu_);
    if (auto it = tags_.find(name); it != tags_.end()) return it->second.get();
  }
  const std::size_t n = stores_.size();
  std::vector<Residue> residues(n);
  std::optional<std::size_t> holder;
  std::uint64_t base_step = 1;
  bool strict = false;
  std::string errors;
  bool unavailable = false;
  std::optional<Status> regressed;
  const auto note = [&](std::size_t s, const Status& st) {
    if (!errors.empty()) errors += "; ";
    errors += names_[s] + ": " + st.to_string();
  };
  for (std::size_t s = 0; s < n; ++s) {
    store_reads_.fetch_add(1, std::memory_order_relaxed);
    Result<SegmentTagInfo> info = stores_[s]->tag(tag);
    if (info.ok()) {
      residues[s] = Residue{Residue::State::kKnown, info->delta, info->remainder};
      if (!holder) {
        holder = s;
        base_step = std::max<std::uint64_t>(info->step, 1);
      }
      strict = strict || info->strict;
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
    return no_such_segment_tag(name);
  }
  if (Status st = prove_residues(name, names_, residues); !st.ok()) return st;
  if (strict && n > 1) return strict_tag_needs_leader(name);
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
  auto made = std::make_unique<Tag>(*this, tag, *holder, base_step, std::move(residues), strict);
  MutexLock lock(tags_mu_);
  // Another caller may have added it since the check above (a lookup of the same name
  // concurrent with one that just finished): keep the first, so one Tag serves the name.
  auto [it, inserted] = tags_.try_emplace(std::string(name), std::move(made));
  if (inserted) index_.insert(it->second.get());
  return it->second.get();
}

}  // namespace flurry

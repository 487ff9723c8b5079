// Internal: SegmentService's state, shared by the files that implement it.
//
//   segment_tag.cc      one tag's hot path: the double buffer, claims with one atomic add, the
//                       switch to the next range, waiting for it (the protocol is described
//                       there).
//   segment_fetch.cc    fetching a tag's next range from its stores (floors, residues), and the
//                       first lookup of a tag in every store.
//   segment_fetcher.cc  the one background thread that runs the fetches.
//   segment_residues.cc the residue proof of a tag served by several stores.
//   segment_service.cc  the facade: options, the tags by name, unknown tags, the stores' rows.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cursor.h"
#include "flurry/mutex.h"
#include "flurry/segment_service.h"
#include "segment_floor.h"
#include "segment_residues.h"
#include "tag_index.h"

namespace flurry {
namespace internal {

constexpr int kIndexBits = kSegmentIndexBits;
constexpr std::uint64_t kIndexMask = kSegmentIndexMask;
// Callers stop claiming with fetch_add once the index passes this (segment_tag.cc).
constexpr std::uint64_t kIndexGuard = std::uint64_t{1} << 39;
// A claim adds at most one IdCount: it never carries the index past its 40 bits.
static_assert(kMaxIdCount <= kMaxSegmentStep && kIndexGuard + kMaxIdCount < kIndexMask);
constexpr std::uint64_t kWriting = ~std::uint64_t{0};
constexpr std::size_t kRing = 4;
// The background thread's retry delays after a store error.
constexpr std::chrono::milliseconds kFirstBackoff{50};
constexpr std::chrono::milliseconds kMaxBackoff{2000};
// Most tags remembered as unknown at once; beyond it the expired ones go, then all of them.
constexpr std::size_t kMaxUnknownTags = 65536;

// One range's parameters, as callers of its epoch read them.
struct RangeRecord {
  std::atomic<std::uint64_t> epoch{kWriting};
  std::atomic<std::uint64_t> first{0};
  std::atomic<std::uint64_t> delta{1};
  std::atomic<std::uint64_t> count{0};
  // The index whose claim starts the prefetch of the next range.
  std::atomic<std::uint64_t> prefetch_index{0};
  // Strict tags: the leadership term the range was fetched in (0 for other tags).
  std::atomic<std::uint64_t> term{0};
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
  std::chrono::microseconds fetch_duration{0};
  // Strict tags: the leadership term of the request that asked for the fetch (it began before
  // the fetch started); 0 for other tags.
  std::uint64_t term = 0;
};

// The range of an allocation: its first ID and how many IDs it holds.
[[nodiscard]] Range make_range(const SegmentAllocation& a);

// UNAVAILABLE / SHUT_DOWN.
[[nodiscard]] Status segment_service_stopping();

// NOT_FOUND naming the tag and how to create it.
[[nodiscard]] Status no_such_segment_tag(std::string_view name);

// FAILED_PRECONDITION: strict tag `name` is served only by the timestamp oracle's leader.
[[nodiscard]] Status strict_tag_needs_leader(std::string_view name);

}  // namespace internal

class SegmentService::Impl {
 public:
  class Tag;

  Impl(std::vector<std::unique_ptr<SegmentStore>> stores, SegmentOptions options, Clocks clocks);
  ~Impl() { stop(); }

  // Stops the background thread and wakes every waiting caller (they get SHUT_DOWN).
  void stop() FLURRY_EXCLUDES(queue_mu_, tags_mu_);
  // The keys of store `s`'s floors (segment_floor.h): its identity as the store tells it, asked
  // of the store with kAllowed (errors as the store's calls), or what it knows with kNever.
  Result<internal::SegmentFloorKeys> floor_keys(std::size_t s, Blocking blocking);
  // The tag, looked up in the stores at its first use (errors as SegmentService::next()).
  Result<Tag*> find(const SegmentTag& name, Blocking blocking) FLURRY_EXCLUDES(lookups_mu_);
  Result<SegmentTagInfo> stored_tag(const SegmentTag& name);
  Status create_tag(const SegmentTagSpec& spec);
  Result<std::vector<SegmentTagInfo>> list_tags();
  // Queues a fetch of `tag`'s next range, to start no earlier than `not_before`.
  void schedule(Tag* tag, MonoTime not_before) FLURRY_EXCLUDES(queue_mu_);
  [[nodiscard]] bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }
  // Forgets that `name` was unknown (it was just created).
  void forget_unknown(std::string_view name) FLURRY_EXCLUDES(unknown_mu_);

  std::vector<std::unique_ptr<SegmentStore>> stores_;
  std::vector<std::string> names_;
  const SegmentOptions options_;
  const Clocks clocks_;

  // The writer lock of the tags: adding one, and listing them. Lookups by name go through
  // `index_` and take no lock.
  mutable Mutex tags_mu_;
  std::map<std::string, std::unique_ptr<Tag>, std::less<>> tags_
      FLURRY_GUARDED_BY(tags_mu_);  // owns the tags
  internal::TagIndex<Tag> index_;   // the same tags, lock-free; inserted into under tags_mu_
  internal::SegmentFloors floors_;
  std::atomic<std::uint64_t> store_reads_{0};
  std::atomic<std::uint64_t> unknown_hits_{0};

 private:
  // A first lookup under way: callers of the same tag wait for it instead of reading the stores.
  // Its fields are guarded by the service's lookups_mu_.
  struct Lookup {
    bool done = false;
    Status status;
    Tag* tag = nullptr;
    std::condition_variable cv;
  };

  void fetch_loop(std::stop_token st) FLURRY_EXCLUDES(queue_mu_);
  // Reads every store for `name` and makes its buffers; no lock held across the reads.
  Result<Tag*> look_up(const SegmentTag& name) FLURRY_EXCLUDES(tags_mu_);
  [[nodiscard]] bool known_unknown(std::string_view name) FLURRY_EXCLUDES(unknown_mu_);
  void remember_unknown(std::string_view name) FLURRY_EXCLUDES(unknown_mu_);

  Mutex lookups_mu_;  // guards lookups_ and every Lookup
  std::unordered_map<std::string, std::shared_ptr<Lookup>> lookups_ FLURRY_GUARDED_BY(lookups_mu_);
  Mutex unknown_mu_;
  // tag -> until when it is known unknown
  std::unordered_map<std::string, MonoTime> unknown_ FLURRY_GUARDED_BY(unknown_mu_);

  std::atomic<bool> stopping_{false};
  Mutex queue_mu_;
  std::deque<std::pair<Tag*, MonoTime>> queue_ FLURRY_GUARDED_BY(queue_mu_);
  // Replaced each time the fetcher sleeps; stopped to wake it.
  std::stop_source wake_ FLURRY_GUARDED_BY(queue_mu_);
  std::jthread fetcher_ FLURRY_GUARDED_BY(queue_mu_);  // started by the first schedule()
};

class SegmentService::Impl::Tag final : public SegmentCounter {
 public:
  Tag(Impl& service, SegmentTag name, std::size_t store, std::uint64_t base_step,
      std::vector<internal::Residue> residues, bool strict);

  // `term`: SegmentService::next's; ignored (0) unless the tag is strict.
  Status next(IdCount count, std::span<std::uint64_t> out, Blocking blocking,
              std::uint64_t term) override FLURRY_EXCLUDES(mu_);
  [[nodiscard]] const std::string& tag() const noexcept override { return name_.name(); }
  [[nodiscard]] bool strict() const noexcept override { return strict_; }
  Result<SegmentRange> range(IdCount size, Blocking blocking, std::uint64_t term)
      FLURRY_EXCLUDES(mu_);
  // The background thread's work: fetch the next range and make it available.
  void fetch() FLURRY_EXCLUDES(mu_);
  [[nodiscard]] SegmentTagState state() const FLURRY_EXCLUDES(mu_);
  // Wakes every caller waiting for a range (the service is stopping).
  void wake_waiters() FLURRY_EXCLUDES(mu_);

 private:
  // Claims up to `want` indexes of the current epoch with one fetch_add. Returns how many IDs
  // were written to `out` (from the front); sets `exhausted` when the range has no more, or
  // when it belongs to another term than `term` (its claimed indexes are then lost).
  std::size_t claim(std::span<std::uint64_t> out, bool& exhausted, bool& prefetch,
                    std::uint64_t term);
  // next() once the current range could not serve the whole request, or a prefetch is due.
  [[gnu::noinline]] Status next_slow(std::span<std::uint64_t> out, std::size_t filled,
                                     bool prefetch, Blocking blocking, std::uint64_t term)
      FLURRY_EXCLUDES(mu_);
  // Strict tags, for a request of `term`: takes the current range out of circulation when it
  // was fetched in an earlier term. UNAVAILABLE when it belongs to a later one (the request's
  // term is over). OK at once for other tags.
  Status retire_stale_locked(std::uint64_t term) FLURRY_REQUIRES(mu_);
  // The current range cannot serve a request for `asked` IDs: switches to the next range if it
  // is there, or waits for it (unlocking) until `deadline`. OK: try the current range again;
  // otherwise the error to return (the refusal, WOULD_BLOCK with kNever, UNAVAILABLE after the
  // deadline). `waited` is set at the first wait (counted once per request).
  // A strict tag's next range of an earlier term than `term` is dropped and fetched again.
  Status await_next_locked(Blocking blocking, MonoTime deadline, bool& waited, std::uint64_t asked,
                           std::uint64_t term) FLURRY_REQUIRES(mu_);
  // Makes next_ the current range. Precondition: next_.
  void switch_locked() FLURRY_REQUIRES(mu_);
  // Asks the background thread for the next range unless one is on its way; a fetch not
  // started yet takes the highest `term` asked for (strict tags).
  void want_next_locked(std::uint64_t term = 0) FLURRY_REQUIRES(mu_);
  // Waits (unlocking) until a fetch completes, the deadline passes or the service stops.
  // Returns false on the deadline.
  bool wait_locked(MonoTime deadline) FLURRY_REQUIRES(mu_);
  void wake_waiters_locked() FLURRY_REQUIRES(mu_);
  Status unavailable_locked(std::uint64_t asked) const FLURRY_REQUIRES(mu_);
  std::uint64_t next_step_locked(MonoTime now) const FLURRY_REQUIRES(mu_);
  // OK when a range of store `s` with this residue keeps the tag's residue proof.
  Status check_residue_locked(std::size_t s, const SegmentAllocation& got) FLURRY_REQUIRES(mu_);

  Impl& service_;
  const SegmentTag name_;
  const bool strict_;

  // The hot path's state.
  alignas(64) std::atomic<std::uint64_t> cursor_{0};
  alignas(64) std::atomic<std::uint64_t> published_{0};  // the current 64-bit epoch
  internal::RangeRecord ring_[internal::kRing];

  mutable Mutex mu_;
  std::uint64_t epoch_ FLURRY_GUARDED_BY(mu_) = 0;
  std::optional<internal::Range> current_ FLURRY_GUARDED_BY(mu_);
  std::optional<internal::Range> next_ FLURRY_GUARDED_BY(mu_);
  bool fetching_ FLURRY_GUARDED_BY(mu_) = false;  // queued or under way
  // Strict tags: the highest term a request asked a range for; the next fetch records it.
  std::uint64_t wanted_term_ FLURRY_GUARDED_BY(mu_) = 0;
  std::uint64_t base_step_ FLURRY_GUARDED_BY(mu_);
  std::uint64_t step_ FLURRY_GUARDED_BY(mu_);  // the step of the last fetch
  std::size_t preferred_store_ FLURRY_GUARDED_BY(mu_);
  std::chrono::milliseconds backoff_ FLURRY_GUARDED_BY(mu_){0};
  std::vector<std::stop_source*> waiters_ FLURRY_GUARDED_BY(mu_);
  std::uint64_t retired_ids_ FLURRY_GUARDED_BY(mu_) = 0;  // IDs of the ranges before the current
  std::string last_error_ FLURRY_GUARDED_BY(mu_);
  // Per store, as proven at first use and by each range.
  std::vector<internal::Residue> residues_ FLURRY_GUARDED_BY(mu_);
  // Why the last fetch failed when retrying soon cannot help (STORE_REGRESSED, residues): callers
  // with empty buffers get it at once. Cleared by the next range.
  std::optional<Status> refusal_ FLURRY_GUARDED_BY(mu_);
  std::optional<MonoTime> last_regression_report_ FLURRY_GUARDED_BY(mu_);
  // Failed fetches not yet reported (on_fetch_failed): the first one's store and status, and
  // how many store attempts failed since the last report.
  std::optional<std::pair<std::size_t, Status>> unreported_failure_ FLURRY_GUARDED_BY(mu_);
  std::uint64_t unreported_failures_ FLURRY_GUARDED_BY(mu_) = 0;
  std::optional<MonoTime> last_failure_report_ FLURRY_GUARDED_BY(mu_);

  // Counters (read without mu_ for metrics).
  std::atomic<std::uint64_t> skipped_{0};
  std::atomic<std::uint64_t> ranges_fetched_{0};
  std::atomic<std::uint64_t> store_errors_{0};
  std::atomic<std::uint64_t> waits_{0};
  std::atomic<std::uint64_t> unavailable_{0};
  std::atomic<std::uint64_t> store_regressed_{0};
  std::atomic<std::uint64_t> stale_term_ids_{0};
  std::atomic<std::int64_t> fetch_time_us_{0};
};

}  // namespace flurry

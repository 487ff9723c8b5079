// Segment mode's in-memory half: short, plain, increasing integers per business tag, served from
// ranges that one or more SegmentStores hand out (docs/segments.md).
//
// Per tag the service keeps two buffers, as Meituan Leaf does. IDs come from the current range
// with one atomic add; once a share (prefetch_at, default 10%) of it is used, the next range is
// fetched in the background, so the switch to it is instant. A batch may span the end of one
// range and the start of the next. Only when both buffers are empty (the store is down or slower
// than demand) does a caller wait, at most max_wait, and then gets UNAVAILABLE.
//
// Adaptive step (Leaf's rule): a range that lasted less than target_duration doubles the next
// step, up to max_step; one that lasted more than twice target_duration halves it, never below
// the tag's base step.
//
// Several stores: a tag is looked for in every store; ranges come from the one that answered last,
// the others are tried when it fails. Stores that serve one tag must give it one delta (at least
// the number of stores) and different remainders (SegmentStore), so their IDs never collide:
// this is proven from the stores' rows at the tag's first use and checked again at every range,
// and a tag that fails the proof is refused (FAILED_PRECONDITION naming the stores). With one
// store, every ID a node issues for a tag is above every ID it issued for that tag before,
// across restarts too; with several, only IDs from one store are ordered so.
//
// Store floors: per (store, tag) the service remembers the end of the last range the store gave
// this host (in memory and, with floor_dir and host_dir, in host-local files made durable before
// the range is used), keyed by the store's identity (SegmentStore::identity()), not by how its
// location is written. A store found below it (max_id moved down, a restored backup, a tag deleted
// or created again) is refused with UNAVAILABLE / STORE_REGRESSED and nothing is written to it; the
// tag serves again from the first attempt after an operator repairs the store above the floor.
//
// Unknown tags: a tag no store has is remembered as absent for unknown_tag_ttl (on the injected
// MonotonicClock), and concurrent first lookups of one tag share one store read, so a flood of
// unknown tags costs at most one read per store per distinct tag per TTL and holds no lock that
// other tags need.
//
// Strict tags (SegmentTagSpec::strict): served only by the timestamp oracle's leader, so that
// their numbers increase across every server. The service does not know the oracle; its caller
// passes the leadership term it holds (TimestampOracle::term()) with each request, and checks
// that it still holds it after the numbers were taken (TimestampOracle::check_term). Each range
// of a strict tag carries the term of the request that asked for it, which began before the
// range was fetched; a request of term T uses only ranges of term T, discards those of earlier
// terms (a prefetch started before T included: another leader may have handed out higher
// numbers since) and refuses when the tag has moved on to a later term. A strict tag is served
// by a service with one store only (numbers of two stores are not ordered).
//
// Thread safety: every method may be called from any thread at any time after create().
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/generator.h"  // Blocking
#include "flurry/host_dir.h"
#include "flurry/id_count.h"
#include "flurry/segment_store.h"
#include "flurry/status.h"

namespace flurry {

struct SegmentOptions {
  // The share of the current range used before the next one is fetched: 0 < prefetch_at < 1.
  double prefetch_at = 0.1;
  // Adaptive step: the duration one range should last.
  std::chrono::milliseconds target_duration{15 * 60 * 1000};
  // Adaptive step: the largest step (at least every tag's base step to have any effect).
  std::uint64_t max_step = 1'000'000;
  // Longest a caller waits when both buffers are empty, before UNAVAILABLE.
  std::chrono::milliseconds max_wait{1000};
  // Most IDs one next() call may ask for, and the largest range() size.
  std::uint64_t max_batch = 100'000;
  // Where this host keeps its store floors (small files per store identity and tag; shared by
  // the processes of the host that use the same directory). Empty: none.
  std::filesystem::path floor_dir;
  // The host directory (host_dir.h), opened by the caller: the floors are also written to this
  // user's entry there and read from every user's, so that every flurry process of the host
  // knows them, whatever its data directory or user. Unopened: none. With neither this nor
  // floor_dir, floors are kept in memory only and forgotten at exit.
  HostDir host_dir;
  // How long a tag that no store has is answered NOT_FOUND from memory. Positive.
  std::chrono::milliseconds unknown_tag_ttl{1000};
  // Told of each refused allocation from a store that went backwards (STORE_REGRESSED), at most
  // once per tag per regression_log_interval; called on the service's background thread. May be
  // empty.
  std::function<void(const Status&)> on_store_regressed;
  std::chrono::milliseconds regression_log_interval{10'000};
  // Told of a tag's failed range fetches, at most once per tag per regression_log_interval:
  // the tag, the store (describe()) and status of the first failure since the last report, and
  // how many failures (one per store tried) that report covers. Called on the service's
  // background thread, without the tag's lock. May be empty.
  std::function<void(std::string_view tag, std::string_view store, const Status& status,
                     std::uint64_t failures)>
      on_fetch_failed;
};

// INVALID_ARGUMENT naming the option when one is out of range.
[[nodiscard]] Status check_segment_options(const SegmentOptions& options);

// A contiguous run of one tag's IDs, for a client that serves them in-process: start, start +
// delta, ..., up to but excluding end.
struct SegmentRange {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t delta = 1;
  [[nodiscard]] std::uint64_t size() const noexcept { return (end - start) / delta; }
};

// One buffer as SegmentService::inspect shows it.
struct SegmentBufferInfo {
  std::uint64_t start = 0;  // first ID of the range
  std::uint64_t end = 0;    // one past the range
  std::uint64_t delta = 1;
  std::uint64_t remainder = 0;
  std::uint64_t size = 0;       // IDs in the range
  std::uint64_t remaining = 0;  // IDs not handed out yet
  std::uint64_t step = 0;       // the step it was fetched with
  std::string store;            // SegmentStore::describe() of where it came from
  std::int64_t fetched_unix_ms = 0;
  std::chrono::microseconds fetch_duration{0};  // how long the store took
};

// One tag's state (what Leaf's cache page shows) and its counters.
struct SegmentTagState {
  std::string tag;
  std::optional<SegmentBufferInfo> current;  // absent before the first range arrived
  std::optional<SegmentBufferInfo> next;     // absent until prefetched
  bool fetching = false;                     // a fetch is under way
  bool strict = false;                       // SegmentTagSpec::strict
  // Strict tags: the leadership term of the current range (0: none yet, or not strict).
  std::uint64_t term = 0;
  std::uint64_t step = 0;  // the step the next fetch will ask for
  std::uint64_t base_step = 0;
  std::uint64_t remaining = 0;  // IDs in both buffers not handed out yet
  // Counters since the service started.
  std::uint64_t ids_issued = 0;
  std::uint64_t ids_skipped = 0;  // ends of ranges too short for a range() request
  std::uint64_t ranges_fetched = 0;
  std::uint64_t store_errors = 0;
  std::uint64_t waits = 0;        // callers that found both buffers empty
  std::uint64_t unavailable = 0;  // of those, the ones that gave up after max_wait
  // Strict tags: IDs of ranges dropped because they were fetched in an earlier term.
  std::uint64_t stale_term_ids = 0;
  std::uint64_t store_regressed = 0;              // ranges refused: a store below this host's floor
  std::chrono::microseconds fetch_time_total{0};  // sum over ranges_fetched
  std::string last_error;                         // the last store error, if any
};

// One tag's buffers, looked up once: next() through a counter skips the name lookup, for
// in-process callers that serve a tag often. Owned by its SegmentService; valid until the service
// is destroyed. Thread-safe.
class SegmentCounter {
 public:
  virtual ~SegmentCounter() = default;
  // As SegmentService::next() for this counter's tag.
  [[nodiscard]] virtual Status next(IdCount count, std::span<std::uint64_t> out,
                                    Blocking blocking = Blocking::kAllowed,
                                    std::uint64_t term = 0) = 0;
  [[nodiscard]] virtual const std::string& tag() const noexcept = 0;
  // Whether the tag is strict (as its store row said when the service first looked it up).
  [[nodiscard]] virtual bool strict() const noexcept = 0;
};

class SegmentService {
 public:
  // `stores` (at least one) and `clocks` must outlive nothing: the service owns the stores; the
  // clocks must outlive the service. Starts one background thread for prefetching.
  [[nodiscard]] static Result<std::unique_ptr<SegmentService>> create(
      std::vector<std::unique_ptr<SegmentStore>> stores, SegmentOptions options = {},
      Clocks clocks = Clocks::system());
  ~SegmentService();  // stops the background thread; callers still waiting get UNAVAILABLE
  SegmentService(const SegmentService&) = delete;
  SegmentService& operator=(const SegmentService&) = delete;

  // Fills out[0, count) with the tag's next IDs, increasing. The tag and the count come checked
  // (SegmentTag, IdCount) and are not checked again: `count` is made against at most
  // options().max_batch, and `out` holds at least count.value() elements (the caller's
  // preconditions). Errors: NOT_FOUND (no store has the tag), FAILED_PRECONDITION (the tag's
  // stores fail the residue proof), UNAVAILABLE (both buffers empty for max_wait; no store
  // answers; SHUT_DOWN; STORE_REGRESSED; with Blocking::kNever, WOULD_BLOCK instead of any wait
  // or store call). Nothing is issued on error.
  //
  // `term`: for a strict tag, the oracle's leadership term the caller holds (see the top of this
  // file); ignored for other tags. A strict tag with term 0 is FAILED_PRECONDITION (only the
  // oracle's leader serves it; with several stores likewise), and one whose current range belongs
  // to a later term than `term` is UNAVAILABLE (the caller's term is over). The caller must still
  // check its term after the IDs were taken and drop them if it no longer holds it.
  [[nodiscard]] Status next(const SegmentTag& tag, IdCount count, std::span<std::uint64_t> out,
                            Blocking blocking = Blocking::kAllowed, std::uint64_t term = 0);

  // The counter of `tag`. The first call for a tag looks it up in the stores: errors as next().
  [[nodiscard]] Result<SegmentCounter*> counter(const SegmentTag& tag,
                                                Blocking blocking = Blocking::kAllowed);

  // `size` consecutive IDs of the tag (`size` made against at most max_batch, as next()'s
  // count) from one range: a range whose rest is too short is skipped (those IDs are never
  // issued). Errors as next(), and OUT_OF_RANGE when `size` exceeds the ranges the tag is
  // fetching (its step / delta). `term` as for next().
  [[nodiscard]] Result<SegmentRange> range(const SegmentTag& tag, IdCount size,
                                           Blocking blocking = Blocking::kAllowed,
                                           std::uint64_t term = 0);

  // Creates a tag in every store. With one store, `spec` as given; with n stores, store k gets
  // delta n and remainder k (spec.delta and spec.remainder must then be left at 1 and 0).
  // ALREADY_EXISTS if a store has it; the stores that did create it keep it. A strict spec with
  // several stores is FAILED_PRECONDITION (created nowhere). Blocks on the stores.
  [[nodiscard]] Status create_tag(const SegmentTagSpec& spec);

  // The tags of every store (a tag in several stores once, from the first store that has it).
  // UNAVAILABLE only when no store answers. Blocks on the stores.
  [[nodiscard]] Result<std::vector<SegmentTagInfo>> list_tags();

  // The highest `max_id` the stores hold for `tag` (no ID of the tag at or above it has been
  // handed out): read from every store, the one store row each. NOT_FOUND when no store has the
  // tag; the store's error (e.g. UNAVAILABLE) when any store does not answer, since the missing
  // one may hold the highest. Blocks on the stores.
  [[nodiscard]] Result<std::uint64_t> stored_max_id(const SegmentTag& tag);

  // One tag as the stores keep it: the row of the first store that has it. NOT_FOUND when none
  // does (remembered for unknown_tag_ttl, as for next()); UNAVAILABLE when a store that might
  // have it does not answer. Blocks on the stores.
  [[nodiscard]] Result<SegmentTagInfo> stored_tag(const SegmentTag& tag);

  // Store reads made to look tags up, and lookups answered from the unknown-tag memory.
  struct LookupCounts {
    std::uint64_t store_reads = 0;
    std::uint64_t unknown_hits = 0;
  };
  [[nodiscard]] LookupCounts lookup_counts() const noexcept;

  // The in-memory state of a tag this service has served (NOT_FOUND for one it has not: it may
  // still exist in a store). Never blocks on a store.
  [[nodiscard]] Result<SegmentTagState> inspect(std::string_view tag) const;

  // The state of every tag this service has served, by name. Never blocks on a store.
  [[nodiscard]] std::vector<SegmentTagState> inspect_all() const;

  [[nodiscard]] const SegmentOptions& options() const noexcept;
  // describe() of each store, in order.
  [[nodiscard]] std::vector<std::string> store_names() const;

  class Impl;  // src/segment/segment_service_impl.h

 private:
  explicit SegmentService(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flurry

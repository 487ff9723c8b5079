// The C++ client's state (include/flurry/client.h): Client::Impl (the prefetch buffer and its
// refills, the layout, the segment handles) and Segment::Impl (one tag's double buffer of
// ranges). Internal to clients/cpp/src.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "batch_sizer.h"
#include "flurry/client.h"
#include "flurry/layout.h"
#include "flurry/mutex.h"
#include "settings.h"
#include "transport.h"

namespace flurry {

inline constexpr std::uint64_t kClosedIndex = 0x80000000u;
inline constexpr std::uint64_t kIndexMask = 0xffffffffu;

struct Segment::Impl {
  Client::Impl* client = nullptr;
  std::string tag;
  Mutex mu;
  std::condition_variable cv;
  struct Range {
    std::uint64_t start = 0, end = 0, delta = 1;
  };
  std::optional<Range> current FLURRY_GUARDED_BY(mu);
  std::uint64_t next_value FLURRY_GUARDED_BY(mu) = 0;
  std::uint64_t used FLURRY_GUARDED_BY(mu) = 0;
  std::optional<Range> pending FLURRY_GUARDED_BY(mu);
  bool fetching FLURRY_GUARDED_BY(mu) = false;
  std::uint64_t fetch_seq FLURRY_GUARDED_BY(mu) = 0;  // completed fetches
  std::optional<ClientError> fetch_error FLURRY_GUARDED_BY(mu);
  std::thread worker;  // started and joined with `mu` held, or by the client's shutdown

  void start_fetch_locked() FLURRY_REQUIRES(mu);
  ClientResult<std::uint64_t> next() FLURRY_EXCLUDES(mu);
  // In a forked child, with `mu` held by the fork's prepare handler: drops the ranges and the
  // fetch in flight, then unlocks `mu`.
  void fork_child() noexcept FLURRY_NO_THREAD_SAFETY_ANALYSIS;
};

struct Client::Impl {
  using Steady = client_internal::Steady;

  ClientOptions options;
  std::unique_ptr<client_internal::Transport> transport;
  std::atomic<bool> closed{false};

  // The layout, read once: layout_fetch_mu lets one caller at a time fetch it (held across the
  // request, it guards no data); layout_mu guards the fields below, held only to read or set them.
  Mutex layout_fetch_mu;
  Mutex layout_mu;
  // Set once, then only read: ready_layout() hands it out without the lock.
  std::optional<Layout> layout FLURRY_GUARDED_BY(layout_mu);
  std::string layout_text FLURRY_GUARDED_BY(layout_mu);
  std::atomic<std::uint32_t> server_max_batch{0};

  // The active batch: a seqlock-guarded array. state = generation << 32 | next index; readers
  // claim an index with fetch_add and keep the ID only if the generation did not move meanwhile.
  std::atomic<std::uint64_t> state{kClosedIndex};
  std::atomic<std::uint32_t> count{0};
  std::atomic<std::uint32_t> low_mark{0};
  std::atomic<std::int64_t> expires_ns{0};
  // Made once under `mu` before the first batch is installed; read lock-free by the hot path.
  std::unique_ptr<std::atomic<std::uint64_t>[]> ids;
  std::uint32_t capacity FLURRY_GUARDED_BY(mu) = 0;
  std::atomic<bool> refill_busy{false};  // a refill runs or its batch waits: no new refill

  // Refills: one in flight, run by `refiller`.
  Mutex mu;
  std::condition_variable cv;         // callers waiting for a refill to end
  std::condition_variable refill_cv;  // the refiller waiting for work: woken alone
  bool refill_requested FLURRY_GUARDED_BY(mu) = false;
  bool refill_running FLURRY_GUARDED_BY(mu) = false;
  std::uint64_t refill_seq FLURRY_GUARDED_BY(mu) = 0;  // completed refills
  std::optional<ClientError> refill_error FLURRY_GUARDED_BY(mu);
  std::vector<std::uint64_t> pending FLURRY_GUARDED_BY(mu);
  std::int64_t pending_expires_ns FLURRY_GUARDED_BY(mu) = 0;
  bool has_pending FLURRY_GUARDED_BY(mu) = false;
  bool expired_since_refill FLURRY_GUARDED_BY(mu) = false;
  bool first_refill FLURRY_GUARDED_BY(mu) = true;
  std::optional<client_internal::BatchSizer> sizer FLURRY_GUARDED_BY(mu);
  std::thread refiller;  // started with `mu` held, joined by shutdown()

  Mutex segments_mu;
  std::map<std::string, std::unique_ptr<Segment>, std::less<>> segments
      FLURRY_GUARDED_BY(segments_mu);

  // tso() (src/tso.cc): the callers not yet in a request, whether one is in flight (its sender,
  // a caller, holds no lock during it) and the leader that last answered (none: the endpoints).
  struct TsoWaiter {
    bool taken = false;  // in a request: its value comes from that request
    bool done = false;
    std::uint64_t value = 0;
    std::optional<ClientError> error;
  };
  Mutex tso_mu;
  std::condition_variable tso_cv;
  std::deque<std::shared_ptr<TsoWaiter>> tso_queue FLURRY_GUARDED_BY(tso_mu);
  bool tso_busy FLURRY_GUARDED_BY(tso_mu) = false;
  std::optional<client_internal::Endpoint> tso_leader FLURRY_GUARDED_BY(tso_mu);

  ClientResult<std::uint64_t> tso() FLURRY_EXCLUDES(tso_mu);
  // The callers of the next request (the queue's first max_batch), marked taken; tso_busy set.
  std::vector<std::shared_ptr<TsoWaiter>> tso_take_batch_locked() FLURRY_REQUIRES(tso_mu);
  // Hands `batch` the values of `first` (first + k for the k-th caller) or its error; clears
  // tso_busy and wakes every waiter.
  void tso_deliver_locked(const std::vector<std::shared_ptr<TsoWaiter>>& batch,
                          const ClientResult<std::uint64_t>& first) FLURRY_REQUIRES(tso_mu);
  // GET /v1/tso?count=`count` to the leader, else the endpoints; follows 307s. The first value.
  ClientResult<std::uint64_t> tso_fetch(std::uint64_t count, Steady::time_point deadline)
      FLURRY_EXCLUDES(tso_mu);

  [[nodiscard]] Steady::time_point now() const { return transport->now(); }
  [[nodiscard]] Steady::time_point deadline() const { return now() + options.timeout; }

  // The layout, read from the server once (GET /v1/layout).
  [[nodiscard]] ClientResult<const Layout*> ready_layout(Steady::time_point deadline)
      FLURRY_EXCLUDES(layout_fetch_mu, layout_mu);
  // Claims the next ID of the active batch. `precise`: judge its age by the precise clock (the
  // slow path); otherwise by the coarse clock's upper bound (the hot path), which may call a
  // batch that is about to expire stale, never a stale one fresh.
  bool try_take(std::uint64_t& id, bool& want_refill, bool precise) noexcept;
  // n IDs of the active batch at once, when it holds n fresh ones.
  bool try_take_many(std::size_t n, std::vector<std::uint64_t>& out) noexcept;
  void close_active() noexcept;
  void install_pending_locked() FLURRY_REQUIRES(mu);
  void start_refill_locked() FLURRY_REQUIRES(mu);
  void start_refill_if_idle() FLURRY_EXCLUDES(mu);
  void refill_loop() FLURRY_EXCLUDES(mu);
  ClientResult<std::uint64_t> next_slow(Steady::time_point deadline) FLURRY_EXCLUDES(mu);
  void shutdown();

  // fork() (docs/clients.md, "Fork"). The prepare handler locks every mutex that guards data (none
  // is held across I/O), so the child's copy of that data is consistent and no lock in it is held
  // by a thread the child does not have; the parent handler unlocks them. The child handler drops
  // the active batch, the batch waiting, the refill in flight, every segment's ranges and fetch,
  // and the idle connections, makes the condition variables and the lock held across I/O anew,
  // forgets the parent's threads, and unlocks. The hot path is not involved.
  void fork_prepare() noexcept FLURRY_NO_THREAD_SAFETY_ANALYSIS;
  void fork_parent() noexcept FLURRY_NO_THREAD_SAFETY_ANALYSIS;
  void fork_child() noexcept FLURRY_NO_THREAD_SAFETY_ANALYSIS;

  Impl();
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
};

// Makes `object` anew in a forked child without destroying the copy from the parent: a thread the
// child does not have can be neither joined nor detached (and a joinable std::thread may not be
// destroyed), and a condition variable or mutex that such a thread waited on or held may not be
// destroyed either. The copy's resources (a thread's stack, nothing else) are left to the child.
template <typename T>
void remake(T& object) noexcept {
  ::new (static_cast<void*>(&object)) T();
}

}  // namespace flurry

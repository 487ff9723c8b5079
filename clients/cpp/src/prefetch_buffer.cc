// The C++ client's prefetch buffer (docs/clients.md, "Snowflake IDs: the prefetch buffer"): the
// active batch claimed lock-free by next(), the batch waiting behind it, and the one refill in
// flight, run by the client's refill thread.
#include <time.h>

#include <algorithm>
#include <utility>

#include "client_impl.h"
#include "errors.h"
#include "ids_parser.h"

namespace flurry {

using namespace client_internal;

namespace {

// CLOCK_MONOTONIC_COARSE (about 5 ns to read, against 25 for the precise clock) plus a margin
// covering its lag behind CLOCK_MONOTONIC (steady_clock): at least the precise time, so a batch it
// calls fresh is fresh. The hot path uses it; only the slow path drops a batch, by the precise
// clock.
std::int64_t coarse_ns_upper_bound() noexcept {
  static const std::int64_t slack = [] {
    timespec res{};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    const std::int64_t ns = res.tv_sec * 1'000'000'000 + res.tv_nsec;
    return std::max<std::int64_t>(2 * ns, 1'000'000);
  }();
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return now.tv_sec * 1'000'000'000 + now.tv_nsec + slack;
}

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch())
      .count();
}

}  // namespace

bool Client::Impl::try_take(std::uint64_t& id, bool& want_refill, bool precise) noexcept {
  const std::uint64_t v = state.fetch_add(1, std::memory_order_acq_rel);
  const std::uint64_t index = v & kIndexMask;
  const std::uint32_t n = count.load(std::memory_order_relaxed);
  if (index >= n) return false;
  const std::int64_t expires = expires_ns.load(std::memory_order_relaxed);
  const std::uint32_t low = low_mark.load(std::memory_order_relaxed);
  const std::uint64_t value = ids[index].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if ((state.load(std::memory_order_relaxed) >> 32) != (v >> 32)) return false;  // recycled
  // Too old (or maybe, by the coarse clock): the slow path decides, and drops the batch.
  if ((precise ? steady_ns() : coarse_ns_upper_bound()) >= expires) return false;
  want_refill = n - index - 1 < low;
  id = value;
  return true;
}

bool Client::Impl::try_take_many(std::size_t n, std::vector<std::uint64_t>& out) noexcept {
  std::uint64_t v = state.load(std::memory_order_acquire);
  for (;;) {
    const std::uint64_t index = v & kIndexMask;
    if (index + n > count.load(std::memory_order_relaxed) ||
        steady_ns() >= expires_ns.load(std::memory_order_relaxed)) {
      return false;
    }
    if (state.compare_exchange_weak(v, v + n, std::memory_order_acq_rel)) {
      out.resize(n);
      for (std::size_t i = 0; i < n; ++i) out[i] = ids[index + i].load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      // Recycled meanwhile: those IDs are dropped.
      return (state.load(std::memory_order_relaxed) >> 32) == (v >> 32);
    }
  }
}

void Client::Impl::close_active() noexcept {
  const std::uint64_t generation = (state.load(std::memory_order_relaxed) >> 32) + 1;
  state.store(generation << 32 | kClosedIndex, std::memory_order_release);
}

void Client::Impl::install_pending_locked() {
  const std::uint64_t generation = (state.load(std::memory_order_relaxed) >> 32) + 1;
  state.store(generation << 32 | kClosedIndex, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(pending.size(), capacity));
  for (std::uint32_t i = 0; i < n; ++i) ids[i].store(pending[i], std::memory_order_relaxed);
  count.store(n, std::memory_order_relaxed);
  low_mark.store(static_cast<std::uint32_t>(options.low_water * n), std::memory_order_relaxed);
  expires_ns.store(pending_expires_ns, std::memory_order_relaxed);
  state.store(generation << 32, std::memory_order_release);
  has_pending = false;
  pending.clear();
  refill_busy.store(refill_running, std::memory_order_relaxed);
}

void Client::Impl::start_refill_locked() {
  if (refill_running || has_pending || closed.load()) return;
  refill_running = true;
  refill_requested = true;
  refill_busy.store(true, std::memory_order_relaxed);
  if (!refiller.joinable()) refiller = std::thread([this] { refill_loop(); });
  refill_cv.notify_one();
}

void Client::Impl::start_refill_if_idle() {
  if (refill_busy.load(std::memory_order_relaxed)) return;
  MutexLock lock(mu);
  start_refill_locked();
}

void Client::Impl::refill_loop() {
  MutexLock lock(mu);
  for (;;) {
    lock.wait(refill_cv,
              [this]() FLURRY_REQUIRES(mu) { return refill_requested || closed.load(); });
    if (closed.load()) return;
    refill_requested = false;
    const bool expired = expired_since_refill;
    expired_since_refill = false;
    lock.unlock();
    const Steady::time_point deadline = this->deadline();
    Steady::time_point sent = Steady::now();  // when the answering request went out
    ClientResult<const Layout*> layout_ready = ready_layout(deadline);
    std::optional<ClientError> error;
    std::vector<std::uint64_t> fetched;
    if (!layout_ready.ok()) {
      error = layout_ready.error();
    } else {
      std::uint32_t size = 0;
      {
        MutexLock guard(mu);
        if (!sizer) {
          sizer.emplace(options.min_batch, options.max_batch, server_max_batch.load());
          capacity = sizer->largest();
          ids = std::make_unique<std::atomic<std::uint64_t>[]>(capacity);
        }
        size = first_refill ? sizer->first() : expired ? sizer->expired() : sizer->low();
        first_refill = false;
      }
      ClientResult<std::string> body =
          transport->get("/v1/ids?count=" + std::to_string(size) + "&format=text", deadline, &sent);
      if (!body.ok()) {
        error = body.error();
      } else if (!parse_text_ids(*body, fetched) || fetched.empty()) {
        error = client_error(Status(StatusCode::kUnknown,
                                    "GET /v1/ids: not a list of IDs: " + body->substr(0, 200)));
      }
    }
    lock.lock();
    refill_running = false;
    if (error) {
      refill_error = std::move(error);
      refill_busy.store(has_pending, std::memory_order_relaxed);
    } else {
      refill_error.reset();
      pending = std::move(fetched);
      pending_expires_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(sent.time_since_epoch()).count() +
          options.max_age.count();
      has_pending = true;
    }
    ++refill_seq;
    cv.notify_all();
  }
}

ClientResult<std::uint64_t> Client::Impl::next_slow(Steady::time_point deadline) {
  MutexLock lock(mu);
  for (;;) {
    if (closed.load()) return closed_error();
    std::uint64_t id = 0;
    bool want_refill = false;
    if (try_take(id, want_refill, /*precise=*/true)) {
      if (want_refill) start_refill_locked();
      return id;
    }
    // The active batch is used up or too old.
    const std::uint64_t v = state.load(std::memory_order_relaxed);
    if ((v & kIndexMask) < count.load(std::memory_order_relaxed)) expired_since_refill = true;
    close_active();
    if (has_pending) {
      if (steady_ns() < pending_expires_ns) {
        install_pending_locked();
      } else {
        has_pending = false;
        pending.clear();
        expired_since_refill = true;
        refill_busy.store(refill_running, std::memory_order_relaxed);
      }
      continue;
    }
    start_refill_locked();
    const std::uint64_t seq = refill_seq;
    if (!lock.wait_until(cv, deadline, [&]() FLURRY_REQUIRES(mu) {
          return refill_seq != seq || closed.load();
        })) {
      return client_error(Status(StatusCode::kDeadlineExceeded,
                                 "no IDs within the timeout (a refill is still running)"));
    }
    if (closed.load()) return closed_error();
    if (refill_error && !has_pending) return *refill_error;
  }
}

}  // namespace flurry

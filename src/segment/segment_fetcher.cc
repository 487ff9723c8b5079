// SegmentService: the one background thread that fetches ranges (segment_service_impl.h lists
// the other files). It starts with the first fetch, takes the queued tags whose time has come, and
// sleeps on the injected MonotonicClock until the next one is due or a schedule() wakes it.
#include <algorithm>
#include <system_error>

#include "segment_service_impl.h"

namespace flurry {

void SegmentService::Impl::schedule(Tag* tag, MonoTime not_before) {
  MutexLock lock(queue_mu_);
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
    MutexLock lock(queue_mu_);
    wake_.request_stop();
  });
  while (!st.stop_requested()) {
    Tag* due = nullptr;
    MonoTime earliest = MonoTime::max();
    std::stop_token woken;
    {
      MutexLock lock(queue_mu_);
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
    MutexLock lock(queue_mu_);
    fetcher = std::move(fetcher_);
  }
  fetcher.request_stop();
  if (fetcher.joinable()) fetcher.join();
  MutexLock lock(tags_mu_);
  for (auto& [name, tag] : tags_) {
    (void)name;
    tag->wake_waiters();
  }
}

}  // namespace flurry

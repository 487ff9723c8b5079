#include "service/event_log.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "core/quote.h"

namespace flurry::service {

using internal::quote;
namespace {

std::string log_value(const EventValue& value) {
  struct Visitor {
    std::string operator()(std::monostate) const { return "null"; }
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return fmt::format("{:.1f}", v); }
    std::string operator()(const std::string& v) const { return quote(v, 1024); }
  };
  return std::visit(Visitor{}, value);
}

}  // namespace

std::string_view to_string(EventLevel level) noexcept {
  switch (level) {
    case EventLevel::kInfo:
      return "info";
    case EventLevel::kWarning:
      return "warning";
    case EventLevel::kError:
      return "error";
  }
  return "info";
}

EventLog::EventLog(Clock& wall, std::size_t capacity)
    : wall_(wall), capacity_(std::max<std::size_t>(capacity, 1)) {}

std::uint64_t EventLog::record(EventLevel level, std::string kind, std::uint64_t node,
                               std::string message, std::vector<EventDetail> details, Line line) {
  if (line == Line::kWrite) {
    std::string text = "event=" + kind + " node=" + std::to_string(node);
    for (const EventDetail& d : details) text += " " + d.key + "=" + log_value(d.value);
    text += " message=" + quote(message, 1024);
    const auto spd = level == EventLevel::kError     ? spdlog::level::err
                     : level == EventLevel::kWarning ? spdlog::level::warn
                                                     : spdlog::level::info;
    spdlog::log(spd, "{}", text);
  }
  Event event{
      0,
      std::chrono::duration_cast<std::chrono::milliseconds>(wall_.now().time_since_epoch()).count(),
      level,
      std::move(kind),
      node,
      std::move(message),
      std::move(details)};
  MutexLock lock(mu_);
  event.seq = next_seq_++;
  if (ring_.size() == capacity_) {
    ring_.pop_front();
    ++dropped_;
  }
  ring_.push_back(std::move(event));
  return ring_.back().seq;
}

EventPage EventLog::read(std::uint64_t since) const {
  EventPage page;
  page.capacity = capacity_;
  MutexLock lock(mu_);
  page.dropped = dropped_;
  page.next_seq = next_seq_;
  // Seqs in the ring are consecutive: the first wanted one is found by arithmetic.
  if (!ring_.empty()) {
    const std::uint64_t first = ring_.front().seq;
    const std::size_t skip =
        since < first
            ? 0
            : static_cast<std::size_t>(std::min<std::uint64_t>(since - first + 1, ring_.size()));
    page.events.assign(ring_.begin() + static_cast<std::ptrdiff_t>(skip), ring_.end());
  }
  return page;
}

}  // namespace flurry::service

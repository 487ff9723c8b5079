// The recent notable events of this process (lease claimed, lost or re-claimed, clock steps,
// throttling, readiness changes, failed segment fetches, ...): a ring of the last `capacity`
// events kept in memory for GET /v1/events and the console, each also written to the log.
//
// Thread-safe: record() and read() may be called from any thread at any time (one mutex; events
// are rare).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "flurry/clock.h"
#include "flurry/mutex.h"

namespace flurry::service {

enum class EventLevel { kInfo, kWarning, kError };

// "info", "warning", "error".
[[nodiscard]] std::string_view to_string(EventLevel level) noexcept;

// A detail's value: null, an integer, a number or text.
using EventValue = std::variant<std::monostate, std::int64_t, double, std::string>;

struct EventDetail {
  std::string key;
  EventValue value;
};

struct Event {
  std::uint64_t seq = 0;     // 1, 2, ... in the order recorded
  std::int64_t unix_ms = 0;  // wall clock when recorded
  EventLevel level = EventLevel::kInfo;
  std::string kind;  // a stable name: lease_claimed, clock_step, ... (docs/operations.md)
  std::uint64_t node = 0;
  std::string message;
  std::vector<EventDetail> details;  // in the order given
};

// What read() returns.
struct EventPage {
  std::size_t capacity = 0;
  std::uint64_t dropped = 0;   // events pushed out of the ring since start
  std::uint64_t next_seq = 1;  // the seq the next event gets
  std::vector<Event> events;   // oldest first
};

class EventLog {
 public:
  static constexpr std::size_t kDefaultCapacity = 512;

  // `wall` (which must outlive the log) stamps the events. `capacity` >= 1.
  explicit EventLog(Clock& wall, std::size_t capacity = kDefaultCapacity);
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Whether record() writes the log line itself, or the caller already wrote its own (the lines
  // that existed before the ring keep their names and keys).
  enum class Line { kWrite, kAlreadyLogged };

  // Stamps the event (seq, wall time), keeps it (dropping the oldest when full) and, with
  // Line::kWrite, logs `event=<kind> node=N key=value... message="..."` at its level. Returns
  // the seq.
  std::uint64_t record(EventLevel level, std::string kind, std::uint64_t node, std::string message,
                       std::vector<EventDetail> details = {}, Line line = Line::kWrite);

  // The events with seq > `since`, oldest first.
  [[nodiscard]] EventPage read(std::uint64_t since = 0) const;

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

 private:
  Clock& wall_;
  const std::size_t capacity_;
  mutable Mutex mu_;
  std::deque<Event> ring_ FLURRY_GUARDED_BY(mu_);
  std::uint64_t next_seq_ FLURRY_GUARDED_BY(mu_) = 1;
  std::uint64_t dropped_ FLURRY_GUARDED_BY(mu_) = 0;
};

}  // namespace flurry::service

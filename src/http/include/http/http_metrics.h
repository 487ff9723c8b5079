// The HTTP layer's request accounting for /metrics: every finished request by route and status
// code, and its latency, cheap enough for every request (sharded like the service's counters,
// flurry/server/metrics.h). The route labels are HTTP's; the service knows nothing of them.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "service/metrics.h"
#include "service/prometheus.h"

namespace flurry::http {

// The routes, as they are labelled in metrics.
enum class Route : std::uint8_t {
  kIds,         // /v1/ids
  kIdDecode,    // /v1/ids/{id}
  kLayout,      // /v1/layout
  kLeafGet,     // /api/snowflake/get/{key}
  kLeafDecode,  // /decodeSnowflakeId
  kHealthz,     // /healthz
  kReadyz,      // /readyz
  kMetrics,     // /metrics
  // Segment mode (docs/segments.md).
  kSegmentIds,      // /v1/segments/{tag}/ids
  kSegmentRange,    // /v1/segments/{tag}/range
  kSegmentLeafGet,  // /api/segment/get/{tag}
  kSegmentList,     // /v1/segments (GET: the tags; POST: create one)
  kSegmentTag,      // /v1/segments/{tag}
  kSegmentsPage,    // /segments
  // Order numbers (docs/order-numbers.md).
  kOrderNumbers,  // /v1/order-numbers
  kOrderDecode,   // /v1/order-numbers/{code}
  // The console's read routes.
  kNodes,   // /v1/nodes
  kStatus,  // /v1/status
  kEvents,  // /v1/events
  // The console's page (docs/operations.md "The console").
  kConsole,  // /console and its files
  // The timestamp oracle (docs/operations.md "Timestamp oracle").
  kTso,        // /v1/tso
  kReadyzTso,  // /readyz/tso
  kOther,      // anything else (404s, requests that did not parse)
};
inline constexpr std::size_t kRouteCount = 23;

// "/v1/ids", "/v1/ids/{id}", ..., "other" (also for a value out of range).
[[nodiscard]] std::string_view route_label(Route route) noexcept;

// Thread-safe: record() from any number of threads (lock-free), render() concurrently with it.
class RequestMetrics {
 public:
  RequestMetrics() = default;
  RequestMetrics(const RequestMetrics&) = delete;
  RequestMetrics& operator=(const RequestMetrics&) = delete;

  // One finished request: its route, HTTP status and time from the complete request to the
  // response written (negative counts as 0). A route out of range is ignored.
  void record(Route route, int status, std::chrono::nanoseconds duration) noexcept;

  // Appends flurry_http_requests_total and flurry_http_request_duration_seconds in the
  // Prometheus text format 0.0.4 (families always, series only for routes that were used).
  void render(service::PrometheusWriter& out) const;

  // The status codes counted one by one; any other counts as "other".
  static constexpr std::array<int, 16> kCodes = {200, 201, 302, 307, 400, 401, 403, 404,
                                                 405, 408, 409, 413, 431, 500, 501, 503};

 private:
  static constexpr std::size_t kCodeSlots = kCodes.size() + 1;

  struct alignas(64) Shard {
    std::array<std::array<std::atomic<std::uint64_t>, kCodeSlots>, kRouteCount> requests{};
    std::array<std::array<std::atomic<std::uint64_t>, service::LatencyBuckets::kSlots>, kRouteCount>
        buckets{};
    std::array<std::atomic<std::uint64_t>, kRouteCount> duration_ns{};
  };

  std::array<Shard, service::kCounterShards> shards_{};
};

}  // namespace flurry::http

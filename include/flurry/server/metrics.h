// Request accounting for the Prometheus endpoint, cheap enough for every request.
//
// Counters live in cache-line-aligned shards; each thread adds to the shard its thread-local slot
// picks, with relaxed atomic adds, so there is no shared lock and (with as many shards as
// threads) no shared cache line on the request path. Rendering sums the shards.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "flurry/server/prometheus.h"

namespace flurry::server {

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
  kOther,    // anything else (404s, requests that did not parse)
};
inline constexpr std::size_t kRouteCount = 21;

// "/v1/ids", "/v1/ids/{id}", ..., "other".
[[nodiscard]] std::string_view route_label(Route route) noexcept;

class RequestMetrics {
 public:
  RequestMetrics() = default;
  RequestMetrics(const RequestMetrics&) = delete;
  RequestMetrics& operator=(const RequestMetrics&) = delete;

  // One finished request: its route, HTTP status and time from the complete request to the
  // response written.
  void record(Route route, int status, std::chrono::nanoseconds duration) noexcept;
  // IDs handed out.
  void add_ids(std::uint64_t n) noexcept { shard().ids.fetch_add(n, std::memory_order_relaxed); }

  [[nodiscard]] std::uint64_t ids_issued() const noexcept;

  // Appends flurry_ids_issued_total, flurry_http_requests_total and
  // flurry_http_request_duration_seconds in the Prometheus text format 0.0.4.
  void render(PrometheusWriter& out) const;

  // The status codes counted one by one; any other counts as "other".
  static constexpr std::array<int, 15> kCodes = {200, 201, 302, 400, 401, 403, 404, 405,
                                                 408, 409, 413, 431, 500, 501, 503};
  // Histogram bucket upper bounds in nanoseconds (50 us to 1 s), then +Inf.
  static constexpr std::array<std::int64_t, 14> kBucketsNs = {
      50'000,     100'000,    250'000,    500'000,     1'000'000,   2'500'000,   5'000'000,
      10'000'000, 25'000'000, 50'000'000, 100'000'000, 250'000'000, 500'000'000, 1'000'000'000};
  // The bucket bounds as the `le` label writes them (seconds), in the same order.
  static constexpr std::array<std::string_view, kBucketsNs.size()> kBucketLabels = {
      "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
      "0.01",  "0.025",  "0.05",    "0.1",    "0.25",  "0.5",    "1"};

 private:
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kCodeSlots = kCodes.size() + 1;
  static constexpr std::size_t kBucketSlots = kBucketsNs.size() + 1;

  struct alignas(64) Shard {
    std::atomic<std::uint64_t> ids{0};
    std::array<std::array<std::atomic<std::uint64_t>, kCodeSlots>, kRouteCount> requests{};
    std::array<std::array<std::atomic<std::uint64_t>, kBucketSlots>, kRouteCount> buckets{};
    std::array<std::atomic<std::uint64_t>, kRouteCount> duration_ns{};
  };

  [[nodiscard]] Shard& shard() noexcept;

  std::array<Shard, kShards> shards_{};
};

}  // namespace flurry::server

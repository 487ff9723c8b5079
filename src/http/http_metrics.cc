#include "http/http_metrics.h"

#include <string>

namespace flurry::http {
namespace {

constexpr std::array<std::string_view, kRouteCount> kRouteLabels = {"/v1/ids",
                                                                    "/v1/ids/{id}",
                                                                    "/v1/layout",
                                                                    "/api/snowflake/get/{key}",
                                                                    "/decodeSnowflakeId",
                                                                    "/healthz",
                                                                    "/readyz",
                                                                    "/metrics",
                                                                    "/v1/segments/{tag}/ids",
                                                                    "/v1/segments/{tag}/range",
                                                                    "/api/segment/get/{tag}",
                                                                    "/v1/segments",
                                                                    "/v1/segments/{tag}",
                                                                    "/segments",
                                                                    "/v1/order-numbers",
                                                                    "/v1/order-numbers/{code}",
                                                                    "/v1/nodes",
                                                                    "/v1/status",
                                                                    "/v1/events",
                                                                    "/console",
                                                                    "/v1/tso",
                                                                    "/readyz/tso",
                                                                    "other"};

}  // namespace

std::string_view route_label(Route route) noexcept {
  const auto i = static_cast<std::size_t>(route);
  return i < kRouteLabels.size() ? kRouteLabels[i] : "other";
}

void RequestMetrics::record(Route route, int status, std::chrono::nanoseconds duration) noexcept {
  const auto r = static_cast<std::size_t>(route);
  if (r >= kRouteCount) return;
  std::size_t code = kCodes.size();
  for (std::size_t i = 0; i < kCodes.size(); ++i) {
    if (kCodes[i] == status) {
      code = i;
      break;
    }
  }
  const std::int64_t ns = duration.count() < 0 ? 0 : duration.count();
  Shard& s = shards_[service::this_thread_shard()];
  s.requests[r][code].fetch_add(1, std::memory_order_relaxed);
  s.buckets[r][service::LatencyBuckets::slot(ns)].fetch_add(1, std::memory_order_relaxed);
  s.duration_ns[r].fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
}

void RequestMetrics::render(service::PrometheusWriter& out) const {
  std::array<std::array<std::uint64_t, kCodeSlots>, kRouteCount> requests{};
  std::array<std::array<std::uint64_t, service::LatencyBuckets::kSlots>, kRouteCount> buckets{};
  std::array<std::uint64_t, kRouteCount> duration{};
  for (const Shard& s : shards_) {
    for (std::size_t r = 0; r < kRouteCount; ++r) {
      for (std::size_t c = 0; c < kCodeSlots; ++c) {
        requests[r][c] += s.requests[r][c].load(std::memory_order_relaxed);
      }
      for (std::size_t b = 0; b < service::LatencyBuckets::kSlots; ++b) {
        buckets[r][b] += s.buckets[r][b].load(std::memory_order_relaxed);
      }
      duration[r] += s.duration_ns[r].load(std::memory_order_relaxed);
    }
  }

  out.family("flurry_http_requests_total", service::PrometheusWriter::Type::kCounter,
             "HTTP requests by route and status code.");
  for (std::size_t r = 0; r < kRouteCount; ++r) {
    for (std::size_t c = 0; c < kCodeSlots; ++c) {
      if (requests[r][c] == 0) continue;
      const std::string code = c < kCodes.size() ? std::to_string(kCodes[c]) : "other";
      out.sample("flurry_http_requests_total", requests[r][c],
                 {{"route", kRouteLabels[r]}, {"code", code}});
    }
  }

  out.family("flurry_http_request_duration_seconds", service::PrometheusWriter::Type::kHistogram,
             "Time from a complete request to its response written.");
  for (std::size_t r = 0; r < kRouteCount; ++r) {
    out.latency_series("flurry_http_request_duration_seconds", {"route", kRouteLabels[r]},
                       buckets[r], duration[r]);
  }
}

}  // namespace flurry::http

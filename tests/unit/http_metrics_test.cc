// HTTP's request metrics as /metrics shows them (names, labels, the `other` code, cumulative
// buckets, sums in seconds), the latency buckets both transports share, and the service's
// sharded counter summed over threads.
#include "http/http_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "service/metrics.h"
#include "service/prometheus.h"

namespace flurry::http {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

std::string render(const RequestMetrics& m) {
  std::string text;
  service::PrometheusWriter out(text);
  m.render(out);
  return text;
}

TEST(LatencyBucketsTest, EachDurationFallsInTheFirstBoundItDoesNotExceed) {
  EXPECT_EQ(service::LatencyBuckets::slot(-5), 0u);
  EXPECT_EQ(service::LatencyBuckets::slot(0), 0u);
  EXPECT_EQ(service::LatencyBuckets::slot(50'000), 0u);
  EXPECT_EQ(service::LatencyBuckets::slot(50'001), 1u);
  EXPECT_EQ(service::LatencyBuckets::slot(1'000'000'000),
            service::LatencyBuckets::kBoundsNs.size() - 1);
  EXPECT_EQ(service::LatencyBuckets::slot(1'000'000'001),
            service::LatencyBuckets::kBoundsNs.size());
  EXPECT_EQ(service::LatencyBuckets::kSlots, service::LatencyBuckets::kBoundsNs.size() + 1);
}

TEST(RequestMetricsTest, NothingRecordedWritesTheFamiliesOnly) {
  const RequestMetrics m;
  EXPECT_EQ(render(m),
            "# HELP flurry_http_requests_total HTTP requests by route and status code.\n"
            "# TYPE flurry_http_requests_total counter\n"
            "# HELP flurry_http_request_duration_seconds Time from a complete request to its "
            "response written.\n"
            "# TYPE flurry_http_request_duration_seconds histogram\n");
}

TEST(RequestMetricsTest, RoutesCodesAndBucketsAsMetricsShowsThem) {
  RequestMetrics m;
  m.record(Route::kIds, 200, microseconds(40));
  m.record(Route::kIds, 200, milliseconds(2));
  m.record(Route::kIds, 418, milliseconds(2000));  // not a counted code; beyond the last bound
  m.record(Route::kOther, 404, nanoseconds(-1));   // counts as 0
  m.record(static_cast<Route>(kRouteCount), 200, milliseconds(1));  // out of range: ignored
  const std::string text = render(m);
  for (const char* line : {
           "flurry_http_requests_total{route=\"/v1/ids\",code=\"200\"} 2\n",
           "flurry_http_requests_total{route=\"/v1/ids\",code=\"other\"} 1\n",
           "flurry_http_requests_total{route=\"other\",code=\"404\"} 1\n",
           "flurry_http_request_duration_seconds_bucket{route=\"/v1/ids\",le=\"5e-05\"} 1\n",
           "flurry_http_request_duration_seconds_bucket{route=\"/v1/ids\",le=\"0.001\"} 1\n",
           "flurry_http_request_duration_seconds_bucket{route=\"/v1/ids\",le=\"0.0025\"} 2\n",
           "flurry_http_request_duration_seconds_bucket{route=\"/v1/ids\",le=\"1\"} 2\n",
           "flurry_http_request_duration_seconds_bucket{route=\"/v1/ids\",le=\"+Inf\"} 3\n",
           "flurry_http_request_duration_seconds_sum{route=\"/v1/ids\"} 2.00204\n",
           "flurry_http_request_duration_seconds_count{route=\"/v1/ids\"} 3\n",
           "flurry_http_request_duration_seconds_bucket{route=\"other\",le=\"5e-05\"} 1\n",
           "flurry_http_request_duration_seconds_sum{route=\"other\"} 0\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
  }
  // Routes never used have no series.
  EXPECT_EQ(text.find("/v1/layout"), std::string::npos) << text;
}

TEST(RequestMetricsTest, RouteLabels) {
  EXPECT_EQ(route_label(Route::kIds), "/v1/ids");
  EXPECT_EQ(route_label(Route::kSegmentIds), "/v1/segments/{tag}/ids");
  EXPECT_EQ(route_label(Route::kConsole), "/console");
  EXPECT_EQ(route_label(Route::kTso), "/v1/tso");
  EXPECT_EQ(route_label(Route::kReadyzTso), "/readyz/tso");
  EXPECT_EQ(route_label(Route::kOther), "other");
  EXPECT_EQ(route_label(static_cast<Route>(200)), "other");
}

TEST(ShardedCounterTest, SumsWhatEveryThreadAdded) {
  service::ShardedCounter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 1000; ++i) c.add(3);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c.total(), 8u * 1000u * 3u);
}

}  // namespace
}  // namespace flurry::http

// The gRPC adapter's per-method counters and histograms, and their Prometheus text
// (flurry_grpc_* in GrpcServer::write_metrics). Thread-safe: relaxed atomics, written by every
// call and read by /metrics.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "flurry/status.h"
#include "methods.h"
#include "service/prometheus.h"

namespace flurry::grpc_api {

class StreamBudget;

constexpr std::size_t kCodeCount = 17;  // OK .. UNAUTHENTICATED
constexpr std::size_t kBucketSlots = service::LatencyBuckets::kSlots;

struct alignas(64) MethodMetrics {
  std::array<std::atomic<std::uint64_t>, kCodeCount> codes{};
  std::array<std::atomic<std::uint64_t>, kReasonCount> reasons{};
  std::array<std::atomic<std::uint64_t>, kBucketSlots> buckets{};
  std::atomic<std::uint64_t> duration_ns{0};
  std::atomic<std::uint64_t> messages{0};
  std::atomic<std::uint64_t> ids{0};
};

class CallMetrics {
 public:
  // The end of a call to `method`: its status code, its flurry reason when it failed with one,
  // and `ns`, the nanoseconds from its start to its status.
  void record(Method method, const Status& status, std::int64_t ns);

  // A message of `ids` IDs written to a response of `method`.
  void count_sent(Method method, std::uint64_t ids) {
    MethodMetrics& m = metrics_[static_cast<std::size_t>(method)];
    m.messages.fetch_add(1, std::memory_order_relaxed);
    m.ids.fetch_add(ids, std::memory_order_relaxed);
  }

  // Every flurry_grpc_* family: the calls' counters and histograms, with
  // `connections_rejected` (the listener's descriptor ceiling) and the streams' `budget`.
  void write(service::PrometheusWriter& out, std::uint64_t connections_rejected,
             const StreamBudget& budget) const;

 private:
  std::array<MethodMetrics, kMethodNames.size()> metrics_{};
};

}  // namespace flurry::grpc_api

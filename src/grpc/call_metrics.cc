// flurry_grpc_* (call_metrics.h).
#include "call_metrics.h"

#include "stream_budget.h"

namespace flurry::grpc_api {

void CallMetrics::record(Method method, const Status& status, std::int64_t ns) {
  MethodMetrics& m = metrics_[static_cast<std::size_t>(method)];
  const auto code = static_cast<std::size_t>(status.code());
  m.codes[code < kCodeCount ? code : static_cast<std::size_t>(StatusCode::kUnknown)].fetch_add(
      1, std::memory_order_relaxed);
  m.buckets[service::LatencyBuckets::slot(ns)].fetch_add(1, std::memory_order_relaxed);
  m.duration_ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
  if (!status.ok() && status.reason() != Reason::kNone) {
    m.reasons[static_cast<std::size_t>(status.reason())].fetch_add(1, std::memory_order_relaxed);
  }
}

void CallMetrics::write(service::PrometheusWriter& out, std::uint64_t connections_rejected,
                        const StreamBudget& budget) const {
  using Type = service::PrometheusWriter::Type;
  out.family("flurry_grpc_requests_total", Type::kCounter, "gRPC calls by method and status code.");
  for (std::size_t m = 0; m < kMethodNames.size(); ++m) {
    for (std::size_t c = 0; c < kCodeCount; ++c) {
      const std::uint64_t n = metrics_[m].codes[c].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out.sample("flurry_grpc_requests_total", n,
                 {{"method", kMethodNames[m]}, {"code", to_string(static_cast<StatusCode>(c))}});
    }
  }
  out.family("flurry_grpc_errors_total", Type::kCounter,
             "gRPC calls that failed, by method and flurry reason.");
  for (std::size_t m = 0; m < kMethodNames.size(); ++m) {
    for (std::size_t r = 1; r < static_cast<std::size_t>(kReasonCount); ++r) {
      const std::uint64_t n = metrics_[m].reasons[r].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out.sample("flurry_grpc_errors_total", n,
                 {{"method", kMethodNames[m]}, {"reason", to_string(static_cast<Reason>(r))}});
    }
  }
  out.family("flurry_grpc_request_duration_seconds", Type::kHistogram,
             "Time from a call's start to its status (a stream's whole life).");
  for (std::size_t m = 0; m < kMethodNames.size(); ++m) {
    std::array<std::uint64_t, kBucketSlots> buckets{};
    for (std::size_t b = 0; b < kBucketSlots; ++b) {
      buckets[b] = metrics_[m].buckets[b].load(std::memory_order_relaxed);
    }
    out.latency_series("flurry_grpc_request_duration_seconds", {"method", kMethodNames[m]}, buckets,
                       metrics_[m].duration_ns.load(std::memory_order_relaxed));
  }
  out.family("flurry_grpc_connections_rejected_total", Type::kCounter,
             "gRPC connections closed at once because the descriptor ceiling was reached.");
  out.sample("flurry_grpc_connections_rejected_total", connections_rejected);
  out.family("flurry_grpc_streams", Type::kGauge, "Stream and StreamRange calls running.");
  out.sample("flurry_grpc_streams", static_cast<std::uint64_t>(budget.streams()));
  out.family("flurry_grpc_stream_buffered_bytes", Type::kGauge,
             "Bytes of Stream answers and StreamRange chunks issued and not yet taken by the "
             "transport.");
  out.sample("flurry_grpc_stream_buffered_bytes", budget.bytes());
  out.family("flurry_grpc_stream_messages_total", Type::kCounter,
             "Messages of IDs sent on gRPC streams (and unary responses), by method.");
  out.family("flurry_grpc_ids_sent_total", Type::kCounter,
             "IDs written to gRPC responses, by method.");
  for (std::size_t m = 0; m < kMethodNames.size(); ++m) {
    const std::uint64_t messages = metrics_[m].messages.load(std::memory_order_relaxed);
    if (messages == 0) continue;
    out.sample("flurry_grpc_stream_messages_total", messages, {{"method", kMethodNames[m]}});
    out.sample("flurry_grpc_ids_sent_total", metrics_[m].ids.load(std::memory_order_relaxed),
               {{"method", kMethodNames[m]}});
  }
}

}  // namespace flurry::grpc_api

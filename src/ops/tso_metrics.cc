#include "ops/tso_metrics.h"

#include <chrono>

namespace flurry::ops {

void write_tso_metrics(const TimestampOracle& oracle, service::PrometheusWriter& out) {
  const TsoStats s = oracle.stats();
  out.gauge("flurry_tso_leader", "1 while this process leads the timestamp oracle, else 0.",
            s.role == TsoRole::kLeader ? 1.0 : 0.0);
  out.gauge("flurry_tso_term",
            "The timestamp oracle's leadership term (fencing token) this process leads in; 0 when "
            "it does not lead.",
            static_cast<double>(s.term));
  out.counter("flurry_tso_leader_changes_total",
              "Times this process became or stopped being the timestamp oracle's leader.",
              s.leader_changes);
  out.counter("flurry_tso_window_saves_total",
              "Upper bounds of the timestamp window saved to the registry.", s.window_saves);
  out.counter("flurry_tso_requests_total",
              "Timestamp grants asked of the oracle here, refused ones included.", s.requests);
  out.counter("flurry_tso_timestamps_total", "Timestamps handed out.", s.timestamps);
  out.counter(
      "flurry_tso_not_leader_total",
      "Timestamp requests refused because this process does not lead (NOT_LEADER, NO_LEADER).",
      s.not_leader);
  out.family("flurry_tso_wait_seconds_total", service::PrometheusWriter::Type::kCounter,
             "Time timestamp grants spent waiting (the clock, the window's save).");
  out.sample("flurry_tso_wait_seconds_total", std::chrono::duration<double>(s.wait_total).count(),
             {});
}

}  // namespace flurry::ops

// The timestamp oracle's metrics (flurry_tso_*), written by Operations::write_metrics on a server
// that serves the oracle.
#pragma once

#include "flurry/timestamp_oracle.h"
#include "service/prometheus.h"

namespace flurry::ops {

// flurry_tso_leader (1 while this process leads), flurry_tso_term, and the counters
// flurry_tso_leader_changes_total, _window_saves_total, _requests_total, _timestamps_total,
// _not_leader_total and _wait_seconds_total, from one TimestampOracle::stats() reading.
// Thread-safe as stats() is.
void write_tso_metrics(const TimestampOracle& oracle, service::PrometheusWriter& out);

}  // namespace flurry::ops

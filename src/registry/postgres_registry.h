// Internal: the PostgreSQL registry opened from a connection string already parsed.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "db/postgres_conninfo.h"
#include "flurry/clock.h"
#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry::internal {

// open_postgres_registry (registry.h) of a connection string already parsed, so that nothing
// below the edge that parsed it (open_registry) parses or checks it again. `scope` names the
// tables: empty for the node IDs (flurry_nodes, flurry_meta), "tso" for the timestamp oracle's
// lease (flurry_tso_nodes, flurry_tso_meta).
[[nodiscard]] Result<std::unique_ptr<NodeRegistry>> open_postgres_registry(
    PostgresUrl url, std::chrono::milliseconds ttl, std::string_view layout, MonotonicClock& clock,
    std::string_view scope = {});

}  // namespace flurry::internal

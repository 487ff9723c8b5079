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
// below the edge that parsed it (open_registry) parses or checks it again.
[[nodiscard]] Result<std::unique_ptr<NodeRegistry>> open_postgres_registry(
    PostgresUrl url, std::chrono::milliseconds ttl, std::string_view layout, MonotonicClock& clock);

}  // namespace flurry::internal

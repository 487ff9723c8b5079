// tso()'s answers (docs/clients.md, "Timestamps"): a grant's first value and a 307's leader,
// checked against clients/conformance/cases.json by the client's tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "flurry/client.h"
#include "settings.h"

namespace flurry::client_internal {

// The first timestamp of a GET /v1/tso answer ({"first":"<decimal>","count":N}); UNKNOWN quoting
// an answer that does not fit a request for `count` (another count, a first that is not decimal
// text, values past 2^64 - 1).
[[nodiscard]] ClientResult<std::uint64_t> parse_tso_grant(const std::string& body,
                                                          std::uint64_t count,
                                                          const std::string& endpoint);

// The leader's endpoint from a 307's Location ("http://host:port/v1/tso?count=N"): its scheme and
// authority; none unless an absolute http:// or https:// URL.
[[nodiscard]] std::optional<Endpoint> tso_leader_of(std::string_view location);

}  // namespace flurry::client_internal

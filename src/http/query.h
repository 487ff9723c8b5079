// Internal: the query string and path segments of a request target, percent-decoded.
//
// Only what the API needs: a route names the parameters it accepts (at most kMaxQueryParams);
// parse_query() finds each one at most once and rejects any other, and path_segment() decodes
// one segment of the path. Values that need no decoding are views into the target; decoded ones
// live in a QueryScratch, whose strings keep their capacity across requests, so a warm scratch
// makes parsing allocation-free. Depends on the core only (the fuzzer links it alone).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "flurry/status.h"

namespace flurry::http {

inline constexpr std::size_t kMaxQueryParams = 4;

// Reusable storage for decoded names and values: one per thread, reused for every request.
struct QueryScratch {
  std::array<std::string, kMaxQueryParams> values;  // decoded values, by parameter index
  std::string key;                                  // a decoded parameter name
  std::string path;                                 // a decoded path segment
};

// The parameters found, by their index in the route's list. The views point into the query
// string or into the QueryScratch: valid while both are unchanged.
struct QueryParams {
  std::array<std::string_view, kMaxQueryParams> value{};
  std::array<bool, kMaxQueryParams> present{};
};

// Splits `query` (the part after '?', without it) at '&' into name=value pairs, percent-decoding
// both ('+' is a space); empty pairs are skipped and a name without '=' has an empty value.
// Fills params.value[i] and params.present[i] for `allowed[i]`. INVALID_ARGUMENT / BAD_INPUT
// naming the parameter for an unknown or repeated one, or a bad escape; `route` names the route
// in the message ("/v1/ids takes count, format and encoding"). Precondition:
// allowed.size() <= kMaxQueryParams.
[[nodiscard]] Status parse_query(std::string_view query, std::string_view route,
                                 std::span<const std::string_view> allowed, QueryParams& params,
                                 QueryScratch& scratch);

// A path segment (the text after a route prefix, without '/'), percent-decoded ('+' stays a
// plus). The view points into `raw` or into scratch.path. INVALID_ARGUMENT / BAD_INPUT on a bad
// escape.
[[nodiscard]] Result<std::string_view> path_segment(std::string_view raw, QueryScratch& scratch);

}  // namespace flurry::http

// The C++ client's order-number decode (docs/clients.md, "Order numbers"): the request's target
// and the server's answer made into a DecodedOrder. Pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "flurry/client.h"
#include "flurry/status.h"

namespace flurry::client_internal {

// "/v1/order-numbers/{code}[?tag=T]", code and tag percent-encoded (all but RFC 3986's
// unreserved characters).
[[nodiscard]] std::string order_decode_target(std::string_view code,
                                              const std::optional<std::string>& tag);

// The answer of GET /v1/order-numbers/{code}: its fields, without `decoded` (the caller decodes
// the snowflake ID with the layout). UNKNOWN quoting the answer when it does not fit: not JSON,
// no `id` of decimal text below 2^64, a `source` that is neither "snowflake" nor "segment", a
// segment answer without a `tag`.
[[nodiscard]] Result<DecodedOrder> parse_decoded_order(std::string_view body);

}  // namespace flurry::client_internal

// How the verbs show a decoded ID (`flurry decode`, `flurry order decode --layout`): as aligned
// text or as one JSON object.
#pragma once

#include <nlohmann/json.hpp>

#include "flurry/decoded_id.h"
#include "flurry/layout.h"

namespace flurry::cli {

// Every field, the time in ISO-8601, the node, sequence and encodings, one per line.
void print_decoded(const DecodedId& d, const Layout& layout);
// The same as a JSON object (the ID as a decimal string).
[[nodiscard]] nlohmann::ordered_json decoded_json(const DecodedId& d, const Layout& layout);
// `j` on one line of standard output (odd bytes replaced, never an exception).
void print_json(const nlohmann::ordered_json& j);

}  // namespace flurry::cli

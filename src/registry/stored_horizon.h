// Checks every leasing registry makes of the horizon records it stores (internal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "flurry/horizon.h"
#include "flurry/status.h"

namespace flurry::internal {

// The horizon a claim of `node` inherits from its stored text (none when nothing is stored).
// Never reads an unreadable record as "none", which could let the next owner repeat IDs:
// DATA_LOSS / CORRUPT for text that does not parse or a record of another node, the message
// naming the node and `where` (the registry).
[[nodiscard]] Result<std::optional<HorizonRecord>> inherited_horizon(
    const std::optional<std::string>& text, std::uint64_t node, std::string_view where);

// A horizon save's check that the registry did not go backwards: `stored` is what the registry
// held under this lease (token) just before the save, `saved_last` what this process saved last
// under the same token. FAILED_PRECONDITION / REGISTRY_REGRESSED when any generation's horizon is
// below it (or the stored record is missing or unreadable), naming both.
[[nodiscard]] Status check_not_behind(const Result<HorizonRecord>& stored,
                                      const HorizonRecord& saved_last, std::uint64_t token,
                                      std::string_view where);

// Raises `to` to `from` where `from` is higher: each generation's horizon to the larger of the
// two, and the generation in use to `from`'s when that raised anything. Records of another shape
// (another number of generations) leave `to` as it is (Generator::create refuses such a record).
// True when anything was raised.
bool raise_horizons(HorizonRecord& to, const HorizonRecord& from);

}  // namespace flurry::internal

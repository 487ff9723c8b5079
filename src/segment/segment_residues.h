// Internal: the residue proof of a tag served by several stores (docs/segments.md): the stores
// of one tag can never issue one ID twice when they share one delta, at least the number of
// stores, and each has a remainder of its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/status.h"

namespace flurry::internal {

// What a node knows of one store's residue for a tag.
struct Residue {
  enum class State { kUnknown, kAbsent, kKnown } state = State::kUnknown;
  std::uint64_t delta = 1;
  std::uint64_t remainder = 0;
};

// OK when `residues` (one per store, `names` their describe()) keep the proof; OK with one store.
// A store whose residue is unknown (it did not answer and this host remembers none) fails it.
// FAILED_PRECONDITION naming the tag, every store's residue and why otherwise.
[[nodiscard]] Status prove_residues(std::string_view tag, const std::vector<std::string>& names,
                                    const std::vector<Residue>& residues);

}  // namespace flurry::internal

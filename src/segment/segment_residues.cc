// The residue proof: see segment_residues.h.
#include "segment_residues.h"

#include <string>

#include "core/quote.h"

namespace flurry::internal {

Status prove_residues(std::string_view tag, const std::vector<std::string>& names,
                      const std::vector<Residue>& residues) {
  const std::size_t n = names.size();
  if (n <= 1) return OkStatus();
  const auto refuse = [&](std::string why) {
    std::string listed;
    for (std::size_t s = 0; s < n; ++s) {
      listed += (s > 0 ? "; " : "") + names[s] + ": ";
      switch (residues[s].state) {
        case Residue::State::kUnknown:
          listed += "unknown";
          break;
        case Residue::State::kAbsent:
          listed += "no such tag";
          break;
        case Residue::State::kKnown:
          listed += "delta " + std::to_string(residues[s].delta) + " remainder " +
                    std::to_string(residues[s].remainder);
          break;
      }
    }
    return Status(StatusCode::kFailedPrecondition,
                  "segment tag " + internal::quote(tag) + " is refused: its " + std::to_string(n) +
                      " stores could issue the same ID: " + why + " (" + listed +
                      "). Every store of a tag needs one delta of at least " + std::to_string(n) +
                      " and a remainder of its own (create the tag through a server or `flurry "
                      "segment create` with all the stores)");
  };
  const Residue* first = nullptr;
  for (std::size_t s = 0; s < n; ++s) {
    const Residue& r = residues[s];
    if (r.state == Residue::State::kUnknown) {
      return refuse("store " + names[s] +
                    " did not answer and this host remembers no residue of it");
    }
    if (r.state != Residue::State::kKnown) continue;
    if (r.delta < n) {
      return refuse("store " + names[s] + " has delta " + std::to_string(r.delta) +
                    ", below the number of stores");
    }
    if (first != nullptr && r.delta != first->delta) {
      return refuse("the stores do not agree on one delta");
    }
    if (first == nullptr) first = &r;
    for (std::size_t t = 0; t < s; ++t) {
      if (residues[t].state == Residue::State::kKnown && residues[t].remainder == r.remainder) {
        return refuse("stores " + names[t] + " and " + names[s] + " share remainder " +
                      std::to_string(r.remainder));
      }
    }
  }
  return OkStatus();
}

}  // namespace flurry::internal

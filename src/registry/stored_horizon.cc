#include "stored_horizon.h"

namespace flurry::internal {
namespace {

// "horizon 123 (generation 0)" or, with several generations, "horizons 123 -1 (generation 0)".
std::string format_horizons(const HorizonRecord& r) {
  std::string out = r.horizons.size() == 1 ? "horizon" : "horizons";
  for (std::int64_t h : r.horizons) {
    out += ' ';
    out += std::to_string(h);
  }
  return out + " (generation " + std::to_string(r.generation) + ")";
}

}  // namespace

Result<std::optional<HorizonRecord>> inherited_horizon(const std::optional<std::string>& text,
                                                       std::uint64_t node, std::string_view where) {
  if (!text) return std::optional<HorizonRecord>();
  const std::string name =
      "the horizon of node " + std::to_string(node) + " in " + std::string(where);
  Result<HorizonRecord> record = parse_horizon_record(*text);
  if (!record.ok()) return record.status().with_prefix(name);
  if (record->node != node) {
    return Status(Reason::kCorrupt, name + " was written for node " + std::to_string(record->node));
  }
  return std::optional<HorizonRecord>(std::move(record).value());
}

bool raise_horizons(HorizonRecord& to, const HorizonRecord& from) {
  if (to.horizons.size() != from.horizons.size()) return false;
  bool raised = false;
  for (std::size_t g = 0; g < from.horizons.size(); ++g) {
    if (from.horizons[g] > to.horizons[g]) {
      to.horizons[g] = from.horizons[g];
      raised = true;
    }
  }
  if (raised) to.generation = from.generation;
  return raised;
}

Status check_not_behind(const Result<HorizonRecord>& stored, const HorizonRecord& saved_last,
                        std::uint64_t token, std::string_view where) {
  bool behind = !stored.ok() || stored->horizons.size() != saved_last.horizons.size();
  for (std::size_t g = 0; !behind && g < saved_last.horizons.size(); ++g) {
    behind = stored->horizons[g] < saved_last.horizons[g];
  }
  if (!behind) return OkStatus();
  return Status(
      Reason::kRegistryRegressed,
      "the horizon of node " + std::to_string(saved_last.node) + " in " + std::string(where) +
          " went backwards under this lease (token " + std::to_string(token) + "): it holds " +
          (stored.ok() ? format_horizons(*stored) : std::string("none")) + ", below the " +
          format_horizons(saved_last) + " saved last (was the registry restored from a backup?)");
}

}  // namespace flurry::internal

// LeasedHorizonStore: a generator's HorizonStore under a node-ID lease.
#include <string>
#include <utility>

#include "flurry/registry.h"

namespace flurry {

Result<HorizonRecord> LeasedHorizonStore::load() {
  if (claim_.inherited) return *claim_.inherited;
  return Status(StatusCode::kNotFound, Reason::kNone,
                "node " + std::to_string(claim_.lease.node) + " has no saved horizon in " +
                    registry_.describe());
}

Status LeasedHorizonStore::save(const HorizonRecord& record) {
  Status st = registry_.save_horizon(claim_.lease, record);
  // load() must return the last saved record, not the inherited one: a generator created again
  // on this store (same lease) has to start above what the previous one may have issued.
  if (st.ok()) claim_.inherited = record;
  return st;
}

std::string LeasedHorizonStore::describe() const {
  return registry_.describe() + " (node " + std::to_string(claim_.lease.node) + ", token " +
         std::to_string(claim_.lease.token) + ")";
}

}  // namespace flurry

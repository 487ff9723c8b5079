// LeasedHorizonStore: a generator's HorizonStore under a node-ID lease.
#include <string>
#include <utility>

#include "flurry/horizon_floor.h"
#include "flurry/registry.h"

namespace flurry {

Result<HorizonRecord> LeasedHorizonStore::load() {
  if (claim_.inherited) return *claim_.inherited;
  return Status(StatusCode::kNotFound, "node " + std::to_string(claim_.lease.node) +
                                           " has no saved horizon in " + registry_.describe());
}

bool is_lease_gone(const Status& status) noexcept {
  return status.code() == StatusCode::kFailedPrecondition &&
         (status.reason() == Reason::kLeaseLost || status.reason() == Reason::kRegistryRegressed);
}

Status LeasedHorizonStore::save(const HorizonRecord& record) {
  // This host remembers the record before the registry may accept it, so that a registry that
  // later goes backwards cannot take this process below it.
  if (floor_ != nullptr) {
    if (Status st = floor_->remember(record); !st.ok()) return st;
  }
  Status st = registry_.save_horizon(claim_.lease, record);
  if (!st.ok()) return st;
  // load() must return the last saved record, not the inherited one: a generator created again
  // on this store (same lease) has to start above what the previous one may have issued.
  claim_.inherited = record;
  return floor_ != nullptr ? floor_->accepted(record) : OkStatus();
}

std::string LeasedHorizonStore::describe() const {
  return registry_.describe() + " (node " + std::to_string(claim_.lease.node) + ", token " +
         std::to_string(claim_.lease.token) + ")";
}

}  // namespace flurry

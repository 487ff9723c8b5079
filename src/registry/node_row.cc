#include <algorithm>

#include "flurry/registry.h"

namespace flurry {

NodeRowView view_node(const NodeInfo& node, const Layout* layout, std::int64_t now_unix_ms) {
  NodeRowView view;
  if (node.live && node.expires_unix_ms) {
    view.lease_expires_unix_ms = node.expires_unix_ms;
    view.lease_remaining_ms = std::max<std::int64_t>(*node.expires_unix_ms - now_unix_ms, 0);
  }
  if (node.horizon) {
    const HorizonRecord& record = *node.horizon;
    NodeRowView::Horizon h;
    h.generation = record.generation;
    if (record.generation < record.horizons.size()) h.ticks = record.horizons[record.generation];
    if (layout != nullptr && h.ticks >= 0)
      h.time = layout->time_of(static_cast<std::uint64_t>(h.ticks));
    view.horizon = h;
  }
  return view;
}

}  // namespace flurry

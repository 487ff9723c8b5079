// StreamBudget (stream_budget.h).
#include "stream_budget.h"

#include <algorithm>

namespace flurry::grpc_api {

StreamBudget::Connection* StreamBudget::enter(const std::string& peer) {
  MutexLock lock(mu_);
  Entry& e = connections_[peer];
  ++e.streams;
  ++streams_;
  return &e.connection;
}

void StreamBudget::leave(const std::string& peer) {
  MutexLock lock(mu_);
  const auto it = connections_.find(peer);
  if (it != connections_.end() && --it->second.streams == 0) connections_.erase(it);
  --streams_;
}

std::uint64_t StreamBudget::take(Connection& c, std::uint64_t want, std::uint64_t least) {
  MutexLock lock(take_mu_);
  const std::uint64_t server_used = used_.load(std::memory_order_relaxed);
  const std::uint64_t conn_used = c.bytes.load(std::memory_order_relaxed);
  const std::uint64_t room =
      std::min(server_used < kServerStreamBytes ? kServerStreamBytes - server_used : 0,
               conn_used < kConnectionStreamBytes ? kConnectionStreamBytes - conn_used : 0);
  std::uint64_t got = std::min(want, room);
  got -= got % 8;
  got = std::max(least, got);
  used_.fetch_add(got, std::memory_order_relaxed);
  c.bytes.fetch_add(got, std::memory_order_relaxed);
  return got;
}

std::size_t StreamBudget::streams() const {
  MutexLock lock(mu_);
  return streams_;
}

}  // namespace flurry::grpc_api

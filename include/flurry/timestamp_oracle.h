// SCRATCH (i35-transport): the spec's declarations of the timestamp oracle, so that the
// transports compile before the tso core lands on main. Replaced by main's header on merge.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "flurry/clock.h"
#include "flurry/generator.h"
#include "flurry/layout.h"
#include "flurry/status.h"

namespace flurry {

struct TsoLeaderAddress {
  std::string http, grpc, owner;
};
struct TsoGrant {
  std::uint64_t first = 0, count = 0, term = 0;
};
struct TsoStats {
  bool leader = false;
  std::uint64_t term = 0, leader_changes = 0, window_saves = 0, requests = 0, timestamps = 0,
                refused_not_leader = 0;
  Nanos wait_total{0};
};

class TimestampOracle {
 public:
  virtual ~TimestampOracle() = default;
  virtual Result<TsoGrant> grant(std::uint64_t count, Blocking blocking) = 0;
  [[nodiscard]] virtual std::uint64_t max_batch() const = 0;
  [[nodiscard]] virtual std::uint64_t term() const = 0;
  [[nodiscard]] virtual Status check_term(std::uint64_t term) const = 0;
  [[nodiscard]] virtual std::optional<TsoLeaderAddress> leader() const = 0;
  [[nodiscard]] virtual Status readiness() const = 0;
  [[nodiscard]] virtual TsoStats stats() const = 0;
};

}  // namespace flurry

#include "flurry/server/service.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include "flurry/timefmt.h"
#include "text.h"

#ifndef FLURRY_VERSION
#error "FLURRY_VERSION must be defined by the build"
#endif

namespace flurry::server {
namespace {

// Adds the monotonic counters of `from` to `into` (gauges are left alone).
void add_counters(GeneratorStats& into, const GeneratorStats& from) {
  into.throttle_waits += from.throttle_waits;
  into.rollback_waits += from.rollback_waits;
  into.rollback_failures += from.rollback_failures;
  into.clock_switches += from.clock_switches;
  into.horizon_saves += from.horizon_saves;
  into.horizon_failures += from.horizon_failures;
}

void add_counters(LeaseKeeperStats& into, const LeaseKeeperStats& from) {
  into.renewals += from.renewals;
  into.renewal_failures += from.renewal_failures;
}

using std::chrono::milliseconds;

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

std::string millis_text(Nanos d) {
  return std::to_string(std::chrono::duration_cast<milliseconds>(d).count()) + " ms";
}

std::int64_t to_ms(Nanos d) {
  return std::chrono::duration_cast<milliseconds>(d).count();
}

// For log lines: the status as code=... reason=... message="...".
std::string describe(const Status& st) {
  return "code=" + std::string(to_string(st.code())) +
         " reason=" + std::string(to_string(st.reason())) + " message=" + quote(st.message(), 1024);
}

// What a change of state is judged by: code and reason (messages carry changing numbers).
std::string state_key(const Status& st) {
  if (st.ok()) return "";
  return std::string(to_string(st.code())) + "/" + std::string(to_string(st.reason()));
}

// A lease lost for good is retryable for the service as a whole: it claims a node ID again.
// The reason stays REGISTRY_REGRESSED when that is why it was lost.
Status reclaiming(std::uint64_t node, std::string_view detail, Reason why = Reason::kLeaseLost) {
  return Status(StatusCode::kUnavailable,
                why == Reason::kRegistryRegressed ? why : Reason::kLeaseLost,
                "the lease on node " + std::to_string(node) +
                    (why == Reason::kRegistryRegressed ? " was lost: the registry went backwards"
                                                       : " was lost to another owner") +
                    "; claiming a node ID again" +
                    (detail.empty() ? std::string() : ": " + std::string(detail)));
}

void append_line(std::string& out, std::string_view name, double value) {
  char buf[48];
  out += name;
  out += ' ';
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    out.append(buf,
               static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, value).ptr - buf));
  }
  out += '\n';
}

void append_metric(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help, double value) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
  append_line(out, name, value);
}

}  // namespace

Service::Service(Config config, Clock& clock)
    : config_(std::move(config)), clock_(clock), layout_([&] {
        Result<Layout> parsed = Layout::parse(config_.layout);
        return parsed.ok() ? std::move(parsed).value() : std::move(Layout::parse("flurry")).value();
      }()) {
  if (Result<RollbackPolicy> p = parse_rollback_policy(config_.rollback); p.ok()) rollback_ = *p;
}

Service::~Service() {
  stop();
}

std::string_view Service::version() const noexcept {
  return FLURRY_VERSION;
}

std::string Service::registry_description() const {
  return registry_ ? registry_->describe() : std::string("(not open)");
}

Status Service::start(std::stop_token stop) {
  std::lock_guard lock(stop_mu_);
  if (stopped_ || registry_) {
    return Status(StatusCode::kFailedPrecondition, Reason::kNone,
                  "Service::start called twice or after stop");
  }
  Status st = start_locked(std::move(stop));
  if (st.ok()) return st;
  // Undo what was acquired; the caller reports `st`.
  current_.store(nullptr, std::memory_order_release);
  generator_.store(nullptr, std::memory_order_release);
  for (const std::unique_ptr<Incarnation>& inc : incarnations_) shut_down(*inc, false, "start");
  incarnations_.clear();
  registry_.reset();
  stopped_ = true;
  return st;
}

Status Service::start_locked(std::stop_token stop) {
  if (Status valid = validate_config(config_); !valid.ok()) return valid;
  if (Status alive = layout_.check_alive(clock_.now()); !alive.ok()) return alive;

  // The data directory.
  const std::filesystem::path dir(config_.data_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Status(
        StatusCode::kFailedPrecondition, Reason::kIo,
        "cannot create the data directory " + quote(config_.data_dir, 1024) + ": " + ec.message());
  }

  // The registry.
  const std::string host = hostname();
  if (config_.registry == "static") {
    std::uint64_t node = config_.node.value_or(0);
    if (config_.node_from_hostname) {
      Result<std::uint64_t> n = node_from_hostname(host);
      if (!n.ok()) {
        return InvalidArgument("node_from_hostname: " + n.status().message());
      }
      node = *n;
      if (node >= layout_.node_count()) {
        return InvalidArgument("node_from_hostname: node " + std::to_string(node) +
                               " (from the host name " + quote(host) +
                               ") is out of range: the layout has node IDs 0-" +
                               std::to_string(layout_.node_count() - 1));
      }
    }
    Result<std::unique_ptr<NodeRegistry>> r =
        open_static_registry(config_.data_dir, node, layout_.to_string());
    if (!r.ok()) return r.status().with_prefix("cannot open the static registry");
    registry_ = std::move(r).value();
  } else {
    const std::string path = (dir / "registry.db").string();
    Result<std::unique_ptr<NodeRegistry>> r =
        open_sqlite_registry(path, milliseconds(config_.lease_ttl_ms), clock_, layout_.to_string());
    if (!r.ok())
      return r.status().with_prefix("cannot open the sqlite registry " + quote(path, 1024));
    registry_ = std::move(r).value();
  }

  // This host's own memory of the horizons, kept beside the registry (see horizon_floor.h).
  floor_ =
      std::make_unique<HorizonFloor>(dir / "local-horizons", config_.registry, layout_.to_string());

  // The node ID, the generator and the lease keeper.
  owner_ = host + ":" + std::to_string(::getpid());
  Result<std::unique_ptr<Incarnation>> inc = incarnate(std::move(stop));
  if (!inc.ok()) return inc.status();
  publish(std::move(inc).value());
  const Incarnation& cur = *incarnations_.back();
  max_batch_ = std::min<std::uint64_t>(config_.max_batch, cur.generator->max_batch());
  if (max_batch_ < config_.max_batch) {
    spdlog::warn(
        "event=max_batch_lowered max_batch={} configured={} reason=\"the layout cannot issue more "
        "within max_lead_ms\"",
        max_batch_, config_.max_batch);
  }

  serving_.store(true, std::memory_order_release);
  {
    std::lock_guard lock(monitor_mu_);
    monitor_stop_ = false;
  }
  reset_monitor_state(cur);
  monitor_ = std::thread([this] { monitor_loop(); });
  return OkStatus();
}

Result<std::unique_ptr<Service::Incarnation>> Service::incarnate(std::stop_token stop) {
  Result<Claim> claim = registry_->claim(owner_, layout_.node_count());
  if (!claim.ok()) {
    return claim.status().with_prefix("cannot claim a node ID from " + registry_->describe());
  }
  auto inc = std::make_unique<Incarnation>();
  inc->lease = claim->lease;
  const std::uint64_t node = inc->lease.node;
  spdlog::debug("event=lease_claimed node={} token={} owner={} inherited={}", node,
                claim->lease.token, quote(owner_), claim->inherited.has_value());
  // Never below what this process or host saved for the node, whatever the registry says.
  Result<std::optional<HorizonRegression>> regression = floor_->raise(*claim);
  if (!regression.ok()) {
    if (Status st = registry_->release(claim->lease); !st.ok()) {
      spdlog::error("event=lease_release_failed node={} {}", node, describe(st));
    }
    return regression.status().with_prefix("cannot start node " + std::to_string(node));
  }
  if (*regression) note_regression(**regression);
  inc->store =
      std::make_unique<LeasedHorizonStore>(*registry_, std::move(claim).value(), floor_.get());

  // The generator.
  GeneratorOptions options;
  options.node = node;
  options.max_lead = milliseconds(config_.max_lead_ms);
  options.rollback = rollback_;
  options.max_wait = milliseconds(config_.max_wait_ms);
  options.horizon_window = milliseconds(config_.horizon_window_ms);
  options.background_horizon = true;
  Result<std::unique_ptr<Generator>> g = Generator::create(layout_, options, clock_, *inc->store);
  if (!g.ok()) {
    shut_down(*inc, false, "start");
    return g.status().with_prefix("cannot start the generator for node " + std::to_string(node));
  }
  inc->generator = std::move(g).value();

  // The lease keeper runs while the start may still wait for the clock.
  inc->keeper = std::make_unique<LeaseKeeper>(*registry_, inc->lease, *inc->generator,
                                              SteadyClock::instance());
  if (Status st = inc->keeper->start(); !st.ok()) {
    shut_down(*inc, false, "start");
    return st;
  }

  if (Status st = wait_for_clock(*inc->generator, node, std::move(stop)); !st.ok()) {
    shut_down(*inc, false, "start");
    return st;
  }
  (void)inc->generator->maintain();  // extend the horizon now rather than on the first request
  return inc;
}

void Service::publish(std::unique_ptr<Incarnation> inc) {
  Incarnation* p = inc.get();
  incarnations_.push_back(std::move(inc));
  node_.store(p->lease.node, std::memory_order_release);
  std::lock_guard lock(totals_mu_);
  if (const Incarnation* old = current_.load(std::memory_order_acquire); old != nullptr) {
    add_counters(retired_generators_, old->generator->stats());
    add_counters(retired_keepers_, old->keeper->stats());
  }
  current_.store(p, std::memory_order_release);
  generator_.store(p->generator.get(), std::memory_order_release);
}

void Service::shut_down(Incarnation& inc, bool lease_lost, std::string_view when) {
  if (inc.retired) return;
  inc.retired = true;
  const std::uint64_t node = inc.lease.node;
  if (lease_lost && inc.keeper) inc.keeper->stop();
  if (inc.generator) {
    if (Status st = inc.generator->close(); !st.ok()) {
      if (lease_lost || st.reason() == Reason::kRegistryRegressed) {
        spdlog::info(
            "event=generator_closed node={} horizon_saved=false note=\"expected: the lease is "
            "lost or the registry went backwards\" {}",
            node, describe(st));
      } else {
        spdlog::error("event=horizon_save_failed node={} when={} {}", node, when, describe(st));
      }
    }
  }
  if (inc.keeper) inc.keeper->stop();
  if (lease_lost) return;
  if (Status st = registry_->release(inc.lease); !st.ok()) {
    spdlog::error("event=lease_release_failed node={} {}", node, describe(st));
  } else if (when == "stop") {
    spdlog::info("event=lease_released node={}", node);
  }
}

void Service::note_regression(const HorizonRegression& r) {
  // One event, counted once: the renewal may have counted it already, and a re-claim that
  // retries finds it again.
  if (!regression_counted_) regressions_.fetch_add(1, std::memory_order_relaxed);
  regression_counted_ = reclaiming_.load(std::memory_order_acquire);
  const std::string what = describe_regression(r, layout_);
  spdlog::error(
      "event=registry_regressed node={} generation={} registry_tick={} remembered_tick={} "
      "registry={} message={}",
      r.node, r.generation, r.registry_tick, r.remembered_tick, quote(registry_->describe(), 1024),
      quote(what + "; starting above the remembered horizon", 1024));
  if (reclaiming_.load(std::memory_order_acquire)) {
    std::lock_guard lock(monitor_mu_);
    reclaim_status_ = Status(
        StatusCode::kUnavailable, Reason::kRegistryRegressed,
        "claiming a node ID again: " + what + "; waiting to start above the remembered horizon");
  }
}

void Service::reset_monitor_state(const Incarnation& inc) {
  last_lease_state_.clear();
  last_keeper_ = inc.keeper->stats();
  last_stats_ = inc.generator->stats();
  logged_failures_ = last_keeper_.renewal_failures;
  logged_horizon_failures_ = last_stats_.horizon_failures;
}

Status Service::wait_for_clock(Generator& generator, std::uint64_t node, std::stop_token stop) {
  const Nanos unit = layout_.unit();
  const Nanos max_lead = milliseconds(config_.max_lead_ms);
  const Nanos crash_cost = milliseconds(config_.horizon_window_ms) + max_lead + unit;
  const Nanos wait_limit = crash_cost + milliseconds(config_.max_wait_ms);
  bool announced = false;
  bool switched = false;
  std::mutex mu;
  std::condition_variable_any cv;
  for (;;) {
    Status health = generator.health();
    if (health.ok()) {
      if (announced) spdlog::info("event=start_resumed node={} reason=clock_caught_up", node);
      return OkStatus();
    }
    if (health.reason() != Reason::kClockBehind) {
      return health.with_prefix("cannot start node " + std::to_string(node));
    }
    const GeneratorStats s = generator.stats();
    const Nanos gap = unit * s.lead_ticks;
    const std::string why = "the horizon node " + std::to_string(node) + " inherited lies " +
                            millis_text(gap) + " ahead of the clock";
    if (gap > crash_cost && rollback_ == RollbackPolicy::kClock && !switched) {
      // Switch clock generation now (one ID is spent on it), so the node is ready at once.
      switched = true;
      Result<std::uint64_t> id = generator.next();
      if (!id.ok()) return id.status().with_prefix("cannot start: " + why);
      spdlog::warn("event=clock_switch node={} generation={} reason={}", node,
                   generator.stats().generation, quote(why, 1024));
      continue;
    }
    if (gap > crash_cost && rollback_ == RollbackPolicy::kFail) {
      return Status(StatusCode::kUnavailable, Reason::kClockBehind,
                    "refusing to start: " + why +
                        ", more than a crash explains (horizon_window_ms + max_lead_ms); "
                        "rollback = fail. Wait until the clock has caught up, or use "
                        "rollback = wait or clock");
    }
    if (gap > wait_limit || switched) {
      return Status(StatusCode::kUnavailable, Reason::kClockBehind,
                    "refusing to start: " + why + "; rollback = " + config_.rollback +
                        " waits at most " + millis_text(wait_limit) +
                        " (horizon_window_ms + max_lead_ms + max_wait_ms) at start");
    }
    const Nanos wait = gap - max_lead;
    if (!announced) {
      announced = true;
      spdlog::warn("event=start_delayed node={} wait_ms={} rollback={} reason={}", node,
                   to_ms(wait), config_.rollback, quote(why, 1024));
    }
    std::unique_lock lock(mu);
    const Nanos step = std::clamp<Nanos>(wait, milliseconds(1), milliseconds(100));
    cv.wait_for(lock, stop, step, [] { return false; });
    if (stop.stop_requested()) {
      return Status(StatusCode::kCancelled, Reason::kShutDown,
                    "the start was interrupted while waiting for the clock");
    }
  }
}

void Service::stop() {
  std::lock_guard lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  serving_.store(false, std::memory_order_release);
  stopping_.store(true, std::memory_order_release);
  {
    std::lock_guard mlock(monitor_mu_);
    monitor_stop_ = true;
  }
  monitor_stop_source_.request_stop();  // a re-claim waiting for the clock
  monitor_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();

  // Only the latest incarnation can still be live; the others were retired with their lease.
  for (const std::unique_ptr<Incarnation>& inc : incarnations_) shut_down(*inc, false, "stop");
}

Status Service::issue(std::span<std::uint64_t> out, Blocking blocking) {
  if (!serving_.load(std::memory_order_acquire)) {
    return Status(StatusCode::kUnavailable, Reason::kShutDown,
                  stopping_.load(std::memory_order_relaxed) ? "the service is shutting down"
                                                            : "the service has not started");
  }
  if (out.empty() || out.size() > max_batch_) {
    return InvalidArgument("count must be between 1 and " + std::to_string(max_batch_));
  }
  Generator* const g = generator_.load(std::memory_order_acquire);
  if (g == nullptr) return reclaiming(node_.load(std::memory_order_acquire), "");
  Status st;
  if (out.size() == 1) {
    Result<std::uint64_t> id = g->next(blocking);
    if (id.ok()) {
      out[0] = *id;
    } else {
      st = id.status();
    }
  } else {
    st = g->next_batch(out, blocking);
  }
  if (!st.ok()) {
    // The lease was lost for good (or the generator was retired for it meanwhile): the monitor
    // claims a node ID again, so the caller may retry.
    if (is_lease_gone(st) ||
        (st.reason() == Reason::kShutDown && serving_.load(std::memory_order_acquire) &&
         generator_.load(std::memory_order_acquire) != g)) {
      return reclaiming(g->options().node, st.message(), st.reason());
    }
    return st;
  }
  metrics_.add_ids(out.size());
  return OkStatus();
}

Result<DecodedId> Service::decode(std::string_view text, Encoding encoding) const {
  Result<std::uint64_t> id = decode_id(text, encoding);
  if (!id.ok()) return id.status();
  Result<IdParts> parts = layout_.decompose(*id);
  if (!parts.ok()) return parts.status();  // says why this layout cannot have produced it
  DecodedId d;
  d.id = *id;
  d.parts = *parts;
  d.time = layout_.time_of(parts->ticks);
  d.unix_ms = std::chrono::floor<milliseconds>(d.time).time_since_epoch().count();
  return d;
}

Status Service::readiness() const {
  if (!serving_.load(std::memory_order_acquire)) {
    return stopping_.load(std::memory_order_relaxed)
               ? Status(StatusCode::kUnavailable, Reason::kShutDown, "the service is shutting down")
               : Status(StatusCode::kUnavailable, Reason::kNone, "the service has not started");
  }
  if (reclaiming_.load(std::memory_order_acquire)) {
    std::lock_guard lock(monitor_mu_);
    return reclaim_status_;
  }
  const Incarnation* inc = current_.load(std::memory_order_acquire);
  if (Status lease = inc->keeper->status(); !lease.ok()) {
    // Lost for good: the monitor is about to claim a node ID again.
    return is_lease_gone(lease) ? reclaiming(inc->lease.node, lease.message(), lease.reason())
                                : lease;
  }
  return inc->generator->health();
}

std::string Service::metrics_text() const {
  std::string out;
  out.reserve(8192);
  metrics_.render(out);
  const bool ready = readiness().ok();
  // The latest node's objects (while a node ID is claimed again: those of the lost one), plus
  // the counters of the nodes before it.
  const Incarnation* inc = nullptr;
  GeneratorStats generators_before{};
  LeaseKeeperStats keepers_before{};
  {
    std::lock_guard lock(totals_mu_);
    inc = current_.load(std::memory_order_acquire);
    generators_before = retired_generators_;
    keepers_before = retired_keepers_;
  }
  if (inc != nullptr) {
    GeneratorStats s = inc->generator->stats();
    add_counters(s, generators_before);
    const double unit_s = std::chrono::duration<double>(layout_.unit()).count();
    append_metric(out, "flurry_clock_lead_seconds", "gauge",
                  "How far the time of the IDs issued now runs ahead of the clock (0 when idle).",
                  static_cast<double>(std::max<std::int64_t>(s.lead_ticks, 0)) * unit_s);
    out += "# HELP flurry_rollback_events_total Clock steps back beyond max_lead, by outcome.\n";
    out += "# TYPE flurry_rollback_events_total counter\n";
    append_line(out, "flurry_rollback_events_total{outcome=\"wait\"}",
                static_cast<double>(s.rollback_waits));
    append_line(out, "flurry_rollback_events_total{outcome=\"fail\"}",
                static_cast<double>(s.rollback_failures));
    append_line(out, "flurry_rollback_events_total{outcome=\"clock_switch\"}",
                static_cast<double>(s.clock_switches));
    append_metric(out, "flurry_throttle_waits_total", "counter",
                  "Calls that waited because demand exceeded the layout's rate limit.",
                  static_cast<double>(s.throttle_waits));
    append_metric(out, "flurry_horizon_ahead_seconds", "gauge",
                  "How far the durable horizon lies ahead of the clock.",
                  static_cast<double>(s.horizon_ahead_ticks) * unit_s);
    append_metric(out, "flurry_horizon_saves_total", "counter", "Successful horizon writes.",
                  static_cast<double>(s.horizon_saves));
    append_metric(out, "flurry_horizon_save_failures_total", "counter", "Failed horizon writes.",
                  static_cast<double>(s.horizon_failures));
    append_metric(out, "flurry_clock_generation", "gauge", "The clock generation in use.",
                  static_cast<double>(s.generation));
  }
  if (inc != nullptr) {
    LeaseKeeperStats k = inc->keeper->stats();
    add_counters(k, keepers_before);
    append_metric(out, "flurry_lease_renewals_total", "counter", "Successful lease renewals.",
                  static_cast<double>(k.renewals));
    append_metric(out, "flurry_lease_renewal_failures_total", "counter", "Failed lease renewals.",
                  static_cast<double>(k.renewal_failures));
    // A static node's lease never expires.
    append_metric(out, "flurry_lease_remaining_seconds", "gauge",
                  "Time until the node's lease expires, as far as this process knows.",
                  inc->lease.ttl.count() == 0 ? std::numeric_limits<double>::infinity()
                                              : std::chrono::duration<double>(k.remaining).count());
  }
  append_metric(out, "flurry_registry_regressions_total", "counter",
                "Times the registry was found behind what this process or host saved for a node "
                "(a replaced, emptied or restored registry).",
                static_cast<double>(regressions_.load(std::memory_order_relaxed)));
  append_metric(out, "flurry_ready", "gauge", "1 while IDs can be issued with proof of uniqueness.",
                ready ? 1 : 0);
  append_metric(out, "flurry_node_id", "gauge", "This process's node ID.",
                static_cast<double>(node()));
  out += "# HELP flurry_build_info The flurry version.\n# TYPE flurry_build_info gauge\n";
  out += "flurry_build_info{version=\"";
  out += version();
  out += "\"} 1\n";
  return out;
}

void Service::monitor_loop() {
  std::unique_lock lock(monitor_mu_);
  while (!monitor_stop_) {
    monitor_cv_.wait_for(lock, milliseconds(250), [this] { return monitor_stop_; });
    if (monitor_stop_) break;
    lock.unlock();
    try {
      Incarnation& inc = *current_.load(std::memory_order_acquire);
      if (log_changes(inc)) reclaim(inc);
    } catch (const std::exception& e) {
      spdlog::error("event=monitor_error message={}", quote(e.what()));
    }
    lock.lock();
  }
}

bool Service::log_changes(const Incarnation& inc) {
  const std::uint64_t node = inc.lease.node;
  const LeaseKeeperStats k = inc.keeper->stats();
  const Status lease = inc.keeper->status();
  const std::string lease_state = state_key(lease);
  // Failed renewals are retried quickly: one line a second at most, with the count.
  const auto now = std::chrono::steady_clock::now();
  if (k.renewal_failures > logged_failures_ && now - last_failure_log_ >= std::chrono::seconds(1)) {
    spdlog::warn("event=lease_renewal_failed node={} failures={} total_failures={} remaining_ms={}",
                 node, k.renewal_failures - logged_failures_, k.renewal_failures,
                 k.remaining.count());
    logged_failures_ = k.renewal_failures;
    last_failure_log_ = now;
  }
  if (lease_state != last_lease_state_) {
    if (lease.ok()) {
      spdlog::info("event=lease_recovered node={} remaining_ms={}", node, k.remaining.count());
    } else if (k.lost && lease.reason() == Reason::kRegistryRegressed) {
      regressions_.fetch_add(1, std::memory_order_relaxed);
      regression_counted_ = true;  // the re-claim that follows finds the same event
      spdlog::error("event=registry_regressed node={} token={} registry={} {}", node,
                    inc.lease.token, quote(registry_->describe(), 1024), describe(lease));
    } else if (k.lost) {
      spdlog::error("event=lease_lost node={} {}", node, describe(lease));
    } else {
      spdlog::warn("event=lease_suspended node={} {}", node, describe(lease));
    }
    last_lease_state_ = lease_state;
  }
  last_keeper_ = k;

  const GeneratorStats s = inc.generator->stats();
  if (s.horizon_failures > logged_horizon_failures_ &&
      now - last_horizon_log_ >= std::chrono::seconds(1)) {
    spdlog::warn("event=horizon_save_failed node={} failures={} total_failures={}", node,
                 s.horizon_failures - logged_horizon_failures_, s.horizon_failures);
    logged_horizon_failures_ = s.horizon_failures;
    last_horizon_log_ = now;
  }
  if (s.rollback_waits > last_stats_.rollback_waits) {
    spdlog::warn("event=clock_rollback node={} outcome=wait count={}", node,
                 s.rollback_waits - last_stats_.rollback_waits);
  }
  if (s.rollback_failures > last_stats_.rollback_failures) {
    spdlog::warn("event=clock_rollback node={} outcome=fail count={}", node,
                 s.rollback_failures - last_stats_.rollback_failures);
  }
  if (s.clock_switches > last_stats_.clock_switches) {
    spdlog::warn("event=clock_rollback node={} outcome=clock_switch generation={}", node,
                 s.generation);
  }
  if (s.throttle_waits > last_stats_.throttle_waits) {
    spdlog::debug("event=throttled node={} count={}", node,
                  s.throttle_waits - last_stats_.throttle_waits);
  }
  if (s.horizon_saves > last_stats_.horizon_saves) {
    spdlog::debug("event=horizon_saved node={} saves={} ahead_ms={}", node,
                  s.horizon_saves - last_stats_.horizon_saves,
                  to_ms(layout_.unit() * s.horizon_ahead_ticks));
  }
  last_stats_ = s;

  const Status health = inc.generator->health();
  const std::string health_state = state_key(health);
  if (health_state != last_health_state_) {
    if (health.ok()) {
      spdlog::info("event=ready node={}", node);
    } else {
      spdlog::warn("event=not_ready node={} {}", node, describe(health));
    }
    last_health_state_ = health_state;
  }
  // A registry that went backwards under the same token shows in the generator's horizon
  // writes first (the renewals still succeed): the node ID must be claimed again then too.
  return k.lost || (health.reason() == Reason::kRegistryRegressed && !health.ok());
}

void Service::reclaim(Incarnation& lost) {
  const std::uint64_t old_node = lost.lease.node;
  const auto set_status = [&](Status st) {
    std::lock_guard lock(monitor_mu_);
    reclaim_status_ = std::move(st);
  };
  const bool still_ours = !lost.keeper->stats().lost;
  const Status why = still_ours ? lost.generator->health() : lost.keeper->status();
  set_status(reclaiming(old_node, why.message(), why.reason()));
  reclaiming_.store(true, std::memory_order_release);
  generator_.store(nullptr, std::memory_order_release);  // issue() answers UNAVAILABLE from now
  // A lease the registry still knows as ours is released, so the node ID can be claimed again
  // at once (above what this process remembers of it).
  shut_down(lost, !still_ours, still_ours ? "registry_regressed" : "lease_lost");
  spdlog::warn("event=lease_reclaiming old_node={} owner={}", old_node, quote(owner_));

  // Retry with a backoff: 1 s doubling, at most the lease TTL.
  const milliseconds cap =
      config_.lease_ttl_ms > 0 ? milliseconds(config_.lease_ttl_ms) : milliseconds(1000);
  milliseconds backoff = std::min(milliseconds(1000), cap);
  std::string last_failure;
  for (std::uint64_t attempt = 1;; ++attempt) {
    {
      std::lock_guard lock(monitor_mu_);
      if (monitor_stop_) return;
    }
    Result<std::unique_ptr<Incarnation>> inc = incarnate(monitor_stop_source_.get_token());
    if (inc.ok()) {
      const Lease lease = (*inc)->lease;
      publish(std::move(inc).value());
      reset_monitor_state(*incarnations_.back());
      reclaiming_.store(false, std::memory_order_release);
      regression_counted_ = false;
      spdlog::info("event=lease_reclaimed old_node={} new_node={} token={} attempts={}", old_node,
                   lease.node, lease.token, attempt);
      return;
    }
    const Status& st = inc.status();
    // One line per kind of failure, not one per attempt.
    if (const std::string key = state_key(st); key != last_failure) {
      spdlog::warn("event=lease_reclaim_failed old_node={} attempt={} retry_ms={} {}", old_node,
                   attempt, backoff.count(), describe(st));
      last_failure = key;
    } else {
      spdlog::debug("event=lease_reclaim_failed old_node={} attempt={} retry_ms={} {}", old_node,
                    attempt, backoff.count(), describe(st));
    }
    std::unique_lock lock(monitor_mu_);
    reclaim_status_ = reclaiming(
        old_node, "attempt " + std::to_string(attempt) + " failed: " + st.message(), why.reason());
    if (monitor_cv_.wait_for(lock, backoff, [this] { return monitor_stop_; })) return;
    backoff = std::min(backoff * 2, cap);
  }
}

}  // namespace flurry::server

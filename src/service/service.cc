#include "service/service.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <system_error>
#include <utility>
#include <vector>

#include "core/quote.h"
#include "flurry/mutex.h"
#include "flurry/node_session.h"
#include "flurry/timefmt.h"
#include "monitor.h"
#include "service/metrics.h"

#ifndef FLURRY_VERSION
#error "FLURRY_VERSION must be defined by the build"
#endif

namespace flurry::service {

using internal::quote;
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

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

void write_generator_metrics(PrometheusWriter& out, const GeneratorStats& s, Nanos unit) {
  const double unit_s = std::chrono::duration<double>(unit).count();
  out.gauge("flurry_clock_lead_seconds",
            "How far the time of the IDs issued now runs ahead of the clock (0 when idle).",
            static_cast<double>(std::max<std::int64_t>(s.lead_ticks, 0)) * unit_s);
  constexpr std::string_view kRollbacks = "flurry_rollback_events_total";
  out.family(kRollbacks, PrometheusWriter::Type::kCounter,
             "Clock steps back beyond max_lead, by outcome.");
  out.sample(kRollbacks, s.rollback_waits, {{"outcome", "wait"}});
  out.sample(kRollbacks, s.rollback_failures, {{"outcome", "fail"}});
  out.sample(kRollbacks, s.clock_switches, {{"outcome", "clock_switch"}});
  out.counter("flurry_throttle_waits_total",
              "Calls that waited because demand exceeded the layout's rate limit.",
              s.throttle_waits);
  out.gauge("flurry_horizon_ahead_seconds", "How far the durable horizon lies ahead of the clock.",
            static_cast<double>(s.horizon_ahead_ticks) * unit_s);
  out.counter("flurry_horizon_saves_total", "Successful horizon writes.", s.horizon_saves);
  out.counter("flurry_horizon_save_failures_total", "Failed horizon writes.", s.horizon_failures);
  out.gauge("flurry_clock_generation", "The clock generation in use.",
            static_cast<double>(s.generation));
}

void write_keeper_metrics(PrometheusWriter& out, const LeaseKeeperStats& k, const Lease& lease) {
  out.counter("flurry_lease_renewals_total", "Successful lease renewals.", k.renewals);
  out.counter("flurry_lease_renewal_failures_total", "Failed lease renewals.", k.renewal_failures);
  // A static node's lease never expires.
  out.gauge("flurry_lease_remaining_seconds",
            "Time until the node's lease expires, as far as this process knows.",
            lease.ttl.count() == 0 ? std::numeric_limits<double>::infinity()
                                   : std::chrono::duration<double>(k.remaining).count());
}

}  // namespace

void log_session_event(SessionEventLevel level, const std::string& line) {
  switch (level) {
    case SessionEventLevel::kDebug:
      spdlog::debug("{}", line);
      return;
    case SessionEventLevel::kInfo:
      spdlog::info("{}", line);
      return;
    case SessionEventLevel::kWarning:
      spdlog::warn("{}", line);
      return;
    case SessionEventLevel::kError:
      spdlog::error("{}", line);
      return;
  }
}

Layout default_layout() {
  return Layout::parse("flurry").value();
}

GeneratorOptions generator_options_of(const ServiceOptions& options) {
  GeneratorOptions g;
  g.max_lead = options.max_lead;
  g.rollback = options.rollback;
  g.max_wait = options.max_wait;
  g.horizon_window = options.horizon_window;
  g.background_horizon = true;
  return g;
}

Status check_service_options(const ServiceOptions& options) {
  if (Status st = check_registry_options(options.registry, options.layout); !st.ok()) return st;
  if (options.max_batch == 0) return InvalidArgument("max_batch: must be at least 1");
  return Generator::check_options(options.layout, generator_options_of(options));
}

// Everything the service holds. Request threads read the atomics; start(), stop() and the
// monitor thread change the rest, one at a time (stop() stops the monitor before it looks).
class Service::Impl final : public SessionOwner {
 public:
  Impl(ServiceOptions options, Clocks clocks)
      : options_(std::move(options)),
        clocks_(clocks),
        owner_(hostname() + ":" + std::to_string(::getpid())),
        events_(clocks.wall) {}

  Status start(std::stop_token stop);
  void stop();
  Status issue(std::span<std::uint64_t> out, Blocking blocking);
  Status readiness() const;
  void write_metrics(PrometheusWriter& out) const;
  ServiceState state() const;
  Result<RegistryListing> list_nodes() const;
  std::string registry_description() const {
    return registry_ ? registry_->describe() : std::string("(not open)");
  }

  // SessionOwner (the monitor thread).
  NodeSession& current_session() override { return *current_.load(std::memory_order_acquire); }
  void retire(NodeSession& lost, const Status& why) override;
  Status claim_again(std::stop_token stop) override;
  void set_reclaim_status(Status status) override {
    MutexLock lock(reclaim_mu_);
    reclaim_status_ = std::move(status);
  }
  void count_regression() override {
    regressions_.fetch_add(1, std::memory_order_relaxed);
    regression_counted_ = true;  // the re-claim that follows finds the same event
  }
  void report_readiness() override {
    if (readiness_listener_)
      readiness_listener_(node_.load(std::memory_order_acquire), readiness());
  }

  const ServiceOptions options_;
  const Clocks clocks_;
  const std::string owner_;
  std::uint64_t max_batch_ = 0;
  std::atomic<std::uint64_t> node_{0};
  ShardedCounter ids_issued_;             // what issue() handed out
  ReadinessListener readiness_listener_;  // set before start()
  EventLog events_;

 private:
  // Why nothing is issued outside start()..stop(): one status for issue() and readiness().
  [[nodiscard]] Status not_serving() const;
  Status start_locked(std::stop_token stop) FLURRY_REQUIRES(stop_mu_);
  // Makes `session` the current one (request threads see it from now on).
  void publish(std::unique_ptr<NodeSession> session);
  // Logs a registry found behind this host's memory of a node, counts it, and shows it in
  // readiness while a node ID is being claimed again.
  void note_regression(const HorizonRegression& regression);
  // Records `session`'s claim in the event ring (start: lease_claimed).
  void record_claim(const NodeSession& session);

  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<HorizonFloor> floor_;
  std::unique_ptr<SessionContext> context_;
  std::unique_ptr<Monitor> monitor_;
  std::atomic<std::uint64_t> regressions_{0};
  // The regression behind the re-claim in progress is counted already (start and monitor
  // thread only): the claims that find it again do not count it twice.
  bool regression_counted_ = false;
  // Every session so far, the current one last.
  std::vector<std::unique_ptr<NodeSession>> sessions_;
  // The latest session (also while its lease is lost and another is being claimed).
  std::atomic<NodeSession*> current_{nullptr};
  // Counters of the sessions already replaced, so that /metrics counters never go back when a
  // node ID is claimed again. Guarded by totals_mu_, which publish() holds while it switches
  // current_, so a reader sees either the old session or its counters here, never both.
  mutable Mutex totals_mu_;
  GeneratorStats retired_generators_ FLURRY_GUARDED_BY(totals_mu_) = {};  // counter fields only
  LeaseKeeperStats retired_keepers_ FLURRY_GUARDED_BY(totals_mu_) = {};   // counter fields only
  // The generator issue() uses; nullptr while a node ID is being claimed again.
  std::atomic<Generator*> generator_{nullptr};

  std::int64_t started_unix_ms_ = 0;  // set by start()
  MonoTime started_mono_{};
  std::atomic<bool> serving_{false};  // started and not stopping
  std::atomic<bool> stopping_{false};
  std::atomic<bool> reclaiming_{false};
  Mutex stop_mu_;  // serializes start() and stop()
  bool started_ FLURRY_GUARDED_BY(stop_mu_) = false;
  bool stopped_ FLURRY_GUARDED_BY(stop_mu_) = false;
  mutable Mutex reclaim_mu_;
  Status reclaim_status_ FLURRY_GUARDED_BY(reclaim_mu_);  // why not ready while reclaiming_
};

Status Service::Impl::start(std::stop_token stop) {
  MutexLock lock(stop_mu_);
  if (stopped_ || started_) {
    return Status(StatusCode::kFailedPrecondition, "Service::start called twice or after stop");
  }
  started_ = true;
  started_mono_ = clocks_.monotonic.now();
  started_unix_ms_ =
      std::chrono::duration_cast<std::chrono::milliseconds>(clocks_.wall.now().time_since_epoch())
          .count();
  Status st = start_locked(std::move(stop));
  if (st.ok()) return st;
  // Undo what was acquired; the caller reports `st`.
  current_.store(nullptr, std::memory_order_release);
  generator_.store(nullptr, std::memory_order_release);
  for (const std::unique_ptr<NodeSession>& s : sessions_) s->shut_down(false, "start");
  sessions_.clear();
  stopped_ = true;
  return st;
}

Status Service::Impl::start_locked(std::stop_token stop) {
  const Layout& layout = options_.layout;
  if (Status alive = layout.check_alive(clocks_.wall.now()); !alive.ok()) return alive;
  Result<std::unique_ptr<NodeRegistry>> registry =
      open_registry(options_.registry, layout, clocks_, hostname());
  if (!registry.ok()) return registry.status();
  registry_ = std::move(registry).value();
  // This host's own memory of the horizons, kept beside the registry (see horizon_floor.h).
  // Keyed by the registry's identity: a copy is only compared with the registry it came from.
  // And the host-wide records every process of the host shares (host_dir.h).
  Result<std::unique_ptr<HorizonFloor>> floor = open_horizon_floor(options_.registry, layout);
  if (!floor.ok()) return floor.status();
  floor_ = std::move(floor).value();
  context_ = std::make_unique<SessionContext>(SessionContext{
      *registry_, *floor_, options_.layout, generator_options_of(options_), clocks_, owner_,
      [this](const HorizonRegression& r) { note_regression(r); }, log_session_event,
      /*host_guard=*/true, /*keeper=*/{}});

  Result<std::unique_ptr<NodeSession>> session = NodeSession::open(*context_, std::move(stop));
  if (!session.ok()) return session.status();
  publish(std::move(session).value());
  record_claim(current_session());
  max_batch_ =
      std::min<std::uint64_t>(options_.max_batch, current_session().generator().max_batch());
  if (max_batch_ < options_.max_batch) {
    spdlog::warn(
        "event=max_batch_lowered max_batch={} configured={} reason=\"the layout cannot issue more "
        "within max_lead_ms\"",
        max_batch_, options_.max_batch);
  }
  monitor_ = std::make_unique<Monitor>(*this, clocks_, layout, options_.max_lead,
                                       options_.registry.lease_ttl, registry_->describe(), events_);
  if (Status st = monitor_->start(); !st.ok()) return st;
  serving_.store(true, std::memory_order_release);
  return OkStatus();
}

// The session logged its claim already (event=lease_claimed, info; tests and docs read that
// line's keys): the ring gets the event with its details only.
void Service::Impl::record_claim(const NodeSession& session) {
  const Lease& lease = session.lease();
  std::vector<EventDetail> details = {
      {"token", static_cast<std::int64_t>(lease.token)}, {"owner", owner_}, {"horizon_time", {}}};
  std::string inherited = "a node ID never used before";
  if (const std::optional<HorizonRecord>& record = session.inherited(); record) {
    const NodeRowView view =
        view_node(NodeInfo{lease.node, {}, 0, false, {}, record, {}}, &options_.layout, 0);
    if (view.horizon && view.horizon->time) {
      details[2].value = format_time(*view.horizon->time);
      inherited = "the horizon " + format_time(*view.horizon->time);
    }
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(session.waited());
  if (waited.count() > 0)
    details.push_back({"waited_ms", static_cast<std::int64_t>(waited.count())});
  events_.record(EventLevel::kInfo, "lease_claimed", lease.node,
                 "claimed node " + std::to_string(lease.node) + " (token " +
                     std::to_string(lease.token) + ") inheriting " + inherited +
                     (waited.count() > 0 ? "; the start waited " + std::to_string(waited.count()) +
                                               " ms for the clock"
                                         : ""),
                 std::move(details), EventLog::Line::kAlreadyLogged);
}

void Service::Impl::publish(std::unique_ptr<NodeSession> session) {
  NodeSession* p = session.get();
  sessions_.push_back(std::move(session));
  node_.store(p->node(), std::memory_order_release);
  MutexLock lock(totals_mu_);
  if (const NodeSession* old = current_.load(std::memory_order_acquire); old != nullptr) {
    add_counters(retired_generators_, old->generator().stats());
    add_counters(retired_keepers_, old->keeper().stats());
  }
  current_.store(p, std::memory_order_release);
  generator_.store(&p->generator(), std::memory_order_release);
}

void Service::Impl::note_regression(const HorizonRegression& r) {
  // One event, counted once: the renewal may have counted it already, and a re-claim that
  // retries finds it again.
  if (!regression_counted_) regressions_.fetch_add(1, std::memory_order_relaxed);
  regression_counted_ = reclaiming_.load(std::memory_order_acquire);
  const std::string what = describe_regression(r, options_.layout);
  spdlog::error(
      "event=registry_regressed node={} generation={} registry_tick={} remembered_tick={} "
      "registry={} message={}",
      r.node, r.generation, r.registry_tick, r.remembered_tick, quote(registry_->describe(), 1024),
      quote(what + "; starting above the remembered horizon", 1024));
  // The token is not known yet: the claim that found the regression is still being set up.
  events_.record(EventLevel::kError, "registry_regressed", r.node,
                 what + "; starting above the remembered horizon",
                 {{"token", {}}, {"registry", registry_->describe()}},
                 EventLog::Line::kAlreadyLogged);
  if (reclaiming_.load(std::memory_order_acquire)) {
    set_reclaim_status(Status(
        Reason::kReclaimingNode,
        "claiming a node ID again: " + what + "; waiting to start above the remembered horizon"));
  }
}

void Service::Impl::retire(NodeSession& lost, const Status& why) {
  set_reclaim_status(reclaiming(lost.node(), why.message(), why.reason()));
  reclaiming_.store(true, std::memory_order_release);
  generator_.store(nullptr, std::memory_order_release);  // issue() answers UNAVAILABLE from now
  // A lease the registry still knows as ours is released, so the node ID can be claimed again
  // at once (above what this process remembers of it).
  // Ours unless the keeper (a renewal, or the registry's watch) or a horizon write found another
  // owner: a registry that went backwards still holds our row, or none.
  const bool still_ours =
      lost.keeper().status().reason() != Reason::kLeaseLost && why.reason() != Reason::kLeaseLost;
  lost.shut_down(!still_ours, still_ours ? "registry_regressed" : "lease_lost");
  spdlog::warn("event=lease_reclaiming old_node={} owner={}", lost.node(), quote(owner_));
}

Status Service::Impl::claim_again(std::stop_token stop) {
  Result<std::unique_ptr<NodeSession>> session = NodeSession::open(*context_, std::move(stop));
  if (!session.ok()) return session.status();
  publish(std::move(session).value());
  reclaiming_.store(false, std::memory_order_release);
  regression_counted_ = false;
  return OkStatus();
}

void Service::Impl::stop() {
  MutexLock lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  serving_.store(false, std::memory_order_release);
  stopping_.store(true, std::memory_order_release);
  if (monitor_) monitor_->stop();  // interrupts a re-claim waiting for the clock
  // Only the latest session can still be live; the others were retired with their lease.
  for (const std::unique_ptr<NodeSession>& s : sessions_) s->shut_down(false, "stop");
}

Status Service::Impl::not_serving() const {
  return Status(Reason::kShutDown, stopping_.load(std::memory_order_relaxed)
                                       ? "the service is shutting down"
                                       : "the service has not started");
}

Status Service::Impl::issue(std::span<std::uint64_t> out, Blocking blocking) {
  if (!serving_.load(std::memory_order_acquire)) return not_serving();
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
  ids_issued_.add(out.size());
  return OkStatus();
}

Status Service::Impl::readiness() const {
  if (!serving_.load(std::memory_order_acquire)) return not_serving();
  if (reclaiming_.load(std::memory_order_acquire)) {
    MutexLock lock(reclaim_mu_);
    return reclaim_status_;
  }
  const NodeSession* s = current_.load(std::memory_order_acquire);
  if (Status lease = s->keeper().status(); !lease.ok()) {
    // Lost for good: the monitor is about to claim a node ID again.
    return is_lease_gone(lease) ? reclaiming(s->node(), lease.message(), lease.reason()) : lease;
  }
  // A horizon write may find the lease gone (or the registry gone backwards) before the keeper
  // does: answer as issue() does then.
  Status health = s->generator().health();
  return is_lease_gone(health) ? reclaiming(s->node(), health.message(), health.reason()) : health;
}

void Service::Impl::write_metrics(PrometheusWriter& out) const {
  out.counter("flurry_ids_issued_total", "IDs handed out.", ids_issued_.total());
  const bool ready = readiness().ok();
  // The latest node's objects (while a node ID is claimed again: those of the lost one), plus
  // the counters of the nodes before it.
  const NodeSession* s = nullptr;
  GeneratorStats generators{};
  LeaseKeeperStats keepers{};
  {
    MutexLock lock(totals_mu_);
    s = current_.load(std::memory_order_acquire);
    generators = retired_generators_;
    keepers = retired_keepers_;
  }
  if (s != nullptr) {
    GeneratorStats g = s->generator().stats();
    add_counters(g, generators);
    write_generator_metrics(out, g, options_.layout.unit());
    LeaseKeeperStats k = s->keeper().stats();
    add_counters(k, keepers);
    write_keeper_metrics(out, k, s->lease());
  }
  out.counter("flurry_registry_regressions_total",
              "Times the registry was found behind what this process or host saved for a node "
              "(a replaced, emptied or restored registry).",
              regressions_.load(std::memory_order_relaxed));
  out.gauge("flurry_ready", "1 while IDs can be issued with proof of uniqueness.", ready ? 1 : 0);
  out.gauge("flurry_node_id", "This process's node ID.",
            static_cast<double>(node_.load(std::memory_order_acquire)));
  out.family("flurry_build_info", PrometheusWriter::Type::kGauge, "The flurry version.");
  out.sample("flurry_build_info", std::uint64_t{1}, {{"version", version()}});
}

ServiceState Service::Impl::state() const {
  ServiceState out;
  out.owner = owner_;
  out.started_unix_ms = started_unix_ms_;
  out.uptime = std::chrono::duration_cast<std::chrono::milliseconds>(clocks_.monotonic.now() -
                                                                     started_mono_);
  out.node = node_.load(std::memory_order_acquire);
  const NodeSession* s = nullptr;
  {
    MutexLock lock(totals_mu_);
    s = current_.load(std::memory_order_acquire);
    out.generator = retired_generators_;
    out.keeper = retired_keepers_;
  }
  if (s != nullptr) {
    GeneratorStats g = s->generator().stats();
    add_counters(g, out.generator);
    out.generator = g;
    LeaseKeeperStats k = s->keeper().stats();
    add_counters(k, out.keeper);
    out.keeper = k;
    out.token = s->lease().token;
    out.lease_ttl = s->lease().ttl;
    out.lease =
        s->keeper().status().ok() ? ServiceState::Lease::kHeld : ServiceState::Lease::kSuspended;
  }
  if (reclaiming_.load(std::memory_order_acquire)) out.lease = ServiceState::Lease::kReclaiming;
  if (const Monitor* m = monitor_.get(); m != nullptr) {
    out.clock_steps = m->clock_steps();
    out.throttling = m->throttling();
  }
  return out;
}

Result<RegistryListing> Service::Impl::list_nodes() const {
  // serving_ (acquire) orders the read of registry_ after start() set it.
  if (!serving_.load(std::memory_order_acquire) || registry_ == nullptr) return not_serving();
  return registry_->list();
}

Result<std::unique_ptr<Service>> Service::create(ServiceOptions options, Clocks clocks) {
  if (Status st = check_service_options(options); !st.ok()) return st;
  return std::unique_ptr<Service>(new Service(std::make_unique<Impl>(std::move(options), clocks)));
}

Service::Service(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Service::~Service() {
  stop();
}

Status Service::start(std::stop_token stop) {
  return impl_->start(std::move(stop));
}

void Service::stop() {
  impl_->stop();
}

Status Service::issue(std::span<std::uint64_t> out, Blocking blocking) {
  return impl_->issue(out, blocking);
}

std::uint64_t Service::max_batch() const noexcept {
  return impl_->max_batch_;
}

Status Service::readiness() const {
  return impl_->readiness();
}

void Service::set_readiness_listener(ReadinessListener listener) {
  impl_->readiness_listener_ = std::move(listener);
}

void Service::write_metrics(PrometheusWriter& out) const {
  impl_->write_metrics(out);
}

std::uint64_t Service::ids_issued() const noexcept {
  return impl_->ids_issued_.total();
}

const ServiceOptions& Service::options() const noexcept {
  return impl_->options_;
}

std::uint64_t Service::node() const noexcept {
  return impl_->node_.load(std::memory_order_acquire);
}

std::string Service::registry_description() const {
  return impl_->registry_description();
}

EventLog& Service::events() noexcept {
  return impl_->events_;
}

Result<RegistryListing> Service::list_nodes() const {
  return impl_->list_nodes();
}

ServiceState Service::state() const {
  return impl_->state();
}

std::string_view Service::version() noexcept {
  return FLURRY_VERSION;
}

}  // namespace flurry::service

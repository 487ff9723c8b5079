// flurry serve: run the ID service over HTTP and gRPC until SIGTERM or SIGINT (SIGHUP reloads
// what can be reloaded in place: see Reloaders).
#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "app/config.h"
#include "app/grpc_module.h"
#include "app/notifier.h"
#include "common.h"
#include "core/private_files.h"
#include "core/quote.h"
#include "flurry/host_dir.h"
#include "flurry/mutex.h"
#include "flurry/open_registry.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "flurry/timefmt.h"
#include "grpc_api/grpc_server.h"
#include "http/http_metrics.h"
#include "http/http_server.h"
#include "ops/authorizer.h"
#include "ops/deferral.h"
#include "ops/operations.h"
#include "order/order_formats.h"
#include "serve_tso.h"
#include "service/service.h"
#include "settings_args.h"
#include "tls/pinned_files.h"
#include "tls/server.h"
#include "verbs.h"

namespace flurry::cli {
namespace {

using app::Config;

// How long in-flight requests may take to finish after SIGTERM.
constexpr std::chrono::milliseconds kDrain{5000};
// Descriptors kept for everything but client connections: the listening socket, the registry
// (a SQLite connection per operation, its WAL and shared memory), state and lock files, logs,
// epoll and eventfds of the I/O threads, /proc reads.
constexpr std::uint64_t kReservedDescriptors = 128;
// Descriptors below the ceiling that gRPC's connections leave to HTTP's (an eighth of the room
// when that is less).
constexpr std::uint64_t kHttpDescriptors = 64;

struct ServeArgs {
  SettingsArgs settings;
  bool print_config = false;
};

void setup_logging(const Config& config) {
  auto logger =
      std::make_shared<spdlog::logger>("flurry", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
  logger->set_level(spdlog::level::from_str(std::string(app::to_string(config.log_level))));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
}

// What the descriptor limit leaves for client connections.
struct DescriptorBudget {
  std::uint64_t max_connections;  // HTTP connections at most
  // No connection, HTTP or gRPC, may hold a descriptor this high or above (0: no ceiling): the
  // top kReservedDescriptors numbers stay for everything else.
  std::uint64_t ceiling;
  // gRPC's connections stop kHttpDescriptors below it (0: no ceiling), so that HTTP's probes
  // (/readyz, /metrics) still connect while gRPC clients hold every descriptor they may.
  std::uint64_t grpc_ceiling;
};

// Raises the soft RLIMIT_NOFILE to the hard limit (to fs.nr_open when the hard limit is
// unlimited) and returns how many connections fit under it beside kReservedDescriptors: the
// configured max_connections, or fewer, with a warning, and the descriptor ceiling both front
// ends apply to their connections (one budget: HTTP and gRPC connections together never take the
// reserved descriptors). Without this, idle connections beyond the limit would leave no
// descriptor for the registry, and the lease would be lost.
DescriptorBudget fit_max_connections(std::uint64_t configured) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    spdlog::warn("event=fd_limit error=\"{}\" max_connections={} configured={}",
                 std::strerror(errno), configured, configured);
    return {configured, 0, 0};
  }
  rlim_t target = lim.rlim_max;
  if (target == RLIM_INFINITY) {
    std::uint64_t nr_open = 0;
    std::ifstream f("/proc/sys/fs/nr_open");
    if (f >> nr_open && nr_open > 0) {
      target = static_cast<rlim_t>(nr_open);
    } else {
      target = lim.rlim_cur;
    }
  }
  if (lim.rlim_cur != RLIM_INFINITY && target > lim.rlim_cur) {
    rlimit raised = lim;
    raised.rlim_cur = target;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      lim.rlim_cur = target;
    } else {
      spdlog::warn("event=fd_limit_not_raised soft={} wanted={} error=\"{}\"",
                   static_cast<std::uint64_t>(lim.rlim_cur), static_cast<std::uint64_t>(target),
                   std::strerror(errno));
    }
  }
  const std::uint64_t soft = lim.rlim_cur == RLIM_INFINITY
                                 ? std::numeric_limits<std::uint64_t>::max()
                                 : static_cast<std::uint64_t>(lim.rlim_cur);
  const std::uint64_t room = soft > kReservedDescriptors ? soft - kReservedDescriptors : 1;
  const std::uint64_t effective = std::min(configured, room);
  const auto text = [](rlim_t v) {
    return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v);
  };
  spdlog::info("event=fd_limit soft={} hard={} max_connections={} configured={}",
               text(lim.rlim_cur), text(lim.rlim_max), effective, configured);
  if (effective < configured) {
    spdlog::warn(
        "event=max_connections_lowered max_connections={} configured={} reason=\"the descriptor "
        "limit (RLIMIT_NOFILE {}) leaves room for {} connections beside {} descriptors kept for "
        "the registry, files and threads; raise it (ulimit -n, LimitNOFILE=) for more\"",
        effective, configured, text(lim.rlim_cur), effective, kReservedDescriptors);
  }
  if (soft == std::numeric_limits<std::uint64_t>::max()) return {effective, 0, 0};
  return {effective, room, std::max<std::uint64_t>(1, room - std::min(kHttpDescriptors, room / 8))};
}

// Signals arrive on a thread of their own (Asio's signal_set): the first asks for a graceful
// stop, a second one ends the process at once (safe: the durable horizon covers every issued
// ID, as after kill -9). SIGHUP runs the reload hook (set_reload) on the signal thread; without
// one it is logged and ignored. Either way the server keeps serving. `on_stop` runs on the signal
// thread at the first SIGTERM or SIGINT, before anything is told to stop (the service manager
// hears STOPPING=1 before the lease is released).
class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(std::string_view signal)> on_stop)
      : on_stop_(std::move(on_stop)), signals_(ctx_, SIGINT, SIGTERM, SIGHUP) {
    wait();
    thread_ = std::thread([this] { ctx_.run(); });
  }
  ~SignalWatcher() {
    ctx_.stop();
    if (thread_.joinable()) thread_.join();
  }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  std::stop_token token() const { return stop_.get_token(); }
  // What SIGHUP runs, on the signal thread (one SIGHUP at a time). Set once everything it reloads
  // exists; cleared before those parts go: clearing waits for a reload under way to finish.
  void set_reload(std::function<void()> reload) {
    MutexLock lock(reload_mu_);
    reload_ = std::move(reload);
  }
  // Blocks until a signal arrived; returns its name.
  std::string wait_for_signal() {
    MutexLock lock(mu_);
    lock.wait(cv_, [this]() FLURRY_REQUIRES(mu_) { return !signal_.empty(); });
    return signal_;
  }

 private:
  void wait() {
    signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      if (signo == SIGHUP) {
        MutexLock lock(reload_mu_);
        if (reload_) {
          reload_();
        } else {
          spdlog::info(
              "event=sighup action=ignored reason=\"nothing to reload yet (the server is starting "
              "or stopping)\"");
        }
        wait();
        return;
      }
      const std::string name = signo == SIGINT ? "SIGINT" : "SIGTERM";
      bool second = false;
      {
        MutexLock lock(mu_);
        second = !signal_.empty();
        if (!second) signal_ = name;
      }
      if (second) {
        spdlog::warn("event=forced_exit signal={} reason=\"second signal during shutdown\"", name);
        spdlog::default_logger()->flush();
        std::_Exit(kExitFailure);
      }
      if (on_stop_) on_stop_(name);
      cv_.notify_all();
      stop_.request_stop();
      wait();
    });
  }

  const std::function<void(std::string_view)> on_stop_;
  boost::asio::io_context ctx_{1};
  boost::asio::signal_set signals_;
  std::stop_source stop_;
  Mutex mu_;
  std::condition_variable cv_;
  std::string signal_ FLURRY_GUARDED_BY(mu_);
  Mutex reload_mu_;  // held while reload_ runs
  std::function<void()> reload_ FLURRY_GUARDED_BY(reload_mu_);
  std::thread thread_;
};

// What SIGHUP reloads in place: each part that can re-read its files (certificates, tokens)
// registers a function here in the composition root. A reload that fails keeps what the part had
// (its error is logged); the others still run. Settings themselves are read at start only.
class Reloaders {
 public:
  using Reload = std::function<Status()>;
  void add(std::string what, Reload reload) {
    parts_.emplace_back(std::move(what), std::move(reload));
  }

  // Runs every reload in the order added and logs one line each, then a summary.
  void run() const {
    if (parts_.empty()) {
      spdlog::info(
          "event=sighup action=ignored reason=\"nothing is reloadable with these settings; "
          "settings are read at start only (restart to change them)\"");
      return;
    }
    int failed = 0;
    for (const auto& [what, reload] : parts_) {
      const Status st = reload();
      if (st.ok()) {
        spdlog::info("event=reloaded part={}", what);
      } else {
        ++failed;
        spdlog::error("event=reload_failed part={} kept=previous {}", what,
                      internal::quote(st.to_string(), 1024));
      }
    }
    spdlog::info("event=sighup action=reload parts={} failed={}", parts_.size(), failed);
  }

 private:
  std::vector<std::pair<std::string, Reload>> parts_;
};

// The segment service's reports, to the event ring of the node service (which outlives it).
struct SegmentEvents {
  service::EventLog* events = nullptr;
  std::function<std::uint64_t()> node;
};

// Segment mode's service over the configured stores (SQLite ones are opened now, PostgreSQL ones on
// first use). An error names the setting and the store.
Result<std::unique_ptr<SegmentService>> open_segments(const app::SegmentConfig& config,
                                                      const std::filesystem::path& data_dir,
                                                      const std::filesystem::path& host_dir,
                                                      Clocks clocks, SegmentEvents events) {
  std::vector<std::unique_ptr<SegmentStore>> stores;
  for (const SegmentStoreSpec& spec : config.stores) {
    Result<std::unique_ptr<SegmentStore>> store = open_segment_store(spec);
    if (!store.ok()) return store.status().with_prefix("segment_stores: " + to_string(spec));
    stores.push_back(std::move(store).value());
  }
  SegmentOptions options = config.options;
  // The floors of what each store handed this host live beside the registry's state.
  options.floor_dir = data_dir / "segment-floors";
  // And in the host directory, so that every flurry process of the host knows them.
  Result<HostDir> host = HostDir::open(host_dir);
  if (!host.ok()) return host.status().with_prefix("the host directory (host_dir)");
  options.host_dir = std::move(host).value();
  options.on_store_regressed = [events](const Status& st) {
    spdlog::error("event=segment_store_regressed reason={} message={}", to_string(st.reason()),
                  internal::quote(st.message(), 1024));
    events.events->record(
        service::EventLevel::kError, "segment_store_regressed", events.node(), st.message(),
        {{"reason", std::string(to_string(st.reason()))}, {"message", st.message()}},
        service::EventLog::Line::kAlreadyLogged);
  };
  options.on_fetch_failed = [events](std::string_view tag, std::string_view store, const Status& st,
                                     std::uint64_t failures) {
    events.events->record(service::EventLevel::kWarning, "segment_fetch_failed", events.node(),
                          "tag " + std::string(tag) + ": fetching a range from " +
                              std::string(store) + " failed: " + st.message(),
                          {{"tag", std::string(tag)},
                           {"store", std::string(store)},
                           {"reason", std::string(to_string(st.reason()))},
                           {"message", st.message()},
                           {"failures", static_cast<std::int64_t>(failures)}});
  };
  Result<std::unique_ptr<SegmentService>> service =
      SegmentService::create(std::move(stores), std::move(options), clocks);
  if (!service.ok()) return service.status().with_prefix("segment settings");
  return service;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

// Serves until a signal; the service and the server are ready when this is called.
// The order-number formats of the settings, or null when no keys are configured. Errors name the
// key file or the variable, never key bytes.
Result<std::unique_ptr<order::OrderFormats>> open_orders(const Config& config) {
  Result<std::optional<OrderKeySet>> keys =
      order::load_order_keys(config.orders.key_file, app::flurry_environment(), true);
  if (!keys.ok()) return keys.status();
  if (!*keys) return std::unique_ptr<order::OrderFormats>();
  return order::OrderFormats::create(config.orders, std::move(**keys), config.service.layout,
                                     SystemClock::coarse(), config.service.max_lead);
}

// Whether clients on other hosts can reach `host`: anything but a loopback address.
bool reachable_from_other_hosts(const std::string& host) {
  if (host == "localhost") return false;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) != 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) return !IN6_IS_ADDR_LOOPBACK(&v6);
  return true;
}

// A SQLite or static registry coordinates the processes of one host only: serving other hosts
// from it invites a second host with the same node IDs.
void warn_if_single_host_registry(const Config& config) {
  const RegistryKind kind = config.service.registry.kind;
  if (kind != RegistryKind::kSqlite && kind != RegistryKind::kStatic) return;
  if (!reachable_from_other_hosts(config.http.listen.host)) return;
  spdlog::warn(
      "event=single_host_registry registry={} listen={} message=\"the {} registry coordinates the "
      "processes of this host only: flurry servers on other hosts must not use it (they would "
      "hold the same node IDs); use registry = etcd or postgres for a fleet\"",
      to_string(kind), internal::quote(config.http.listen.to_string()), to_string(kind));
}

// Whether this process looks like it runs in a container (Docker, Podman, Kubernetes,
// systemd-nspawn).
bool in_container() {
  std::error_code ec;
  return std::getenv("KUBERNETES_SERVICE_HOST") != nullptr || std::getenv("container") != nullptr ||
         std::filesystem::exists("/.dockerenv", ec) ||
         std::filesystem::exists("/run/.containerenv", ec);
}

// A static node's host guard and horizon records see only the processes that share host_dir: in a
// container that shares nothing with its host, another container with the same node ID is not
// seen, and keeping static node IDs apart is the operator's promise (docs/operations.md, "The
// host directory").
void warn_if_static_node_unguarded(const Config& config) {
  if (config.service.registry.kind != RegistryKind::kStatic || !in_container()) return;
  spdlog::warn(
      "event=static_node_unguarded host_dir={} message=\"this process runs in a container: its "
      "static node ID is guarded only against processes that share the host directory {}; "
      "another container of this host with the same node ID is not seen. Give every container "
      "its own node ID (a StatefulSet ordinal), or mount one host directory into all of them "
      "(host_dir)\"",
      internal::quote(config.service.registry.host_dir.string(), 1024),
      config.service.registry.host_dir.string());
}

// At a signal: gRPC's health says NOT_SERVING first, then both front ends drain at once.
int serve_until_signal(SignalWatcher& signals, service::Service& service, http::HttpServer& http,
                       grpc_api::GrpcServer* grpc, ops::Pools& pools) {
  const std::string signal = signals.wait_for_signal();
  signals.set_reload(nullptr);
  spdlog::info("event=shutdown signal={} connections={} drain_ms={}", signal, http.connections(),
               kDrain.count());
  std::thread grpc_stop;
  if (grpc != nullptr) {
    grpc->begin_shutdown();
    grpc_stop = std::thread([grpc] { grpc->stop(kDrain); });
  }
  http.stop(kDrain);
  if (grpc_stop.joinable()) grpc_stop.join();
  // The transports posted their last deferred requests: run what is queued and join.
  pools.stop();
  service.stop();
  spdlog::info("event=stopped node={}", service.node());
  return kExitOk;
}

int run_serve(const ServeArgs& args) {
  MonotonicClock& monotonic = SteadyClock::instance();
  const MonoTime t0 = monotonic.now();
  Result<app::LoadedConfig> loaded = app::load_config(gather_inputs(args.settings));
  if (!loaded.ok()) {
    print_error(loaded.status().message());
    return kExitUsage;
  }
  const Config& config = loaded->config;
  if (args.print_config) {
    std::cout << app::to_toml(config);
    return kExitOk;
  }

  setup_logging(config);
  for (const std::string& warning : loaded->warnings) {
    spdlog::warn("event=config_warning {}", warning);
  }
  warn_if_single_host_registry(config);
  warn_if_static_node_unguarded(config);
  // gRPC's module is loaded only when gRPC is on, and before anything starts, so that a missing
  // one fails the start at once.
  grpc_api::GrpcModuleStart start_grpc = nullptr;
  if (config.grpc.listen) {
    Result<grpc_api::GrpcModuleStart> module = load_grpc_module(grpc_module_paths());
    if (!module.ok()) return fail(module.status());
    start_grpc = *module;
  }
  // TLS's files are read and checked now (and the module loaded), so that a bad one fails the
  // start before anything runs; SIGHUP reads them again (the "tls" reloader below).
  std::shared_ptr<tls::ServerContext> tls_context;
  tls::ServerFiles tls_files;
  if (config.tls.enabled()) {
    tls_files = {*config.tls.cert_file, *config.tls.key_file, config.tls.client_ca_file};
    Result<std::shared_ptr<tls::ServerContext>> made = tls::make_server_context(tls_files);
    if (!made.ok()) return fail(made.status());
    tls_context = std::move(made).value();
    spdlog::info("event=tls_loaded {} client_certificates={}", tls_context->describe(),
                 config.tls.client_ca_file ? "required" : "not_requested");
  }
  // gRPC reads its TLS files again every kGrpcTlsRefresh and serves whatever it finds: it reads
  // copies that were checked instead, replaced only by a SIGHUP whose files load (as HTTP's).
  tls::PinnedServerFiles grpc_tls;
  if (tls_context && start_grpc != nullptr) {
    if (Status st = grpc_tls.pin(tls_files); !st.ok()) return fail(st);
  }
  // The tokens are read here (and again on SIGHUP), then held by the authorizer only (never
  // logged).
  Result<ops::TokenList> tokens =
      ops::read_tokens(config.auth.token_file, config.segments.admin_token_file);
  if (!tokens.ok()) return fail(tokens.status());
  if (const std::string w = ops::open_scope_warning(*tokens, config.auth.open_scopes); !w.empty()) {
    spdlog::warn("event=token_scope_open {}", w);
  }
  // The order-number keys, likewise: read once, held by the formats only (never logged).
  Result<std::unique_ptr<order::OrderFormats>> orders = open_orders(config);
  if (!orders.ok()) return fail(orders.status());
  const std::string orders_text =
      *orders ? (*orders)->describe() : std::string("off (no order_key_file or FLURRY_ORDER_KEYS)");
  // systemd's readiness protocol (Type=notify), only when NOTIFY_SOCKET is set: READY=1 once
  // /readyz would say ready, STATUS= lines as readiness changes, STOPPING=1 at the first signal.
  Result<std::unique_ptr<app::NotifySink>> notify_sink = app::systemd_notify_sink();
  if (!notify_sink.ok()) return fail(notify_sink.status());
  app::ReadinessNotifier notifier(notify_sink->get());
  notifier.starting(to_string(config.service.registry.kind));
  SignalWatcher signals([&notifier](std::string_view signal) { notifier.stopping(signal); });
  // Checked before anything is kept there (the default segment store lives in it too).
  if (Status st = internal::open_data_dir(config.service.registry.data_dir); !st.ok()) {
    return fail(st);
  }
  Result<std::unique_ptr<service::Service>> created =
      service::Service::create(config.service, {SystemClock::coarse(), monotonic});
  if (!created.ok()) return fail(created.status());
  service::Service& service = **created;
  // The directory's registry identity is checked (and recorded, when new) once the settings are
  // (Service::create) and before anything else is kept there: a start refused because the directory
  // belongs to another registry creates nothing in it (not the default segment store's segments.db,
  // nor segment-floors/). Service::start checks it again, as every user of open_registry does.
  if (Result<std::string> identity =
          registry_identity(config.service.registry, config.service.layout);
      !identity.ok()) {
    return fail(identity.status());
  } else if (Status st = check_data_dir_identity(config.service.registry.data_dir, *identity);
             !st.ok()) {
    return fail(st);
  }
  Result<std::unique_ptr<SegmentService>> segments =
      open_segments(config.segments, config.service.registry.data_dir,
                    config.service.registry.host_dir, {SystemClock::coarse(), monotonic},
                    {&service.events(), [&service] { return service.node(); }});
  if (!segments.ok()) return fail(segments.status());

  // The composition root: everything the transports share is built here, once, and handed to
  // them; no transport builds any of it.
  const Clocks clocks{SystemClock::coarse(), monotonic};
  // The timestamp oracle (--tso): built before the operations that serve it, started once the
  // listeners' addresses are known (its lease names them for the followers' redirects).
  TsoParts tso;
  if (config.tso.enabled) {
    Result<TsoParts> opened = open_tso(config, clocks, host_name());
    if (!opened.ok()) return fail(opened.status());
    tso = std::move(opened).value();
  }
  const std::unique_ptr<order::OrderFormats> order_formats = std::move(orders).value();
  ops::Authorizer authorizer(std::move(tokens).value(), config.auth.open_scopes, monotonic);
  ops::Pools pools;
  ops::Operations operations(service, segments->get(), order_formats.get(), authorizer, pools,
                             clocks);
  // The activity history of GET /v1/status: the operations layer's counters, once a second,
  // sampled on the monitor's looks (every 250 ms) rather than on a thread of its own.
  ops::ActivityHistory activity([&operations] { return operations.activity_counts(); }, clocks);
  operations.set_activity(&activity);
  operations.set_tso(tso.oracle.get());
  const bool notify = *notify_sink != nullptr;
  service.set_readiness_listener(
      [&notifier, &activity, notify](std::uint64_t node, const Status& readiness) {
        if (notify) notifier.update(node, readiness);
        activity.tick();
      });
  // Whatever way this function returns, the monitor stops before the activity goes.
  const struct StopServiceFirst {
    service::Service& service;
    ~StopServiceFirst() { service.stop(); }
  } stop_service_first{service};
  http::RequestMetrics request_metrics;
  http::HttpServer http(operations, pools, request_metrics, config.http, clocks);
  // What SIGHUP reloads (certificates, tokens): each part adds itself as it is built.
  Reloaders reloaders;
  if (tls_context) {
    http.use_tls(tls_context);
    reloaders.add("tls", [&tls_context, &grpc_tls, &tls_files, grpc = start_grpc != nullptr] {
      Status st = tls_context->reload();
      if (st.ok() && grpc) st = grpc_tls.pin(tls_files);  // gRPC reads the copies within 10 s
      if (st.ok()) spdlog::info("event=tls_loaded {}", tls_context->describe());
      return st;
    });
  }
  if (config.auth.token_file || config.segments.admin_token_file) {
    reloaders.add("tokens", [&config, &authorizer] {
      Result<ops::TokenList> fresh =
          ops::read_tokens(config.auth.token_file, config.segments.admin_token_file);
      if (!fresh.ok()) return fresh.status();
      if (const std::string w = ops::open_scope_warning(*fresh, config.auth.open_scopes);
          !w.empty()) {
        spdlog::warn("event=token_scope_open {}", w);
      }
      authorizer.replace(std::move(fresh).value());
      return OkStatus();
    });
  }
  const DescriptorBudget descriptors = fit_max_connections(config.http.max_connections);
  http.set_max_connections(static_cast<std::size_t>(descriptors.max_connections));
  http.set_descriptor_ceiling(descriptors.ceiling);
  if (Status st = http.bind(); !st.ok()) return fail(st);
  if (Status st = service.start(signals.token()); !st.ok()) {
    if (st.code() == StatusCode::kCancelled) {
      spdlog::info("event=stopped reason=\"signal during start\"");
      return kExitOk;
    }
    return fail(st);
  }
  std::unique_ptr<grpc_api::GrpcServer> grpc;
  if (start_grpc != nullptr) {
    // The same TLS files as the HTTP listener, as last checked (grpc_tls): gRPC reads them itself
    // (grpc_options.h).
    grpc_api::GrpcOptions grpc_options = config.grpc;
    if (tls_context) {
      const tls::ServerFiles pinned = grpc_tls.paths();
      grpc_options.tls = {pinned.cert_file, pinned.key_file, pinned.client_ca_file};
    }
    grpc_options.descriptor_ceiling = descriptors.grpc_ceiling;
    Result<std::unique_ptr<grpc_api::GrpcServer>> started =
        start_grpc(operations, pools, grpc_options, monotonic);
    if (!started.ok()) return fail(started.status());
    grpc = std::move(started).value();
    http.add_metrics([&grpc](service::PrometheusWriter& out) { grpc->write_metrics(out); });
  }
  // Renewed TLS files reach gRPC without a SIGHUP too (as gRPC's own watcher did), once they load:
  // a look at the files every second, the copies gRPC reads replaced only by files that load.
  std::jthread grpc_tls_watch;
  if (grpc && tls_context) {
    grpc_tls_watch = std::jthread([&grpc_tls, &tls_files, &monotonic](std::stop_token stop) {
      while (monotonic.wait_for(std::chrono::seconds(1), stop)) {
        Result<bool> renewed = grpc_tls.refresh(tls_files);
        if (!renewed.ok()) {
          spdlog::error("event=reload_failed part=grpc_tls kept=previous {}",
                        internal::quote(renewed.status().to_string(), 1024));
        } else if (*renewed) {
          spdlog::info("event=reloaded part=grpc_tls");
        }
      }
    });
  }

  if (tso.oracle) {
    const TsoLeaderAddress self = tso_self(
        config, http.local_address(), grpc ? grpc->local_address() : std::string(), host_name());
    if (Status st = tso.oracle->start(self); !st.ok()) return fail(st);
    spdlog::info("event=tso_started registry={} http={} grpc={} max_batch={}",
                 tso.registry->describe(), self.http, self.grpc.empty() ? "off" : self.grpc,
                 tso.oracle->max_batch());
  }
  activity.tick();  // the first sample; the monitor's looks take the next ones
  http.start();
  const Layout& layout = service.layout();
  spdlog::info(
      "flurry {} ready in {} ms: node={} layout={} registry={} listen={}{} grpc_listen={} "
      "lifetime_end={} "
      "segment_stores={} segment_tag_creation={} order_numbers={} open_scopes={}",
      service.version(),
      std::chrono::duration_cast<std::chrono::milliseconds>(monotonic.now() - t0).count(),
      service.node(), layout.to_string(), service.registry_description(), http.local_address(),
      !tls_context                ? ""
      : config.tls.client_ca_file ? " (https, client certificates required)"
                                  : " (https)",
      grpc ? grpc->local_address() : std::string("off"),
      layout.end() == TimePoint::max() ? std::string("never") : format_time(layout.end()),
      joined((*segments)->store_names()),
      authorizer.granted(ops::Scope::kAdmin) ? "enabled" : "disabled",
      internal::quote(orders_text, 300), ops::to_string(config.auth.open_scopes));
  // The front ends answer: /readyz says now what the service manager hears.
  notifier.serving(service.node(), service.registry_description(), service.readiness());
  // What the start allocated and freed (configuration, registry and store set-up) goes back to
  // the system instead of staying in malloc's free lists: about 0.15 MB of an idle server.
  ::malloc_trim(0);
  signals.set_reload([&reloaders] { reloaders.run(); });
  return serve_until_signal(signals, service, http, grpc.get(), pools);
}

}  // namespace

Verb add_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve",
                                     "Run the ID service over HTTP and gRPC (settings: flags > "
                                     "FLURRY_* environment > --config file > "
                                     "defaults)");
  add_settings_options(*cmd, args->settings);
  cmd->add_flag("--print-config", args->print_config,
                "Print the effective configuration as TOML and exit");
  return {cmd, [args] { return run_serve(*args); }};
}

}  // namespace flurry::cli

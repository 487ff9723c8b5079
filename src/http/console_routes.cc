// The console's read routes (docs/operations.md "HTTP API"), thin adapters over the operations
// layer:
//
//   GET /v1/nodes    every node ID the registry knows (deferred to the store pool)
//   GET /v1/status   this node: lease, clock, throttling, readiness, layout, activity
//   GET /v1/events   the recent notable events, since= a seq
//
// and the console's page, script and style sheet, embedded at build time (embedded_files.h),
// served without a token: they carry no data. Every request the page makes goes to the JSON API
// and needs that route's own scope.
//
//   GET /console, /console/      console/index.html
//   GET /console/console.js      console/console.js
//   GET /console/console.css     console/console.css
#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "core/numbers.h"
#include "embedded_files.h"
#include "flurry/timefmt.h"
#include "json_views.h"
#include "routes.h"
#include "service/event_log.h"

namespace flurry::http {
namespace {

// `ms_key`: the instant in Unix milliseconds, and `text_key` its RFC 3339 text, or two nulls.
void write_time(JsonWriter& w, std::string_view ms_key, std::string_view text_key,
                const std::optional<std::int64_t>& unix_ms) {
  w.field(ms_key, unix_ms);
  w.key(text_key);
  if (unix_ms) {
    w.value(format_unix_ms(*unix_ms));
  } else {
    w.null();
  }
}

std::int64_t unix_ms_of(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

void write_nodes(const ops::NodesReport& report, OutBuf& body) {
  const RegistryListing& listing = report.listing;
  // Horizons are in the time units of the registry's own layout (as `flurry nodes list`).
  Result<Layout> layout = Layout::parse(listing.layout);
  const Layout* units = layout.ok() ? &*layout : nullptr;
  JsonWriter w(body);
  w.begin_object();
  w.field("registry", report.registry);
  w.field("layout", listing.layout);
  w.field("now_unix_ms", report.now_unix_ms);
  w.field("this_node", report.this_node);
  w.field("this_token", report.this_token);
  w.key("nodes").begin_array();
  for (const NodeInfo& n : listing.nodes) {
    const NodeRowView v = view_node(n, units, report.now_unix_ms);
    w.begin_object();
    w.field("node", n.node);
    w.field("state", n.live ? "live" : "free");
    w.field("owner", n.owner);
    w.field("token", n.token);
    write_time(w, "lease_expires_unix_ms", "lease_expires", v.lease_expires_unix_ms);
    w.field("lease_remaining_ms", v.lease_remaining_ms);
    w.key("horizon");
    if (v.horizon) {
      w.begin_object();
      w.field("generation", v.horizon->generation);
      w.field("ticks", v.horizon->ticks);
      write_time(w, "unix_ms", "time",
                 v.horizon->time ? std::optional(unix_ms_of(*v.horizon->time)) : std::nullopt);
      w.end_object();
    } else {
      w.null();
    }
    if (!n.horizon_error.empty()) w.field("horizon_error", n.horizon_error);
    w.field("this_process", n.node == report.this_node && n.token == report.this_token);
    w.end_object();
  }
  w.end_array().end_object();
  body.push('\n');
}

std::string_view lease_state_name(service::ServiceState::Lease lease) {
  switch (lease) {
    case service::ServiceState::Lease::kHeld:
      return "held";
    case service::ServiceState::Lease::kSuspended:
      return "suspended";
    case service::ServiceState::Lease::kReclaiming:
      return "reclaiming";
  }
  return "held";
}

void write_status(ops::Operations& ops, const LayoutJson& layout_json, OutBuf& body) {
  const service::ServiceState s = ops.service_state();
  const service::ServiceOptions& options = ops.service_options();
  const Status ready = ops.readiness();
  const double unit_ms = std::chrono::duration<double, std::milli>(ops.layout().unit()).count();
  JsonWriter w(body);
  w.begin_object();
  w.field("version", service::Service::version());
  w.field("node", s.node);
  w.field("owner", s.owner);
  w.field("token", s.token);
  w.field("registry", ops.registry_description());
  w.field("started_unix_ms", s.started_unix_ms);
  w.field("uptime_ms", s.uptime.count());
  w.field("ready", ready.ok());
  w.key("readiness");
  if (ready.ok()) {
    w.null();
  } else {
    w.begin_object();
    w.field("code", to_string(ready.code()));
    w.field("reason", to_string(ready.reason()));
    w.field("message", ready.message());
    w.end_object();
  }
  w.key("layout");
  layout_json.write(s.node, ops.max_batch(), w);
  const GeneratorStats& g = s.generator;
  w.key("clock").begin_object();
  w.field("lead_ms", static_cast<double>(g.lead_ticks) * unit_ms);
  w.field("max_lead_ms", options.max_lead.count());
  w.field("horizon_ahead_ms", static_cast<double>(g.horizon_ahead_ticks) * unit_ms);
  w.field("generation", g.generation);
  w.field("rollback", to_string(options.rollback));
  w.field("max_wait_ms", options.max_wait.count());
  w.field("rollback_waits", g.rollback_waits);
  w.field("rollback_failures", g.rollback_failures);
  w.field("clock_switches", g.clock_switches);
  w.field("steps_detected", s.clock_steps);
  w.end_object();
  w.key("throttling").begin_object();
  w.field("active", s.throttling);
  w.field("waits_total", g.throttle_waits);
  w.end_object();
  w.key("lease").begin_object();
  w.field("state", lease_state_name(s.lease));
  w.field("ttl_ms", s.lease_ttl.count());
  w.key("remaining_ms");
  if (s.lease_ttl.count() == 0) {
    w.null();
  } else {
    w.value(s.keeper.remaining.count());
  }
  w.field("renewals", s.keeper.renewals);
  w.field("renewal_failures", s.keeper.renewal_failures);
  w.end_object();
  w.key("segments").begin_object();
  w.field("served", ops.segments_served());
  w.key("stores").begin_array();
  for (const std::string& store : ops.segment_store_names()) w.value(store);
  w.end_array().end_object();
  w.key("order_numbers").begin_object().field("served", ops.orders_served()).end_object();
  const ops::ActivitySnapshot a =
      ops.activity() != nullptr ? ops.activity()->read() : ops::ActivitySnapshot{};
  w.key("activity").begin_object();
  w.field("interval_ms", a.interval.count());
  w.field("end_unix_ms", a.end_unix_ms);
  w.key("series").begin_array();
  constexpr std::array<std::string_view, 3> kNames = {"snowflake", "segment", "order_numbers"};
  for (std::size_t i = 0; i < a.series.size(); ++i) {
    w.begin_object();
    w.field("name", kNames[i]);
    w.key("ids").begin_array();
    for (const std::uint64_t n : a.series[i].ids) w.value(n);
    w.end_array().end_object();
  }
  w.end_array().end_object();
  w.end_object();
  body.push('\n');
}

void write_value(const service::EventValue& value, JsonWriter& w) {
  if (std::holds_alternative<std::int64_t>(value)) {
    w.value(std::get<std::int64_t>(value));
  } else if (std::holds_alternative<double>(value)) {
    w.value(std::get<double>(value));
  } else if (std::holds_alternative<std::string>(value)) {
    w.value(std::get<std::string>(value));
  } else {
    w.null();
  }
}

void write_events(const service::EventPage& page, OutBuf& body) {
  JsonWriter w(body);
  w.begin_object();
  w.field("capacity", page.capacity);
  w.field("dropped", page.dropped);
  w.field("next_seq", page.next_seq);
  w.key("events").begin_array();
  for (const service::Event& e : page.events) {
    w.begin_object();
    w.field("seq", e.seq);
    write_time(w, "unix_ms", "time", e.unix_ms);
    w.field("level", to_string(e.level));
    w.field("kind", e.kind);
    w.field("node", e.node);
    w.field("message", e.message);
    w.key("details").begin_object();
    for (const service::EventDetail& d : e.details) {
      w.key(d.key);
      write_value(d.value, w);
    }
    w.end_object();
    w.end_object();
  }
  w.end_array().end_object();
  body.push('\n');
}

void events(ops::Operations& ops, RouteCall& call) {
  constexpr std::array<std::string_view, 1> kAllowed = {"since"};
  QueryParams q;
  if (Status st = parse_query(call.query, "/v1/events", kAllowed, q, call.scratch.query);
      !st.ok()) {
    call.fail(st);
    return;
  }
  std::uint64_t since = 0;
  if (q.present[0]) {
    const internal::ParsedUint n = internal::parse_uint(q.value[0]);
    if (!n.ok()) {
      call.fail(InvalidArgument("parameter \"since\": " + quote(q.value[0]) +
                                " is not a whole number from 0 (an event's seq)"));
      return;
    }
    since = n.value;
  }
  write_events(ops.events().read(since), call.body);
}

// What the console's files are served with: a policy that lets the page load its own script and
// style sheet and talk to its own origin, nothing else (no inline script or style, no framing).
constexpr std::array<HttpHeader, 2> kConsoleHeaders = {{
    {"Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
    {"Referrer-Policy", "no-referrer"},
}};

void add_file(RouteTable& table, std::string_view pattern, std::string_view file_path) {
  const EmbeddedFile* file = find_embedded_file(file_path);
  if (file == nullptr) return;  // not embedded: the path stays 404
  table.add(Route::kConsole, Methods::kGetHead, pattern, {ops::Scope::kNone}, [file](RouteCall& c) {
    if (!c.no_query()) return;
    c.response.content_type = file->content_type;
    c.response.cache_control = "no-cache";
    c.response.headers = kConsoleHeaders;
    c.body.append(file->bytes);
  });
}

}  // namespace

void add_console_routes(RouteTable& table, ops::Operations& ops) {
  auto layout = std::make_shared<const LayoutJson>(ops.layout());
  table.add(Route::kNodes, Methods::kGetHead, "/v1/nodes", {ops::Scope::kRead},
            [&ops](RouteCall& c) {
              if (!c.no_query("/v1/nodes")) return;
              c.run([&ops](RouteCall& r) {
                Result<ops::NodesReport> report = ops.nodes(r.blocking, r.deferral);
                if (!report.ok()) {
                  r.fail(report.status());
                  return;
                }
                write_nodes(*report, r.body);
              });
            });
  table.add(Route::kStatus, Methods::kGetHead, "/v1/status", {ops::Scope::kRead},
            [&ops, layout](RouteCall& c) {
              if (c.no_query("/v1/status")) write_status(ops, *layout, c.body);
            });
  table.add(Route::kEvents, Methods::kGetHead, "/v1/events", {ops::Scope::kRead},
            [&ops](RouteCall& c) { events(ops, c); });
  add_file(table, "/console", "console/index.html");
  add_file(table, "/console/", "console/index.html");
  add_file(table, "/console/console.js", "console/console.js");
  add_file(table, "/console/console.css", "console/console.css");
}

}  // namespace flurry::http

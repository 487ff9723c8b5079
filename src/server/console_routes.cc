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
#include "flurry/server/event_log.h"
#include "flurry/timefmt.h"
#include "json_views.h"
#include "routes.h"

namespace flurry::server {
namespace {

// "unix_ms": N and the RFC 3339 text of the same instant under `text_key`, or nulls.
void append_time(OutBuf& body, std::string_view ms_key, std::string_view text_key,
                 const std::optional<std::int64_t>& unix_ms) {
  body.push('"');
  body.append(ms_key);
  body.append("\":");
  if (unix_ms) {
    body.append_int(*unix_ms);
  } else {
    body.append("null");
  }
  body.append(",\"");
  body.append(text_key);
  body.append("\":");
  if (unix_ms) {
    body.append_json_string(format_unix_ms(*unix_ms));
  } else {
    body.append("null");
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
  body.append("{\"registry\":");
  body.append_json_string(report.registry);
  body.append(",\"layout\":");
  body.append_json_string(listing.layout);
  body.append(",\"now_unix_ms\":");
  body.append_int(report.now_unix_ms);
  body.append(",\"this_node\":");
  body.append_uint(report.this_node);
  body.append(",\"this_token\":");
  body.append_uint(report.this_token);
  body.append(",\"nodes\":[");
  bool first = true;
  for (const NodeInfo& n : listing.nodes) {
    const NodeRowView v = view_node(n, units, report.now_unix_ms);
    if (!first) body.push(',');
    first = false;
    body.append("{\"node\":");
    body.append_uint(n.node);
    body.append(",\"state\":");
    body.append(n.live ? "\"live\"" : "\"free\"");
    body.append(",\"owner\":");
    body.append_json_string(n.owner);
    body.append(",\"token\":");
    body.append_uint(n.token);
    body.push(',');
    append_time(body, "lease_expires_unix_ms", "lease_expires", v.lease_expires_unix_ms);
    body.append(",\"lease_remaining_ms\":");
    if (v.lease_remaining_ms) {
      body.append_int(*v.lease_remaining_ms);
    } else {
      body.append("null");
    }
    body.append(",\"horizon\":");
    if (v.horizon) {
      body.append("{\"generation\":");
      body.append_uint(v.horizon->generation);
      body.append(",\"ticks\":");
      body.append_int(v.horizon->ticks);
      body.push(',');
      append_time(body, "unix_ms", "time",
                  v.horizon->time ? std::optional(unix_ms_of(*v.horizon->time)) : std::nullopt);
      body.push('}');
    } else {
      body.append("null");
    }
    if (!n.horizon_error.empty()) {
      body.append(",\"horizon_error\":");
      body.append_json_string(n.horizon_error);
    }
    body.append(",\"this_process\":");
    body.append(n.node == report.this_node && n.token == report.this_token ? "true" : "false");
    body.push('}');
  }
  body.append("]}\n");
}

std::string_view lease_state_name(ServiceState::Lease lease) {
  switch (lease) {
    case ServiceState::Lease::kHeld:
      return "held";
    case ServiceState::Lease::kSuspended:
      return "suspended";
    case ServiceState::Lease::kReclaiming:
      return "reclaiming";
  }
  return "held";
}

void write_status(ops::Operations& ops, const LayoutJson& layout_json, OutBuf& body) {
  const ServiceState s = ops.service_state();
  const ServiceOptions& options = ops.service_options();
  const Status ready = ops.readiness();
  const double unit_ms = std::chrono::duration<double, std::milli>(ops.layout().unit()).count();
  body.append("{\"version\":");
  body.append_json_string(Service::version());
  body.append(",\"node\":");
  body.append_uint(s.node);
  body.append(",\"owner\":");
  body.append_json_string(s.owner);
  body.append(",\"token\":");
  body.append_uint(s.token);
  body.append(",\"registry\":");
  body.append_json_string(ops.registry_description());
  body.append(",\"started_unix_ms\":");
  body.append_int(s.started_unix_ms);
  body.append(",\"uptime_ms\":");
  body.append_int(s.uptime.count());
  body.append(",\"ready\":");
  body.append(ready.ok() ? "true" : "false");
  body.append(",\"readiness\":");
  if (ready.ok()) {
    body.append("null");
  } else {
    body.append("{\"code\":");
    body.append_json_string(to_string(ready.code()));
    body.append(",\"reason\":");
    body.append_json_string(to_string(ready.reason()));
    body.append(",\"message\":");
    body.append_json_string(ready.message());
    body.push('}');
  }
  body.append(",\"layout\":");
  layout_json.write(s.node, ops.max_batch(), body);
  body.resize(body.size() - 1);  // LayoutJson ends the route's body with a newline
  const GeneratorStats& g = s.generator;
  body.append(",\"clock\":{\"lead_ms\":");
  body.append_double(static_cast<double>(g.lead_ticks) * unit_ms);
  body.append(",\"max_lead_ms\":");
  body.append_int(options.max_lead.count());
  body.append(",\"horizon_ahead_ms\":");
  body.append_double(static_cast<double>(g.horizon_ahead_ticks) * unit_ms);
  body.append(",\"generation\":");
  body.append_uint(g.generation);
  body.append(",\"rollback\":");
  body.append_json_string(to_string(options.rollback));
  body.append(",\"max_wait_ms\":");
  body.append_int(options.max_wait.count());
  body.append(",\"rollback_waits\":");
  body.append_uint(g.rollback_waits);
  body.append(",\"rollback_failures\":");
  body.append_uint(g.rollback_failures);
  body.append(",\"clock_switches\":");
  body.append_uint(g.clock_switches);
  body.append(",\"steps_detected\":");
  body.append_uint(s.clock_steps);
  body.append("},\"throttling\":{\"active\":");
  body.append(s.throttling ? "true" : "false");
  body.append(",\"waits_total\":");
  body.append_uint(g.throttle_waits);
  body.append("},\"lease\":{\"state\":");
  body.append_json_string(lease_state_name(s.lease));
  body.append(",\"ttl_ms\":");
  body.append_int(s.lease_ttl.count());
  body.append(",\"remaining_ms\":");
  if (s.lease_ttl.count() == 0) {
    body.append("null");
  } else {
    body.append_int(s.keeper.remaining.count());
  }
  body.append(",\"renewals\":");
  body.append_uint(s.keeper.renewals);
  body.append(",\"renewal_failures\":");
  body.append_uint(s.keeper.renewal_failures);
  body.append("},\"segments\":{\"served\":");
  body.append(ops.segments_served() ? "true" : "false");
  body.append(",\"stores\":[");
  bool first = true;
  for (const std::string& store : ops.segment_store_names()) {
    if (!first) body.push(',');
    first = false;
    body.append_json_string(store);
  }
  body.append("]},\"order_numbers\":{\"served\":");
  body.append(ops.orders_served() ? "true" : "false");
  body.append("},\"activity\":{\"interval_ms\":");
  const ops::ActivitySnapshot a =
      ops.activity() != nullptr ? ops.activity()->read() : ops::ActivitySnapshot{};
  body.append_int(a.interval.count());
  body.append(",\"end_unix_ms\":");
  body.append_int(a.end_unix_ms);
  body.append(",\"series\":[");
  constexpr std::array<std::string_view, 3> kNames = {"snowflake", "segment", "order_numbers"};
  for (std::size_t i = 0; i < a.series.size(); ++i) {
    if (i > 0) body.push(',');
    body.append("{\"name\":");
    body.append_json_string(kNames[i]);
    body.append(",\"ids\":[");
    for (std::size_t j = 0; j < a.series[i].ids.size(); ++j) {
      if (j > 0) body.push(',');
      body.append_uint(a.series[i].ids[j]);
    }
    body.append("]}");
  }
  body.append("]}}\n");
}

void write_value(const EventValue& value, OutBuf& body) {
  if (std::holds_alternative<std::int64_t>(value)) {
    body.append_int(std::get<std::int64_t>(value));
  } else if (std::holds_alternative<double>(value)) {
    body.append_double(std::get<double>(value));
  } else if (std::holds_alternative<std::string>(value)) {
    body.append_json_string(std::get<std::string>(value));
  } else {
    body.append("null");
  }
}

void write_events(const EventPage& page, OutBuf& body) {
  body.append("{\"capacity\":");
  body.append_uint(page.capacity);
  body.append(",\"dropped\":");
  body.append_uint(page.dropped);
  body.append(",\"next_seq\":");
  body.append_uint(page.next_seq);
  body.append(",\"events\":[");
  bool first = true;
  for (const Event& e : page.events) {
    if (!first) body.push(',');
    first = false;
    body.append("{\"seq\":");
    body.append_uint(e.seq);
    body.push(',');
    append_time(body, "unix_ms", "time", e.unix_ms);
    body.append(",\"level\":");
    body.append_json_string(to_string(e.level));
    body.append(",\"kind\":");
    body.append_json_string(e.kind);
    body.append(",\"node\":");
    body.append_uint(e.node);
    body.append(",\"message\":");
    body.append_json_string(e.message);
    body.append(",\"details\":{");
    for (std::size_t i = 0; i < e.details.size(); ++i) {
      if (i > 0) body.push(',');
      body.append_json_string(e.details[i].key);
      body.push(':');
      write_value(e.details[i].value, body);
    }
    body.append("}}");
  }
  body.append("]}\n");
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
  table.add(Route::kConsole, Methods::kGetHead, pattern, {Scope::kNone}, [file](RouteCall& c) {
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
  table.add(Route::kNodes, Methods::kGetHead, "/v1/nodes", {Scope::kRead}, [&ops](RouteCall& c) {
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
  table.add(Route::kStatus, Methods::kGetHead, "/v1/status", {Scope::kRead},
            [&ops, layout](RouteCall& c) {
              if (c.no_query("/v1/status")) write_status(ops, *layout, c.body);
            });
  table.add(Route::kEvents, Methods::kGetHead, "/v1/events", {Scope::kRead},
            [&ops](RouteCall& c) { events(ops, c); });
  add_file(table, "/console", "console/index.html");
  add_file(table, "/console/", "console/index.html");
  add_file(table, "/console/console.js", "console/console.js");
  add_file(table, "/console/console.css", "console/console.css");
}

}  // namespace flurry::server

// The timestamp oracle's routes (docs/operations.md "Timestamp oracle") over the operations layer,
// and the answers of a server that does not lead it (fail_leader_only), which strict segment
// tags' routes share.
//
//   GET /v1/tso?count=N   N consecutive timestamps: {"first":"<decimal>","count":N}
//   GET /readyz/tso       200 while this process grants timestamps (it leads), else 503
#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "flurry/timestamp_oracle.h"
#include "routes.h"

namespace flurry::http {
namespace {

// {"http":"H:P","grpc":"H:P"} (a member empty when the leader does not serve that transport).
void write_leader(const TsoLeaderAddress& leader, OutBuf& body) {
  body.append("{\"http\":");
  body.append_json_string(leader.http);
  body.append(",\"grpc\":");
  body.append_json_string(leader.grpc);
  body.push('}');
}

// Text that can go into a header as it is: printable ASCII without spaces (a leader's address
// comes from the registry, which other processes write).
bool header_safe(std::string_view text) {
  for (const char c : text) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

void tso(ops::Operations& ops, RouteCall& call) {
  static constexpr std::array<std::string_view, 1> kParams = {"count"};
  QueryParams q;
  if (Status st = parse_query(call.query, "/v1/tso", kParams, q, call.scratch.query); !st.ok()) {
    call.fail(st);
    return;
  }
  ops::IdCount count = ops::IdCount::one();
  // Without the oracle the count is not checked: the operation answers why (TSO_OFF).
  if (q.present[0] && ops.tso_served()) {
    Result<ops::IdCount> parsed =
        ops::IdCount::parse(q.value[0], ops.tso_max_batch(), {"parameter", "count"});
    if (!parsed.ok()) {
      call.fail(parsed.status());
      return;
    }
    count = *parsed;
  }
  if (call.head() && ops.tso_served()) {
    // GET's status and headers, without taking (and burning) timestamps for a body never sent:
    // the redirect of a server that does not lead, or the refusal of one that cannot grant now.
    if (Status ready = ops.tso_oracle()->readiness(); !ready.ok()) {
      fail_leader_only(call, ops, ready);
      return;
    }
    call.head_only(kJsonType);
    return;
  }
  call.run([&ops, count](RouteCall& c) {
    Result<TsoGrant> grant = ops.tso(count, c.blocking, c.deferral);
    if (!grant.ok()) {
      fail_leader_only(c, ops, grant.status());
      return;
    }
    c.body.append("{\"first\":\"");
    c.body.append_uint(grant->first);
    c.body.append("\",\"count\":");
    c.body.append_uint(grant->count);
    c.body.append("}\n");
  });
}

void readyz_tso(ops::Operations& ops, RouteCall& call) {
  OutBuf& body = call.body;
  const TimestampOracle* oracle = ops.tso_oracle();
  Status ready;
  if (oracle != nullptr) {
    ready = oracle->readiness();
  } else {  // the operation says why (TSO_OFF), having taken nothing
    ops::Deferral none;
    ready = ops.tso(ops::IdCount::one(), Blocking::kNever, none).status();
  }
  body.append("{\"ready\":");
  body.append(ready.ok() ? "true" : "false");
  if (oracle != nullptr) {
    const TsoStats stats = oracle->stats();
    body.append(",\"role\":");
    body.append_json_string(to_string(stats.role));
    body.append(",\"term\":");
    body.append_uint(stats.term);
  }
  if (ready.ok()) {
    body.append("}\n");
    return;
  }
  call.response.status = 503;
  body.append(",\"reason\":");
  body.append_json_string(ready.reason() != Reason::kNone ? to_string(ready.reason())
                                                          : to_string(ready.code()));
  body.append(",\"message\":");
  body.append_json_string(ready.message());
  body.append("}\n");
}

}  // namespace

void write_tso_health(const ops::Operations& ops, OutBuf& body) {
  const TimestampOracle* oracle = ops.tso_oracle();
  if (oracle == nullptr) return;
  const TsoStats stats = oracle->stats();
  const std::optional<TsoLeaderAddress> leader = ops.tso_leader();
  body.append(",\"tso\":{\"role\":");
  body.append_json_string(to_string(stats.role));
  body.append(",\"term\":");
  body.append_uint(stats.term);
  body.append(",\"leader\":");
  if (leader) {
    write_leader(*leader, body);
  } else {
    body.append("null");
  }
  body.push('}');
}

void fail_leader_only(RouteCall& call, const ops::Operations& ops, const Status& status) {
  if (status.reason() != Reason::kNotLeader && status.reason() != Reason::kNoLeader) {
    call.fail(status);
    return;
  }
  // Read after the refusal, so it names the leader the oracle knows now.
  const std::optional<TsoLeaderAddress> leader =
      status.reason() == Reason::kNotLeader ? ops.tso_leader() : std::nullopt;
  if (!leader || (leader->http.empty() && leader->grpc.empty())) {
    Api::error(status.reason() == Reason::kNoLeader
                   ? status
                   : Status(Reason::kNoLeader, "no leader of the timestamp oracle is known (" +
                                                   status.message() + ")"),
               call.response, call.body);
    return;
  }
  std::string extra = ",\"leader\":";
  {
    OutBuf leader_json;
    write_leader(*leader, leader_json);
    extra.append(leader_json.data(), leader_json.size());
  }
  Api::error(status, call.response, call.body, extra);  // 503 with Retry-After
  // "Location: " and CRLF, and room for the target of a longer request than any route needs.
  const std::size_t length =
      call.scheme.size() + 3 + leader->http.size() + call.path.size() + 1 + call.query.size();
  if (leader->http.empty() || !header_safe(leader->http) || length + 12 > kMaxExtraHeaderBytes) {
    return;
  }
  call.response.status = 307;
  call.response.retry_after = false;
  std::string& location = call.response.location;
  location.reserve(length);
  location.append(call.scheme).append("://").append(leader->http).append(call.path);
  if (!call.query.empty()) location.append("?").append(call.query);
}

void add_tso_routes(RouteTable& table, ops::Operations& ops) {
  table.add(Route::kTso, Methods::kGetHead, "/v1/tso", {ops::Scope::kIds},
            [&ops](RouteCall& c) { tso(ops, c); });
  table.add(Route::kReadyzTso, Methods::kGetHead, "/readyz/tso", {ops::Scope::kNone},
            [&ops](RouteCall& c) {
              if (c.no_query()) readyz_tso(ops, c);
            });
}

}  // namespace flurry::http

// What the tests of the HTTP routes without a transport share (api_test, segment_api_test,
// order_api_test): the operations layer wired as `flurry serve` wires it (OpsStack), an answer of
// Api::handle with its body and its request (a deferred one finished as a pool does), a
// started Service and a SegmentService over one store. Needs src/http on the include path
// (api.h).
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/clock.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "flurry/status.h"
#include "host_guard_scope.h"
#include "http/api.h"
#include "ops/authorizer.h"
#include "ops/deferral.h"
#include "ops/operations.h"
#include "service/service.h"

namespace flurry::testing {

// The operations layer over a service, as the composition root builds it: the authorizer
// (`tokens` and the `open` scopes, on `clock`), the blocking pools and the operations (deferral
// deadlines on `clock` too).
struct OpsStack {
  OpsStack(service::Service& service, SegmentService* segments, order::OrderFormats* orders,
           ops::TokenList tokens, MonotonicClock& clock = SteadyClock::instance(),
           ops::ScopeSet open = ops::kDefaultOpenScopes)
      : authorizer(std::move(tokens), open, clock),
        operations(service, segments, orders, authorizer, pools, {SystemClock::coarse(), clock}) {}
  // With admin_token_file's token alone (none when `token` is empty).
  OpsStack(service::Service& service, SegmentService* segments, order::OrderFormats* orders,
           std::string token = {}, MonotonicClock& clock = SteadyClock::instance())
      : OpsStack(service, segments, orders, admin_tokens(std::move(token)), clock) {}
  static ops::TokenList admin_tokens(std::string token) {
    if (token.empty()) return {};
    return {ops::TokenEntry{std::move(token), ops::kAdminTokenScopes}};
  }
  ops::Authorizer authorizer;
  ops::Pools pools;
  ops::Operations operations;
};

// One answer: the response and its body, and the request it answers.
struct ApiReply {
  http::ApiResponse response;
  std::string body;
  http::Method method = http::Method::kGet;
  std::string target;
  std::string authorization;
  std::string request_body;
  int status() const { return response.status; }
  nlohmann::json doc() const { return nlohmann::json::parse(body); }
  std::string message() const { return doc()["error"]["message"].get<std::string>(); }
  std::string code() const { return doc()["error"]["code"].get<std::string>(); }
};

// Api::handle of one request, its body kept.
inline ApiReply call_api(http::Api& api, http::ApiScratch& scratch, std::string_view target,
                         http::Method method, std::string_view authorization, std::string_view body,
                         Blocking blocking) {
  ApiReply reply;
  http::OutBuf out;
  api.handle(http::ApiRequest{method, target, authorization, body}, reply.response, out, scratch,
             blocking);
  reply.body.assign(out.view());
  reply.method = method;
  reply.target = target;
  reply.authorization = authorization;
  reply.request_body = body;
  return reply;
}

// Finishes a deferred request as the pool it was deferred to does: its resume (the closure over
// the request the route parsed and admitted), Blocking::kAllowed, the response's deferral.
inline ApiReply complete_api(http::Api&, const ApiReply& deferred) {
  ApiReply reply;
  http::OutBuf out;
  http::ApiScratch scratch;
  http::Api::resume(deferred.response, deferred.method, reply.response, out, scratch);
  reply.body.assign(out.view());
  reply.method = deferred.method;
  reply.target = deferred.target;
  reply.authorization = deferred.authorization;
  reply.request_body = deferred.request_body;
  return reply;
}

// A Service with the default options in `data_dir`, started.
inline Result<std::unique_ptr<service::Service>> start_service(std::filesystem::path data_dir) {
  use_own_host_guard_scope();
  service::ServiceOptions options;
  options.registry.host_dir = data_dir;  // this test's own host (created with the data dir)
  options.registry.data_dir = std::move(data_dir);
  Result<std::unique_ptr<service::Service>> created = service::Service::create(std::move(options));
  if (!created.ok()) return created;
  if (Status st = (*created)->start(); !st.ok()) return st;
  return created;
}

// The SQLite segment store in `path`.
inline Result<std::unique_ptr<SegmentStore>> open_sqlite_store(std::filesystem::path path) {
  SegmentStoreSpec spec;
  spec.sqlite_path = std::move(path);
  return open_segment_store(spec);
}

// A SegmentService over the one store `store`.
inline Result<std::unique_ptr<SegmentService>> serve_store(std::unique_ptr<SegmentStore> store,
                                                           SegmentOptions options) {
  std::vector<std::unique_ptr<SegmentStore>> stores;
  stores.push_back(std::move(store));
  return SegmentService::create(std::move(stores), options);
}

}  // namespace flurry::testing

// Running one call (calls.h): its end, and its admission by the credential it carries.
#include "calls.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "messages.h"
#include "status_mapping.h"

namespace flurry::grpc_api {
namespace {

// The credential of a call: its `authorization` metadata ("Bearer <token>"), empty when
// absent. Never logged.
std::string_view credential_of(const grpc::CallbackServerContext& ctx) {
  const auto& metadata = ctx.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return {};
  return std::string_view(it->second.data(), it->second.size());
}

// The client's address without the port, for the token brake (ops::GuessBrake): gRPC names
// the peer "ipv4:127.0.0.1:5000" or "ipv6:[::1]:5000" (the brackets percent-encoded by some
// versions); an IPv4-mapped IPv6 address is given as IPv4. Another form (a Unix socket) is kept
// whole.
std::string client_of(const grpc::CallbackServerContext& ctx) {
  std::string peer = ctx.peer();
  std::string_view text = peer;
  const bool v4 = text.starts_with("ipv4:");
  if (!v4 && !text.starts_with("ipv6:")) return peer;
  text.remove_prefix(5);
  const std::size_t colon = text.rfind(':');
  if (colon != std::string_view::npos) text = text.substr(0, colon);
  for (std::string_view open : {"[", "%5B", "%5b"}) {
    if (text.starts_with(open)) text.remove_prefix(open.size());
  }
  for (std::string_view close : {"]", "%5D", "%5d"}) {
    if (text.ends_with(close)) text.remove_suffix(close.size());
  }
  if (text.starts_with("::ffff:") && text.find('.') != std::string_view::npos) {
    text.remove_prefix(7);
  }
  return std::string(text);
}

}  // namespace

Calls::Calls(ops::Operations& operations, ops::Pools& pools, const grpc_api::GrpcOptions& options,
             MonotonicClock& clock)
    : ops_(operations), pools_(pools), options_(options), clock_(clock) {
  for (std::size_t m = 0; m < kMethodScopes.size(); ++m) {
    needs_token_[m] = ops_.authorizer().needs_token(kMethodScopes[m]);
  }
}

grpc::Status Calls::answer(Method method, grpc::CallbackServerContext& ctx, const Status& status,
                           MonoTime started) {
  const std::int64_t ns = std::max<std::int64_t>(0, (clock_.now() - started).count());
  if (status.reason() == Reason::kNotLeader) {
    // Read after the refusal, so it names the leader the oracle knows now.
    const std::optional<TsoLeaderAddress> leader = ops_.tso_leader();
    if (leader && (!leader->http.empty() || !leader->grpc.empty())) {
      metrics_.record(method, status, ns);
      return to_grpc_status(ctx, status, &*leader);
    }
    const Status none(Reason::kNoLeader,
                      "no leader of the timestamp oracle is known (" + status.message() + ")");
    metrics_.record(method, none, ns);
    return to_grpc_status(ctx, none);
  }
  metrics_.record(method, status, ns);
  return to_grpc_status(ctx, status);
}

Status Calls::admit(Method method, const grpc::CallbackServerContext& ctx, Blocking blocking,
                    ops::Deferral& deferral) {
  const auto m = static_cast<std::size_t>(method);
  if (!needs_token_[m]) return OkStatus();
  return ops_.authorizer().admit(credential_of(ctx), kMethodScopes[m], blocking, deferral,
                                 client_of(ctx), kGrpcCredential);
}

grpc::ServerUnaryReactor* Calls::refuse(Method method, grpc::CallbackServerContext* ctx,
                                        Status status) {
  return unary(method, ctx,
               [status = std::move(status)](Blocking, ops::Deferral&) { return status; });
}

}  // namespace flurry::grpc_api

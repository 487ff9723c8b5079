#include "etcd_client.h"

#include <algorithm>
#include <boost/beast/http.hpp>
#include <utility>

#include "core/quote.h"
#include "tls/client.h"
#include "tls/http_client.h"

namespace flurry::internal {
namespace {

constexpr std::string_view kAuthenticatePath = "/v3/auth/authenticate";
constexpr std::chrono::milliseconds kAuthenticateTimeout{5000};

// Largest answer taken (a range over every key of a registry with millions of node IDs is far
// smaller).
constexpr std::uint64_t kMaxBody = std::uint64_t{64} << 20;

}  // namespace

Status check_etcd_cluster_name(std::string_view name) {
  if (name.empty() || name.size() > 64) {
    return InvalidArgument("the cluster name must have 1 to 64 characters, not " +
                           std::to_string(name.size()));
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return InvalidArgument("the cluster name " + quote(name) + " has the character " +
                             quote_char(c) + " (allowed: A-Z a-z 0-9 . _ -)");
    }
  }
  if (name == "." || name == "..")
    return InvalidArgument("the cluster name cannot be " + quote(name));
  return OkStatus();
}

EtcdClient::EtcdClient(std::vector<EtcdEndpoint> endpoints, std::chrono::milliseconds timeout,
                       std::optional<EtcdAuth> auth, std::shared_ptr<tls::ClientContext> tls)
    : endpoints_(std::move(endpoints)),
      timeout_(timeout),
      auth_(std::move(auth)),
      user_(auth_ ? auth_->user : std::string()),
      http_(std::make_shared<tls::HttpClient>(std::move(tls))) {}

std::string EtcdClient::describe() const {
  std::string out;
  for (const EtcdEndpoint& ep : endpoints_) {
    out += out.empty() ? "" : ",";
    out += ep.to_string();
  }
  return out;
}

namespace {

// etcd's answers to a token that no longer works: repeated once after authenticating again.
bool is_stale_token(const EtcdError& error) {
  return error.code == 16 ||  // UNAUTHENTICATED: "invalid auth token" (expired, unknown)
         (error.code == 3 &&  // INVALID_ARGUMENT: the auth store changed since the token was made
          error.message.find("revision of auth store is old") != std::string::npos);
}

}  // namespace

Result<EtcdClient::Answer> EtcdClient::attempt(const EtcdEndpoint& endpoint, std::string_view path,
                                               const std::string& body, const std::string& token,
                                               bool& retry_elsewhere, bool& stale_token) const {
  namespace http = boost::beast::http;

  retry_elsewhere = true;
  stale_token = false;
  const std::string where = endpoint.to_string();
  http::request<http::string_body> req{http::verb::post, std::string(path), 11};
  req.set(http::field::host, endpoint.address.to_string());
  req.set(http::field::content_type, "application/json");
  req.set(http::field::user_agent, "flurry");
  if (!token.empty()) req.set(http::field::authorization, token);
  // Over TLS the connection is kept for the next request (tls/client.h: a pool per peer, which
  // spares a handshake a request); plain HTTP makes a connection per exchange.
  req.keep_alive(endpoint.tls);
  req.body() = body;
  req.prepare_payload();
  if (endpoint.tls && http_->tls() == nullptr) {
    retry_elsewhere = false;
    return Status(StatusCode::kFailedPrecondition, where + ": an https:// endpoint without TLS");
  }
  // etcd checks a password with bcrypt, on purpose slow (tens of ms a check, seconds when many
  // clients authenticate at once on a busy host): an authentication gets more time than other
  // requests, rather than being abandoned and sent again while etcd still works on the first.
  const std::chrono::milliseconds timeout =
      path == kAuthenticatePath ? std::max(timeout_, kAuthenticateTimeout) : timeout_;
  Result<tls::HttpResponse> exchanged = http_->exchange(
      {endpoint.tls, endpoint.address.host, endpoint.address.port}, req, timeout, kMaxBody, where);
  if (!exchanged.ok()) return exchanged.status();
  const auto& res = *exchanged;
  const int http_status = res.result_int();
  std::string text = res.body();
  const std::string call = where + " " + std::string(path);
  // A 200 stream (keep-alive) may carry an error as its message.
  std::optional<EtcdError> error = parse_etcd_error(text);
  if (http_status == 200 && !error) {
    if (!etcd_answer_is_json(text)) {
      return Status(Reason::kIo, call + ": the answer is not JSON: " + quote(text));
    }
    Answer answer;
    answer.body = std::move(text);
    answer.endpoint = where;
    answer.date_unix_ms = parse_http_date(res[http::field::date]);
    return answer;
  }
  if (!error) {
    if (text.find("CommonName of client") != std::string::npos) {
      // etcd 3.4's gateway with --client-cert-auth refuses every client certificate with a CN.
      retry_elsewhere = false;
      return Status(StatusCode::kFailedPrecondition,
                    call + ": etcd refused the client certificate: " + quote(text, 256) +
                        " (etcd's JSON gateway takes only client certificates without a Common "
                        "Name; authenticate with etcd_user and etcd_password_file)");
    }
    return Status(Reason::kIo, call + ": HTTP " + std::to_string(http_status) + " " + quote(text) +
                                   " (is this etcd 3.4 or later?)");
  }
  const std::string what =
      call + ": etcd error " + std::to_string(error->code) + ": " + quote(error->message, 256);
  switch (error->code) {
    case 1:   // CANCELLED
    case 2:   // UNKNOWN: "context deadline exceeded" while the member has no leader
    case 4:   // DEADLINE_EXCEEDED
    case 14:  // UNAVAILABLE: no leader, leader changed, request timed out
      return Status(Reason::kIo, what);
    default:
      break;
  }
  if (http_status >= 500) return Status(Reason::kIo, what);
  retry_elsewhere = false;
  const std::string user = auth_ ? "user " + quote(auth_->user) : std::string("no user");
  if (is_stale_token(*error)) {
    stale_token = true;
    return Status(StatusCode::kUnauthenticated, what + ": etcd refused the token of " + user);
  }
  const auto says = [&](std::string_view text) {
    return error->message.find(text) != std::string::npos;
  };
  switch (error->code) {
    case 3:  // INVALID_ARGUMENT: etcd's authentication errors among others
      if (says("user name is empty")) {
        return Status(StatusCode::kUnauthenticated,
                      what +
                          ": etcd requires authentication; set etcd_user and "
                          "etcd_password_file");
      }
      if (says("authentication failed")) {
        return Status(StatusCode::kUnauthenticated,
                      "etcd refused " + user +
                          ": authentication failed (wrong password or unknown user; " + what + ")");
      }
      return Status(StatusCode::kInternal, what);
    case 9:  // FAILED_PRECONDITION: "authentication is not enabled"
      if (says("authentication is not enabled")) {
        return Status(StatusCode::kFailedPrecondition,
                      "etcd_user " + (auth_ ? quote(auth_->user) : std::string()) +
                          " is set but etcd has authentication disabled (" + what +
                          "); enable it (etcdctl auth enable) or unset etcd_user");
      }
      return Status(StatusCode::kInternal, what);
    case 5:  // NOT_FOUND: the lease is not found
      return Status(StatusCode::kNotFound, what);
    case 7:          // PERMISSION_DENIED: the user's roles do not cover the key
      if (!auth_) {  // what etcd with authentication and client certificates says to no user
        return Status(StatusCode::kUnauthenticated,
                      what +
                          ": etcd requires authentication (it denies requests without a user); "
                          "set etcd_user and etcd_password_file");
      }
      return Status(StatusCode::kPermissionDenied,
                    what + ": etcd denied " + user + " " + std::string(path) +
                        (auth_ && !auth_->needs.empty() ? "; its role needs " + auth_->needs
                                                        : std::string()));
    case 8:  // RESOURCE_EXHAUSTED: too many requests, database space exceeded
      return Status(StatusCode::kUnavailable, what);
    default:
      return Status(StatusCode::kInternal, what);
  }
}

Result<EtcdClient::Answer> EtcdClient::post_with(std::string_view path, const std::string& body,
                                                 const std::string& token,
                                                 bool& stale_token) const {
  const std::size_t n = endpoints_.size();
  if (n == 0) return Status(StatusCode::kInternal, "etcd: no endpoints");
  const std::size_t first = preferred_.load(std::memory_order_relaxed) % n;
  std::string failures;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (first + k) % n;
    bool retry_elsewhere = false;
    Result<Answer> answer = attempt(endpoints_[i], path, body, token, retry_elsewhere, stale_token);
    if (answer.ok()) {
      preferred_.store(i, std::memory_order_relaxed);
      return answer;
    }
    if (!retry_elsewhere) return answer.status();
    failures += failures.empty() ? "" : "; ";
    failures += answer.status().message();
  }
  return Status(Reason::kIo,
                "no etcd endpoint answered " + std::string(path) + " (" + failures + ")");
}

Result<std::string> EtcdClient::token(const std::string& refused) const {
  MutexLock lock(auth_mu_);
  if (!token_.empty() && token_ != refused) return token_;
  constexpr std::string_view kPath = kAuthenticatePath;
  authentications_.fetch_add(1, std::memory_order_relaxed);
  bool stale_token = false;
  Result<Answer> a = post_with(kPath, etcd_authenticate_body(auth_->user, auth_->password),
                               std::string(), stale_token);
  if (!a.ok()) {
    if (a.status().code() == StatusCode::kUnauthenticated ||
        a.status().code() == StatusCode::kFailedPrecondition) {
      return a.status();
    }
    return a.status().with_prefix("cannot authenticate to etcd as user " + quote(auth_->user));
  }
  Result<std::string> token = parse_etcd_token(a->body);
  if (!token.ok()) {
    return Status(StatusCode::kInternal, "etcd " + a->endpoint + " answered " + std::string(kPath) +
                                             " unexpectedly: " + token.status().message());
  }
  token_ = std::move(token).value();
  return token_;
}

Result<EtcdClient::Answer> EtcdClient::post(std::string_view path, const std::string& body) const {
  bool stale_token = false;
  if (!auth_) return post_with(path, body, std::string(), stale_token);
  Result<std::string> current = token(std::string());
  if (!current.ok()) return current.status();
  Result<Answer> answer = post_with(path, body, *current, stale_token);
  if (answer.ok() || !stale_token) return answer;
  // The token expired or went stale: authenticate again (unless another request did meanwhile)
  // and repeat the request once. Refused again, the answer stays UNAUTHENTICATED.
  Result<std::string> fresh = token(*current);
  if (!fresh.ok()) return fresh.status();
  return post_with(path, body, *fresh, stale_token);
}

namespace {

// A parser's INVALID_ARGUMENT as the INTERNAL error of an unexpected answer from `answer`.
template <typename T>
Result<T> from(const EtcdClient::Answer& answer, std::string_view path, Result<T> parsed) {
  if (parsed.ok()) return parsed;
  return Status(StatusCode::kInternal, "etcd " + answer.endpoint + " answered " +
                                           std::string(path) +
                                           " unexpectedly: " + parsed.status().message());
}

}  // namespace

Result<EtcdRange> EtcdClient::range(std::string_view key, std::string_view range_end,
                                    bool keys_only) const {
  constexpr std::string_view kPath = "/v3/kv/range";
  Result<Answer> a = post(kPath, etcd_range_body(key, range_end, keys_only));
  if (!a.ok()) return a.status();
  return from(*a, kPath, parse_etcd_range(a->body));
}

Result<EtcdTxnResult> EtcdClient::txn(const EtcdTxn& txn) const {
  constexpr std::string_view kPath = "/v3/kv/txn";
  Result<Answer> a = post(kPath, etcd_txn_body(txn));
  if (!a.ok()) return a.status();
  Result<EtcdTxnResult> r = from(*a, kPath, parse_etcd_txn(a->body));
  if (!r.ok()) return r;
  const std::size_t expected = r->succeeded ? txn.success.size() : txn.failure.size();
  if (r->responses.size() != expected) {
    return Status(StatusCode::kInternal, "etcd " + a->endpoint + " answered " + std::string(kPath) +
                                             " with " + std::to_string(r->responses.size()) +
                                             " responses for " + std::to_string(expected) +
                                             " operations");
  }
  return r;
}

Result<EtcdLeaseGrant> EtcdClient::grant(std::int64_t ttl_seconds) const {
  constexpr std::string_view kPath = "/v3/lease/grant";
  Result<Answer> a = post(kPath, etcd_grant_body(ttl_seconds));
  if (!a.ok()) return a.status();
  return from(*a, kPath, parse_etcd_grant(a->body));
}

Result<std::optional<std::int64_t>> EtcdClient::keep_alive(std::int64_t id) const {
  constexpr std::string_view kPath = "/v3/lease/keepalive";
  Result<Answer> a = post(kPath, etcd_lease_body(id));
  if (!a.ok()) return a.status();
  return from(*a, kPath, parse_etcd_keepalive(a->body));
}

Status EtcdClient::revoke(std::int64_t id) const {
  Result<Answer> a = post("/v3/lease/revoke", etcd_lease_body(id));
  return a.status();
}

Result<EtcdClient::TimeToLive> EtcdClient::time_to_live(std::int64_t id) const {
  constexpr std::string_view kPath = "/v3/lease/timetolive";
  Result<Answer> a = post(kPath, etcd_lease_body(id));
  if (!a.ok()) return a.status();
  Result<EtcdLeaseTtl> ttl = from(*a, kPath, parse_etcd_time_to_live(a->body));
  if (!ttl.ok()) return ttl.status();
  return TimeToLive{*ttl, a->date_unix_ms};
}

}  // namespace flurry::internal

namespace flurry {

std::string EtcdEndpoint::to_string() const {
  return (tls ? "https://" : "") + address.to_string();
}

Result<EtcdEndpoint> parse_etcd_endpoint(std::string_view text) {
  EtcdEndpoint out;
  std::string_view rest = text;
  if (rest.substr(0, 8) == "https://") {
    out.tls = true;
    rest.remove_prefix(8);
  } else if (rest.substr(0, 7) == "http://") {
    rest.remove_prefix(7);
  } else if (rest.find("://") != std::string_view::npos) {
    return InvalidArgument("etcd endpoint " + internal::quote_redacted(text) +
                           ": only http:// and https:// endpoints are known");
  }
  // Credentials in the endpoint are refused and never shown: an etcd user is etcd_user, its
  // password is read from etcd_password_file.
  if (rest.find('@') != std::string_view::npos) {
    return InvalidArgument("etcd endpoint " + internal::quote_redacted(text) +
                           ": user information in an endpoint is not used; give the user as "
                           "etcd_user and its password in etcd_password_file");
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);  // "https://h:2379/"
  if (rest.find_first_of("/?#") != std::string_view::npos) {
    return InvalidArgument("etcd endpoint " + internal::quote_redacted(text) +
                           ": has a path or query; give only the scheme, host and port");
  }
  Result<HostPort> address = parse_host_port(rest, HostPortUse::kConnect);
  if (!address.ok()) return address.status();
  out.address = std::move(address).value();
  return out;
}

}  // namespace flurry

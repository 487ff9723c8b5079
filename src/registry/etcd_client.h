// Internal: a small synchronous client for etcd's v3 JSON gateway (the etcd node registry's only
// way to talk to etcd): the requests, endpoint failover, the auth token and deadlines. What goes
// on the wire (the JSON bodies, base64 keys, the parsers of the answers) is etcd_codec.h's.
// Not public API.
//
// Each request is one HTTP/1.1 POST through flurry's one client exchange (tls/http_client.h:
// plain HTTP on a fresh connection, or TLS on a kept one for https:// endpoints) to /v3/kv/range,
// /v3/kv/txn, /v3/kv/deleterange, /v3/lease/{grant,keepalive,revoke,timetolive} or
// /v3/auth/authenticate.
//
// Endpoints: a request goes to the endpoint that answered last and, on a connection error, a
// timeout, an HTTP 5xx or an etcd "unavailable" answer (no leader, leader changed, request timed
// out), to the next one, each endpoint once. Every attempt has one deadline (`timeout`) covering
// resolution, connection, the request and the whole response, so a member that hangs costs at most
// `timeout` before the next one is tried.
//
// Authentication (EtcdAuth given): the first request authenticates (/v3/auth/authenticate) and
// every request carries the token in its Authorization header. When etcd answers that the token is
// invalid (a simple token expired: etcd's --auth-token-ttl, 300 s by default, counts from its last
// use) or stale (the auth store changed since: "revision of auth store is old"), the client
// authenticates again, once, and repeats the request once; a request etcd refuses that way is
// not applied, so repeating it is safe. An authentication may take up to max(timeout, 5 s): etcd
// checks passwords with bcrypt. The password and the token never appear in a message.
//
// Errors (Status): UNAVAILABLE / IO when no endpoint answered (each endpoint's failure in the
// message; retryable); NOT_FOUND when etcd says the lease is not found (code 5); UNAVAILABLE when
// etcd is out of space or rate-limits (code 8); UNAUTHENTICATED when etcd refuses the user or its
// password, requires a user and none is set, or refuses a fresh token; PERMISSION_DENIED (code 7)
// naming the user and what it needs; FAILED_PRECONDITION when a user is set and etcd's
// authentication is disabled; INTERNAL for any other error etcd answers and for an answer that is
// not what the gateway sends (the message names the endpoint and the path).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcd_codec.h"
#include "flurry/clock.h"
#include "flurry/host_port.h"
#include "flurry/mutex.h"
#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry::tls {
class ClientContext;
class HttpClient;
}  // namespace flurry::tls

namespace flurry::internal {

// open_etcd_registry (registry.h) with the endpoints typed already (RegistryOptions), so that
// nothing below the edge where their text entered parses them again.
[[nodiscard]] Result<std::unique_ptr<NodeRegistry>> open_etcd_registry(
    std::vector<EtcdEndpoint> endpoints, const EtcdRegistryOptions& options,
    std::string_view layout, Clock& clock);

// The endpoints' schemes against the TLS files: all https:// or none; TLS files only with
// https://; a client certificate and its key together. INVALID_ARGUMENT naming the setting.
[[nodiscard]] Status check_etcd_transport(const std::vector<EtcdEndpoint>& endpoints,
                                          const EtcdTlsFiles& tls);

// A cluster name of the etcd registry: 1-64 of [A-Za-z0-9._-]. INVALID_ARGUMENT otherwise.
[[nodiscard]] Status check_etcd_cluster_name(std::string_view name);

// ---- The client ----

// etcd authentication: the user, its password and what the user must be granted (for messages:
// "readwrite on the prefix /flurry/NAME/").
struct EtcdAuth {
  std::string user;
  std::string password;
  std::string needs;
};

class EtcdClient {
 public:
  // One HTTP answer with status 200.
  struct Answer {
    std::string body;
    std::string endpoint;  // who answered ("host:port")
    // The answer's Date header (the member's clock, whole seconds), if it had a valid one.
    std::optional<std::int64_t> date_unix_ms;
  };

  // `endpoints` must not be empty; `timeout` is per attempt (positive). `auth`: authenticate as
  // that user (none: send no token). `tls`: the context of https:// endpoints (required with
  // them: without it their requests fail with FAILED_PRECONDITION, never go out as plain HTTP).
  EtcdClient(std::vector<EtcdEndpoint> endpoints, std::chrono::milliseconds timeout,
             std::optional<EtcdAuth> auth = std::nullopt,
             std::shared_ptr<tls::ClientContext> tls = nullptr);

  // Thread-safe: every method may be called from any thread at once (each request has its own
  // connection).

  // POSTs `body` to `path` with failover (see the top of this file).
  [[nodiscard]] Result<Answer> post(std::string_view path, const std::string& body) const;

  // Keys in [key, range_end) (just `key` when range_end is empty), in key order.
  [[nodiscard]] Result<EtcdRange> range(std::string_view key, std::string_view range_end = {},
                                        bool keys_only = false) const;
  [[nodiscard]] Result<EtcdTxnResult> txn(const EtcdTxn& txn) const;
  // A new lease of `ttl_seconds` (etcd raises it to its minimum, 2 s by default).
  [[nodiscard]] Result<EtcdLeaseGrant> grant(std::int64_t ttl_seconds) const;
  // Renews lease `id` to its granted TTL: the new TTL, or none if the lease is gone.
  [[nodiscard]] Result<std::optional<std::int64_t>> keep_alive(std::int64_t id) const;
  // Revokes lease `id`, deleting its keys. NOT_FOUND when it is gone already.
  [[nodiscard]] Status revoke(std::int64_t id) const;
  // What is left of lease `id`, and when the answer was given (the Date header, if any).
  struct TimeToLive {
    EtcdLeaseTtl ttl;
    std::optional<std::int64_t> date_unix_ms;
  };
  [[nodiscard]] Result<TimeToLive> time_to_live(std::int64_t id) const;

  // "host:port,host:port" or "https://host:port,...".
  [[nodiscard]] std::string describe() const;
  // The user it authenticates as; empty without.
  [[nodiscard]] const std::string& user() const noexcept { return user_; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  // How many times this client authenticated (0 without a user): the first time, and once per
  // token etcd refused as invalid or stale.
  [[nodiscard]] std::uint64_t authentications() const noexcept {
    return authentications_.load(std::memory_order_relaxed);
  }

 private:
  // post() with `token` (empty: none) in the Authorization header.
  // `stale_token`: etcd refused `token` as expired or stale (worth authenticating again).
  [[nodiscard]] Result<Answer> post_with(std::string_view path, const std::string& body,
                                         const std::string& token, bool& stale_token) const;
  // One attempt on one endpoint; `retry_elsewhere` says whether another endpoint may do better.
  [[nodiscard]] Result<Answer> attempt(const EtcdEndpoint& endpoint, std::string_view path,
                                       const std::string& body, const std::string& token,
                                       bool& retry_elsewhere, bool& stale_token) const;
  // The current token, authenticating first when there is none or when the one the caller was
  // refused with (`refused`, non-empty) is still the current one.
  [[nodiscard]] Result<std::string> token(const std::string& refused) const
      FLURRY_EXCLUDES(auth_mu_);

  const std::vector<EtcdEndpoint> endpoints_;
  const std::chrono::milliseconds timeout_;
  const std::optional<EtcdAuth> auth_;
  const std::string user_;
  // The one HTTP exchange (tls/http_client.h), with the TLS context of https:// endpoints.
  const std::shared_ptr<tls::HttpClient> http_;
  // The token etcd gave (empty: none yet); one thread authenticates at a time.
  mutable Mutex auth_mu_;
  mutable std::string token_ FLURRY_GUARDED_BY(auth_mu_);
  mutable std::atomic<std::uint64_t> authentications_{0};
  // The endpoint to try first: the last one that answered.
  mutable std::atomic<std::size_t> preferred_{0};
};

}  // namespace flurry::internal

// Internal: a small synchronous client for etcd's v3 JSON gateway (the etcd node registry's only
// way to talk to etcd). Not public API.
//
// Each request is one HTTP/1.1 POST through flurry's one client exchange (tls/http_client.h:
// plain HTTP on a fresh connection, or TLS on a kept one for https:// endpoints) to /v3/kv/range,
// /v3/kv/txn, /v3/kv/deleterange, /v3/lease/{grant,keepalive,revoke,timetolive} or
// /v3/auth/authenticate. Keys and values travel base64-encoded; int64 fields come back as JSON
// strings, and fields at their default value are left out (a failed txn has no "succeeded", an
// empty range no "kvs"), so every parser here reads an absent field as its default.
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
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/host_port.h"
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

// Standard base64 (RFC 4648, alphabet A-Z a-z 0-9 + /) with '=' padding.
[[nodiscard]] std::string base64_encode(std::string_view bytes);
// The inverse of base64_encode: strict (length a multiple of 4, padding only at the end, no
// other characters, no stray bits in the last group). INVALID_ARGUMENT otherwise.
[[nodiscard]] Result<std::string> base64_decode(std::string_view text);

// etcd's range_end for "every key that starts with `prefix`": the prefix with its last byte
// below 0xff incremented and the rest dropped. `prefix` must not be empty or all 0xff bytes.
[[nodiscard]] std::string etcd_prefix_end(std::string_view prefix);

// An HTTP date (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT") as Unix milliseconds; none when
// the text is not one.
[[nodiscard]] std::optional<std::int64_t> parse_http_date(std::string_view text);

// ---- Requests ----

struct EtcdCompare {
  enum class Target { kCreateRevision, kModRevision, kVersion, kValue, kLease };
  enum class Result { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kCreateRevision;
  Result result = Result::kEqual;
  std::int64_t number = 0;  // the revision, version or lease ID compared with
  std::string value;        // kValue

  // create_revision(key) == revision: 0 means "the key does not exist".
  [[nodiscard]] static EtcdCompare create_revision(std::string key, std::int64_t revision);
  [[nodiscard]] static EtcdCompare mod_revision(std::string key, std::int64_t revision);
  [[nodiscard]] static EtcdCompare lease(std::string key, std::int64_t lease_id);
  // value(key) == value; false when the key does not exist.
  [[nodiscard]] static EtcdCompare value_equals(std::string key, std::string value);
};

struct EtcdOp {
  enum class Kind { kRange, kPut, kDelete };
  Kind kind = Kind::kRange;
  std::string key;
  std::string range_end;   // kRange, kDelete: empty for the one key
  std::string value;       // kPut
  std::int64_t lease = 0;  // kPut: 0 for none

  [[nodiscard]] static EtcdOp range(std::string key, std::string range_end = {});
  [[nodiscard]] static EtcdOp put(std::string key, std::string value, std::int64_t lease = 0);
  [[nodiscard]] static EtcdOp remove(std::string key, std::string range_end = {});
};

struct EtcdTxn {
  std::vector<EtcdCompare> compare;
  std::vector<EtcdOp> success;
  std::vector<EtcdOp> failure;
};

// The JSON bodies the gateway takes.
[[nodiscard]] std::string etcd_range_body(std::string_view key, std::string_view range_end,
                                          bool keys_only);
[[nodiscard]] std::string etcd_txn_body(const EtcdTxn& txn);
[[nodiscard]] std::string etcd_lease_body(std::int64_t id);

// ---- Answers ----

struct EtcdKeyValue {
  std::string key;
  std::string value;  // empty for keys_only ranges
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  std::int64_t lease = 0;  // 0: none
};

struct EtcdRange {
  std::int64_t revision = 0;  // the store's revision when read
  std::vector<EtcdKeyValue> kvs;
  std::int64_t count = 0;
  bool more = false;
};

struct EtcdOpResult {
  EtcdOp::Kind kind = EtcdOp::Kind::kRange;
  EtcdRange range;           // kRange
  std::int64_t deleted = 0;  // kDelete
};

struct EtcdTxnResult {
  bool succeeded = false;
  // The store's revision after the txn: the create_revision of a key the txn created.
  std::int64_t revision = 0;
  // One per operation of the branch that ran, in order.
  std::vector<EtcdOpResult> responses;
};

struct EtcdLeaseGrant {
  std::int64_t id = 0;
  std::int64_t ttl_seconds = 0;  // what etcd granted (at least its minimum TTL)
};

struct EtcdLeaseTtl {
  // Seconds left, by the leader's clock; -1 when the lease has expired or never existed.
  std::int64_t ttl_seconds = -1;
  std::int64_t granted_ttl_seconds = 0;
};

// Parsers of the gateway's 200 answers. INVALID_ARGUMENT saying what is malformed (the client
// turns that into INTERNAL naming the endpoint).
[[nodiscard]] Result<EtcdRange> parse_etcd_range(std::string_view body);
[[nodiscard]] Result<EtcdTxnResult> parse_etcd_txn(std::string_view body);
[[nodiscard]] Result<EtcdLeaseGrant> parse_etcd_grant(std::string_view body);
// A keep-alive answer (the first message of the stream): the TTL etcd renewed the lease to, or
// none when the lease has expired or was revoked (etcd leaves TTL out then).
[[nodiscard]] Result<std::optional<std::int64_t>> parse_etcd_keepalive(std::string_view body);
[[nodiscard]] Result<EtcdLeaseTtl> parse_etcd_time_to_live(std::string_view body);

// An error answer: {"error": "...", "code": N, "message": "..."} for unary calls, or
// {"error": {"grpc_code": N, "message": "..."}} on a stream (keep-alive). None when `body` is
// neither.
struct EtcdError {
  int code = 0;  // the gRPC code
  std::string message;
};
[[nodiscard]] std::optional<EtcdError> parse_etcd_error(std::string_view body);

// ---- The client ----

// etcd authentication: the user, its password and what the user must be granted (for messages:
// "readwrite on the prefix /flurry/NAME/").
struct EtcdAuth {
  std::string user;
  std::string password;
  std::string needs;
};

// The JSON body of /v3/auth/authenticate.
[[nodiscard]] std::string etcd_authenticate_body(std::string_view user, std::string_view password);
// The token of a /v3/auth/authenticate answer. INVALID_ARGUMENT when it has none.
[[nodiscard]] Result<std::string> parse_etcd_token(std::string_view body);

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
  [[nodiscard]] Result<std::string> token(const std::string& refused) const;

  const std::vector<EtcdEndpoint> endpoints_;
  const std::chrono::milliseconds timeout_;
  const std::optional<EtcdAuth> auth_;
  const std::string user_;
  // The one HTTP exchange (tls/http_client.h), with the TLS context of https:// endpoints.
  const std::shared_ptr<tls::HttpClient> http_;
  // The token etcd gave (empty: none yet); one thread authenticates at a time.
  mutable std::mutex auth_mu_;
  mutable std::string token_;  // guarded by auth_mu_
  mutable std::atomic<std::uint64_t> authentications_{0};
  // The endpoint to try first: the last one that answered.
  mutable std::atomic<std::size_t> preferred_{0};
};

}  // namespace flurry::internal

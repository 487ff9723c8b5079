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
#include <functional>
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

// One change a watch saw: a put (kv is the new version) or a delete (kv.key and kv.mod_revision,
// the revision of the delete, only).
struct EtcdEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  EtcdKeyValue kv;
};

// A key's versions that etcd still retains (EtcdClient::history).
struct EtcdHistory {
  // Puts, oldest first (deletes left out), up to and including the revision asked for.
  std::vector<EtcdKeyValue> versions;
  // History below this revision was compacted away and could not be read (0: none was).
  std::int64_t compacted_below = 0;
};

// A watch in progress (EtcdClient::watch). Destroying it cancels the watch; the callback never
// runs once the destructor has returned, and the destructor must not run on the callback's thread.
class EtcdWatch {
 public:
  virtual ~EtcdWatch() = default;
};

// Called on the client's own thread with each batch of events in revision order, or, once and
// last, with an error when the watch ended for good (the history it needs was compacted, etcd
// cancelled it, permission denied) and no further events will come. Must not block for long.
using EtcdWatchCallback =
    std::function<void(const std::vector<EtcdEvent>& events, const Status& ended)>;

// What the client sent, for metrics and the fleet harness.
struct EtcdClientCounters {
  std::uint64_t requests = 0;             // unary calls (Range, Txn, LeaseGrant, ...), each attempt
  std::uint64_t keep_alive_messages = 0;  // messages sent on LeaseKeepAlive streams
  std::uint64_t watch_streams = 0;        // Watch streams opened (history reads included)
  std::uint64_t authentications = 0;
};

class EtcdClient {
 public:
  // `endpoints` must not be empty; `timeout` is per attempt (positive). `auth`: authenticate as
  // that user (none: send no token). `tls`: files of https:// endpoints (the CA, and a client
  // certificate with its key, which may carry a Common Name: with etcd's --client-cert-auth and
  // authentication enabled that name is the user). Connects to nothing until the first call.
  // Errors loading the etcd module (flurry_etcd.so) or reading the TLS files come from the first
  // call, or earlier from open().
  [[nodiscard]] static Result<std::unique_ptr<EtcdClient>> open(
      std::vector<EtcdEndpoint> endpoints, std::chrono::milliseconds timeout,
      std::optional<EtcdAuth> auth = std::nullopt, EtcdTlsFiles tls = {});
  virtual ~EtcdClient() = default;

  // Thread-safe: every method may be called from any thread at once.

  // Keys in [key, range_end) (just `key` when range_end is empty), in key order, as of
  // `revision` (0: the latest). OUT_OF_RANGE when `revision` was compacted.
  [[nodiscard]] virtual Result<EtcdRange> range(std::string_view key,
                                                std::string_view range_end = {},
                                                bool keys_only = false,
                                                std::int64_t revision = 0) const = 0;
  [[nodiscard]] virtual Result<EtcdTxnResult> txn(const EtcdTxn& txn) const = 0;
  // A new lease of `ttl_seconds` (etcd raises it to its minimum, 2 s by default).
  [[nodiscard]] virtual Result<EtcdLeaseGrant> grant(std::int64_t ttl_seconds) const = 0;
  // Renews lease `id` to its granted TTL over the process's one LeaseKeepAlive stream (opened on
  // first use, reopened on the next endpoint when it breaks): the new TTL, or none if the lease
  // is gone. Waits for etcd's answer at most `timeout`.
  [[nodiscard]] virtual Result<std::optional<std::int64_t>> keep_alive(std::int64_t id) const = 0;
  // Revokes lease `id`, deleting its keys. NOT_FOUND when it is gone already.
  [[nodiscard]] virtual Status revoke(std::int64_t id) const = 0;
  // What is left of lease `id` (ttl_seconds -1: expired or unknown).
  [[nodiscard]] virtual Result<EtcdLeaseTtl> time_to_live(std::int64_t id) const = 0;
  // Every version of `key` etcd retains up to revision `until` (a Watch from the oldest retained
  // revision, read until etcd confirms it is past `until`). Bounded by `timeout` per attempt.
  [[nodiscard]] virtual Result<EtcdHistory> history(std::string_view key,
                                                    std::int64_t until) const = 0;
  // Watches [key, range_end) (just `key` when empty) for changes after `after_revision` (events
  // with a larger revision; 0: from now). A broken stream is reopened on the next endpoint from
  // the last revision seen, so no event is skipped (only compaction ends it, with an error). On
  // etcd members that lose their leader the stream is cut (gRPC metadata hasleader=true) and
  // reopened elsewhere.
  [[nodiscard]] virtual Result<std::unique_ptr<EtcdWatch>> watch(
      std::string key, std::string range_end, std::int64_t after_revision,
      EtcdWatchCallback callback) const = 0;

  // "host:port,host:port" or "https://host:port,...".
  [[nodiscard]] virtual std::string describe() const = 0;
  // The user it authenticates as; empty without.
  [[nodiscard]] virtual const std::string& user() const noexcept = 0;
  [[nodiscard]] virtual std::chrono::milliseconds timeout() const noexcept = 0;
  [[nodiscard]] virtual EtcdClientCounters counters() const = 0;
};

}  // namespace flurry::internal

// Internal: the etcd node registry's only way to talk to etcd: a client of etcd's own gRPC API
// (etcdserverpb's KV, Lease, Watch and Auth services, code generated from the protocol
// definitions Debian ships) with endpoint failover, the auth token and deadlines. Not public API.
//
// gRPC lives in the module flurry_etcd.so (etcd_module/), loaded with dlopen() by open(), so that
// a process that does not use the etcd registry maps no gRPC; the client here holds one channel
// per endpoint in it and does the failover, the authentication and the streams' threads.
//
// Endpoints: a unary call (Range, Txn, LeaseGrant, LeaseRevoke, LeaseTimeToLive, Authenticate)
// goes to the endpoint that answered last and, when it fails with UNAVAILABLE, DEADLINE_EXCEEDED
// or etcd's "no leader" / "leader changed" / "request timed out", to the next one, each endpoint
// once. Every attempt has one deadline (`timeout`), so a member that hangs costs at most `timeout`
// before the next one is tried. Streams (LeaseKeepAlive, Watch) are opened only on an endpoint
// that connects within `timeout`, and HTTP/2 keepalive pings end a stream whose member stops
// answering: after max(timeout, 5 s) without traffic a ping goes out, and the stream breaks when
// its answer takes longer than `timeout` (5 s: etcd's default --grpc-keepalive-min-time, below
// which etcd closes a connection for pinging too often).
//
// Keep-alive: ONE LeaseKeepAlive stream per client, opened on first use; a reader thread hands
// each answer to the callers waiting for that lease; writes are serialized. A broken stream is
// reopened on the next endpoint by the next call. Watches: one Watch stream per watch (and per
// history read), each with its own reader thread, carrying the metadata "hasleader: true".
//
// TLS (https:// endpoints): gRPC's SSL credentials with the CA file and, when given, the client
// certificate and its key. A certificate may carry a Common Name: with etcd's --client-cert-auth
// and authentication enabled, a client that sends no token is the user its certificate names.
//
// Authentication (EtcdAuth with a user): the first call authenticates (Auth/Authenticate) and
// every call carries the token as the gRPC metadata "token". When etcd answers that the token is
// invalid (a simple token expired: etcd's --auth-token-ttl, 300 s by default, counts from its last
// use) or stale ("revision of auth store is old"), the client authenticates again, once, and
// repeats the call once; a call etcd refuses that way is not applied, so repeating it is safe. An
// authentication may take up to max(timeout, 5 s): etcd checks passwords with bcrypt. An EtcdAuth
// with an empty user sends no token; its `needs` still names what the identity (the client
// certificate's Common Name) must be granted in PERMISSION_DENIED messages. The password and the
// token never appear in a message.
//
// Errors (Status): UNAVAILABLE / IO when no endpoint answered (each endpoint's failure in the
// message; retryable); NOT_FOUND when etcd says the lease is not found; UNAVAILABLE when etcd is
// out of space or rate-limits (RESOURCE_EXHAUSTED); UNAUTHENTICATED when etcd refuses the user or
// its password, requires a user and none is set, or refuses a fresh token; PERMISSION_DENIED
// naming the user (or the certificate's Common Name) and what it needs; FAILED_PRECONDITION when
// a user is set and etcd's authentication is disabled, or when the etcd module cannot be loaded;
// OUT_OF_RANGE when a revision asked for was compacted; INTERNAL for any other error etcd answers
// (the message names the endpoint and the call).
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

#include "etcd_types.h"
#include "flurry/clock.h"
#include "flurry/host_port.h"
#include "flurry/mutex.h"
#include "flurry/registry.h"
#include "flurry/status.h"

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
  // How the end is confirmed: a Range of the key at `until` first gives its last put up to then,
  // and the read ends at that put's event (or any event at or past `until`). etcd 3.4 answers a
  // WatchProgressRequest at once, even while the watcher still catches up, so for a key absent at
  // `until` (never written, or deleted) a progress answer past `until` ends the read only after
  // 300 ms without events (etcd sends a catching-up watcher its backlog every 100 ms). After a
  // compaction the version current at the compaction revision is read with a Range there and
  // reported with compacted_below. OUT_OF_RANGE when `until` itself is compacted. `until` must
  // not be beyond etcd's current revision.
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

// Node IDs: leases with horizon hand-off (docs/design.md, "Leases, hand-off and fencing").
//
// A NodeRegistry hands each process a node ID under a lease, and keeps the node's durable
// horizon with it. The horizon travels with the node ID: the next owner of node 7 inherits the
// last horizon node 7's previous owner saved and starts above it. The registry accepts a
// horizon only from the current owner (compare-and-set on the fencing token), so an old owner
// cut off from the registry can never issue above what its successor inherited: uniqueness
// holds whatever the clocks and the network do. The lease TTL only decides how soon a dead
// node's ID can be reused.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/horizon.h"
#include "flurry/host_port.h"
#include "flurry/layout.h"
#include "flurry/status.h"

namespace flurry {

struct Lease {
  std::uint64_t node = 0;
  // Fencing token: strictly increases every time this node ID is claimed.
  std::uint64_t token = 0;
  std::string owner;
  std::chrono::milliseconds ttl{0};
};

// One node ID as the registry sees it (`flurry nodes list`).
struct NodeInfo {
  std::uint64_t node = 0;
  // The current owner ("host:pid" as the claimant named itself), or the last one when the node ID
  // is free (empty if the backend does not keep it).
  std::string owner;
  // The fencing token of the current or last lease.
  std::uint64_t token = 0;
  // A lease holds the node ID now (by the registry's clock).
  bool live = false;
  // When the live lease runs out unless renewed, by the registry's clock (Unix milliseconds);
  // absent when the node ID is free or its lease never expires (static).
  std::optional<std::int64_t> expires_unix_ms;
  // The node's saved horizon record, if any was saved.
  std::optional<HorizonRecord> horizon;
  // Non-empty when a horizon is stored but cannot be read: why (the listing still shows the node).
  std::string horizon_error;
};

struct RegistryListing {
  // The layout the registry belongs to (canonical text); empty when none was recorded yet.
  std::string layout;
  // Every node ID the registry has a record of, in node order.
  std::vector<NodeInfo> nodes;
};

// One node ID of a listing as an operator reads it (`flurry nodes list`, GET /v1/nodes): the
// one place the expiry and horizon of a row are interpreted.
struct NodeRowView {
  // When the live lease runs out (absent: free, or never expires) and how long that is from
  // `now_unix_ms`, at least 0.
  std::optional<std::int64_t> lease_expires_unix_ms;
  std::optional<std::int64_t> lease_remaining_ms;
  // The horizon of the record's current generation, when a record is stored: its ticks (-1:
  // never used) and their time in the registry's layout (absent: unused, or no layout to read
  // the ticks with).
  struct Horizon {
    std::uint64_t generation = 0;
    std::int64_t ticks = -1;
    std::optional<TimePoint> time;
  };
  std::optional<Horizon> horizon;
};

// `node` read with the registry's own layout (null when its text does not parse) at
// `now_unix_ms`.
[[nodiscard]] NodeRowView view_node(const NodeInfo& node, const Layout* layout,
                                    std::int64_t now_unix_ms);

struct Claim {
  Lease lease;
  // The node's last saved horizon record, if the node ID was ever used.
  std::optional<HorizonRecord> inherited;
};

// Thread-safe: every method may be called from any thread.
//
// A registry belongs to one layout (two layouts over the same node IDs collide even when their
// node IDs differ): it records the layout it was opened with first and refuses any other
// (FAILED_PRECONDITION / STATE_MISMATCH naming both).
//
// Errors: UNAVAILABLE (retryable: the database is busy or unreachable; reason IO or none),
// RESOURCE_EXHAUSTED / NO_FREE_NODE (no free node ID; the static registry: its node is in use),
// DATA_LOSS / CORRUPT (an unreadable row or horizon), FAILED_PRECONDITION with reason LEASE_LOST
// (the lease is no longer this owner's: another process claimed the node ID since) or
// REGISTRY_REGRESSED (the registry went backwards: the node's row is gone, or its fencing token is
// below this lease's, as after a restore from a backup).
class NodeRegistry {
 public:
  virtual ~NodeRegistry() = default;

  // Claims the lowest node ID below node_count that is free: never claimed, released, or
  // whose lease has expired (etcd: a claim that loses races to others claiming at the same time
  // picks at random among more and more of the lowest free ones). `owner` is a human-readable
  // name for logs (host:pid).
  [[nodiscard]] virtual Result<Claim> claim(std::string_view owner, std::uint64_t node_count) = 0;

  // Extends the lease by its TTL from now. Succeeds as long as nobody claimed the node ID since,
  // even after the lease expired (then it is simply taken back).
  [[nodiscard]] virtual Status renew(const Lease& lease) = 0;

  // Saves the node's horizon record, durable on return; only for the current owner.
  [[nodiscard]] virtual Status save_horizon(const Lease& lease, const HorizonRecord& record) = 0;

  // Frees the node ID at once. The horizon stays with it for the next owner.
  [[nodiscard]] virtual Status release(const Lease& lease) = 0;

  // Operators (`flurry nodes`): what the registry holds, read without changing anything. A stored
  // layout other than the one this handle was opened with is listed, not refused.
  [[nodiscard]] virtual Result<RegistryListing> list() = 0;

  // Operators: frees node ID `node` for the next claim; its horizon stays with it. While a live
  // lease holds the node, refuses with FAILED_PRECONDITION / LEASE_LIVE unless `force`. A forced
  // release fences the holder out: its next renew and horizon write fail with LEASE_LOST, so it
  // stops issuing once its own lease runs out by its clock, while the next owner starts above the
  // horizon the registry last accepted. NOT_FOUND when the registry has no record of `node`.
  [[nodiscard]] virtual Status release_node(std::uint64_t node, bool force) = 0;

  // For logs: the backend and where it keeps its data.
  [[nodiscard]] virtual std::string describe() const = 0;

  // A subscription to news of one lease (watch_lease); destroying it ends the subscription.
  class LeaseWatch {
   public:
    virtual ~LeaseWatch() = default;
  };
  // Called at most once, on a thread of the registry's (never from within watch_lease itself),
  // with FAILED_PRECONDITION / LEASE_LOST or
  // REGISTRY_REGRESSED (is_lease_gone() holds) when the registry learns that the lease is gone.
  // Must not block and must not call into the registry.
  using LeaseLostCallback = std::function<void(const Status& why)>;
  // Tells `on_lost` as soon as the registry learns that `lease` is gone (etcd: its node key was
  // deleted or rewritten, or its etcd lease revoked, seen by a watch within one round trip)
  // instead of at the next renew(). Once the returned handle's destructor has returned, the
  // callback is not running and never runs again; the handle must be destroyed before the
  // registry. Registries that cannot watch return a null handle (the default): renew() is then
  // the only way they tell. An error (the watch could not be set up) leaves renew() to tell.
  [[nodiscard]] virtual Result<std::unique_ptr<LeaseWatch>> watch_lease(const Lease& lease,
                                                                        LeaseLostCallback on_lost) {
    (void)lease;
    (void)on_lost;
    return std::unique_ptr<LeaseWatch>();
  }
};

// True when `status` says the lease is gone for good (LEASE_LOST or REGISTRY_REGRESSED under
// FAILED_PRECONDITION): renewing again cannot help; claim a node ID again.
[[nodiscard]] bool is_lease_gone(const Status& status) noexcept;

class HorizonFloor;

// The HorizonStore a generator uses under a lease: load() returns the inherited record (or
// NOT_FOUND), save() goes to the registry with the lease's fencing token. With a floor, every
// record is remembered there before the registry write, and confirmed to it after.
class LeasedHorizonStore final : public HorizonStore {
 public:
  LeasedHorizonStore(NodeRegistry& registry, Claim claim, HorizonFloor* floor = nullptr)
      : registry_(registry), claim_(std::move(claim)), floor_(floor) {}

  [[nodiscard]] Result<HorizonRecord> load() override;
  [[nodiscard]] Status save(const HorizonRecord& record) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] const Lease& lease() const noexcept { return claim_.lease; }

 private:
  NodeRegistry& registry_;
  Claim claim_;
  HorizonFloor* floor_;
};

// The embedded default: a SQLite database file holding one row per node ID (WAL,
// synchronous=FULL, BEGIN IMMEDIATE for claims, a busy timeout). Lease times come from `clock`.
// Several processes on one host may share the file. `path`'s directory must exist. `layout` is
// the canonical layout text (Layout::to_string()) the registry belongs to.
[[nodiscard]] Result<std::unique_ptr<NodeRegistry>> open_sqlite_registry(
    const std::string& path, std::chrono::milliseconds ttl, Clock& clock, std::string_view layout);

// A fixed node ID (from configuration or a StatefulSet pod ordinal), its horizon in a local
// state file (FileHorizonStore::path_for(state_dir, node)). claim() takes an exclusive lock on
// the state file, so two processes on one host cannot run as the same node; the lock is held
// until release() or the registry's destruction. Leases never expire. The fencing token is kept
// durably beside the state file (<state file>.token), so it grows across processes too. The state
// directory belongs to one layout, recorded in DIR/layout on first use.
[[nodiscard]] Result<std::unique_ptr<NodeRegistry>> open_static_registry(
    const std::string& state_dir, std::uint64_t node, std::string_view layout);

// One etcd member's client address, typed once where its text enters (parse_etcd_endpoint).
struct EtcdEndpoint {
  HostPort address;
  bool tls = false;  // https://: TLS (EtcdTlsFiles); otherwise plain HTTP
  // "https://HOST:PORT" with TLS, "HOST:PORT" without.
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const EtcdEndpoint&, const EtcdEndpoint&) = default;
};

// "HOST:PORT", "http://HOST:PORT" (plain HTTP) or "https://HOST:PORT" (TLS), HOST:PORT as
// parse_host_port(..., HostPortUse::kConnect) takes it (port 1-65535, [IPV6]:PORT). A path, a
// query or another scheme is refused: INVALID_ARGUMENT naming the text.
[[nodiscard]] Result<EtcdEndpoint> parse_etcd_endpoint(std::string_view text);

// The files of TLS to etcd (https:// endpoints); unset: not given. Given with plain endpoints
// they are refused (never a silent fall back to plain HTTP).
struct EtcdTlsFiles {
  std::optional<std::filesystem::path> ca_file;    // PEM bundle; unset: the system's CAs
  std::optional<std::filesystem::path> cert_file;  // client certificate (PEM); with key_file
  std::optional<std::filesystem::path> key_file;   // its private key (PEM); with cert_file
  [[nodiscard]] bool any() const noexcept { return ca_file || cert_file || key_file; }
  friend bool operator==(const EtcdTlsFiles&, const EtcdTlsFiles&) = default;
};

struct EtcdRegistryOptions {
  // The cluster's members (parse_etcd_endpoint): "10.0.0.1:2379", "[fd00::1]:2379",
  // "https://etcd-0.example:2379"; at least one, all https:// or none. A request goes to the
  // member that answered last, and to the next one when a member is unreachable, times out or has
  // no leader.
  std::vector<std::string> endpoints;
  // TLS to https:// endpoints: the CA that verifies the members (their name or IP must match the
  // endpoint's host) and the client certificate etcd's --client-cert-auth asks for. With etcd's
  // authentication enabled and no `user`, etcd takes the certificate's Common Name as the user
  // (a certificate without one then gets UNAUTHENTICATED); with a `user`, the user's token is the
  // identity and the certificate only the transport's.
  EtcdTlsFiles tls;
  // etcd authentication (etcd's auth API, `etcdctl auth enable`): the user, and its password
  // (never printed, never in a message). Empty user: none. A token from etcd's Authenticate call
  // is sent with every request (gRPC metadata); when etcd says it is invalid (a simple token
  // expires after etcd's --auth-token-ttl without use) the client authenticates again once and
  // repeats the request.
  std::string user;
  std::string password;
  // The registry's name within the etcd cluster: its keys live under /flurry/<cluster>/. 1-64 of
  // [A-Za-z0-9._-]. Processes sharing a cluster name share node IDs.
  std::string cluster = "default";
  // How long a lease lives without renewal. etcd leases have whole seconds: the etcd lease gets
  // this rounded up, at least 2 s (etcd's minimum), so it never runs out before this.
  std::chrono::milliseconds ttl{10000};
  // How long one request to one member may take in all (connecting, sending, the whole answer)
  // before the next member is tried. 0: min(ttl / 3, 2 s).
  std::chrono::milliseconds request_timeout{0};
  // Which of the cluster's registries: empty for the node IDs, "tso" for the timestamp oracle's
  // lease (open_registry's RegistryScope), whose keys live under /flurry/<cluster>/tso/.
  std::string scope;
};

// Node IDs leased from an etcd cluster (v3.4 or later, through its gRPC API: the module
// flurry_etcd.so, loaded when the registry opens), for nodes on
// many hosts. Keys under /flurry/<cluster>: `layout` (the layout text, recorded by the first
// claim), `nodes/<id>` (bound to an etcd lease: the node ID is held while the lease lives; its
// create_revision is the fencing token), `horizon/<id>` (the horizon record, kept when the lease
// goes) and `last/<id>` (the last claim's owner; its mod_revision is the last token). Lease times
// are etcd's: an expired lease is gone within about a second of its TTL (the leader checks every
// 500 ms), and renew() cannot revive it (its node key went with it: LEASE_LOST). list() gives a
// live lease's expiry as `clock`'s now plus the whole seconds etcd's leader says are left (to
// about a second when the clocks agree); a free node ID's owner and token are its last
// claim's. Connects to nothing until the first call; INVALID_ARGUMENT for bad options or TLS
// files, FAILED_PRECONDITION when flurry_etcd.so cannot be loaded. `layout`
// is the canonical layout text (Layout::to_string()) the registry belongs to.
//
// Errors beyond NodeRegistry's: UNAVAILABLE / IO naming every member tried when none answered
// within the request timeout (retryable; a failed TLS handshake says why as gRPC reports it:
// certificate verify failed, no client certificate configured, ...); INTERNAL for a request etcd
// refuses otherwise (the message names the member and the call); ABORTED from release_node()
// when the node keeps changing under it. With authentication: UNAUTHENTICATED when etcd refuses
// the user or password ("etcd refused user 'x': authentication failed"), when etcd requires a user
// and none is set (nor a client certificate with a Common Name), or when a fresh token is refused
// again; PERMISSION_DENIED naming the user (or the certificate's Common Name) and the key prefix
// when the user's roles do not grant readwrite on /flurry/<cluster>/; FAILED_
// PRECONDITION when a user is set and etcd has authentication disabled. None of these is retried
// on another member.
//
// `clock` (wall time) dates a live lease's expiry in list(); it must outlive the registry.
[[nodiscard]] Result<std::unique_ptr<NodeRegistry>> open_etcd_registry(
    const EtcdRegistryOptions& options, std::string_view layout, Clock& clock);

// PostgreSQL, for processes on many hosts sharing one database: a row per node ID in table
// flurry_nodes (owner, fencing token, expires_at, horizon) and the layout in flurry_meta, both
// created on first open when missing (the tables live in the connection's search_path). Lease
// times are the database server's clock (now()), never the host's. `url` is a libpq connection
// string: a URL (postgresql://user@host:5432/dbname?sslmode=require) or key=value pairs; libpq's
// environment variables (PGPASSWORD, PGSSLMODE, ...) and ~/.pgpass apply as usual. `layout` is
// the canonical layout text the registry belongs to. `clock` measures the operations' deadlines
// (SteadyClock::instance() in production); it must outlive the registry.
//
// Opening connects (UNAVAILABLE when the server cannot be reached), creates the tables and checks
// the layout. The registry keeps one connection (application_name "flurry", and with several hosts
// the one that takes writes, unless the string or libpq's environment says otherwise); its
// operations take turns on it. Every operation is bounded by min(ttl / 3, 2 s), the connection
// included, on the client and on the server (statement, lock and idle-in-transaction timeouts), so
// a database that hangs costs an UNAVAILABLE, never a renewal blocked past its lease; a broken
// connection is made again by the next operation. Connection failures, timeouts, lock and
// serialization conflicts and a server that does not take writes are UNAVAILABLE / IO (retryable);
// a role without the privileges the tables need is PERMISSION_DENIED; other SQL errors are
// INTERNAL with PostgreSQL's message. Messages and describe() name the server with any password
// replaced by "***". INVALID_ARGUMENT for a malformed `url`, a TTL that is not positive or an
// empty layout.
[[nodiscard]] Result<std::unique_ptr<NodeRegistry>> open_postgres_registry(
    const std::string& url, std::chrono::milliseconds ttl, std::string_view layout,
    MonotonicClock& clock);

// The trailing ordinal of a StatefulSet pod name: "flurry-7" -> 7. INVALID_ARGUMENT if the name
// does not end in "-<digits>".
[[nodiscard]] Result<std::uint64_t> node_from_hostname(std::string_view hostname);

}  // namespace flurry

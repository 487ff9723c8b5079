// The etcd node registry: node IDs leased from an etcd cluster, for nodes on many hosts
// (docs/design.md, "The registries").
//
// Keys under /flurry/<cluster>:
//   layout        the canonical layout text; created by the first claim only if absent
//   nodes/<id>    {"owner": "..."}, bound to the holder's etcd lease: the node ID is held exactly
//                 while the key exists. Its create_revision is the fencing token: etcd's revision
//                 only grows, so every claim of a node ID gets a larger one.
//   horizon/<id>  format_horizon_record() text, unleased: it stays for the next owner
//   last/<id>     {"owner": "..."} of the last claim, unleased, written by the claim's txn: its
//                 mod_revision is the last token (the listing's owner and token of a free node ID)
// and, outside every cluster's prefix,
//   /flurry-cluster-names/<name in lower case>   the cluster's name as first used: names compare
//                 exactly ("prod" and "Prod" are two clusters), so a name that differs from an
//                 existing one only by case is refused rather than run as a second cluster that
//                 hands out the same node IDs again.
//
// Every decision is one etcd txn whose compares carry the fencing: a claim creates nodes/<id>
// only if it does not exist and the layout key holds this layout; a horizon is written only while
// nodes/<id> has this lease's create_revision and etcd lease. etcd's lease expiry deletes the node
// key, so an expired lease cannot be renewed back (LEASE_LOST), unlike SQLite's.
//
// Within the process a mutex guards only the map of this handle's leases; requests run
// concurrently (gRPC multiplexes them on the endpoint's channel, see etcd_client.h), so a slow
// horizon write never holds up a renewal.
//
// Renewals go over the client's one LeaseKeepAlive stream. A watch on each held node key and
// horizon key (watch_lease) tells the lease keeper at once when the node key is deleted (its etcd
// lease revoked or expired, the node released by an operator) or rewritten, or when the horizon
// key is put back below what this lease saved last; while that watch runs, a renewal is one
// keep-alive message and nothing else. A claim takes the highest horizon among the current version
// of the horizon key and the kHistoryVersions before it that etcd retains (raise_to_history), so
// a value put back by hand and never repaired (its holder died first) cannot lead the next owner
// below IDs already issued.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/numbers.h"
#include "core/quote.h"
#include "etcd_client.h"
#include "flurry/mutex.h"
#include "flurry/registry.h"
#include "stored_horizon.h"

namespace flurry {
namespace {

using internal::EtcdClient;
using internal::EtcdCompare;
using internal::EtcdKeyValue;
using internal::EtcdOp;
using internal::EtcdRange;
using internal::EtcdTxn;
using internal::EtcdTxnResult;
using internal::quote;
using std::chrono::milliseconds;

// etcd's smallest lease TTL with its default election timeout.
constexpr std::int64_t kMinTtlSeconds = 2;
constexpr milliseconds kMaxRequestTimeout{2000};
// How many versions of a horizon key before the current one a claim reads (raise_to_history).
constexpr int kHistoryVersions = 8;
// A claim that lost this many races picks among the 2^kMaxPickBits lowest free node IDs at most.
constexpr int kMaxPickBits = 10;
// Attempts of a forced release_node whose key changes under it.
constexpr int kReleaseAttempts = 3;

// The owner recorded in a node key's value ({"owner": "..."}); the raw value if it is not that.
std::string owner_of(const std::string& value) {
  const nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    auto it = j.find("owner");
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return value;
}

// The node ID of a key's last segment, written as std::to_string writes it; none otherwise.
std::optional<std::uint64_t> node_of(std::string_view text) {
  const internal::ParsedUint n = internal::parse_uint(text);
  if (!n.ok() || std::to_string(n.value) != text) return std::nullopt;
  return n.value;
}

const EtcdKeyValue* first(const EtcdRange& range) {
  return range.kvs.empty() ? nullptr : &range.kvs.front();
}

// The key under which a cluster name is reserved, in any letter case (see the top of this file).
std::string cluster_name_key(std::string_view cluster) {
  std::string key = "/flurry-cluster-names/";
  for (char c : cluster) key += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return key;
}

// This handle's view of a lease it holds: the token and the etcd lease the node key is bound to,
// and the horizon it saved last under it.
struct Held {
  Held() = default;
  Held(std::uint64_t token, std::int64_t lease_id) : token(token), lease_id(lease_id) {}

  std::uint64_t token = 0;
  std::int64_t lease_id = 0;
  // The record saved last under this lease and the horizon key's mod_revision that save gave it
  // (0: nothing saved yet). The next save is a compare-and-set on that revision, so a horizon put
  // back by anyone else (etcdctl, a restored snapshot) is noticed.
  std::int64_t horizon_revision = 0;
  HorizonRecord saved;
  // A watch of the node's keys runs (watch_lease): renewals need not read the node key.
  bool watched = false;
  // The text of the save in progress (or the last one): the watch knows its own puts by it.
  std::string writing;
};

class EtcdRegistry final : public NodeRegistry {
 public:
  EtcdRegistry(std::unique_ptr<EtcdClient> client, const std::string& cluster,
               const std::string& scope, milliseconds ttl, std::string layout, Clock& clock)
      : client_(std::move(client)),
        clock_(clock),
        cluster_(cluster),
        prefix_("/flurry/" + cluster + (scope.empty() ? "" : "/" + scope)),
        layout_(std::move(layout)),
        ttl_(ttl),
        ttl_seconds_(std::max<std::int64_t>(kMinTtlSeconds, (ttl.count() + 999) / 1000)) {}

  Result<Claim> claim(std::string_view owner, std::uint64_t node_count) override;
  Status renew(const Lease& lease) override;
  Status save_horizon(const Lease& lease, const HorizonRecord& record) override;
  Status release(const Lease& lease) override;
  Result<RegistryListing> list() override;
  Status release_node(std::uint64_t node, bool force) override;
  // "etcd:H:P,H:P/flurry/NAME", or "etcd:https://H:P/flurry/NAME as user 'U'".
  std::string describe() const override {
    return "etcd:" + client_->describe() + prefix_ +
           (client_->user().empty() ? "" : " as user " + quote(client_->user()));
  }
  Result<std::unique_ptr<LeaseWatch>> watch_lease(const Lease& lease,
                                                  LeaseLostCallback on_lost) override;

 private:
  [[nodiscard]] std::string where() const { return "etcd registry " + describe(); }
  [[nodiscard]] std::string key(std::string_view kind, std::uint64_t node) const {
    return prefix_ + "/" + std::string(kind) + "/" + std::to_string(node);
  }
  [[nodiscard]] std::string node_key(std::uint64_t node) const { return key("nodes", node); }
  [[nodiscard]] std::string horizon_key(std::uint64_t node) const { return key("horizon", node); }
  [[nodiscard]] std::string last_key(std::uint64_t node) const { return key("last", node); }
  [[nodiscard]] std::string layout_key() const { return prefix_ + "/layout"; }

  // Records layout_ as the registry's layout if it has none yet; STATE_MISMATCH if it has another.
  // Reserves the cluster name first (reserve_cluster_name).
  [[nodiscard]] Status record_layout();
  // Reserves cluster_ under its lower-case form; STATE_MISMATCH when a name that differs from it
  // only by letter case was there first (reserved, or in use by keys of a flurry older than the
  // reservation).
  [[nodiscard]] Status reserve_cluster_name();
  [[nodiscard]] Status case_twin(std::string_view theirs) const;
  // The lease's entry in held_, or nullopt when this handle does not know it.
  [[nodiscard]] std::optional<Held> held(const Lease& lease);
  [[nodiscard]] Status other_layout(const std::string& theirs) const;
  // claim() once the lease is granted; the caller revokes the lease if this fails.
  [[nodiscard]] Result<Claim> claim_under(std::string_view owner, std::uint64_t node_count,
                                          std::int64_t lease_id);
  // The horizon the previous owner of `node` left (`stored`: the range of its horizon key),
  // checked to be readable and its node's.
  [[nodiscard]] Result<std::optional<HorizonRecord>> inherited_horizon(
      std::uint64_t node, const EtcdRange& stored) const;
  // The etcd lease `lease`'s node key is bound to: remembered from the claim or, for a lease this
  // handle did not claim, read from the key (FAILED_PRECONDITION when it is no longer that
  // lease's).
  [[nodiscard]] Result<std::int64_t> lease_id_of(const Lease& lease);
  void forget(const Lease& lease);
  // The error for `lease` given what its node key now holds (`stored`, a range of it): LEASE_LOST
  // saying what became of the node, or REGISTRY_REGRESSED for a token below the lease's. `note`
  // says what else is known ("its etcd lease expired").
  [[nodiscard]] Status lost(const Lease& lease, std::optional<std::int64_t> lease_id,
                            std::string_view what, const EtcdRange& stored,
                            std::string_view note = {}) const;
  // lost() after reading the node key; LEASE_LOST with `note` if it cannot be read.
  [[nodiscard]] Status lost_after_reading(const Lease& lease, std::optional<std::int64_t> lease_id,
                                          std::string_view what, std::string_view note) const;

  class KeyWatch;
  // What the watch of `lease` makes of `events` on its node key or horizon key: the loss to tell
  // the keeper, if any.
  [[nodiscard]] std::optional<Status> judge(const Lease& lease,
                                            const std::vector<internal::EtcdEvent>& events);
  // The watch of `lease` ended for good (`why`): renewals read the node key again.
  void unwatched(const Lease& lease, const Status& why);
  // Raises `inherited` (from `current`, the horizon key as the claim at `revision` read it) to the
  // highest of the key's earlier versions that etcd retains: the kHistoryVersions before
  // `current`, read one by one (a point read each); with no current version, for a node ID
  // `claimed_before`, every retained version (a watch over the history, which costs etcd a scan of
  // every revision since the oldest retained one: only after a horizon key was deleted by hand).
  [[nodiscard]] Status raise_to_history(std::uint64_t node, const EtcdKeyValue* current,
                                        bool claimed_before, std::int64_t revision,
                                        std::optional<HorizonRecord>& inherited) const;

  const std::unique_ptr<EtcdClient> client_;
  // Wall time, for a lease's expiry (list()).
  Clock& clock_;
  const std::string cluster_;
  const std::string prefix_;
  const std::string layout_;
  const milliseconds ttl_;
  const std::int64_t ttl_seconds_;
  // Set once the layout key is known to hold layout_ (claims compare it in their txn anyway).
  std::atomic<bool> layout_recorded_{false};
  Mutex mu_;
  std::map<std::uint64_t, Held> held_ FLURRY_GUARDED_BY(mu_);
};

Status EtcdRegistry::other_layout(const std::string& theirs) const {
  return Status(Reason::kStateMismatch,
                where() + " belongs to layout \"" + theirs + "\"; this process uses layout \"" +
                    layout_ +
                    "\". IDs of two layouts over one registry collide even when their node IDs "
                    "differ: give the other layout its own cluster name");
}

Status EtcdRegistry::case_twin(std::string_view theirs) const {
  return Status(Reason::kStateMismatch,
                "the cluster name " + quote(cluster_) + " differs only by letter case from " +
                    quote(theirs) + ", which is already in use in etcd " + client_->describe() +
                    ". Cluster names compare exactly, so these would be two clusters handing out "
                    "the same node IDs: use " +
                    quote(theirs) +
                    " to join that cluster, or a name that differs by more than case");
}

Status EtcdRegistry::reserve_cluster_name() {
  const std::string name_key = cluster_name_key(cluster_);
  EtcdTxn txn;
  txn.compare = {EtcdCompare::create_revision(name_key, 0)};
  txn.success = {EtcdOp::put(name_key, cluster_)};
  txn.failure = {EtcdOp::range(name_key)};
  Result<EtcdTxnResult> r = client_->txn(txn);
  if (!r.ok()) return r.status().with_prefix(where() + ": cannot reserve the cluster name");
  if (!r->succeeded) {
    const EtcdKeyValue* stored = first(r->responses[0].range);
    if (stored != nullptr && stored->value != cluster_) return case_twin(stored->value);
    return OkStatus();  // reserved by this name (or deleted meanwhile: the next start reserves it)
  }
  // The first reservation of this name: a case twin may be in use by a flurry that predates
  // reservations. Their keys name it; this listing runs once per name, ever.
  const std::string all = "/flurry/";
  Result<EtcdRange> keys = client_->range(all, internal::etcd_prefix_end(all), true);
  if (!keys.ok() && keys.status().code() == StatusCode::kPermissionDenied) {
    // A user whose role covers only this cluster's keys (etcd authentication) may not list the
    // others'. The listing looks for a twin older than reservations, and such a flurry cannot
    // talk to an etcd with authentication at all, so none can be running beside this one.
    return OkStatus();
  }
  if (!keys.ok()) return keys.status().with_prefix(where() + ": cannot list the cluster names");
  for (const EtcdKeyValue& kv : keys->kvs) {
    const std::string_view rest = std::string_view(kv.key).substr(all.size());
    const std::string_view theirs = rest.substr(0, rest.find('/'));
    if (theirs != cluster_ && cluster_name_key(theirs) == name_key) {
      // Hand the name back to the cluster that had it first.
      EtcdTxn undo;
      undo.compare = {EtcdCompare::value_equals(name_key, cluster_)};
      undo.success = {EtcdOp::put(name_key, std::string(theirs))};
      (void)client_->txn(undo);
      return case_twin(theirs);
    }
  }
  return OkStatus();
}

Status EtcdRegistry::record_layout() {
  if (layout_recorded_.load(std::memory_order_acquire)) return OkStatus();
  if (Status st = reserve_cluster_name(); !st.ok()) return st;
  EtcdTxn txn;
  txn.compare = {EtcdCompare::create_revision(layout_key(), 0)};
  txn.success = {EtcdOp::put(layout_key(), layout_)};
  txn.failure = {EtcdOp::range(layout_key())};
  Result<EtcdTxnResult> r = client_->txn(txn);
  if (!r.ok()) return r.status().with_prefix(where() + ": cannot record the layout");
  if (!r->succeeded) {
    const EtcdKeyValue* stored = first(r->responses[0].range);
    // Deleted between the compare and the range: the next claim records it again.
    if (stored == nullptr) {
      return Status(StatusCode::kUnavailable,
                    where() + ": the layout key changed meanwhile; retry");
    }
    // Layouts compare by structure: `worker:10` recorded, `node:10` here, is one layout.
    if (!Layout::same_structure(stored->value, layout_)) return other_layout(stored->value);
  }
  layout_recorded_.store(true, std::memory_order_release);
  return OkStatus();
}

Result<std::optional<HorizonRecord>> EtcdRegistry::inherited_horizon(
    std::uint64_t node, const EtcdRange& stored) const {
  const EtcdKeyValue* kv = first(stored);
  return internal::inherited_horizon(
      kv == nullptr ? std::nullopt : std::optional<std::string>(kv->value), node, where());
}

Result<Claim> EtcdRegistry::claim(std::string_view owner, std::uint64_t node_count) {
  if (node_count == 0) return InvalidArgument("node_count must be at least 1");
  if (Status st = record_layout(); !st.ok()) return st;
  Result<internal::EtcdLeaseGrant> grant = client_->grant(ttl_seconds_);
  if (!grant.ok()) return grant.status().with_prefix(where() + ": cannot grant a lease");
  Result<Claim> claim = claim_under(owner, node_count, grant->id);
  // The lease holds nothing, or a node key this claim does not hand out (its horizon is
  // unreadable): revoking it frees that node ID again. If etcd is unreachable, it expires.
  if (!claim.ok()) (void)client_->revoke(grant->id);
  return claim;
}

Result<Claim> EtcdRegistry::claim_under(std::string_view owner, std::uint64_t node_count,
                                        std::int64_t lease_id) {
  const std::string nodes = prefix_ + "/nodes/";
  Result<EtcdRange> keys = client_->range(nodes, internal::etcd_prefix_end(nodes), true);
  if (!keys.ok()) return keys.status().with_prefix(where() + ": cannot list the held node IDs");
  std::set<std::uint64_t> taken;
  for (const EtcdKeyValue& kv : keys->kvs) {
    if (std::optional<std::uint64_t> n = node_of(std::string_view(kv.key).substr(nodes.size()))) {
      taken.insert(*n);
    }
  }
  const std::string value = nlohmann::json{{"owner", owner}}.dump();
  int layout_lost = 0;
  // The layout as the registry spells it (the txn compares text; structures are what must agree).
  std::string recorded_layout = layout_;
  // Uncontended, a claim takes the lowest free node ID. Each race lost to another claimant doubles
  // the number of lowest free node IDs it picks from at random, so that many processes starting
  // at once (a fleet's rollout) spread over the free IDs in a few rounds instead of queueing on
  // the same lowest one, one txn each per process ahead of them.
  std::mt19937_64 pick(std::random_device{}());
  int races = 0;
  for (;;) {
    const std::size_t width = std::size_t{1} << std::min(races, kMaxPickBits);
    std::vector<std::uint64_t> free;
    for (std::uint64_t n = 0; n < node_count && free.size() < width; ++n) {
      if (!taken.contains(n)) free.push_back(n);
    }
    if (free.empty()) break;
    const std::uint64_t node = free[pick() % free.size()];
    // Take it if it is still free and the layout still ours.
    EtcdTxn txn;
    txn.compare = {EtcdCompare::create_revision(node_key(node), 0),
                   EtcdCompare::value_equals(layout_key(), recorded_layout)};
    // The success branch reads last/<id> before writing it: absent, the node ID was never
    // claimed, so its horizon key has no history to read.
    txn.success = {EtcdOp::range(last_key(node)), EtcdOp::put(node_key(node), value, lease_id),
                   EtcdOp::put(last_key(node), value), EtcdOp::range(horizon_key(node))};
    txn.failure = {EtcdOp::range(node_key(node)), EtcdOp::range(layout_key()),
                   EtcdOp::range(horizon_key(node))};
    Result<EtcdTxnResult> r = client_->txn(txn);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kNotFound) {  // the new lease is gone already
        return Status(StatusCode::kUnavailable,
                      where() + ": the lease granted for the claim expired before it was used (" +
                          r.status().message() + "); retry");
      }
      return r.status().with_prefix(where() + ": cannot claim node " + std::to_string(node));
    }
    std::uint64_t token = 0;
    bool claimed_before = true;
    if (r->succeeded) {
      claimed_before = first(r->responses[0].range) != nullptr;
      token = static_cast<std::uint64_t>(r->revision);  // the node key's create_revision
    } else {
      const EtcdKeyValue* layout = first(r->responses[1].range);
      if (layout == nullptr) {  // deleted by hand: record it again, then try the node again
        if (++layout_lost > 3) {
          return Status(StatusCode::kUnavailable, where() + ": the layout key keeps vanishing");
        }
        layout_recorded_.store(false, std::memory_order_release);
        if (Status st = record_layout(); !st.ok()) return st;
        continue;
      }
      if (layout->value != recorded_layout) {
        if (!Layout::same_structure(layout->value, layout_)) return other_layout(layout->value);
        if (++layout_lost > 3) {
          return Status(StatusCode::kUnavailable, where() + ": the layout key keeps changing");
        }
        recorded_layout = layout->value;  // the same layout spelt otherwise: try again with it
        continue;
      }
      const EtcdKeyValue* held = first(r->responses[0].range);
      if (held == nullptr || held->lease != lease_id) {
        taken.insert(node);  // claimed by another process since the listing
        ++races;
        continue;
      }
      // Ours: an earlier attempt of this txn went through and its answer was lost (the client
      // tried the next endpoint).
      token = static_cast<std::uint64_t>(held->create_revision);
    }
    const EtcdRange& stored = r->responses[r->succeeded ? 3 : 2].range;
    Result<std::optional<HorizonRecord>> inherited = inherited_horizon(node, stored);
    if (!inherited.ok()) return inherited.status();
    if (token == 0) {
      return Status(StatusCode::kInternal,
                    where() + ": the claim of node " + std::to_string(node) + " has no revision");
    }
    if (Status st = raise_to_history(node, first(stored), claimed_before,
                                     static_cast<std::int64_t>(token), *inherited);
        !st.ok()) {
      return st;
    }
    {
      MutexLock lock(mu_);
      held_[node] = Held(token, lease_id);
    }
    Claim claim;
    claim.lease.node = node;
    claim.lease.token = token;
    claim.lease.owner = std::string(owner);
    claim.lease.ttl = ttl_;
    claim.inherited = std::move(inherited).value();
    return claim;
  }
  return Status(Reason::kNoFreeNode,
                "all " + std::to_string(node_count) + " node IDs are leased in " + where() +
                    "; wait for a lease to expire (ttl " + std::to_string(ttl_.count()) +
                    " ms) or use a layout with more node bits");
}

Status EtcdRegistry::lost(const Lease& lease, std::optional<std::int64_t> lease_id,
                          std::string_view what, const EtcdRange& stored,
                          std::string_view note) const {
  const std::string node = "node " + std::to_string(lease.node);
  const std::string ours = std::to_string(lease.token);
  const std::string tail = (note.empty() ? std::string() : "; " + std::string(note)) + " (" +
                           std::string(what) + " in " + where() + ")";
  const auto lease_lost = [&](std::string why) {
    return Status(Reason::kLeaseLost, std::move(why) + tail);
  };
  const EtcdKeyValue* kv = first(stored);
  if (kv == nullptr) {
    return lease_lost(node + " is no longer leased under token " + ours +
                      ": its key is gone (the lease expired or was revoked, or the node ID was "
                      "released)");
  }
  const auto token = static_cast<std::uint64_t>(kv->create_revision);
  if (kv->create_revision > 0 && token > lease.token) {
    return lease_lost(node + " was claimed by another owner " + quote(owner_of(kv->value)) +
                      " (token " + std::to_string(token) + " > " + ours + ")");
  }
  if (token < lease.token) {
    return Status(Reason::kRegistryRegressed,
                  node + " has token " + std::to_string(kv->create_revision) +
                      ", below this lease's " + ours +
                      " (was the etcd cluster restored from a backup?)" + tail);
  }
  if (lease_id && kv->lease != *lease_id) {
    return lease_lost(node + "'s key (token " + ours + ") is bound to etcd lease " +
                      std::to_string(kv->lease) + ", not this lease's " +
                      std::to_string(*lease_id) + " (was it rewritten by hand?)");
  }
  return lease_lost(node + " is no longer held under token " + ours);
}

Status EtcdRegistry::lost_after_reading(const Lease& lease, std::optional<std::int64_t> lease_id,
                                        std::string_view what, std::string_view note) const {
  Result<EtcdRange> stored = client_->range(node_key(lease.node));
  if (stored.ok()) return lost(lease, lease_id, what, *stored, note);
  return Status(Reason::kLeaseLost,
                "node " + std::to_string(lease.node) + " is no longer leased under token " +
                    std::to_string(lease.token) + ": " + std::string(note) +
                    " (what became of the node is unknown: " + stored.status().message() + ") (" +
                    std::string(what) + " in " + where() + ")");
}

Result<std::int64_t> EtcdRegistry::lease_id_of(const Lease& lease) {
  {
    MutexLock lock(mu_);
    auto it = held_.find(lease.node);
    if (it != held_.end() && it->second.token == lease.token) return it->second.lease_id;
  }
  // Claimed through another handle: the node key says which etcd lease holds it.
  Result<EtcdRange> stored = client_->range(node_key(lease.node));
  if (!stored.ok()) return stored.status().with_prefix(where() + ": cannot read the node key");
  const EtcdKeyValue* kv = first(*stored);
  if (kv == nullptr || static_cast<std::uint64_t>(kv->create_revision) != lease.token) {
    return lost(lease, std::nullopt, "look up the lease", *stored);
  }
  MutexLock lock(mu_);
  auto [it, added] = held_.try_emplace(lease.node, Held(lease.token, kv->lease));
  if (!added && it->second.token != lease.token) it->second = Held(lease.token, kv->lease);
  return kv->lease;
}

void EtcdRegistry::forget(const Lease& lease) {
  MutexLock lock(mu_);
  auto it = held_.find(lease.node);
  if (it != held_.end() && it->second.token == lease.token) held_.erase(it);
}

Status EtcdRegistry::renew(const Lease& lease) {
  Result<std::int64_t> lease_id = lease_id_of(lease);
  if (!lease_id.ok()) return lease_id.status();
  Result<std::optional<std::int64_t>> ttl = client_->keep_alive(*lease_id);
  if (!ttl.ok()) {
    return ttl.status().with_prefix(where() + ": cannot renew the lease of node " +
                                    std::to_string(lease.node));
  }
  if (!ttl->has_value()) {
    return lost_after_reading(lease, *lease_id, "renew",
                              "its etcd lease " + std::to_string(*lease_id) +
                                  " expired or was revoked, and the node key went with it");
  }
  // The lease lives. While the node key is watched, the watch tells of its loss; otherwise it must
  // still be this lease's (an operator may have released it).
  if (const std::optional<Held> mine = held(lease); mine && mine->watched) return OkStatus();
  Result<EtcdRange> stored = client_->range(node_key(lease.node));
  if (!stored.ok()) {
    return stored.status().with_prefix(where() + ": renewed the etcd lease of node " +
                                       std::to_string(lease.node) + " but cannot read its key");
  }
  const EtcdKeyValue* kv = first(*stored);
  if (kv != nullptr && static_cast<std::uint64_t>(kv->create_revision) == lease.token &&
      kv->lease == *lease_id) {
    return OkStatus();
  }
  return lost(lease, *lease_id, "renew", *stored);
}

std::optional<Held> EtcdRegistry::held(const Lease& lease) {
  MutexLock lock(mu_);
  auto it = held_.find(lease.node);
  if (it == held_.end() || it->second.token != lease.token) return std::nullopt;
  return it->second;
}

Status EtcdRegistry::save_horizon(const Lease& lease, const HorizonRecord& record) {
  if (record.node != lease.node) {
    return InvalidArgument("a horizon record for node " + std::to_string(record.node) +
                           " cannot be saved under the lease of node " +
                           std::to_string(lease.node));
  }
  Result<std::int64_t> lease_id = lease_id_of(lease);
  if (!lease_id.ok()) return lease_id.status();
  const std::optional<Held> mine = held(lease);
  std::int64_t expected = mine ? mine->horizon_revision : 0;
  // Twice at most: a second attempt follows only a horizon raised by someone else (not behind).
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The fencing compare-and-set: only the holder of the current token and lease writes, and
    // only over the horizon it wrote last.
    EtcdTxn txn;
    txn.compare = {
        EtcdCompare::create_revision(node_key(lease.node), static_cast<std::int64_t>(lease.token)),
        EtcdCompare::lease(node_key(lease.node), *lease_id)};
    if (expected > 0) {
      txn.compare.push_back(EtcdCompare::mod_revision(horizon_key(lease.node), expected));
    }
    const std::string text = format_horizon_record(record);
    {
      MutexLock lock(mu_);
      auto it = held_.find(lease.node);
      if (it != held_.end() && it->second.token == lease.token) it->second.writing = text;
    }
    txn.success = {EtcdOp::put(horizon_key(lease.node), text)};
    txn.failure = {EtcdOp::range(node_key(lease.node)), EtcdOp::range(horizon_key(lease.node))};
    Result<EtcdTxnResult> r = client_->txn(txn);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kNotFound) {
        return lost_after_reading(lease, *lease_id, "save the horizon",
                                  "etcd: " + r.status().message());
      }
      return r.status().with_prefix(where() + ": cannot save the horizon of node " +
                                    std::to_string(lease.node));
    }
    if (r->succeeded) {
      MutexLock lock(mu_);
      auto it = held_.find(lease.node);
      if (it != held_.end() && it->second.token == lease.token) {
        it->second.horizon_revision = r->revision;  // the put's mod_revision
        it->second.saved = record;
      }
      return OkStatus();
    }
    const EtcdKeyValue* node = first(r->responses[0].range);
    if (node == nullptr || static_cast<std::uint64_t>(node->create_revision) != lease.token ||
        node->lease != *lease_id || !mine) {
      return lost(lease, *lease_id, "save the horizon", r->responses[0].range);
    }
    // Still ours, but the horizon key is not what this lease wrote last: someone else wrote it
    // (etcdctl, a restored snapshot). Below the last save is a registry gone backwards.
    const EtcdKeyValue* stored = first(r->responses[1].range);
    const Result<HorizonRecord> theirs =
        stored == nullptr ? Result<HorizonRecord>(Status(StatusCode::kNotFound, "no horizon key"))
                          : parse_horizon_record(stored->value);
    if (Status st = internal::check_not_behind(theirs, mine->saved, lease.token, where());
        !st.ok()) {
      return st;
    }
    expected = stored->mod_revision;  // raised, not lowered: write over it
  }
  return Status(StatusCode::kAborted, where() + ": the horizon of node " +
                                          std::to_string(lease.node) +
                                          " kept changing under this lease; try again");
}

Status EtcdRegistry::release(const Lease& lease) {
  Result<std::int64_t> lease_id = lease_id_of(lease);
  if (!lease_id.ok()) return lease_id.status();
  EtcdTxn txn;
  txn.compare = {
      EtcdCompare::create_revision(node_key(lease.node), static_cast<std::int64_t>(lease.token)),
      EtcdCompare::lease(node_key(lease.node), *lease_id)};
  txn.success = {EtcdOp::remove(node_key(lease.node))};
  txn.failure = {EtcdOp::range(node_key(lease.node))};
  Result<EtcdTxnResult> r = client_->txn(txn);
  if (!r.ok()) {
    return r.status().with_prefix(where() + ": cannot release node " + std::to_string(lease.node));
  }
  forget(lease);
  // The lease holds nothing else; if etcd cannot be reached now, it expires.
  (void)client_->revoke(*lease_id);
  if (r->succeeded) return OkStatus();
  return lost(lease, *lease_id, "release", r->responses[0].range);
}

Result<RegistryListing> EtcdRegistry::list() {
  const std::string dir = prefix_ + "/";
  Result<EtcdRange> all = client_->range(dir, internal::etcd_prefix_end(dir));
  if (!all.ok()) return all.status().with_prefix(where() + ": cannot list the registry");
  RegistryListing listing;
  std::map<std::uint64_t, NodeInfo> nodes;
  std::map<std::uint64_t, std::int64_t> leases;  // live node -> its etcd lease
  const auto info = [&](std::uint64_t node) -> NodeInfo& {
    NodeInfo& n = nodes[node];
    n.node = node;
    return n;
  };
  for (const EtcdKeyValue& kv : all->kvs) {
    const std::string_view rest = std::string_view(kv.key).substr(dir.size());
    if (rest == "layout") {
      listing.layout = kv.value;
      continue;
    }
    const std::size_t slash = rest.find('/');
    if (slash == std::string_view::npos) continue;
    const std::string_view kind = rest.substr(0, slash);
    const std::optional<std::uint64_t> node = node_of(rest.substr(slash + 1));
    if (!node) continue;  // not a key of this registry's
    if (kind == "nodes") {
      NodeInfo& n = info(*node);
      n.owner = owner_of(kv.value);
      n.token = static_cast<std::uint64_t>(kv.create_revision);
      n.live = true;
      leases[*node] = kv.lease;
    } else if (kind == "last") {
      NodeInfo& n = info(*node);
      if (!n.live) {  // "last" sorts before "nodes": a live key overwrites this
        n.owner = owner_of(kv.value);
        n.token = static_cast<std::uint64_t>(kv.mod_revision);
      }
    } else if (kind == "horizon") {
      NodeInfo& n = info(*node);
      Result<std::optional<HorizonRecord>> h =
          inherited_horizon(*node, EtcdRange{0, {kv}, 1, false});
      if (h.ok()) {
        n.horizon = std::move(h).value();
      } else {
        n.horizon_error = h.status().message();
      }
    }
  }
  // Expiry: this host's clock plus the whole seconds the leader says are left, so within about a
  // second of the truth when the clocks agree.
  for (const auto& [node, lease_id] : leases) {
    NodeInfo& n = nodes[node];
    Result<internal::EtcdLeaseTtl> left = client_->time_to_live(lease_id);
    if (!left.ok()) {
      return left.status().with_prefix(where() + ": cannot read the lease of node " +
                                       std::to_string(node));
    }
    if (left->ttl_seconds < 0) {  // expired; etcd is about to delete the key
      n.live = false;
      continue;
    }
    const std::int64_t now =
        std::chrono::duration_cast<milliseconds>(clock_.now().time_since_epoch()).count();
    n.expires_unix_ms = now + left->ttl_seconds * 1000;
  }
  for (auto& [node, n] : nodes) listing.nodes.push_back(std::move(n));
  return listing;
}

Status EtcdRegistry::release_node(std::uint64_t node, bool force) {
  const std::string name = "node " + std::to_string(node);
  for (int attempt = 0; attempt < kReleaseAttempts; ++attempt) {
    EtcdTxn read;  // one consistent view of the node's keys
    read.success = {EtcdOp::range(node_key(node)), EtcdOp::range(horizon_key(node)),
                    EtcdOp::range(last_key(node))};
    Result<EtcdTxnResult> seen = client_->txn(read);
    if (!seen.ok()) return seen.status().with_prefix(where() + ": cannot read " + name);
    const EtcdKeyValue* held = first(seen->responses[0].range);
    if (held == nullptr) {
      if (first(seen->responses[1].range) != nullptr ||
          first(seen->responses[2].range) != nullptr) {
        return OkStatus();  // free already
      }
      return Status(StatusCode::kNotFound, where() + " has no record of " + name);
    }
    const std::string holder = quote(owner_of(held->value));
    if (!force) {
      return Status(Reason::kLeaseLive,
                    name + " is held by a live lease of " + holder + " (token " +
                        std::to_string(held->create_revision) + ") in " + where() +
                        "; release it by force to take it away (the holder is fenced out)");
    }
    // Deleted only if it is still the key seen; then its lease is revoked so that the holder's
    // next renewal fails at once.
    EtcdTxn take;
    take.compare = {EtcdCompare::mod_revision(node_key(node), held->mod_revision)};
    take.success = {EtcdOp::remove(node_key(node))};
    Result<EtcdTxnResult> r = client_->txn(take);
    if (!r.ok()) return r.status().with_prefix(where() + ": cannot release " + name);
    if (!r->succeeded) continue;  // renewed or re-claimed meanwhile: look again
    // The key is gone, so the holder is fenced out already; a lease left behind expires.
    (void)client_->revoke(held->lease);
    return OkStatus();
  }
  return Status(StatusCode::kAborted,
                where() + ": " + name + " kept changing while being released; try again");
}

Status EtcdRegistry::raise_to_history(std::uint64_t node, const EtcdKeyValue* current,
                                      bool claimed_before, std::int64_t revision,
                                      std::optional<HorizonRecord>& inherited) const {
  const auto raise = [&](const std::string& value) {
    // An older version that does not read as this node's record was replaced by one that did (the
    // current one is checked by the caller): it cannot be told apart from garbage written by hand.
    Result<std::optional<HorizonRecord>> old = internal::inherited_horizon(value, node, {});
    if (!old.ok() || !old->has_value()) return;
    if (!inherited) {
      inherited = std::move(*old);
    } else {
      internal::raise_horizons(*inherited, **old);
    }
  };
  const std::string what =
      where() + ": cannot read the history of the horizon of node " + std::to_string(node);
  if (current == nullptr) {
    if (!claimed_before) return OkStatus();  // never used: nothing to inherit
    Result<internal::EtcdHistory> past = client_->history(horizon_key(node), revision);
    if (!past.ok()) return past.status().with_prefix(what);
    for (const EtcdKeyValue& version : past->versions) raise(version.value);
    return OkStatus();
  }
  // A put-back matters only when its holder died before its next save (a live holder's save, a
  // compare-and-set on the revision it wrote last, finds it): so it lies among the last versions,
  // right after the holder's last save, which is above every ID the holder issued.
  std::int64_t before = current->mod_revision - 1;
  for (int i = 0; i < kHistoryVersions && before > 0; ++i) {
    Result<EtcdRange> then = client_->range(horizon_key(node), {}, false, before);
    if (!then.ok() && then.status().code() == StatusCode::kOutOfRange) break;  // compacted
    if (!then.ok()) return then.status().with_prefix(what);
    const EtcdKeyValue* kv = first(*then);
    if (kv == nullptr) break;  // the key did not exist then
    raise(kv->value);
    before = kv->mod_revision - 1;
  }
  return OkStatus();
}

// One lease's watch: its node key and its horizon key, each through the client's watch.
class EtcdRegistry::KeyWatch final : public NodeRegistry::LeaseWatch {
 public:
  KeyWatch(EtcdRegistry& registry, Lease lease, LeaseLostCallback on_lost)
      : registry_(registry), lease_(std::move(lease)), on_lost_(std::move(on_lost)) {}
  ~KeyWatch() override {
    // The client's watches end first: after that no callback below runs.
    node_.reset();
    horizon_.reset();
    registry_.unwatched(lease_, OkStatus());
  }

  [[nodiscard]] Status start() {
    const auto from = static_cast<std::int64_t>(lease_.token);  // events after the claim
    const auto callback = [this](const std::vector<internal::EtcdEvent>& events,
                                 const Status& ended) {
      if (!ended.ok()) {
        registry_.unwatched(lease_, ended);
        return;
      }
      if (std::optional<Status> loss = registry_.judge(lease_, events)) tell(*loss);
    };
    Result<std::unique_ptr<internal::EtcdWatch>> node =
        registry_.client_->watch(registry_.node_key(lease_.node), {}, from, callback);
    if (!node.ok()) return node.status();
    node_ = std::move(node).value();
    Result<std::unique_ptr<internal::EtcdWatch>> horizon =
        registry_.client_->watch(registry_.horizon_key(lease_.node), {}, from, callback);
    if (!horizon.ok()) return horizon.status();
    horizon_ = std::move(horizon).value();
    return OkStatus();
  }

 private:
  void tell(const Status& loss) {
    if (told_.exchange(true)) return;
    on_lost_(loss);
  }

  EtcdRegistry& registry_;
  const Lease lease_;
  const LeaseLostCallback on_lost_;
  std::atomic<bool> told_{false};
  std::unique_ptr<internal::EtcdWatch> node_;
  std::unique_ptr<internal::EtcdWatch> horizon_;
};

Result<std::unique_ptr<NodeRegistry::LeaseWatch>> EtcdRegistry::watch_lease(
    const Lease& lease, LeaseLostCallback on_lost) {
  if (!held(lease)) {  // claimed through another handle: renewals read the node key
    return std::unique_ptr<LeaseWatch>();
  }
  auto watch = std::make_unique<KeyWatch>(*this, lease, std::move(on_lost));
  if (Status st = watch->start(); !st.ok()) {
    return st.with_prefix(where() + ": cannot watch the keys of node " +
                          std::to_string(lease.node));
  }
  MutexLock lock(mu_);
  auto it = held_.find(lease.node);
  if (it != held_.end() && it->second.token == lease.token) it->second.watched = true;
  return std::unique_ptr<LeaseWatch>(std::move(watch));
}

void EtcdRegistry::unwatched(const Lease& lease, const Status& why) {
  (void)why;  // renewals read the node key again and report what they find
  MutexLock lock(mu_);
  auto it = held_.find(lease.node);
  if (it != held_.end() && it->second.token == lease.token) it->second.watched = false;
}

std::optional<Status> EtcdRegistry::judge(const Lease& lease,
                                          const std::vector<internal::EtcdEvent>& events) {
  const std::optional<Held> mine = held(lease);
  if (!mine) return std::nullopt;  // released or forgotten: nothing of this lease's to judge
  const std::string node = node_key(lease.node);
  for (const internal::EtcdEvent& event : events) {
    const EtcdKeyValue& kv = event.kv;
    if (kv.key == node) {
      if (event.type == internal::EtcdEvent::Type::kDelete) {
        return lost(lease, mine->lease_id, "watch the node key", EtcdRange{},
                    "seen by the watch at revision " + std::to_string(kv.mod_revision));
      }
      if (static_cast<std::uint64_t>(kv.create_revision) != lease.token ||
          kv.lease != mine->lease_id) {
        return lost(lease, mine->lease_id, "watch the node key", EtcdRange{0, {kv}, 1, false});
      }
      continue;
    }
    // The horizon key: this lease's own saves, or a value put there by someone else. Nothing
    // saved yet: nothing to go below. A change at or before the last save's revision is history
    // (an own save whose event came late); after it, only the save in progress is this lease's.
    if (mine->horizon_revision == 0 || kv.mod_revision <= mine->horizon_revision) continue;
    if (event.type == internal::EtcdEvent::Type::kDelete) {
      return internal::check_not_behind(Status(StatusCode::kNotFound, "deleted"), mine->saved,
                                        lease.token, where());
    }
    if (kv.value == mine->writing) continue;
    if (Status st = internal::check_not_behind(parse_horizon_record(kv.value), mine->saved,
                                               lease.token, where());
        !st.ok()) {
      return st;
    }
  }
  return std::nullopt;
}

}  // namespace

Result<std::unique_ptr<NodeRegistry>> open_etcd_registry(const EtcdRegistryOptions& options,
                                                         std::string_view layout, Clock& clock) {
  if (options.endpoints.empty()) {
    return InvalidArgument("the etcd registry needs at least one endpoint (HOST:PORT)");
  }
  // This API's endpoints are text (its callers' edge); open_registry hands typed ones to
  // internal::open_etcd_registry instead.
  std::vector<EtcdEndpoint> endpoints;
  for (const std::string& text : options.endpoints) {
    Result<EtcdEndpoint> ep = parse_etcd_endpoint(text);
    if (!ep.ok()) return ep.status().with_prefix("etcd endpoint");
    endpoints.push_back(std::move(ep).value());
  }
  return internal::open_etcd_registry(std::move(endpoints), options, layout, clock);
}

Status internal::check_etcd_transport(const std::vector<EtcdEndpoint>& endpoints,
                                      const EtcdTlsFiles& tls) {
  const bool secure = !endpoints.empty() && endpoints.front().tls;
  for (const EtcdEndpoint& ep : endpoints) {
    if (ep.tls != secure) {
      return InvalidArgument(
          "etcd_endpoints: https:// endpoints mixed with plain ones; a cluster is reached over "
          "TLS or without it, never both (" +
          endpoints.front().to_string() + ", " + ep.to_string() + ")");
    }
  }
  if (!secure && tls.any()) {
    const char* which = tls.ca_file     ? "etcd_ca_file"
                        : tls.cert_file ? "etcd_cert_file"
                                        : "etcd_key_file";
    return InvalidArgument(std::string(which) +
                           ": TLS files are given but the etcd endpoints are plain HTTP; write "
                           "them as https://HOST:PORT (flurry never falls back to plain HTTP)");
  }
  if (tls.cert_file.has_value() != tls.key_file.has_value()) {
    return InvalidArgument(tls.cert_file ? "etcd_cert_file: given without etcd_key_file"
                                         : "etcd_key_file: given without etcd_cert_file");
  }
  return OkStatus();
}

Result<std::unique_ptr<NodeRegistry>> internal::open_etcd_registry(
    std::vector<EtcdEndpoint> endpoints, const EtcdRegistryOptions& options,
    std::string_view layout, Clock& clock) {
  if (endpoints.empty()) {
    return InvalidArgument("the etcd registry needs at least one endpoint (HOST:PORT)");
  }
  if (Status st = check_etcd_transport(endpoints, options.tls); !st.ok()) return st;
  if (options.user.empty() != options.password.empty()) {
    return InvalidArgument(options.user.empty() ? "an etcd password is given without a user"
                                                : "etcd user " + quote(options.user) +
                                                      " is given without a password");
  }
  if (Status st = internal::check_etcd_cluster_name(options.cluster); !st.ok()) return st;
  if (options.ttl <= milliseconds(0)) {
    return InvalidArgument("the lease ttl must be positive, not " +
                           std::to_string(options.ttl.count()) + " ms");
  }
  if (options.request_timeout < milliseconds(0)) {
    return InvalidArgument("the etcd request timeout must not be negative");
  }
  const milliseconds timeout =
      options.request_timeout > milliseconds(0)
          ? options.request_timeout
          : std::max(milliseconds(1), std::min(options.ttl / 3, kMaxRequestTimeout));
  // Without a user (none, or a client certificate's Common Name as etcd's user) no token is
  // sent; `needs` names what the identity must be granted in either case.
  std::optional<EtcdAuth> auth =
      EtcdAuth{options.user, options.password,
               "readwrite on the key prefix /flurry/" + options.cluster + "/ and on the key " +
                   cluster_name_key(options.cluster)};
  // The etcd module is loaded and the TLS files are read here, so that a bad one fails the start
  // naming it (and cause).
  Result<std::unique_ptr<EtcdClient>> client =
      EtcdClient::open(std::move(endpoints), timeout, std::move(auth), options.tls);
  if (!client.ok()) return client.status().with_prefix("etcd");
  return std::unique_ptr<NodeRegistry>(
      std::make_unique<EtcdRegistry>(std::move(client).value(), options.cluster, options.scope,
                                     options.ttl, std::string(layout), clock));
}

}  // namespace flurry

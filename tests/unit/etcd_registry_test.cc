// The etcd registry against a real etcd (tests/testing/etcd_server.h), beyond the conformance
// suite: failover between endpoints and timeouts of hung ones, the key schema and the fencing

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "etcd_server.h"
#include "flurry/layout.h"
#include "flurry/open_registry.h"
#include "flurry/registry.h"
#include "free_port.h"
#include "registry/etcd_client.h"
#include "test_store.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;
using internal::EtcdClient;
using testing::EtcdServer;

constexpr std::string_view kLayout = "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";
constexpr std::chrono::milliseconds kTtl = 2s;
// How long after its TTL etcd may still hold an expired lease's keys.
constexpr std::chrono::milliseconds kExpirySlack = 1500ms;

// A listening socket that never accepts: connections complete (the kernel queues them) and
// requests are never answered, as by a hung member.
class BlackHole {
 public:
  BlackHole() {
    fd_ = testing::listen_loopback(port_);
    if (fd_ < 0) std::abort();
  }
  ~BlackHole() { ::close(fd_); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// A port nothing listens on (bound, then closed).
std::string closed_endpoint() {
  const std::uint16_t port = testing::free_port();
  if (port == 0) std::abort();
  return "127.0.0.1:" + std::to_string(port);
}

class EtcdRegistryTest : public ::testing::Test {
 protected:
  EtcdRegistryTest() {
    static int next = 0;
    cluster_ = "reg-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
  }

  void SetUp() override {
    Result<std::string> ep = EtcdServer::shared().endpoint();
    ASSERT_TRUE(ep.ok()) << ep.status().to_string();
    endpoint_ = *ep;
  }

  EtcdRegistryOptions options(std::vector<std::string> endpoints = {}) const {
    EtcdRegistryOptions o;
    o.endpoints = endpoints.empty() ? std::vector<std::string>{endpoint_} : std::move(endpoints);
    o.cluster = cluster_;
    o.ttl = kTtl;
    return o;
  }

  std::unique_ptr<NodeRegistry> open(const EtcdRegistryOptions& o,
                                     std::string_view layout = kLayout) {
    Result<std::unique_ptr<NodeRegistry>> r = open_etcd_registry(o, layout, SystemClock::coarse());
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  std::unique_ptr<NodeRegistry> open() { return open(options()); }

  std::string key(std::string_view rest) const {
    return "/flurry/" + cluster_ + "/" + std::string(rest);
  }
  // The one key `k` through a plain client; nullopt when absent.
  std::optional<internal::EtcdKeyValue> get(const std::string& k) const {
    Result<internal::EtcdRange> r = EtcdServer::shared().client()->range(k);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok() || r->kvs.empty()) return std::nullopt;
    return r->kvs.front();
  }

  static void expect_lease_lost(const Status& st, std::string_view says) {
    EXPECT_EQ(st.reason(), Reason::kLeaseLost) << st.to_string();
    EXPECT_TRUE(is_lease_gone(st)) << st.to_string();
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  }

  std::string cluster_;
  std::string endpoint_;
};

TEST_F(EtcdRegistryTest, KeysHoldTheLayoutTheOwnerTheLeaseAndTheHorizon) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  EXPECT_EQ(registry->describe(), "etcd:" + endpoint_ + "/flurry/" + cluster_);
  EXPECT_FALSE(get(key("layout")).has_value()) << "open() wrote to etcd";
  Result<Claim> c = registry->claim("host:42", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->lease.ttl, kTtl);

  const auto layout = get(key("layout"));
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(layout->value, kLayout);
  EXPECT_EQ(layout->lease, 0);
  const auto node = get(key("nodes/" + std::to_string(c->lease.node)));
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(static_cast<std::uint64_t>(node->create_revision),
            c->lease.token);  // the fencing token
  EXPECT_NE(node->lease, 0);
  EXPECT_EQ(nlohmann::json::parse(node->value).at("owner"), "host:42");
  const auto last = get(key("last/" + std::to_string(c->lease.node)));
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(static_cast<std::uint64_t>(last->mod_revision), c->lease.token);
  EXPECT_EQ(last->lease, 0);

  // The etcd lease is the TTL rounded up to whole seconds.
  Result<internal::EtcdLeaseTtl> ttl = EtcdServer::shared().client()->time_to_live(node->lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().to_string();
  EXPECT_EQ(ttl->granted_ttl_seconds, 2);

  const HorizonRecord record{std::string(kLayout), c->lease.node, 0, {123456}};
  ASSERT_TRUE(registry->save_horizon(c->lease, record).ok());
  const auto horizon = get(key("horizon/" + std::to_string(c->lease.node)));
  ASSERT_TRUE(horizon.has_value());
  EXPECT_EQ(horizon->value, format_horizon_record(record));
  EXPECT_EQ(horizon->lease, 0);  // it outlives the lease

  ASSERT_TRUE(registry->release(c->lease).ok());
  EXPECT_FALSE(get(key("nodes/" + std::to_string(c->lease.node))).has_value());
  EXPECT_TRUE(get(key("horizon/" + std::to_string(c->lease.node))).has_value());
  // The lease was revoked, not left to expire.
  ttl = EtcdServer::shared().client()->time_to_live(node->lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().to_string();
  EXPECT_EQ(ttl->ttl_seconds, -1);
}

TEST_F(EtcdRegistryTest, TokensGrowAcrossNodeIdsAndClaims) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  std::uint64_t last = 0;
  for (int i = 0; i < 4; ++i) {
    Result<Claim> c = registry->claim("a", 16);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->lease.node, static_cast<std::uint64_t>(i));  // the lowest free one
    EXPECT_GT(c->lease.token, last);
    last = c->lease.token;
  }
  Result<Claim> again = registry->claim("b", 16);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(registry->release(again->lease).ok());
  Result<Claim> next = registry->claim("c", 16);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->lease.node, again->lease.node);
  EXPECT_GT(next->lease.token, again->lease.token);
}

// etcd deletes an expired lease's keys: renewing cannot take the node ID back, even when nobody
// claimed it since (the SQLite registry can).
TEST_F(EtcdRegistryTest, AnExpiredLeaseIsLostForGood) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("a", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::this_thread::sleep_for(kTtl + kExpirySlack);
  expect_lease_lost(registry->renew(c->lease), "expired or was revoked");
  expect_lease_lost(registry->save_horizon(c->lease, {std::string(kLayout), c->lease.node, 0, {1}}),
                    "its key is gone");
  EXPECT_FALSE(registry->release(c->lease).ok());
  Result<Claim> again = registry->claim("b", 16);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->lease.node, c->lease.node);
}

// A node key deleted by hand (etcdctl del) while its lease lives: the holder learns at its next
// renewal that the node ID is no longer its own.
TEST_F(EtcdRegistryTest, ANodeKeyDeletedByHandFencesTheHolder) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("a", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  internal::EtcdTxn del;
  del.success = {internal::EtcdOp::remove(key("nodes/" + std::to_string(c->lease.node)))};
  ASSERT_TRUE(EtcdServer::shared().client()->txn(del).ok());
  expect_lease_lost(registry->renew(c->lease), "its key is gone");
  Result<Claim> other = open()->claim("b", 16);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_EQ(other->lease.node, c->lease.node);
  expect_lease_lost(registry->renew(c->lease), "claimed by another owner \"b\"");
}

// A horizon key put back by hand (etcdctl, a restored snapshot) under the holder's token: the
// holder's next save finds it below its last one and says REGISTRY_REGRESSED, as the SQLite and
// PostgreSQL registries do; a value raised by someone else is written over.
TEST_F(EtcdRegistryTest, AHorizonPutBackUnderTheHoldersTokenIsARegression) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("a", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const std::uint64_t node = c->lease.node;
  const std::string horizon = key("horizon/" + std::to_string(node));
  const HorizonRecord older{std::string(kLayout), node, 0, {1000}};
  const HorizonRecord newer{std::string(kLayout), node, 0, {2000}};
  ASSERT_TRUE(registry->save_horizon(c->lease, older).ok());
  ASSERT_TRUE(registry->save_horizon(c->lease, newer).ok());

  const auto put = [&](const std::string& value) {
    internal::EtcdTxn txn;
    txn.success = {internal::EtcdOp::put(horizon, value)};
    ASSERT_TRUE(EtcdServer::shared().client()->txn(txn).ok());
  };
  put(format_horizon_record(older));  // rolled back under the holder's token
  const HorizonRecord next{std::string(kLayout), node, 0, {3000}};
  Status st = registry->save_horizon(c->lease, next);
  EXPECT_EQ(st.reason(), Reason::kRegistryRegressed) << st.to_string();
  EXPECT_NE(st.message().find("went backwards"), std::string::npos) << st.message();
  EXPECT_EQ(get(horizon)->value, format_horizon_record(older)) << "the regressed key was written";

  // The same for a horizon key deleted by hand.
  auto second = open();
  Result<Claim> d = second->claim("b", 16);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  ASSERT_TRUE(second->save_horizon(d->lease, {std::string(kLayout), d->lease.node, 0, {5}}).ok());
  internal::EtcdTxn del;
  del.success = {internal::EtcdOp::remove(key("horizon/" + std::to_string(d->lease.node)))};
  ASSERT_TRUE(EtcdServer::shared().client()->txn(del).ok());
  st = second->save_horizon(d->lease, {std::string(kLayout), d->lease.node, 0, {6}});
  EXPECT_EQ(st.reason(), Reason::kRegistryRegressed) << st.to_string();

  // Raised by someone else (not behind): the holder writes over it.
  auto third = open();
  Result<Claim> e = third->claim("c", 16);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const std::string e_horizon = key("horizon/" + std::to_string(e->lease.node));
  ASSERT_TRUE(third->save_horizon(e->lease, {std::string(kLayout), e->lease.node, 0, {10}}).ok());
  internal::EtcdTxn raise;
  raise.success = {internal::EtcdOp::put(
      e_horizon, format_horizon_record({std::string(kLayout), e->lease.node, 0, {50}}))};
  ASSERT_TRUE(EtcdServer::shared().client()->txn(raise).ok());
  const HorizonRecord mine{std::string(kLayout), e->lease.node, 0, {60}};
  st = third->save_horizon(e->lease, mine);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(get(e_horizon)->value, format_horizon_record(mine));
}

// "prod" and "Prod" are two clusters to etcd's keys; the second to come is refused rather than
// run beside the first, handing out its node IDs again.
TEST_F(EtcdRegistryTest, AClusterNameDifferingOnlyByCaseIsRefused) {
  const std::string lower = "case-" + std::to_string(::getpid());
  const std::string upper = "CASE-" + std::to_string(::getpid());
  EtcdRegistryOptions a = options();
  a.cluster = lower;
  EtcdRegistryOptions b = options();
  b.cluster = upper;
  auto first = open(a);
  auto second = open(b);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  Result<Claim> c = first->claim("a", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  Result<Claim> refused = second->claim("b", 16);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kStateMismatch) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("differs only by letter case from \"" + lower + "\""),
            std::string::npos)
      << refused.status().message();
  // The exact name joins: another node ID of the same cluster.
  Result<Claim> joined = open(a)->claim("c", 16);
  ASSERT_TRUE(joined.ok()) << joined.status().to_string();
  EXPECT_NE(joined->lease.node, c->lease.node);

  // A cluster in use by a flurry that predates the reservation (its keys, no reservation key)
  // keeps its name: a case twin is refused and the name stays reserved for the one in use.
  const std::string legacy = "legacy-" + std::to_string(::getpid());
  internal::EtcdTxn old;
  old.success = {internal::EtcdOp::put("/flurry/" + legacy + "/layout", std::string(kLayout))};
  ASSERT_TRUE(EtcdServer::shared().client()->txn(old).ok());
  EtcdRegistryOptions twin = options();
  twin.cluster = "LEGACY-" + std::to_string(::getpid());
  Result<Claim> late = open(twin)->claim("d", 16);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().reason(), Reason::kStateMismatch) << late.status().to_string();
  EtcdRegistryOptions own = options();
  own.cluster = legacy;
  Result<Claim> kept = open(own)->claim("e", 16);
  EXPECT_TRUE(kept.ok()) << kept.status().to_string();
}

TEST_F(EtcdRegistryTest, ListGivesExpiryByEtcdsClock) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("host:7", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  Result<RegistryListing> l = registry->list();
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  ASSERT_EQ(l->nodes.size(), 1u);
  ASSERT_TRUE(l->nodes[0].expires_unix_ms.has_value());
  // Whole seconds both ways (the Date header, the TTL left): within 2 s of now + TTL.
  EXPECT_NEAR(static_cast<double>(*l->nodes[0].expires_unix_ms),
              static_cast<double>(now + kTtl.count()), 2000.0);
}

TEST_F(EtcdRegistryTest, FailsOverFromADeadEndpointToALiveOne) {
  const std::string closed = closed_endpoint();
  auto registry = open(options({closed, endpoint_}));
  ASSERT_NE(registry, nullptr);
  EXPECT_EQ(registry->describe(), "etcd:" + closed + "," + endpoint_ + "/flurry/" + cluster_);
  Result<Claim> c = registry->claim("a", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(registry->renew(c->lease).ok());
  EXPECT_TRUE(registry->release(c->lease).ok());
}

// A member that accepts connections but never answers costs one request timeout, then the next
// member answers.
TEST_F(EtcdRegistryTest, FailsOverFromAHungEndpointWithinTheTimeout) {
  BlackHole hung;
  EtcdRegistryOptions o = options({hung.endpoint(), endpoint_});
  o.request_timeout = 1500ms;
  auto registry = open(o);
  ASSERT_NE(registry, nullptr);
  const auto start = std::chrono::steady_clock::now();
  Result<Claim> c = registry->claim("a", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  // The first request waits out the hung member (once); later ones go to the live one first.
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 1500ms);
  EXPECT_LT(took, 3000ms);
  const auto renew_start = std::chrono::steady_clock::now();
  EXPECT_TRUE(registry->renew(c->lease).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - renew_start, 1500ms)
      << "the renewal tried the hung member";
}

TEST_F(EtcdRegistryTest, NoMemberAnsweringIsUnavailableWithinTheTimeouts) {
  BlackHole hung;
  const std::string closed = closed_endpoint();
  EtcdRegistryOptions o = options({closed, hung.endpoint()});
  o.request_timeout = 400ms;
  auto registry = open(o);
  ASSERT_NE(registry, nullptr);
  const auto start = std::chrono::steady_clock::now();
  Result<Claim> c = registry->claim("a", 16);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().to_string();
  EXPECT_TRUE(c.status().retryable());
  EXPECT_NE(c.status().message().find(closed), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(hung.endpoint() + " "), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find(": no answer within 400 ms"), std::string::npos)
      << c.status().message();
  EXPECT_GE(took, 400ms);
  EXPECT_LT(took, 1500ms);  // one timeout per member, once

  // The default timeout is a third of the TTL (at most 2 s).
  auto defaults = open(options({hung.endpoint()}));
  ASSERT_NE(defaults, nullptr);
  const auto start2 = std::chrono::steady_clock::now();
  const Status st = defaults->claim("a", 16).status();
  const auto took2 = std::chrono::steady_clock::now() - start2;
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_NE(st.message().find("no answer within 666 ms"), std::string::npos) << st.message();
  EXPECT_LT(took2, 1500ms);
}

TEST_F(EtcdRegistryTest, BadOptionsAreRefusedAtOpen) {
  const auto refused = [&](EtcdRegistryOptions o, std::string_view says) {
    Result<std::unique_ptr<NodeRegistry>> r = open_etcd_registry(o, kLayout, SystemClock::coarse());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  EtcdRegistryOptions o = options();
  o.endpoints.clear();
  refused(o, "at least one endpoint");
  o = options({endpoint_, "localhost"});
  refused(o, "HOST:PORT");
  o = options();
  o.cluster = "a/b";
  refused(o, "cluster name");
  o = options();
  o.ttl = 0ms;
  refused(o, "ttl");
}

// What `flurry serve --registry etcd` opens: the settings reach the registry.
TEST_F(EtcdRegistryTest, OpenRegistryOpensTheEtcdRegistry) {
  testing::TempDir dir;
  RegistryOptions o;
  o.kind = RegistryKind::kEtcd;
  o.data_dir = dir.path() / "data";
  o.etcd_endpoints = parse_etcd_endpoints(closed_endpoint() + "," + endpoint_).value();
  o.cluster = cluster_;
  o.lease_ttl = 3500ms;
  const Layout layout = Layout::parse(kLayout).value();
  SystemClock clock;
  Result<std::unique_ptr<NodeRegistry>> r =
      open_registry(o, layout, Clocks{clock, SteadyClock::instance()}, "host");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->describe(),
            "etcd:" + o.etcd_endpoints[0].to_string() + "," + endpoint_ + "/flurry/" + cluster_);
  Result<Claim> c = (*r)->claim("host:1", layout.node_count());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->lease.ttl, 3500ms);
  const auto node = get(key("nodes/" + std::to_string(c->lease.node)));
  ASSERT_TRUE(node.has_value());
  Result<internal::EtcdLeaseTtl> ttl = EtcdServer::shared().client()->time_to_live(node->lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().to_string();
  EXPECT_EQ(ttl->granted_ttl_seconds, 4);  // rounded up to whole seconds
  EXPECT_TRUE((*r)->release(c->lease).ok());

  o.lease_ttl = 1500ms;  // below etcd's 2 s
  r = open_registry(o, layout, Clocks{clock, SteadyClock::instance()}, "host");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lease_ttl"), std::string::npos) << r.status().message();
}

// The facts about etcd 3.4's gRPC API the client and the registry rely on, checked against the
// real server.
TEST_F(EtcdRegistryTest, EtcdFacts) {
  const std::unique_ptr<EtcdClient> owned = EtcdServer::shared().client();
  const EtcdClient& client = *owned;
  // etcd's minimum TTL is 2 s: a 1 s lease is granted for 2.
  Result<internal::EtcdLeaseGrant> grant = client.grant(1);
  ASSERT_TRUE(grant.ok()) << grant.status().to_string();
  EXPECT_EQ(grant->ttl_seconds, 2);
  Result<std::optional<std::int64_t>> alive = client.keep_alive(grant->id);
  ASSERT_TRUE(alive.ok()) << alive.status().to_string();
  EXPECT_EQ(*alive, std::optional<std::int64_t>(2));

  // A txn that fails its compare runs the failure branch: an empty range.
  internal::EtcdTxn txn;
  txn.compare = {internal::EtcdCompare::create_revision(key("x"), 5)};
  txn.success = {internal::EtcdOp::put(key("x"), "v")};
  txn.failure = {internal::EtcdOp::range(key("x"))};
  Result<internal::EtcdTxnResult> failed = client.txn(txn);
  ASSERT_TRUE(failed.ok()) << failed.status().to_string();
  EXPECT_FALSE(failed->succeeded);
  ASSERT_EQ(failed->responses.size(), 1u);
  EXPECT_TRUE(failed->responses[0].range.kvs.empty());

  ASSERT_TRUE(client.revoke(grant->id).ok());
  // A revoked lease: keep-alive answers TTL 0 (none); time-to-live says -1; revoke and a put
  // under it are NOT_FOUND.
  alive = client.keep_alive(grant->id);
  ASSERT_TRUE(alive.ok()) << alive.status().to_string();
  EXPECT_FALSE(alive->has_value());
  Result<internal::EtcdLeaseTtl> ttl = client.time_to_live(grant->id);
  ASSERT_TRUE(ttl.ok()) << ttl.status().to_string();
  EXPECT_EQ(ttl->ttl_seconds, -1);
  EXPECT_EQ(client.revoke(grant->id).code(), StatusCode::kNotFound);
  internal::EtcdTxn dead;
  dead.success = {internal::EtcdOp::put(key("y"), "v", grant->id)};
  const Status st = client.txn(dead).status();
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.to_string();
  EXPECT_NE(st.message().find("lease not found"), std::string::npos) << st.message();

  // A range at a revision etcd has compacted away is OUT_OF_RANGE naming the endpoint (and one at
  // a retained revision reads the key as it was then).
  internal::EtcdTxn put1;
  put1.success = {internal::EtcdOp::put(key("z"), "1")};
  Result<internal::EtcdTxnResult> first = client.txn(put1);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  internal::EtcdTxn put2;
  put2.success = {internal::EtcdOp::put(key("z"), "2")};
  Result<internal::EtcdTxnResult> second = client.txn(put2);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  Result<internal::EtcdRange> then = client.range(key("z"), {}, false, first->revision);
  ASSERT_TRUE(then.ok()) << then.status().to_string();
  ASSERT_EQ(then->kvs.size(), 1u);
  EXPECT_EQ(then->kvs[0].value, "1");
  Result<std::string> compacted =
      EtcdServer::shared().etcdctl("compact " + std::to_string(second->revision));
  ASSERT_TRUE(compacted.ok()) << compacted.status().to_string();
  Result<internal::EtcdRange> old = client.range(key("z"), {}, false, first->revision);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), StatusCode::kOutOfRange) << old.status().to_string();
  EXPECT_NE(old.status().message().find(endpoint_), std::string::npos) << old.status().message();
  EXPECT_NE(old.status().message().find("compacted"), std::string::npos) << old.status().message();
}

}  // namespace
}  // namespace flurry

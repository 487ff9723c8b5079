// The etcd registry against a secured etcd (tests/testing/etcd_server.h, EtcdServer::secured():
// authentication enabled, TLS with client certificates, tokens that expire after 2 s): the
// registry works as a user whose role covers its prefix, re-authenticates when a token expires,
// and refuses with a message naming the cause a wrong password, a user without the role, a
// missing user, a user given to an etcd without authentication, and (TLS) a wrong CA, a missing
// client certificate, plain endpoints given TLS files. A client certificate's Common Name is the
// user when no user is set (etcd's --client-cert-auth).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "etcd_server.h"
#include "flurry/layout.h"
#include "flurry/open_registry.h"
#include "flurry/registry.h"
#include "registry/etcd_client.h"
#include "test_store.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;
using internal::EtcdClient;
using testing::EtcdServer;

constexpr std::string_view kLayout = "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";
// etcd's --auth-token-ttl on the secured server, and a little more.
constexpr std::chrono::milliseconds kPastTokenTtl = 3s;

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << (text) << "\n  lacks: " << (part)

class EtcdSecuredTest : public ::testing::Test {
 protected:
  EtcdSecuredTest() {
    static int next = 0;
    cluster_ = "sec-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
  }

  void SetUp() override {
    Result<std::string> ep = EtcdServer::secured().endpoint();
    ASSERT_TRUE(ep.ok()) << ep.status().to_string();
    endpoint_ = *ep;
  }

  // Options for `user` (its real password unless `password` is given).
  EtcdRegistryOptions options(std::string user = "flurry",
                              std::optional<std::string> password = std::nullopt) const {
    EtcdRegistryOptions o;
    o.endpoints = {endpoint_};
    o.cluster = cluster_;
    o.ttl = 2s;
    o.tls = EtcdServer::secured().client_tls();
    if (!user.empty()) {
      o.user = user;
      o.password = password.value_or(EtcdServer::password_of(user));
    }
    return o;
  }

  static std::unique_ptr<NodeRegistry> open(const EtcdRegistryOptions& o) {
    Result<std::unique_ptr<NodeRegistry>> r = open_etcd_registry(o, kLayout, SystemClock::coarse());
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  std::string cluster_;
  std::string endpoint_;
};

TEST_F(EtcdSecuredTest, ClaimRenewSaveListAndReleaseAsAUserWithTheRole) {
  auto registry = open(options());
  ASSERT_NE(registry, nullptr);
  EXPECT_EQ(registry->describe(),
            "etcd:" + endpoint_ + "/flurry/" + cluster_ + " as user \"flurry\"");
  Result<Claim> c = registry->claim("host:1", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(registry->renew(c->lease).ok());
  const HorizonRecord record{std::string(kLayout), c->lease.node, 0, {123456}};
  ASSERT_TRUE(registry->save_horizon(c->lease, record).ok());
  Result<RegistryListing> listing = registry->list();
  ASSERT_TRUE(listing.ok()) << listing.status().to_string();
  ASSERT_TRUE(registry->release(c->lease).ok());
  // The next owner inherits the horizon.
  Result<Claim> again = registry->claim("host:2", 16);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  ASSERT_TRUE(again->inherited.has_value());
  EXPECT_EQ(*again->inherited, record);
}

// etcd's simple tokens expire 2 s after their last use here: a request after that is refused
// with "invalid auth token", and the client authenticates again, once, and repeats it.
TEST_F(EtcdSecuredTest, AnExpiredTokenIsRefreshedOnce) {
  Result<std::unique_ptr<EtcdClient>> opened =
      EtcdClient::open({parse_etcd_endpoint(endpoint_).value()}, 5s,
                       internal::EtcdAuth{"flurry", EtcdServer::password_of("flurry"), {}},
                       EtcdServer::secured().client_tls());
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  const EtcdClient& client = **opened;
  const std::string k = "/flurry/" + cluster_ + "/x";
  const Result<internal::EtcdRange> first = client.range(k);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(client.counters().authentications, 1u);
  ASSERT_TRUE(client.range(k).ok());
  EXPECT_EQ(client.counters().authentications, 1u) << "a valid token was replaced";
  std::this_thread::sleep_for(kPastTokenTtl);
  Result<internal::EtcdRange> r = client.range(k);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(client.counters().authentications, 2u);
  // A watch stream opened with an expired token (etcd refuses its watch as "permission denied"):
  // authenticated again, once, and read.
  std::this_thread::sleep_for(kPastTokenTtl);
  Result<internal::EtcdHistory> h = client.history(k, r->revision);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(client.counters().authentications, 3u);

  // The registry keeps renewing and saving horizons past several token lifetimes.
  EtcdRegistryOptions o = options();
  o.ttl = 6s;
  auto registry = open(o);
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("host:1", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  for (std::int64_t tick = 1; tick <= 2; ++tick) {
    std::this_thread::sleep_for(kPastTokenTtl / 2);
    const Status renewed = registry->renew(c->lease);
    ASSERT_TRUE(renewed.ok()) << renewed.to_string();
    std::this_thread::sleep_for(kPastTokenTtl / 2);
    const Status saved =
        registry->save_horizon(c->lease, {std::string(kLayout), c->lease.node, 0, {tick}});
    ASSERT_TRUE(saved.ok()) << saved.to_string();
  }
}

TEST_F(EtcdSecuredTest, AWrongPasswordIsUnauthenticatedAndNeverQuoted) {
  const std::string wrong = "not-the-password-0123";
  auto registry = open(options("flurry", wrong));
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("host:1", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnauthenticated) << c.status().to_string();
  EXPECT_FALSE(c.status().retryable());
  EXPECT_HAS(c.status().message(), "etcd refused user \"flurry\": authentication failed");
  EXPECT_EQ(c.status().message().find(wrong), std::string::npos) << c.status().message();

  auto unknown = open(options("nobody"));
  ASSERT_NE(unknown, nullptr);
  c = unknown->claim("host:1", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnauthenticated) << c.status().to_string();
  EXPECT_HAS(c.status().message(), "etcd refused user \"nobody\": authentication failed");
}

TEST_F(EtcdSecuredTest, AUserWithoutTheRoleIsDeniedNamingTheUserAndThePrefix) {
  auto registry = open(options("norole"));
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("host:1", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied) << c.status().to_string();
  EXPECT_HAS(c.status().message(), "user \"norole\"");
  EXPECT_HAS(c.status().message(), "/flurry/" + cluster_ + "/");
  EXPECT_FALSE(c.status().retryable());
}

// A role limited to one cluster (its prefix and its name's reservation) is enough, and only for
// that cluster.
TEST_F(EtcdSecuredTest, ARoleLimitedToOneClusterServesThatCluster) {
  EtcdRegistryOptions o = options("narrow");
  o.cluster = "narrow";
  auto registry = open(o);
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("host:1", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(registry->save_horizon(c->lease, {std::string(kLayout), c->lease.node, 0, {7}}).ok());
  ASSERT_TRUE(registry->list().ok());
  ASSERT_TRUE(registry->release(c->lease).ok());

  auto elsewhere = open(options("narrow"));  // this test's own cluster name
  ASSERT_NE(elsewhere, nullptr);
  c = elsewhere->claim("host:1", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied) << c.status().to_string();
  EXPECT_HAS(c.status().message(), "user \"narrow\"");
}

TEST_F(EtcdSecuredTest, NoUserIsRefusedSayingEtcdRequiresOne) {
  auto registry = open(options(""));
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("host:1", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnauthenticated) << c.status().to_string();
  EXPECT_HAS(c.status().message(), "etcd requires authentication");
}

TEST_F(EtcdSecuredTest, AUserForAnEtcdWithoutAuthenticationIsRefused) {
  Result<std::string> plain = EtcdServer::shared().endpoint();
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EtcdRegistryOptions o;
  o.endpoints = {*plain};
  o.cluster = cluster_;
  o.ttl = 2s;
  o.user = "flurry";
  o.password = "whatever-password";
  auto registry = open(o);
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("host:1", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition) << c.status().to_string();
  EXPECT_HAS(c.status().message(), "authentication disabled");
}

// TLS failures, at the first request (open() reads the files, the handshake comes later): each
// names its cause, none is tried as plain HTTP.
TEST_F(EtcdSecuredTest, TlsFailuresNameTheirCause) {
  const std::filesystem::path& certs = EtcdServer::secured().certs();
  const auto claim_error = [&](const EtcdTlsFiles& files) {
    EtcdRegistryOptions o = options();
    o.tls = files;
    auto registry = open(o);
    if (registry == nullptr) return Status(StatusCode::kInternal, "not opened");
    return registry->claim("host:1", 16).status();
  };
  // The members' certificate is not signed by the CA given.
  Status st =
      claim_error({certs / "other-ca.pem", certs / "client-nocn.pem", certs / "client-nocn.key"});
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_HAS(st.message(), "certificate verify failed");
  // No client certificate for an etcd with --client-cert-auth.
  st = claim_error({certs / "ca.pem", std::nullopt, std::nullopt});
  EXPECT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "certificate");
  EXPECT_HAS(st.message(), endpoint_);
  // A client certificate of another CA.
  st = claim_error({certs / "ca.pem", certs / "other-client.pem", certs / "other-client.key"});
  EXPECT_FALSE(st.ok());
  EXPECT_HAS(st.message(), endpoint_);

  // A file that is not there fails the open, naming it.
  EtcdRegistryOptions o = options();
  o.tls.ca_file = certs / "no-such-ca.pem";
  Result<std::unique_ptr<NodeRegistry>> r = open_etcd_registry(o, kLayout, SystemClock::coarse());
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "no-such-ca.pem");
}

// etcd with --client-cert-auth and authentication enabled takes the Common Name of the client
// certificate as the user when the client sends no token: a certificate for `flurry` (whose role
// covers the prefix) serves without a password; one for `norole` is denied, naming that user and
// what it needs.
TEST_F(EtcdSecuredTest, TheClientCertificatesCommonNameIsTheUser) {
  const std::filesystem::path& certs = EtcdServer::secured().certs();
  EtcdRegistryOptions o = options("");
  o.tls = {certs / "ca.pem", certs / "client-flurry.pem", certs / "client-flurry.key"};
  auto registry = open(o);
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("host:1", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(registry->renew(c->lease).ok());
  const HorizonRecord record{std::string(kLayout), c->lease.node, 0, {42}};
  ASSERT_TRUE(registry->save_horizon(c->lease, record).ok());
  ASSERT_TRUE(registry->list().ok());
  ASSERT_TRUE(registry->release(c->lease).ok());

  o.tls = {certs / "ca.pem", certs / "client-norole.pem", certs / "client-norole.key"};
  auto denied = open(o);
  ASSERT_NE(denied, nullptr);
  c = denied->claim("host:1", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied) << c.status().to_string();
  EXPECT_HAS(c.status().message(), "user \"norole\" (the Common Name of the client certificate)");
  EXPECT_HAS(c.status().message(), "readwrite on the key prefix /flurry/" + cluster_ + "/");
  EXPECT_FALSE(c.status().retryable());

  // A certificate without a Common Name and no user: etcd requires authentication.
  o.tls = EtcdServer::secured().client_tls();
  auto anonymous = open(o);
  ASSERT_NE(anonymous, nullptr);
  c = anonymous->claim("host:1", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnauthenticated) << c.status().to_string();
  EXPECT_HAS(c.status().message(), "etcd requires authentication");
}

TEST(EtcdTransportTest, SchemesAndTlsFilesAreCheckedAtTheEdge) {
  Result<EtcdEndpoint> e = parse_etcd_endpoint("https://127.0.0.1:2379");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->tls);
  EXPECT_EQ(e->to_string(), "https://127.0.0.1:2379");
  e = parse_etcd_endpoint("http://[::1]:2379/");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->tls);
  EXPECT_EQ(e->to_string(), "[::1]:2379");
  EXPECT_FALSE(parse_etcd_endpoint("unix://x:1").ok());
  EXPECT_FALSE(parse_etcd_endpoint("https://h:1/v3").ok());

  Result<std::vector<EtcdEndpoint>> mixed = parse_etcd_endpoints("https://a:1,b:2");
  ASSERT_FALSE(mixed.ok());
  EXPECT_HAS(mixed.status().message(), "mixed");

  // TLS files with plain endpoints: refused, never plain HTTP.
  RegistryOptions o;
  o.kind = RegistryKind::kEtcd;
  o.etcd_endpoints = parse_etcd_endpoints("127.0.0.1:2379").value();
  o.etcd_tls.ca_file = "/nonexistent/ca.pem";
  const Layout layout = Layout::parse(kLayout).value();
  Status st = check_registry_options(o, layout);
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "etcd_ca_file");
  EXPECT_HAS(st.message(), "https://");
  o.etcd_endpoints = parse_etcd_endpoints("https://127.0.0.1:2379").value();
  EXPECT_TRUE(check_registry_options(o, layout).ok())
      << check_registry_options(o, layout).to_string();
  o.etcd_tls.cert_file = "/nonexistent/client.pem";
  st = check_registry_options(o, layout);
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "etcd_key_file");

  // A user and its password file together, for the etcd registry only.
  RegistryOptions u;
  u.kind = RegistryKind::kEtcd;
  u.etcd_endpoints = parse_etcd_endpoints("127.0.0.1:2379").value();
  u.etcd_user = "flurry";
  st = check_registry_options(u, layout);
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "etcd_password_file");
  u.etcd_password_file = "/nonexistent/password";
  EXPECT_TRUE(check_registry_options(u, layout).ok());
  u.kind = RegistryKind::kSqlite;
  u.etcd_endpoints.clear();
  st = check_registry_options(u, layout);
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "etcd_user");
}

}  // namespace
}  // namespace flurry

// The timestamp oracle's HTTP routes without a transport: two real TimestampOracles sharing one
// SQLite registry file (its oracle scope) as two processes would, each under the operations
// layer and an Api of its own. What a server answers before any leader is known (503
// NO_LEADER), as the leader (200), and as a follower (307 with the leader's Location, over HTTP
// and HTTPS, and 503 when the Location would not fit the headers).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "api_fixture.h"
#include "flurry/horizon_floor.h"
#include "flurry/layout.h"
#include "flurry/registry.h"
#include "flurry/timestamp_oracle.h"
#include "http/api.h"
#include "test_store.h"

namespace flurry::http {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

const TsoLeaderAddress kA{"127.0.0.1:1001", "127.0.0.1:2001", "host-a:1"};
const TsoLeaderAddress kB{"127.0.0.1:1002", "127.0.0.1:2002", "host-b:2"};

// Waits (real time, at most 20 s) until `done` holds: the oracles' threads act on their own.
bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

// One process: its registry handle over the shared file, its floor, its oracle, and the
// operations and the Api over them.
struct Process {
  Process(service::Service& service, const std::filesystem::path& dir, const std::string& name)
      : layout(Layout::parse("tso").value()),
        floor(dir / name, "sqlite:test;scope=tso", layout.to_string()),
        ops(service, nullptr, nullptr) {
    Result<std::unique_ptr<NodeRegistry>> opened = open_sqlite_registry(
        (dir / "tso-registry.db").string(), 9000ms, SystemClock::coarse(), layout.to_string());
    if (!opened.ok()) std::abort();
    registry = std::move(opened).value();
    TsoOptions options;
    options.poll_interval = 50ms;
    Result<std::unique_ptr<TimestampOracle>> made = TimestampOracle::create(
        *registry, floor, layout, options, Clocks{SystemClock::coarse(), SteadyClock::instance()});
    if (!made.ok()) std::abort();
    oracle = std::move(made).value();
    ops.operations.set_tso(oracle.get());
    api = std::make_unique<Api>(ops.operations);
  }
  ~Process() {
    api.reset();
    oracle->stop();
  }
  testing::ApiReply get(std::string_view target, Method method = Method::kGet) {
    return testing::call_api(*api, scratch, target, method, {}, {}, Blocking::kNever);
  }
  Layout layout;
  HorizonFloor floor;
  std::unique_ptr<NodeRegistry> registry;
  std::unique_ptr<TimestampOracle> oracle;
  testing::OpsStack ops;
  std::unique_ptr<Api> api;
  ApiScratch scratch;
};

class TsoApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<service::Service>> started =
        testing::start_service(dir_.path() / "data");
    ASSERT_TRUE(started.ok()) << started.status().to_string();
    service_ = std::move(started).value();
    std::filesystem::create_directories(dir_.path() / "tso");
  }
  void TearDown() override {
    if (service_) service_->stop();
  }
  TempDir dir_;
  std::unique_ptr<service::Service> service_;
};

TEST_F(TsoApiTest, NoLeaderLeaderAndFollower) {
  auto a = std::make_unique<Process>(*service_, dir_.path() / "tso", "a");
  // Not started: no leader is known. 503 NO_LEADER with Retry-After, no Location.
  testing::ApiReply r = a->get("/v1/tso?count=2");
  EXPECT_EQ(r.status(), 503) << r.body;
  EXPECT_EQ(r.response.route, Route::kTso);
  EXPECT_TRUE(r.response.retry_after);
  EXPECT_TRUE(r.response.location.empty());
  EXPECT_EQ(r.doc()["error"]["reason"], "NO_LEADER");
  EXPECT_EQ(a->get("/v1/tso", Method::kHead).status(), 503);
  EXPECT_EQ(a->get("/readyz/tso").status(), 503);
  nlohmann::json health = a->get("/healthz").doc();
  EXPECT_EQ(health["status"], "ok");
  EXPECT_EQ(health["tso"]["role"], "electing");
  EXPECT_TRUE(health["tso"]["leader"].is_null()) << health.dump();
  // Counts are checked against the oracle's max_batch first.
  r = a->get("/v1/tso?count=0");
  EXPECT_EQ(r.status(), 400) << r.body;
  r = a->get("/v1/tso?count=" + std::to_string(a->oracle->max_batch() + 1));
  EXPECT_EQ(r.status(), 400) << r.body;
  EXPECT_NE(r.message().find("max_batch"), std::string::npos) << r.body;

  // A leads: 200, consecutive grants, each above the one before.
  ASSERT_TRUE(a->oracle->start(kA).ok());
  ASSERT_TRUE(eventually([&] { return a->get("/readyz/tso").status() == 200; }));
  r = a->get("/v1/tso?count=5");
  ASSERT_EQ(r.status(), 200) << r.body;
  const std::uint64_t first = std::stoull(r.doc()["first"].get<std::string>());
  EXPECT_EQ(r.doc()["count"], 5);
  r = a->get("/v1/tso");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_GT(std::stoull(r.doc()["first"].get<std::string>()), first + 4);
  EXPECT_EQ(r.doc()["count"], 1);
  health = a->get("/healthz").doc();
  EXPECT_EQ(health["tso"]["role"], "leader");
  EXPECT_EQ(health["tso"]["leader"]["http"], kA.http);
  EXPECT_EQ(health["tso"]["leader"]["grpc"], kA.grpc);
  r = a->get("/v1/tso?count=3", Method::kHead);
  EXPECT_EQ(r.status(), 200);
  EXPECT_TRUE(r.body.empty());

  // B follows: 307 to A with the same path and query, the leader in the body, no Retry-After.
  Process b(*service_, dir_.path() / "tso", "b");
  ASSERT_TRUE(b.oracle->start(kB).ok());
  ASSERT_TRUE(eventually([&] { return b.get("/healthz").doc()["tso"]["role"] == "follower"; }));
  r = b.get("/v1/tso?count=2");
  EXPECT_EQ(r.status(), 307) << r.body;
  EXPECT_EQ(r.response.location, "http://127.0.0.1:1001/v1/tso?count=2");
  EXPECT_FALSE(r.response.retry_after);
  EXPECT_EQ(r.doc()["error"]["reason"], "NOT_LEADER");
  EXPECT_EQ(r.doc()["error"]["leader"]["http"], kA.http);
  EXPECT_EQ(r.doc()["error"]["leader"]["grpc"], kA.grpc);
  r = b.get("/v1/tso", Method::kHead);
  EXPECT_EQ(r.status(), 307);
  EXPECT_EQ(r.response.location, "http://127.0.0.1:1001/v1/tso");
  EXPECT_EQ(b.get("/readyz/tso").status(), 503);
  // Over HTTPS the redirect stays on HTTPS.
  b.api->set_https(true);
  r = b.get("/v1/tso?count=4");
  EXPECT_EQ(r.status(), 307) << r.body;
  EXPECT_EQ(r.response.location, "https://127.0.0.1:1001/v1/tso?count=4");
  // A Location that would not fit the headers (kMaxExtraHeaderBytes): 503 with the leader named
  // in the body instead, and Retry-After.
  r = b.get("/v1/tso?count=" + std::string(600, '0') + "2");
  EXPECT_EQ(r.status(), 503) << r.body;
  EXPECT_TRUE(r.response.location.empty());
  EXPECT_TRUE(r.response.retry_after);
  EXPECT_EQ(r.doc()["error"]["reason"], "NOT_LEADER");
  EXPECT_EQ(r.doc()["error"]["leader"]["http"], kA.http);

  // Metrics: the leader's and the follower's.
  const std::string leader_metrics = a->get("/metrics").body;
  EXPECT_NE(leader_metrics.find("\nflurry_tso_leader 1\n"), std::string::npos) << leader_metrics;
  // Every grant asked for counts, the one refused before any leader was known too.
  EXPECT_NE(leader_metrics.find("\nflurry_tso_requests_total 3\n"), std::string::npos);
  EXPECT_NE(leader_metrics.find("\nflurry_tso_timestamps_total 6\n"), std::string::npos);
  const std::string follower_metrics = b.get("/metrics").body;
  EXPECT_NE(follower_metrics.find("\nflurry_tso_leader 0\n"), std::string::npos);
  EXPECT_NE(follower_metrics.find("\nflurry_tso_not_leader_total 3\n"), std::string::npos)
      << follower_metrics;

  // A stops (it releases the lease): B leads and answers.
  a.reset();
  ASSERT_TRUE(eventually([&] { return b.get("/readyz/tso").status() == 200; }));
  r = b.get("/v1/tso?count=2");
  EXPECT_EQ(r.status(), 200) << r.body;
}

}  // namespace
}  // namespace flurry::http

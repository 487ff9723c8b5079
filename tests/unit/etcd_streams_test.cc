// The etcd client's streams against a real etcd (tests/testing/etcd_server.h): keep-alives share
// one LeaseKeepAlive stream (counted apart from unary requests), a watch sees another client's
// put and delete, resumes after a given revision, survives a dead first endpoint, and ends with an
// error when its history was compacted; history() gives every retained put of a key up to a
// revision, and what compaction left out.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "etcd_server.h"
#include "flurry/registry.h"
#include "free_port.h"
#include "registry/etcd_client.h"

namespace flurry::internal {
namespace {

using namespace std::chrono_literals;
using testing::EtcdServer;
using SteadyClock = std::chrono::steady_clock;

// What a watch callback received, for the test thread to wait on.
class Seen {
 public:
  void add(const std::vector<EtcdEvent>& events, const Status& ended) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const EtcdEvent& e : events) events_.push_back({e, SteadyClock::now()});
    if (!ended.ok()) ended_ = ended;
    cv_.notify_all();
  }
  // Waits until `n` events came (or the watch ended); false after `timeout`.
  bool wait_for(std::size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return events_.size() >= n || ended_.has_value(); }) &&
           events_.size() >= n;
  }
  bool wait_ended(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return ended_.has_value(); });
  }
  struct Event {
    EtcdEvent event;
    SteadyClock::time_point at;
  };
  std::vector<Event> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::optional<Status> ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  std::optional<Status> ended_;
};

class EtcdStreamsTest : public ::testing::Test {
 protected:
  EtcdStreamsTest() {
    static int next = 0;
    prefix_ = "/flurry-streams/" + std::to_string(::getpid()) + "-" + std::to_string(next++) + "/";
  }
  void SetUp() override {
    Result<std::string> ep = EtcdServer::shared().endpoint();
    ASSERT_TRUE(ep.ok()) << ep.status().to_string();
    client_ = EtcdServer::shared().client();
  }
  [[nodiscard]] std::string key(std::string_view rest) const { return prefix_ + std::string(rest); }
  // Puts `value` under `k`; the revision of the put.
  std::int64_t put(const std::string& k, const std::string& value) {
    EtcdTxn txn;
    txn.success = {EtcdOp::put(k, value)};
    Result<EtcdTxnResult> r = client_->txn(txn);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r->revision : 0;
  }
  std::int64_t remove(const std::string& k) {
    EtcdTxn txn;
    txn.success = {EtcdOp::remove(k)};
    Result<EtcdTxnResult> r = client_->txn(txn);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r->revision : 0;
  }

  std::string prefix_;
  std::unique_ptr<EtcdClient> client_;
};

// Many renewals from several threads go over one stream: keep_alive_messages counts them, the
// unary requests do not grow, and every answer is the lease's TTL; a revoked lease answers none.
TEST_F(EtcdStreamsTest, KeepAlivesShareOneStreamAndAreNotRequests) {
  Result<EtcdLeaseGrant> a = client_->grant(10);
  Result<EtcdLeaseGrant> b = client_->grant(20);
  ASSERT_TRUE(a.ok() && b.ok());
  const EtcdClientCounters before = client_->counters();
  constexpr int kThreads = 4;
  constexpr int kEach = 50;
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::string> failures;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const EtcdLeaseGrant& lease = t % 2 == 0 ? *a : *b;
      for (int i = 0; i < kEach; ++i) {
        Result<std::optional<std::int64_t>> ttl = client_->keep_alive(lease.id);
        if (!ttl.ok() || *ttl != std::optional<std::int64_t>(lease.ttl_seconds)) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(ttl.ok() ? "ttl " + std::to_string(ttl->value_or(-1))
                                      : ttl.status().to_string());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures.front();
  const EtcdClientCounters after = client_->counters();
  EXPECT_EQ(after.keep_alive_messages - before.keep_alive_messages,
            std::uint64_t{kThreads * kEach});
  EXPECT_EQ(after.requests, before.requests);

  ASSERT_TRUE(client_->revoke(a->id).ok());
  Result<std::optional<std::int64_t>> gone = client_->keep_alive(a->id);
  ASSERT_TRUE(gone.ok()) << gone.status().to_string();
  EXPECT_FALSE(gone->has_value());
  Result<std::optional<std::int64_t>> alive = client_->keep_alive(b->id);
  ASSERT_TRUE(alive.ok()) << alive.status().to_string();
  EXPECT_EQ(*alive, std::optional<std::int64_t>(20));
}

// A listening socket that never accepts: connections complete (the kernel queues them) and
// nothing is ever answered, as by a hung member.
class BlackHole {
 public:
  BlackHole() { fd_ = testing::listen_loopback(port_); }
  ~BlackHole() {
    if (fd_ >= 0) ::close(fd_);
  }
  BlackHole(const BlackHole&) = delete;
  BlackHole& operator=(const BlackHole&) = delete;
  [[nodiscard]] bool ok() const { return fd_ >= 0; }
  [[nodiscard]] EtcdEndpoint endpoint() const { return EtcdEndpoint{{"127.0.0.1", port_}}; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// The keep-alive stream is opened on an endpoint that connects: past a dead one at once, past a
// hung one within the call's timeout (that call fails, UNAVAILABLE naming it; the next call opens
// the stream on the next endpoint).
TEST_F(EtcdStreamsTest, TheKeepAliveStreamOpensPastDeadAndHungEndpoints) {
  Result<EtcdLeaseGrant> lease = client_->grant(30);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  const EtcdEndpoint live = parse_etcd_endpoint(*EtcdServer::shared().endpoint()).value();
  const std::uint16_t dead = testing::free_port();
  ASSERT_NE(dead, 0);
  constexpr std::chrono::milliseconds kTimeout = 1000ms;

  Result<std::unique_ptr<EtcdClient>> past_dead =
      EtcdClient::open({EtcdEndpoint{{"127.0.0.1", dead}}, live}, kTimeout);
  ASSERT_TRUE(past_dead.ok()) << past_dead.status().to_string();
  auto start = SteadyClock::now();
  Result<std::optional<std::int64_t>> ttl = (*past_dead)->keep_alive(lease->id);
  ASSERT_TRUE(ttl.ok()) << ttl.status().to_string();
  EXPECT_EQ(*ttl, std::optional<std::int64_t>(30));
  EXPECT_LT(SteadyClock::now() - start, kTimeout);  // a refused connection costs no timeout

  BlackHole hung;
  ASSERT_TRUE(hung.ok());
  Result<std::unique_ptr<EtcdClient>> past_hung =
      EtcdClient::open({hung.endpoint(), live}, kTimeout);
  ASSERT_TRUE(past_hung.ok()) << past_hung.status().to_string();
  start = SteadyClock::now();
  ttl = (*past_hung)->keep_alive(lease->id);
  const auto first = SteadyClock::now() - start;
  EXPECT_LT(first, kTimeout + 1000ms);  // bounded by the timeout (and a margin for a loaded host)
  if (!ttl.ok()) {
    EXPECT_EQ(ttl.status().code(), StatusCode::kUnavailable) << ttl.status().to_string();
    EXPECT_NE(ttl.status().message().find(hung.endpoint().to_string()), std::string::npos)
        << ttl.status().message();
    ttl = (*past_hung)->keep_alive(lease->id);
  }
  ASSERT_TRUE(ttl.ok()) << ttl.status().to_string();
  EXPECT_EQ(*ttl, std::optional<std::int64_t>(30));
  // Later renewals go over the stream on the live member at once.
  start = SteadyClock::now();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*past_hung)->keep_alive(lease->id).ok());
  EXPECT_LT(SteadyClock::now() - start, kTimeout);
}

// A watch on a prefix sees another client's put and delete, in order, with their revisions, soon
// after they are written (etcd sends the event as it commits: one round trip).
TEST_F(EtcdStreamsTest, AWatchSeesAnotherClientsPutAndDelete) {
  Seen seen;
  Result<std::unique_ptr<EtcdWatch>> watch = client_->watch(
      prefix_, etcd_prefix_end(prefix_), 0,
      [&](const std::vector<EtcdEvent>& events, const Status& ended) { seen.add(events, ended); });
  ASSERT_TRUE(watch.ok()) << watch.status().to_string();
  // The watch is created on its own thread: a write before etcd registered it would not be seen
  // with after_revision 0, so wait until a probe put arrives.
  const auto give_up = SteadyClock::now() + 10s;
  std::size_t probes = 0;
  while (!seen.wait_for(1, 100ms) && SteadyClock::now() < give_up) {
    put(key("probe"), std::to_string(probes++));
  }
  ASSERT_GE(seen.events().size(), 1u);
  const std::size_t base = seen.events().size() + 0;
  // Another client writes.
  const std::unique_ptr<EtcdClient> other = EtcdServer::shared().client();
  EtcdTxn put_txn;
  put_txn.success = {EtcdOp::put(key("k"), "v1")};
  Result<EtcdTxnResult> p = other->txn(put_txn);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const auto put_done = SteadyClock::now();
  EtcdTxn del_txn;
  del_txn.success = {EtcdOp::remove(key("k"))};
  Result<EtcdTxnResult> d = other->txn(del_txn);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  // Probe puts may still be in flight: wait for the two of key k.
  std::vector<Seen::Event> mine;
  const auto until = SteadyClock::now() + 10s;
  while (SteadyClock::now() < until) {
    mine.clear();
    for (const Seen::Event& e : seen.events()) {
      if (e.event.kv.key == key("k")) mine.push_back(e);
    }
    if (mine.size() >= 2) break;
    (void)seen.wait_for(seen.events().size() + 1, 50ms);
  }
  ASSERT_EQ(mine.size(), 2u) << "events seen: " << seen.events().size() - base;
  EXPECT_EQ(mine[0].event.type, EtcdEvent::Type::kPut);
  EXPECT_EQ(mine[0].event.kv.value, "v1");
  EXPECT_EQ(mine[0].event.kv.mod_revision, p->revision);
  EXPECT_EQ(mine[1].event.type, EtcdEvent::Type::kDelete);
  EXPECT_EQ(mine[1].event.kv.mod_revision, d->revision);
  // One round trip on loopback is well under a millisecond; the bound is generous for a loaded
  // 2-core machine but far below any polling or renewal period (seconds).
  const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(mine[0].at - put_done);
  EXPECT_LT(delay, 500ms);
  std::printf("watch: put seen %lld ms after the put returned\n",
              static_cast<long long>(delay.count()));
  EXPECT_FALSE(seen.ended().has_value());
  EXPECT_GE(client_->counters().watch_streams, 1u);
}

// after_revision: the events after it, including those written before the watch was made.
TEST_F(EtcdStreamsTest, AWatchResumesAfterTheRevisionGiven) {
  const std::int64_t r1 = put(key("a"), "1");
  const std::int64_t r2 = put(key("a"), "2");
  const std::int64_t r3 = put(key("a"), "3");
  Seen seen;
  Result<std::unique_ptr<EtcdWatch>> watch = client_->watch(
      key("a"), "", r1,
      [&](const std::vector<EtcdEvent>& events, const Status& ended) { seen.add(events, ended); });
  ASSERT_TRUE(watch.ok()) << watch.status().to_string();
  ASSERT_TRUE(seen.wait_for(2, 10s));
  const auto events = seen.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].event.kv.mod_revision, r2);
  EXPECT_EQ(events[0].event.kv.value, "2");
  EXPECT_EQ(events[1].event.kv.mod_revision, r3);
  // Destroyed: no callback after the destructor returns.
  watch->reset();
  put(key("a"), "4");
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(seen.events().size(), 2u);
}

// With a dead first endpoint the watch runs on the second one.
TEST_F(EtcdStreamsTest, AWatchWorksWhenTheFirstEndpointIsDead) {
  const std::uint16_t dead = testing::free_port();
  ASSERT_NE(dead, 0);
  const EtcdEndpoint live = parse_etcd_endpoint(*EtcdServer::shared().endpoint()).value();
  Result<std::unique_ptr<EtcdClient>> two =
      EtcdClient::open({EtcdEndpoint{{"127.0.0.1", dead}}, live}, 1000ms);
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  const std::int64_t start = put(key("w"), "0");
  Seen seen;
  Result<std::unique_ptr<EtcdWatch>> watch = (*two)->watch(
      key("w"), "", start,
      [&](const std::vector<EtcdEvent>& events, const Status& ended) { seen.add(events, ended); });
  ASSERT_TRUE(watch.ok()) << watch.status().to_string();
  const std::int64_t r = put(key("w"), "1");
  ASSERT_TRUE(seen.wait_for(1, 10s)) << (seen.ended() ? seen.ended()->to_string() : "no event");
  EXPECT_EQ(seen.events()[0].event.kv.mod_revision, r);
  EXPECT_EQ(seen.events()[0].event.kv.value, "1");
  // And its history read too.
  Result<EtcdHistory> h = (*two)->history(key("w"), r);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  ASSERT_EQ(h->versions.size(), 2u);
  EXPECT_EQ(h->versions[1].value, "1");
}

// history(): every retained put of the key up to `until`, oldest first, also the ones a later
// put overwrote with a lower value; deletes and other keys left out. After a compaction: the
// version current at the compaction revision and what came after, with compacted_below set;
// a watch from before the compaction ends with OUT_OF_RANGE.
TEST_F(EtcdStreamsTest, HistoryGivesEveryRetainedPutAndWhatCompactionLeft) {
  const std::string k = key("horizon");
  const std::int64_t r1 = put(k, "100");
  put(key("other"), "x");
  const std::int64_t r2 = put(k, "200");
  const std::int64_t r3 = put(k, "50");  // lowered: an older, larger value is what history finds
  const std::int64_t r4 = remove(k);
  const std::int64_t r5 = put(k, "60");
  put(k, "70");  // after `until`

  Result<EtcdHistory> h = client_->history(k, r5);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->compacted_below, 0);
  std::vector<std::string> values;
  std::vector<std::int64_t> revisions;
  for (const EtcdKeyValue& kv : h->versions) {
    values.push_back(kv.value);
    revisions.push_back(kv.mod_revision);
  }
  EXPECT_EQ(values, (std::vector<std::string>{"100", "200", "50", "60"}));
  EXPECT_EQ(revisions, (std::vector<std::int64_t>{r1, r2, r3, r5}));
  // Up to an earlier revision only.
  h = client_->history(k, r2);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  ASSERT_EQ(h->versions.size(), 2u);
  EXPECT_EQ(h->versions.back().value, "200");
  // A key that never existed: nothing, confirmed by a progress answer.
  h = client_->history(key("never"), r5);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_TRUE(h->versions.empty());

  // A watch from r1 (before the compaction below), kept open across it: it has seen the events
  // already and is not cut by the compaction.
  Seen early;
  Result<std::unique_ptr<EtcdWatch>> kept = client_->watch(
      k, "", r1 - 1,
      [&](const std::vector<EtcdEvent>& events, const Status& ended) { early.add(events, ended); });
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(early.wait_for(6, 10s));

  // Compacted at r3: the version current then ("50", written at r3) is kept, the ones before
  // are gone.
  Result<std::string> compacted = EtcdServer::shared().etcdctl("compact " + std::to_string(r3));
  ASSERT_TRUE(compacted.ok()) << compacted.status().to_string();
  h = client_->history(k, r5);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->compacted_below, r3);
  values.clear();
  for (const EtcdKeyValue& kv : h->versions) values.push_back(kv.value);
  EXPECT_EQ(values, (std::vector<std::string>{"50", "60"}));
  // Compacted past the deletion: the key did not exist at r4, so only what came after.
  compacted = EtcdServer::shared().etcdctl("compact " + std::to_string(r4));
  ASSERT_TRUE(compacted.ok()) << compacted.status().to_string();
  h = client_->history(k, r5);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->compacted_below, r4);
  ASSERT_EQ(h->versions.size(), 1u);
  EXPECT_EQ(h->versions[0].value, "60");

  // A new watch from before the compaction cannot be served: it ends with OUT_OF_RANGE.
  Seen late;
  Result<std::unique_ptr<EtcdWatch>> watch = client_->watch(
      k, "", r1,
      [&](const std::vector<EtcdEvent>& events, const Status& ended) { late.add(events, ended); });
  ASSERT_TRUE(watch.ok()) << watch.status().to_string();
  ASSERT_TRUE(late.wait_ended(10s));
  EXPECT_EQ(late.ended()->code(), StatusCode::kOutOfRange) << late.ended()->to_string();
  EXPECT_NE(late.ended()->message().find("compacted"), std::string::npos)
      << late.ended()->message();
  EXPECT_TRUE(late.events().empty());
  EXPECT_FALSE(early.ended().has_value());
}

}  // namespace
}  // namespace flurry::internal

// Generator behaviour on a fake clock: sequences, borrowing, throttling, every rollback policy,
// the durable horizon, restarts, time-field exhaustion and batches.
#include "flurry/generator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "fake_clock.h"
#include "flurry/timefmt.h"
#include "no_threads.h"
#include "test_store.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using testing::FaultyStore;
using testing::TempDir;

TimePoint at(std::string_view iso) {
  return parse_time(iso).value();
}

Layout layout_of(std::string_view text) {
  Result<Layout> l = Layout::parse(text);
  EXPECT_TRUE(l.ok()) << l.status().to_string();
  return l.value();
}

class GeneratorTest : public ::testing::Test {
 protected:
  GeneratorTest() : clock_(at("2026-01-01T00:00:00Z")), store_(state_file()) {}

  std::filesystem::path state_file() const { return FileHorizonStore::path_for(dir_.path(), 0); }

  GeneratorOptions options() const {
    GeneratorOptions o;
    o.background_horizon = false;  // deterministic: the horizon moves only inside calls
    return o;
  }

  std::unique_ptr<Generator> make(std::string_view layout, GeneratorOptions o) {
    Result<std::unique_ptr<Generator>> g = Generator::create(layout_of(layout), o, clock_, store_);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    return g.ok() ? std::move(g).value() : nullptr;
  }
  std::unique_ptr<Generator> make(std::string_view layout = "flurry") {
    return make(layout, options());
  }

  IdParts parts(const Generator& g, std::uint64_t id) { return g.layout().decompose(id).value(); }
  std::int64_t now_ticks(const Generator& g) { return g.layout().ticks_at(clock_.now()); }
  std::uint64_t next(Generator& g) {
    Result<std::uint64_t> id = g.next();
    EXPECT_TRUE(id.ok()) << id.status().to_string();
    return id.ok() ? id.value() : 0;
  }

  TempDir dir_;
  FakeClock clock_;
  FaultyStore store_;
};

// Four IDs per tick, 2^20 nodes: small enough to exhaust the sequence in a test.
constexpr std::string_view kTinySeq = "time:41@1ms,node:20,seq:2;epoch=2025-01-01Z";

TEST_F(GeneratorTest, SameTickIncrementsSequence) {
  GeneratorOptions o = options();
  o.node = 77;
  auto g = make("flurry", o);
  const std::uint64_t a = next(*g), b = next(*g), c = next(*g);
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  const IdParts pa = parts(*g, a), pc = parts(*g, c);
  EXPECT_EQ(pa.ticks, static_cast<std::uint64_t>(now_ticks(*g)));
  EXPECT_EQ(pc.ticks, pa.ticks);
  EXPECT_EQ(pa.seq, 0u);
  EXPECT_EQ(pc.seq, 2u);
  EXPECT_EQ(pa.node, 77u);
  EXPECT_EQ(pc.node, 77u);
}

TEST_F(GeneratorTest, NewTickResetsSequence) {
  auto g = make();
  const IdParts a = parts(*g, next(*g));
  (void)next(*g);
  clock_.advance(1ms);
  const IdParts b = parts(*g, next(*g));
  EXPECT_EQ(b.ticks, a.ticks + 1);
  EXPECT_EQ(b.seq, 0u);
}

TEST_F(GeneratorTest, SequenceExhaustionBorrowsTheNextTick) {
  auto g = make(kTinySeq);
  const std::int64_t t0 = now_ticks(*g);
  std::vector<IdParts> got;
  for (int i = 0; i < 6; ++i) got.push_back(parts(*g, next(*g)));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].ticks, static_cast<std::uint64_t>(t0));
    EXPECT_EQ(got[i].seq, static_cast<std::uint64_t>(i));
  }
  EXPECT_EQ(got[4].ticks, static_cast<std::uint64_t>(t0 + 1));
  EXPECT_EQ(got[4].seq, 0u);
  EXPECT_EQ(got[5].seq, 1u);
  EXPECT_EQ(clock_.sleeps(), 0);  // borrowing within max_lead costs no wait
}

// Demand above the rate limit is throttled to it, under every rollback policy: throttling is
// not a rollback, so it waits briefly and never fails.
class ThrottleTest : public GeneratorTest, public ::testing::WithParamInterface<RollbackPolicy> {};

TEST_P(ThrottleTest, LeadNeverExceedsMaxLead) {
  GeneratorOptions o = options();
  o.max_lead = 3ms;
  o.rollback = GetParam();
  const std::string layout = GetParam() == RollbackPolicy::kClock
                                 ? "time:41@1ms,clock:2,node:18,seq:2;epoch=2025-01-01Z"
                                 : std::string(kTinySeq);
  auto g = make(layout, o);
  std::uint64_t prev = 0;
  for (int i = 0; i < 400; ++i) {
    const std::uint64_t id = next(*g);
    ASSERT_GT(id, prev);
    prev = id;
    const std::int64_t lead = static_cast<std::int64_t>(parts(*g, id).ticks) - now_ticks(*g);
    ASSERT_LE(lead, 3) << "at ID " << i;
    ASSERT_EQ(parts(*g, id).clock, 0u);
  }
  // 4 IDs per tick and 4 ticks of lead: the first 16 are free, the rest wait for the clock.
  EXPECT_GT(g->stats().throttle_waits, 0u);
  EXPECT_EQ(g->stats().rollback_failures, 0u);
  EXPECT_EQ(g->stats().clock_switches, 0u);
  EXPECT_GE(clock_.now(), at("2026-01-01T00:00:00Z") + 96ms);  // 400 IDs at 4/ms, less lead
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, ThrottleTest,
                         ::testing::Values(RollbackPolicy::kWait, RollbackPolicy::kFail,
                                           RollbackPolicy::kClock));

TEST_F(GeneratorTest, SmallStepBackIsAbsorbedAndStaysMonotonic) {
  auto g = make();
  const std::uint64_t before = next(*g);
  const std::uint64_t ticks_before = parts(*g, before).ticks;
  clock_.advance(-500ms);  // less than max_lead (1 s)
  std::uint64_t prev = before;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t id = next(*g);
    ASSERT_GT(id, prev);
    prev = id;
  }
  EXPECT_EQ(parts(*g, prev).ticks, ticks_before);  // the logical tick kept going
  EXPECT_EQ(clock_.sleeps(), 0);
  const GeneratorStats s = g->stats();
  EXPECT_EQ(s.rollback_waits + s.rollback_failures + s.clock_switches, 0u);
  EXPECT_TRUE(g->health().ok());
}

TEST_F(GeneratorTest, LargeStepBackUnderFailPolicyRefusesUntilTheClockCatchesUp) {
  GeneratorOptions o = options();
  o.rollback = RollbackPolicy::kFail;
  auto g = make("flurry", o);
  const std::uint64_t before = next(*g);
  clock_.advance(-5s);
  Result<std::uint64_t> refused = g->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().reason(), Reason::kClockBehind);
  EXPECT_TRUE(refused.status().retryable());
  EXPECT_NE(refused.status().message().find("behind"), std::string::npos);
  EXPECT_EQ(g->health().reason(), Reason::kClockBehind);
  EXPECT_EQ(clock_.sleeps(), 0);
  EXPECT_EQ(g->stats().rollback_failures, 1u);
  clock_.advance(5s);
  EXPECT_GT(next(*g), before);
  EXPECT_TRUE(g->health().ok());
}

TEST_F(GeneratorTest, LargeStepBackUnderWaitPolicySleepsWithinMaxWait) {
  GeneratorOptions o = options();
  o.rollback = RollbackPolicy::kWait;
  o.max_wait = 3s;
  auto g = make("flurry", o);
  const std::uint64_t before = next(*g);
  const TimePoint stepped = clock_.now() - 2s;
  clock_.set(stepped);
  const std::uint64_t after = next(*g);
  EXPECT_GT(after, before);
  EXPECT_EQ(g->stats().rollback_waits, 1u);
  // It slept until the last issued time was within max_lead again: about 1 s, not 2.
  EXPECT_GE(clock_.now(), stepped + 999ms);
  EXPECT_LE(clock_.now(), stepped + 1001ms);
  const std::int64_t lead = static_cast<std::int64_t>(parts(*g, after).ticks) - now_ticks(*g);
  EXPECT_LE(lead, 1000);
}

TEST_F(GeneratorTest, LargeStepBackUnderWaitPolicyFailsAtOnceBeyondMaxWait) {
  GeneratorOptions o = options();
  o.max_wait = 3s;
  auto g = make("flurry", o);
  (void)next(*g);
  clock_.advance(-10s);
  const TimePoint stepped = clock_.now();
  Result<std::uint64_t> refused = g->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kClockBehind);
  EXPECT_NE(refused.status().message().find("max_wait"), std::string::npos);
  EXPECT_EQ(clock_.now(), stepped);  // it did not sleep in vain
}

constexpr std::string_view kMulticlock = "multiclock";

TEST_F(GeneratorTest, ClockPolicySwitchesGenerationAndNeverReusesATickOfOne) {
  GeneratorOptions o = options();
  o.rollback = RollbackPolicy::kClock;
  auto g = make(kMulticlock, o);
  std::set<std::uint64_t> ids;
  std::set<std::pair<std::uint64_t, std::uint64_t>> tick_gen;
  auto take = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const std::uint64_t id = next(*g);
      ASSERT_TRUE(ids.insert(id).second) << "duplicate " << id;
      const IdParts p = parts(*g, id);
      tick_gen.insert({p.ticks, p.clock});
    }
  };
  take(3000);
  EXPECT_EQ(parts(*g, *ids.rbegin()).clock, 0u);
  clock_.advance(-10s);
  const std::uint64_t switched = next(*g);
  ids.insert(switched);
  EXPECT_EQ(parts(*g, switched).clock, 1u);
  EXPECT_EQ(static_cast<std::int64_t>(parts(*g, switched).ticks), now_ticks(*g));
  EXPECT_EQ(g->stats().clock_switches, 1u);
  EXPECT_EQ(clock_.sleeps(), 0);  // no waiting: that is the point of the policy
  take(3000);
  clock_.advance(-10s);  // generation 0 and 1 are both above now: a third one
  take(10);
  EXPECT_EQ(g->stats().clock_switches, 2u);
  EXPECT_EQ(g->stats().generation, 2u);
  clock_.advance(30s);  // forward again: generation 2 just continues at the new time
  take(3000);
  EXPECT_EQ(g->stats().clock_switches, 2u);
  EXPECT_EQ(ids.size(), 9011u);  // every one distinct
}

TEST_F(GeneratorTest, ClockPolicyRemembersGenerationsAcrossRestarts) {
  GeneratorOptions o = options();
  o.rollback = RollbackPolicy::kClock;
  std::set<std::uint64_t> ids;
  std::set<std::pair<std::uint64_t, std::uint64_t>> used;  // (generation, tick)
  auto run = [&](int n) {
    auto g = make(kMulticlock, o);
    ASSERT_NE(g, nullptr);
    for (int i = 0; i < n; ++i) {
      const std::uint64_t id = next(*g);
      ASSERT_TRUE(ids.insert(id).second) << "duplicate " << id;
      const IdParts p = parts(*g, id);
      used.insert({p.clock, p.ticks});
    }
    ASSERT_TRUE(g->close().ok());
  };
  const TimePoint t0 = clock_.now();
  run(5000);
  clock_.set(t0 - 10s);
  run(5000);  // generation 0 is above now: switches to 1
  clock_.set(t0 - 9500ms);
  run(5000);  // a clean restart within max_lead of generation 1's end: continues in 1
  clock_.set(t0 - 20s);
  run(5000);  // 0 and 1 are both above now (1 tightly, at its last tick): switches to 2
  const Result<HorizonRecord> rec = store_.load();
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->generation, 2u);
  EXPECT_EQ(ids.size(), 20000u);
  std::set<std::uint64_t> gens;
  for (auto [gen, tick] : used) gens.insert(gen);
  EXPECT_EQ(gens, (std::set<std::uint64_t>{0, 1, 2}));
  // Each generation's record is at or above every tick it issued.
  for (auto [gen, tick] : used) EXPECT_LE(static_cast<std::int64_t>(tick), rec->horizons[gen]);
}

TEST_F(GeneratorTest, ClockPolicyFailsWhenEveryGenerationIsAboveNow) {
  GeneratorOptions o = options();
  o.rollback = RollbackPolicy::kClock;
  auto g = make("time:41@1ms,clock:1,node:9,seq:12;epoch=2025-01-01Z", o);
  (void)next(*g);
  clock_.advance(-10s);
  (void)next(*g);  // generation 1
  clock_.advance(-10s);
  Result<std::uint64_t> refused = g->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kClockBehind);
  EXPECT_NE(refused.status().message().find("2 clock generations"), std::string::npos);
}

TEST_F(GeneratorTest, HorizonStallFailsClosedAndRecovers) {
  auto g = make();
  const std::uint64_t before = next(*g);
  store_.fail_saves = true;
  // The horizon is a window (2 s) ahead; IDs keep flowing inside it without any write.
  clock_.advance(1500ms);
  const std::uint64_t inside = next(*g);
  EXPECT_GT(inside, before);
  clock_.advance(1s);
  Result<std::uint64_t> refused = g->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().reason(), Reason::kHorizonNotPersisted);
  EXPECT_NE(refused.status().message().find("injected failure"), std::string::npos);
  EXPECT_EQ(g->health().reason(), Reason::kHorizonNotPersisted);
  EXPECT_FALSE(g->maintain().ok());
  EXPECT_GE(g->stats().horizon_failures, 2u);
  store_.fail_saves = false;
  EXPECT_GT(next(*g), inside);
  EXPECT_TRUE(g->health().ok());
}

// A store that refuses for good (the registry gave the node ID to another owner) keeps its code
// and reason: is_lease_gone() must recognise what the generator passes on.
TEST_F(GeneratorTest, AStoreRefusingForGoodKeepsItsCodeAndReason) {
  class RefusingStore final : public HorizonStore {
   public:
    explicit RefusingStore(HorizonStore& inner) : inner_(inner) {}
    Result<HorizonRecord> load() override { return inner_.load(); }
    Status save(const HorizonRecord& record) override {
      if (refuse) return Status(Reason::kLeaseLost, "node 0 belongs to another owner");
      return inner_.save(record);
    }
    std::string describe() const override { return inner_.describe(); }
    bool refuse = false;

   private:
    HorizonStore& inner_;
  };
  RefusingStore store(store_);
  Result<std::unique_ptr<Generator>> g =
      Generator::create(layout_of("flurry"), options(), clock_, store);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  store.refuse = true;
  clock_.advance(5s);  // beyond the horizon window: the next call must save
  Result<std::uint64_t> refused = (*g)->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().reason(), Reason::kLeaseLost);
  EXPECT_NE(refused.status().message().find("another owner"), std::string::npos);
  EXPECT_EQ((*g)->health().reason(), Reason::kLeaseLost);
  EXPECT_EQ((*g)->health().code(), StatusCode::kFailedPrecondition);
}

TEST_F(GeneratorTest, NeverIssuesATickAboveTheDurableHorizon) {
  GeneratorOptions o = options();
  o.horizon_window = 1100ms;  // many extensions in a short run
  auto g = make(kTinySeq, o);
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t id = next(*g);
    const std::vector<HorizonRecord> saved = store_.saved();
    ASSERT_FALSE(saved.empty());
    ASSERT_LE(static_cast<std::int64_t>(parts(*g, id).ticks), saved.back().horizons[0]);
    if (i % 7 == 0) clock_.advance(1ms);
  }
  EXPECT_GT(store_.saved().size(), 2u);
}

TEST_F(GeneratorTest, CreateFailsWhenTheHorizonCannotBePersisted) {
  store_.fail_saves = true;
  Result<std::unique_ptr<Generator>> g =
      Generator::create(layout_of("flurry"), options(), clock_, store_);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().reason(), Reason::kHorizonNotPersisted);
}

// The background horizon thread cannot be created: create() says so (it does not throw), and
// leaves the horizon saved tight, so the next start need not wait. Runs in a child process whose
// address space leaves no room for a new thread's stack.
using GeneratorDeathTest = GeneratorTest;

TEST_F(GeneratorDeathTest, CreateReportsThatNoBackgroundThreadCanBeCreated) {
  testing::expect_child_without_threads([this] {
    const auto require = [](bool ok, const std::string& what) {
      if (ok) return;
      std::fprintf(stderr, "child: %s\n", what.c_str());
      std::fflush(stderr);
      _exit(1);
    };
    if (!testing::forbid_new_threads()) _exit(testing::kCannotForbidThreads);
    GeneratorOptions o = options();
    o.background_horizon = true;
    Result<std::unique_ptr<Generator>> g =
        Generator::create(layout_of("flurry"), o, clock_, store_);
    require(!g.ok(), "create() succeeded without a thread");
    require(g.status().code() == StatusCode::kResourceExhausted, g.status().to_string());
    require(g.status().message().starts_with("cannot start the background horizon thread: "),
            g.status().to_string());
    // The horizon was extended a window ahead, then saved back tight below the first tick.
    const std::vector<HorizonRecord> saved = store_.saved();
    require(saved.size() == 2, "saves: " + std::to_string(saved.size()));
    const std::int64_t now = layout_of("flurry").ticks_at(clock_.now());
    require(saved[1].horizons[0] == now - 1,
            "horizon " + std::to_string(saved[1].horizons[0]) + ", now " + std::to_string(now));
    // Without the thread the same store works, and starts at once.
    Result<std::unique_ptr<Generator>> again =
        Generator::create(layout_of("flurry"), options(), clock_, store_);
    require(again.ok(), again.status().to_string());
    const Result<std::uint64_t> id = (*again)->next();
    require(id.ok(), id.status().to_string());
    require(clock_.sleeps() == 0, "the next start waited");
    _exit(0);
  });
}

TEST_F(GeneratorTest, RestartAfterACrashStartsAboveThePersistedHorizon) {
  // A "crash": the state file as it was while the first generator was still running.
  const std::filesystem::path crash_copy = dir_.path() / "crashed.state";
  std::uint64_t last_before = 0;
  {
    auto g = make();
    for (int i = 0; i < 1000; ++i) last_before = next(*g);
    std::filesystem::copy_file(state_file(), crash_copy);
  }
  std::filesystem::copy_file(crash_copy, state_file(),
                             std::filesystem::copy_options::overwrite_existing);
  const std::int64_t persisted = store_.load()->horizons[0];
  EXPECT_GE(persisted, static_cast<std::int64_t>(parts(*make(), last_before).ticks) + 1000);
  std::filesystem::copy_file(crash_copy, state_file(),
                             std::filesystem::copy_options::overwrite_existing);
  clock_.advance(-300ms);  // and the clock stepped back a little across the restart

  GeneratorOptions fail = options();
  fail.rollback = RollbackPolicy::kFail;
  {
    // The persisted horizon is ~2 s ahead: more than max_lead, so `fail` refuses...
    auto g = make("flurry", fail);
    Result<std::uint64_t> refused = g->next();
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().reason(), Reason::kClockBehind);
  }
  // ... and `wait` waits it out (within max_wait), then issues above everything before.
  auto g = make();
  const std::uint64_t first = next(*g);
  EXPECT_GT(first, last_before);
  EXPECT_GT(static_cast<std::int64_t>(parts(*g, first).ticks), persisted);
  EXPECT_EQ(g->stats().rollback_waits, 1u);
}

TEST_F(GeneratorTest, CleanRestartContinuesAboveWithoutWaiting) {
  std::uint64_t last = 0;
  {
    auto g = make(kTinySeq);
    for (int i = 0; i < 100; ++i) last = next(*g);  // borrows ~25 ticks ahead of the clock
    ASSERT_TRUE(g->close().ok());
    // close() saved the horizon tightly at the last issued tick.
    EXPECT_EQ(store_.load()->horizons[0], static_cast<std::int64_t>(parts(*g, last).ticks));
  }
  clock_.advance(-10ms);
  auto g = make(kTinySeq);
  EXPECT_GT(next(*g), last);
  EXPECT_EQ(clock_.sleeps(), 0);
}

TEST_F(GeneratorTest, SuspendRefusesUntilResumed) {
  auto g = make();
  const std::uint64_t before = next(*g);
  g->suspend(Status(Reason::kLeaseExpiring, "lease not renewed"));
  Result<std::uint64_t> refused = g->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kLeaseExpiring);
  EXPECT_EQ(g->health().reason(), Reason::kLeaseExpiring);
  const std::size_t saves = store_.saved().size();
  clock_.advance(5s);
  EXPECT_TRUE(g->maintain().ok());
  EXPECT_EQ(store_.saved().size(), saves);  // a suspended generator does not extend its horizon
  g->resume();
  EXPECT_TRUE(g->health().ok());
  EXPECT_GT(next(*g), before);
}

TEST_F(GeneratorTest, ClosedGeneratorRefuses) {
  auto g = make();
  (void)next(*g);
  ASSERT_TRUE(g->close().ok());
  ASSERT_TRUE(g->close().ok());  // idempotent
  Result<std::uint64_t> refused = g->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kShutDown);
  EXPECT_EQ(g->health().reason(), Reason::kShutDown);
}

TEST_F(GeneratorTest, TimeFieldExhaustion) {
  // A 10-bit field of seconds: 1024 s from the epoch.
  const TimePoint epoch = clock_.now() - 1020s;
  const std::string layout =
      "time:10@1s,node:40,seq:13;epoch=" + std::to_string(epoch.time_since_epoch() / 1ms);
  auto g = make(layout, [&] {
    GeneratorOptions o = options();
    o.max_lead = 0s;
    o.horizon_window = 1s;
    return o;
  }());
  std::uint64_t last = next(*g);
  clock_.advance(3s);  // tick 1023, the last one
  last = next(*g);
  EXPECT_EQ(parts(*g, last).ticks, 1023u);
  clock_.advance(1s);  // tick 1024 does not exist
  Result<std::uint64_t> refused = g->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().reason(), Reason::kTimeExhausted);
  EXPECT_FALSE(refused.status().retryable());

  // And a generator cannot even be created on the dead layout.
  TempDir other;
  FaultyStore store(FileHorizonStore::path_for(other.path(), 0));
  Result<std::unique_ptr<Generator>> dead =
      Generator::create(layout_of(layout), options(), clock_, store);
  ASSERT_FALSE(dead.ok());
  EXPECT_EQ(dead.status().reason(), Reason::kTimeExhausted);
}

TEST_F(GeneratorTest, BorrowingNeverCarriesPastTheLastTick) {
  // One-bit sequence, at the very last tick: (1023, 0) may be issued, (1023, 1) is the end.
  const TimePoint epoch = clock_.now() - 1023s;
  const std::string layout =
      "time:10@1s,node:52,seq:1;epoch=" + std::to_string(epoch.time_since_epoch() / 1ms);
  GeneratorOptions o = options();
  o.horizon_window = 2s;
  auto g = make(layout, o);
  EXPECT_EQ(parts(*g, next(*g)).ticks, 1023u);
  Result<std::uint64_t> refused = g->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kTimeExhausted);
}

TEST_F(GeneratorTest, BatchesSpanTickBoundariesContiguously) {
  auto g = make("time:41@1ms,node:18,seq:4;epoch=2025-01-01Z");  // 16 per tick
  for (int i = 0; i < 10; ++i) (void)next(*g);
  std::vector<std::uint64_t> batch(40);
  ASSERT_TRUE(g->next_batch(batch).ok());
  const std::uint64_t t0 = parts(*g, batch[0]).ticks;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const IdParts p = parts(*g, batch[i]);
    const std::uint64_t flat = 10 + i;  // position in (tick, seq) space from tick t0
    EXPECT_EQ(p.ticks, t0 + flat / 16) << i;
    EXPECT_EQ(p.seq, flat % 16) << i;
    if (i > 0) {
      EXPECT_GT(batch[i], batch[i - 1]);
    }
  }
  const IdParts after = parts(*g, next(*g));
  EXPECT_EQ(after.ticks * 16 + after.seq, t0 * 16 + 50);
}

TEST_F(GeneratorTest, BatchesWithTheNodeBelowTheSequence) {
  GeneratorOptions o = options();
  o.node = 0xBEEF;
  auto g = make("sonyflake", o);          // time | seq | machine
  std::vector<std::uint64_t> batch(600);  // 256 per 10 ms tick
  ASSERT_TRUE(g->next_batch(batch).ok());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(parts(*g, batch[i]).node, 0xBEEFu);
    if (i > 0) {
      EXPECT_GT(batch[i], batch[i - 1]);
    }
  }
  EXPECT_EQ(parts(*g, batch[599]).seq, 599u % 256);
}

TEST_F(GeneratorTest, BatchLargerThanTheLeadAllowsIsRefused) {
  GeneratorOptions o = options();
  o.max_lead = 3ms;
  auto g = make(kTinySeq, o);
  EXPECT_EQ(g->max_batch(), 16u);  // (3 + 1) ticks of 4
  std::vector<std::uint64_t> ok(16), too_big(17);
  EXPECT_TRUE(g->next_batch(ok).ok());
  const Status st = g->next_batch(too_big);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.reason(), Reason::kBatchTooLarge);
}

TEST_F(GeneratorTest, StateOfAnotherLayoutOrNodeIsRefused) {
  {
    auto g = make();
    (void)next(*g);
  }
  Result<std::unique_ptr<Generator>> other =
      Generator::create(layout_of("twitter"), options(), clock_, store_);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().reason(), Reason::kStateMismatch);
  GeneratorOptions o = options();
  o.node = 3;
  Result<std::unique_ptr<Generator>> node3 =
      Generator::create(layout_of("flurry"), o, clock_, store_);
  ASSERT_FALSE(node3.ok());
  EXPECT_EQ(node3.status().reason(), Reason::kStateMismatch);
}

TEST_F(GeneratorTest, OptionsAreValidated) {
  auto create = [&](std::string_view layout, GeneratorOptions o) {
    return Generator::create(layout_of(layout), o, clock_, store_).status();
  };
  GeneratorOptions o = options();
  o.node = 1024;
  EXPECT_EQ(create("flurry", o).code(), StatusCode::kInvalidArgument);
  o = options();
  o.horizon_window = o.max_lead;
  EXPECT_EQ(create("flurry", o).code(), StatusCode::kInvalidArgument);
  o = options();
  o.rollback = RollbackPolicy::kClock;
  EXPECT_EQ(create("flurry", o).code(), StatusCode::kInvalidArgument);
  o = options();
  o.max_wait = -1s;
  EXPECT_EQ(create("flurry", o).code(), StatusCode::kInvalidArgument);
}

TEST_F(GeneratorTest, ClockBeforeTheEpochIsRefused) {
  clock_.set(at("2024-06-01Z"));
  const Status st = Generator::create(layout_of("flurry"), options(), clock_, store_).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.reason(), Reason::kClockBeforeEpoch);
}

TEST_F(GeneratorTest, RollbackPolicyNamesParse) {
  EXPECT_EQ(parse_rollback_policy("wait").value(), RollbackPolicy::kWait);
  EXPECT_EQ(parse_rollback_policy("fail").value(), RollbackPolicy::kFail);
  EXPECT_EQ(parse_rollback_policy("clock").value(), RollbackPolicy::kClock);
  EXPECT_EQ(parse_rollback_policy("Wait").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(to_string(RollbackPolicy::kClock), "clock");
}

// Blocking::kNever: an event loop is told WOULD_BLOCK instead of sleeping or writing the store,
// nothing is issued, and the same call with kAllowed then does what it would have done.
TEST_F(GeneratorTest, NeverBlockingCallsReportWouldBlockForThrottling) {
  GeneratorOptions o = options();
  o.max_lead = 3ms;
  auto g = make(kTinySeq, o);
  std::vector<std::uint64_t> batch(16);  // 4 IDs per tick, 4 ticks of lead: exactly the budget
  ASSERT_TRUE(g->next_batch(batch, Blocking::kNever).ok());
  const TimePoint before = clock_.now();
  Result<std::uint64_t> refused = g->next(Blocking::kNever);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().reason(), Reason::kWouldBlock) << refused.status().to_string();
  EXPECT_EQ(clock_.now(), before);  // it did not sleep
  EXPECT_EQ(g->stats().throttle_waits, 0u);
  const std::uint64_t id = next(*g);  // allowed to block: waits one tick, then issues
  EXPECT_EQ(parts(*g, id).seq, 0u);
  EXPECT_EQ(parts(*g, id).ticks, parts(*g, batch.back()).ticks + 1);  // nothing was skipped
  EXPECT_EQ(g->stats().throttle_waits, 1u);
}

TEST_F(GeneratorTest, NeverBlockingCallsReportWouldBlockForAClockWait) {
  GeneratorOptions o = options();
  o.max_wait = 3s;
  auto g = make("flurry", o);
  const std::uint64_t before = next(*g);
  clock_.advance(-2s);
  const TimePoint stepped = clock_.now();
  Result<std::uint64_t> refused = g->next(Blocking::kNever);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kWouldBlock) << refused.status().to_string();
  EXPECT_EQ(clock_.now(), stepped);
  EXPECT_EQ(g->stats().rollback_waits, 0u);
  EXPECT_GT(next(*g), before);
  EXPECT_EQ(g->stats().rollback_waits, 1u);
  // A step too long to wait for fails at once either way: the caller learns it without a hop.
  clock_.advance(-10s);
  EXPECT_EQ(g->next(Blocking::kNever).status().reason(), Reason::kClockBehind);
}

TEST_F(GeneratorTest, NeverBlockingCallsReportWouldBlockForAHorizonWrite) {
  auto g = make();
  const std::uint64_t before = next(*g);
  const std::size_t saves = store_.saved().size();
  clock_.advance(2500ms);  // past the durable horizon (a 2 s window)
  Result<std::uint64_t> refused = g->next(Blocking::kNever);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kWouldBlock) << refused.status().to_string();
  EXPECT_EQ(store_.saved().size(), saves);  // no write from a call that must not block
  EXPECT_GT(next(*g), before);
  EXPECT_EQ(store_.saved().size(), saves + 1);
  // Suspension and closing answer at once, blocking or not.
  g->suspend(Status(Reason::kSuspended, "test"));
  clock_.advance(2500ms);
  EXPECT_EQ(g->next(Blocking::kNever).status().reason(), Reason::kSuspended);
}

// ---------------------------------------------------------------------------------------------
// next()'s fast path: one fetch_add while the state is far (2^22 values) from every limit. It
// applies only with a wide sequence, as here: 2^22 IDs per 1 ms tick. These tests drive the
// generator across each limit with single calls and check that every ID is honest and that no
// value was skipped (a refused or handed-over call must not have moved the state).

constexpr std::string_view kWideSeq = "time:40@1ms,node:1,seq:22;epoch=2025-01-01Z";
constexpr std::uint64_t kWidePerTick = std::uint64_t{1} << 22;

// The position of an ID of kWideSeq (or of the same field widths below time, node 0) in
// (tick, seq) space: consecutive IDs have consecutive positions.
std::uint64_t wide_position(std::uint64_t id) {
  return (id >> 23) << 22 | (id & (kWidePerTick - 1));
}

class FastPathTest : public GeneratorTest {
 protected:
  // Issues `n` IDs one call at a time, each the next position after the one before (`prev`, 0
  // for none) and at most `max_lead_ticks` ahead of the clock. Returns the last.
  std::uint64_t take_consecutive(Generator& g, std::uint64_t n, std::uint64_t prev,
                                 std::int64_t max_lead_ticks) {
    for (std::uint64_t i = 0; i < n; ++i) {
      Result<std::uint64_t> id = g.next();
      if (!id.ok()) {
        ADD_FAILURE() << "call " << i << ": " << id.status().to_string();
        return prev;
      }
      if (prev != 0 && wide_position(*id) != wide_position(prev) + 1) {
        ADD_FAILURE() << "call " << i << ": position " << wide_position(*id) << " after "
                      << wide_position(prev);
        return *id;
      }
      const std::int64_t lead = static_cast<std::int64_t>(*id >> 23) - now_ticks(g);
      if (lead > max_lead_ticks) {
        ADD_FAILURE() << "call " << i << ": " << lead << " ticks ahead of the clock";
        return *id;
      }
      prev = *id;
    }
    return prev;
  }
};

// The fast path stops where max_lead does: reserve() takes over and throttles, and not one
// value is skipped on the way.
TEST_F(FastPathTest, StaysWithinMaxLeadAndHandsOverWithoutAGap) {
  GeneratorOptions o = options();
  o.max_lead = 1ms;  // two ticks of 2^22 IDs may be issued before the clock has moved
  o.horizon_window = 3ms;
  auto g = make(kWideSeq, o);
  const std::uint64_t first = next(*g);
  const std::uint64_t last = take_consecutive(*g, 2 * kWidePerTick + 100, first, 1);
  EXPECT_EQ(wide_position(last), wide_position(first) + 2 * kWidePerTick + 100);
  EXPECT_GE(g->stats().throttle_waits, 1u);
}

// A step back within max_lead: the fast path keeps counting at the old tick. A step beyond it
// is refused (policy fail) however often it is asked, and when the clock is back the next ID
// follows the last one directly: the refused calls took nothing.
TEST_F(FastPathTest, ClockStepsBackWithoutMovingTheState) {
  GeneratorOptions o = options();
  o.rollback = RollbackPolicy::kFail;
  auto g = make(kWideSeq, o);
  std::uint64_t last = take_consecutive(*g, 1000, next(*g), 0);
  clock_.advance(-500ms);
  last = take_consecutive(*g, 1000, last, 1000);
  clock_.advance(-1000ms);  // 1.5 s behind the last ID: more than max_lead
  for (int i = 0; i < 1000; ++i) {
    Result<std::uint64_t> refused = g->next();
    ASSERT_FALSE(refused.ok());
    ASSERT_EQ(refused.status().reason(), Reason::kClockBehind);
  }
  clock_.advance(1500ms);
  last = take_consecutive(*g, 1000, last, 0);
  EXPECT_EQ(g->stats().rollback_failures, 1000u);
}

// The horizon cannot be extended (the store fails): the fast path and then reserve() issue
// every value up to the durable horizon and not one beyond; calls past it are refused without
// moving the state, and once the store works again the next ID follows the last.
TEST_F(FastPathTest, NeverPassesTheDurableHorizon) {
  auto g = make(kWideSeq);  // max_lead 1 s, window 2 s
  const std::int64_t t0 = now_ticks(*g);
  (void)next(*g);
  const std::int64_t horizon = store_.saved().back().horizons[0];
  ASSERT_EQ(horizon, t0 + 2000);
  store_.fail_saves = true;
  clock_.advance(1999ms);
  const std::uint64_t first = next(*g);
  ASSERT_EQ(static_cast<std::int64_t>(first >> 23), t0 + 1999);
  // Ticks t0 + 1999 and t0 + 2000 (the horizon) are issued in full.
  const std::uint64_t last = take_consecutive(*g, 2 * kWidePerTick - 1, first, 1000);
  EXPECT_EQ(static_cast<std::int64_t>(last >> 23), horizon);
  for (int i = 0; i < 1000; ++i) {
    Result<std::uint64_t> refused = g->next();
    ASSERT_FALSE(refused.ok());
    ASSERT_EQ(refused.status().reason(), Reason::kHorizonNotPersisted);
  }
  store_.fail_saves = false;
  (void)take_consecutive(*g, 1000, last, 1000);
}

// The end of the time field: every value is issued up to the last 2^22 + 1 of the field (the final
// value of a generation never is, and the 2^22 before it are kept for fast-path calls that
// checked before reserve() took the state to the end: Generator::tail_reserve_), then
// TIME_EXHAUSTED, for good.
TEST_F(FastPathTest, EndsExactlyAtTheEndOfTheTimeField) {
  // A 20-bit field of milliseconds whose last tick is the clock's next one.
  const TimePoint epoch = clock_.now() - ((1 << 20) - 2) * 1ms;
  const std::string layout =
      "time:20@1ms,node:1,seq:22;bits=43;epoch=" + std::to_string(epoch.time_since_epoch() / 1ms);
  auto g = make(layout);
  const std::uint64_t first = next(*g);
  ASSERT_EQ(first >> 23, (1u << 20) - 2);
  const std::uint64_t last = take_consecutive(*g, kWidePerTick - 2, first, 1);
  EXPECT_EQ(last >> 23, (1u << 20) - 2);
  EXPECT_EQ(last & (kWidePerTick - 1), kWidePerTick - 2);
  for (int i = 0; i < 1000; ++i) {
    Result<std::uint64_t> refused = g->next();
    ASSERT_FALSE(refused.ok());
    ASSERT_EQ(refused.status().reason(), Reason::kTimeExhausted);
  }
  clock_.advance(5ms);  // past the end: still refused, nothing carried anywhere
  EXPECT_EQ(g->next().status().reason(), Reason::kTimeExhausted);
}

// After close() the fast path issues nothing, and the horizon close() saved covers every ID.
TEST_F(FastPathTest, ClosedGeneratorIssuesNothing) {
  std::uint64_t last = 0;
  {
    auto g = make(kWideSeq);
    last = take_consecutive(*g, 1000, next(*g), 0);
    ASSERT_TRUE(g->close().ok());
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(g->next().status().reason(), Reason::kShutDown);
    EXPECT_EQ(store_.load()->horizons[0], static_cast<std::int64_t>(last >> 23));
  }
  auto again = make(kWideSeq);
  EXPECT_GT(next(*again), last);
}

// A store write that hangs (a stalled disk or registry) must not hold up health(), stats(),
// suspend() or resume(): readiness probes and the lease keeper go on answering.
TEST_F(GeneratorTest, HealthAndSuspendDoNotWaitForAStoreWrite) {
  class GatedStore final : public HorizonStore {
   public:
    explicit GatedStore(HorizonStore& inner) : inner_(inner) {}
    Result<HorizonRecord> load() override { return inner_.load(); }
    Status save(const HorizonRecord& record) override {
      std::unique_lock lock(mu_);
      entered_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return open_; });
      return inner_.save(record);
    }
    std::string describe() const override { return inner_.describe(); }
    void open() {
      std::lock_guard lock(mu_);
      open_ = true;
      cv_.notify_all();
    }
    void close_gate() {
      std::lock_guard lock(mu_);
      open_ = false;
    }
    void wait_entered() {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return entered_; });
    }

   private:
    HorizonStore& inner_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool open_ = true;
    bool entered_ = false;
  };
  GatedStore gated(store_);
  auto created = Generator::create(layout_of("flurry"), options(), clock_, gated);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Generator& g = **created;
  ASSERT_TRUE(g.next().ok());
  gated.close_gate();
  clock_.advance(2500ms);
  std::thread writer([&] { EXPECT_TRUE(g.next().ok()); });  // blocks inside the store write
  gated.wait_entered();
  auto probes = std::async(std::launch::async, [&] {
    const Status health = g.health();
    const GeneratorStats stats = g.stats();
    g.suspend(Status(Reason::kSuspended, "lease in doubt"));
    const Status suspended = g.health();
    g.resume();
    return std::pair{health.ok() && stats.horizon_failures == 0,
                     suspended.reason() == Reason::kSuspended};
  });
  const bool answered = probes.wait_for(10s) == std::future_status::ready;
  gated.open();
  writer.join();
  ASSERT_TRUE(answered) << "health/stats/suspend/resume waited for the store write";
  const auto [healthy, suspended] = probes.get();
  EXPECT_TRUE(healthy);
  EXPECT_TRUE(suspended);
  EXPECT_TRUE(g.health().ok());
}

}  // namespace
}  // namespace flurry

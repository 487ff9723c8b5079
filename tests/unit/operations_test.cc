// The operations layer with no transport at all: a real Service (SQLite registry, default
// layout), a real SegmentService over a real SQLite store in a temporary directory, real order
// formats, and flurry::ops::Operations called directly. Deferral deadlines run on a fake
// monotonic clock: no test sleeps.
#include "ops/operations.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fake_clock.h"
#include "flurry/order_number.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "held_generator.h"
#include "host_guard_scope.h"
#include "ops/activity.h"
#include "ops/authorizer.h"
#include "ops/deferral.h"
#include "ops/retry.h"
#include "ops/values.h"
#include "order/order_formats.h"
#include "service/service.h"
#include "test_store.h"

namespace flurry::ops {
namespace {

using std::chrono::milliseconds;
using testing::FakeMonotonicClock;
using testing::TempDir;

constexpr std::string_view kKey = "1 = 2b7e151628aed2a6abf7158809cf4f3c";

// --- Values, parsed once -------------------------------------------------------------------

TEST(IdCountTest, OfChecksTheRangeNamingTheField) {
  EXPECT_EQ(IdCount::of(1, 10)->value(), 1u);
  EXPECT_EQ(IdCount::of(10, 10)->value(), 10u);
  const Result<IdCount> zero = IdCount::of(0, 10);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  // The operations layer names the bare field; no transport's parameter or message field.
  EXPECT_EQ(zero.status().message(), "count: 0 is too small (at least 1)");
  const Result<IdCount> over = IdCount::of(11, 10, {"", "size"});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(), "size: 11 is more than max_batch (10)");
}

TEST(IdCountTest, EachTransportWordsItsOwnField) {
  EXPECT_EQ(IdCount::of(0, 10, {"parameter", "count"}).status().message(),
            "parameter \"count\": 0 is too small (at least 1)");
  EXPECT_EQ(IdCount::of(11, 10, {"field", "size"}).status().message(),
            "field \"size\": 11 is more than max_batch (10)");
  EXPECT_EQ(IdCount::parse("x", 10, {"parameter", "size"}).status().message(),
            "parameter \"size\": \"x\" is not a whole number from 1 to 10");
}

TEST(IdCountTest, ParseSaysWhatIsWrongWithTheText) {
  EXPECT_EQ(IdCount::parse("7", 10)->value(), 7u);
  EXPECT_EQ(IdCount::parse("", 10).status().message(),
            "count is empty; expected a whole number from 1 to 10");
  EXPECT_EQ(IdCount::parse("x", 10).status().message(),
            "count: \"x\" is not a whole number from 1 to 10");
  EXPECT_EQ(IdCount::parse("-1", 10).status().message(),
            "count: \"-1\" is not a whole number from 1 to 10");
  EXPECT_EQ(IdCount::parse("0", 10).status().message(), "count: 0 is too small (at least 1)");
  EXPECT_EQ(IdCount::parse("99999999999999999999999", 10).status().message(),
            "count: \"99999999999999999999999\" is more than max_batch (10)");
  EXPECT_EQ(IdCount::parse("11", 10).status().message(), "count: 11 is more than max_batch (10)");
  EXPECT_EQ(IdCount::one().value(), 1u);
}

TEST(IdCountTest, NeverAboveKMaxIdCountWhateverTheMax) {
  // The bound that keeps a segment claim inside the cursor's index bits, for any max.
  EXPECT_EQ(IdCount::of(kMaxIdCount, ~std::uint64_t{0})->value(), kMaxIdCount);
  const Result<IdCount> over = IdCount::of(kMaxIdCount + 1, ~std::uint64_t{0});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(), "count: 274877906945 is more than max_batch (274877906944)");
  EXPECT_FALSE(IdCount::parse("274877906945", ~std::uint64_t{0}).ok());
  EXPECT_TRUE(IdCount::parse("274877906944", ~std::uint64_t{0}).ok());
}

TEST(SegmentTagTest, OneCheckNamingWhereTheTextCameFrom) {
  EXPECT_EQ(SegmentTag::of("orders.v1_x-2", "field \"tag\"")->name(), "orders.v1_x-2");
  for (std::string_view bad : {"", ".", "..", "a b", "a/b", "ä"}) {
    SCOPED_TRACE(bad);
    const Result<SegmentTag> tag = SegmentTag::of(bad, "the tag in the path");
    ASSERT_FALSE(tag.ok());
    EXPECT_EQ(tag.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(tag.status().message().rfind("the tag in the path is not a valid tag name: ", 0), 0u)
        << tag.status().message();
  }
  EXPECT_FALSE(SegmentTag::of(std::string(129, 'a'), "x").ok());
  EXPECT_TRUE(SegmentTag::of(std::string(128, 'a'), "x").ok());
}

// The transports' advice derives from the one classification, Status::retryable(): for every
// code and every reason, retry exactly when it says so, after kRetryAfter (1 s).
TEST(RetryTest, AdviceFollowsStatusRetryable) {
  std::vector<Status> all = {OkStatus()};
  for (int c = 1; c <= 16; ++c) all.emplace_back(static_cast<StatusCode>(c), "x");
  for (int r = 1; r < kReasonCount; ++r) all.emplace_back(static_cast<Reason>(r), "x");
  int retried = 0;
  for (const Status& st : all) {
    SCOPED_TRACE(st.to_string());
    const RetryAdvice advice = retry_advice(st);
    EXPECT_EQ(advice.retry, st.retryable());
    EXPECT_EQ(advice.after, advice.retry ? std::chrono::seconds(1) : std::chrono::seconds(0));
    retried += advice.retry ? 1 : 0;
  }
  EXPECT_GT(retried, 0);
  EXPECT_LT(retried, static_cast<int>(all.size()));
  // CANCELLED: the caller went away; no Retry-After, no gRPC retry delay.
  EXPECT_FALSE(retry_advice(Status(StatusCode::kCancelled, "the client cancelled the call")).retry);
  EXPECT_TRUE(retry_advice(Status(Reason::kClockBehind, "x")).retry);
  EXPECT_FALSE(retry_advice(Status(Reason::kBodyTooLarge, "x")).retry);
}

// --- The pools -----------------------------------------------------------------------------

TEST(PoolsTest, GeneratorJobsAreCountedUntilDoneAndStopRunsWhatIsQueued) {
  Pools pools(2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  pools.post(Pool::kGenerator, [released, &ran] {
    released.wait();
    ++ran;
  });
  pools.post(Pool::kGenerator, [&ran] { ++ran; });
  EXPECT_EQ(pools.generator_waiting(), 2u);
  // The store pool runs beside a held generator.
  std::promise<void> store_ran;
  pools.post(Pool::kStore, [&store_ran] { store_ran.set_value(); });
  store_ran.get_future().wait();
  release.set_value();
  pools.stop();
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(pools.generator_waiting(), 0u);
  // After stop a job still runs (on the caller), so a deferred request is always answered.
  bool late = false;
  pools.post(Pool::kStore, [&late] { late = true; });
  EXPECT_TRUE(late);
}

// A server that never defers runs no pool thread: each pool starts its threads at its first job.
TEST(PoolsTest, ThreadsStartWithTheFirstJobOfTheirPool) {
  Pools pools(3);
  EXPECT_EQ(pools.threads_started(), 0u);
  std::promise<void> store_ran;
  pools.post(Pool::kStore, [&store_ran] { store_ran.set_value(); });
  store_ran.get_future().wait();
  EXPECT_EQ(pools.threads_started(), 3u);
  std::promise<void> generator_ran;
  pools.post(Pool::kGenerator, [&generator_ran] { generator_ran.set_value(); });
  generator_ran.get_future().wait();
  EXPECT_EQ(pools.threads_started(), 3u + Pools::kGeneratorThreads);
  pools.stop();
  EXPECT_EQ(pools.threads_started(), 0u);
}

TEST(PoolsTest, StoppedBeforeAnyJobAJobStillRunsOnTheCaller) {
  Pools pools;
  pools.stop();
  bool ran = false;
  pools.post(Pool::kGenerator, [&ran] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_EQ(pools.threads_started(), 0u);
}

// --- Operations over real services -------------------------------------------------------

class OperationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::use_own_host_guard_scope();
    service::ServiceOptions options;
    options.registry.data_dir = dir_.path() / "data";
    options.registry.host_dir = dir_.path();  // this test's own host
    Result<std::unique_ptr<service::Service>> service = service::Service::create(options);
    ASSERT_TRUE(service.ok()) << service.status().to_string();
    service_ = std::move(service).value();
    ASSERT_TRUE(service_->start().ok());

    SegmentStoreSpec spec;
    spec.sqlite_path = dir_.path() / "segments.db";
    Result<std::unique_ptr<SegmentStore>> store = open_segment_store(spec);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    std::vector<std::unique_ptr<SegmentStore>> stores;
    stores.push_back(std::move(store).value());
    SegmentOptions segment_options;
    segment_options.max_batch = 1000;
    segment_options.max_wait = milliseconds(100);
    Result<std::unique_ptr<SegmentService>> segments =
        SegmentService::create(std::move(stores), segment_options);
    ASSERT_TRUE(segments.ok()) << segments.status().to_string();
    segments_ = std::move(segments).value();

    Result<OrderKeySet> keys = OrderKeySet::parse(std::string(kKey), "test keys");
    ASSERT_TRUE(keys.ok()) << keys.status().to_string();
    Result<std::unique_ptr<order::OrderFormats>> formats =
        order::OrderFormats::create({}, std::move(keys).value(), service_->layout());
    ASSERT_TRUE(formats.ok()) << formats.status().to_string();
    formats_ = std::move(formats).value();
    build(segments_.get(), formats_.get());
  }

  void build(SegmentService* segments, order::OrderFormats* formats) {
    ops_.reset();
    ops_ = std::make_unique<Operations>(*service_, segments, formats, authorizer_, pools_,
                                        Clocks{SystemClock::coarse(), clock_});
  }

  void TearDown() override {
    ops_.reset();
    pools_.stop();
    segments_.reset();
    if (service_) service_->stop();
  }

  SegmentTag tag(std::string_view name) { return SegmentTag::of(name, "test").value(); }
  IdCount count(std::uint64_t n) { return IdCount::of(n, 1000).value(); }

  void create(std::string_view name, std::uint64_t start = 1, std::uint64_t step = 100) {
    SegmentTagSpec spec;
    spec.tag = std::string(name);
    spec.start = start;
    spec.step = step;
    Deferral d;
    const Result<SegmentTagInfo> row = ops_->create_segment_tag(spec, Blocking::kAllowed, d);
    ASSERT_TRUE(row.ok()) << row.status().to_string();
    EXPECT_EQ(row->tag, name);
    EXPECT_EQ(row->max_id, start);
  }

  TempDir dir_;
  FakeMonotonicClock clock_;
  Authorizer authorizer_{{}, ops::kDefaultOpenScopes, clock_};
  Pools pools_;
  std::unique_ptr<service::Service> service_;
  std::unique_ptr<SegmentService> segments_;
  std::unique_ptr<order::OrderFormats> formats_;
  std::unique_ptr<Operations> ops_;
};

TEST_F(OperationsTest, NextIdsFillExactlyTheCountIncreasing) {
  std::vector<std::uint64_t> out(10, 0);
  Deferral d;
  ASSERT_TRUE(ops_->next_ids(count(3), out, Blocking::kNever, d).ok());
  EXPECT_LT(out[0], out[1]);
  EXPECT_LT(out[1], out[2]);
  EXPECT_EQ(out[3], 0u);  // nothing beyond the count
  const std::uint64_t last = out[2];
  ASSERT_TRUE(ops_->next_ids(count(1), out, Blocking::kAllowed, d).ok());
  EXPECT_GT(out[0], last);
  EXPECT_EQ(ops_->max_batch(), service_->max_batch());
  EXPECT_TRUE(ops_->readiness().ok());
  EXPECT_EQ(ops_->node(), service_->node());
  const Result<DecodedId> decoded = ops_->decode_id(std::to_string(last), Encoding::kDecimal);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->id, last);
  EXPECT_EQ(ops_->decode_id("zz", Encoding::kDecimal).status().code(),
            StatusCode::kInvalidArgument);
}

// While a request waits on the generator's thread, new ones with Blocking::kNever are deferred
// without trying (first come, first served); run again with kAllowed they complete.
TEST_F(OperationsTest, NextIdsQueueBehindWaitingGeneratorWork) {
  testing::HeldGenerator held(pools_);
  std::vector<std::uint64_t> out(2);
  Deferral d;
  d.pool = Pool::kStore;
  const Status st = ops_->next_ids(count(2), out, Blocking::kNever, d);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.reason(), Reason::kWouldBlock);
  EXPECT_EQ(d.pool, Pool::kGenerator);
  EXPECT_EQ(service_->ids_issued(), 0u);  // nothing was issued
  ASSERT_TRUE(ops_->next_ids(count(2), out, Blocking::kAllowed, d).ok());
  EXPECT_LT(out[0], out[1]);
}

TEST_F(OperationsTest, SegmentIdsDeferWhenNotInMemoryAndCompleteOnThePool) {
  ASSERT_NO_FATAL_FAILURE(create("orders"));
  std::vector<std::uint64_t> out(5);
  Deferral d;
  const MonoTime before = clock_.now();
  Status st = ops_->segment_ids(tag("orders"), count(3), out, Blocking::kNever, d);
  ASSERT_EQ(st.reason(), Reason::kWouldBlock) << st.to_string();
  EXPECT_EQ(d.pool, Pool::kStore);
  EXPECT_EQ(d.deadline, before + milliseconds(1000));  // max(segment_max_wait, 1 s)
  st = ops_->segment_ids(tag("orders"), count(3), out, Blocking::kAllowed, d);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(out[0], 1u);
  EXPECT_EQ(out[2], 3u);
  // Loaded: answered at once.
  Deferral fresh;
  ASSERT_TRUE(ops_->segment_ids(tag("orders"), count(2), out, Blocking::kNever, fresh).ok());
  EXPECT_EQ(out[0], 4u);
  const Result<SegmentRange> range =
      ops_->segment_range(tag("orders"), count(10), Blocking::kNever, fresh);
  ASSERT_TRUE(range.ok()) << range.status().to_string();
  EXPECT_EQ(range->size(), 10u);
  EXPECT_EQ(ops_->segment_ids(tag("nope"), count(1), out, Blocking::kAllowed, fresh).code(),
            StatusCode::kNotFound);
}

TEST_F(OperationsTest, DeferredCallsPastTheirDeadlineAreUnavailableAtOnce) {
  ASSERT_NO_FATAL_FAILURE(create("late"));
  std::vector<std::uint64_t> out(1);
  Deferral ids;
  ASSERT_EQ(ops_->segment_ids(tag("late"), count(1), out, Blocking::kNever, ids).reason(),
            Reason::kWouldBlock);
  Deferral list;
  ASSERT_EQ(ops_->segment_tags(Blocking::kNever, list).status().reason(), Reason::kWouldBlock);
  clock_.advance(std::chrono::seconds(2));
  const Status st = ops_->segment_ids(tag("late"), count(1), out, Blocking::kAllowed, ids);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("segment_max_wait_ms"), std::string::npos);
  EXPECT_NE(st.reason(), Reason::kWouldBlock);
  EXPECT_EQ(ops_->segment_tags(Blocking::kAllowed, list).status().code(), StatusCode::kUnavailable);
  // A call that was never deferred has no deadline.
  Deferral direct;
  ASSERT_TRUE(ops_->segment_ids(tag("late"), count(1), out, Blocking::kAllowed, direct).ok());
}

TEST_F(OperationsTest, StoreOperationsAlwaysDeferUnderNeverBlocking) {
  ASSERT_NO_FATAL_FAILURE(create("a", 1001, 500));
  Deferral d;
  EXPECT_EQ(ops_->segment_tags(Blocking::kNever, d).status().reason(), Reason::kWouldBlock);
  Deferral t;
  EXPECT_EQ(ops_->segment_tag(tag("a"), Blocking::kNever, t).status().reason(),
            Reason::kWouldBlock);
  const Result<std::vector<SegmentTagInfo>> tags = ops_->segment_tags(Blocking::kAllowed, d);
  ASSERT_TRUE(tags.ok());
  ASSERT_EQ(tags->size(), 1u);
  EXPECT_EQ((*tags)[0].max_id, 1001u);
  Result<SegmentTagReport> report = ops_->segment_tag(tag("a"), Blocking::kAllowed, t);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_FALSE(report->served);
  ASSERT_TRUE(report->stored.has_value());
  EXPECT_EQ(report->stored->step, 500u);
  EXPECT_EQ(report->state.step, 500u);
  Deferral none;
  EXPECT_EQ(ops_->segment_tag(tag("b"), Blocking::kAllowed, none).status().code(),
            StatusCode::kNotFound);

  // Creating: deferred to the store pool (the transports admitted the caller before).
  SegmentTagSpec spec;
  spec.tag = "c";
  Deferral c;
  EXPECT_EQ(ops_->create_segment_tag(spec, Blocking::kNever, c).status().reason(),
            Reason::kWouldBlock);
  EXPECT_EQ(c.pool, Pool::kStore);
  EXPECT_TRUE(ops_->create_segment_tag(spec, Blocking::kAllowed, c).ok());
  Deferral again;
  EXPECT_EQ(ops_->create_segment_tag(spec, Blocking::kAllowed, again).status().code(),
            StatusCode::kAlreadyExists);
  spec.tag = "d";
  spec.step = 0;
  Deferral bad;
  EXPECT_EQ(ops_->create_segment_tag(spec, Blocking::kAllowed, bad).status().code(),
            StatusCode::kInvalidArgument);
}

// GET /v1/nodes reads the registry at most once a second (issue 32): a listing is kept for
// kNodesCacheTime on the monotonic clock, and calls that arrive together share one read.
TEST_F(OperationsTest, NodesAreReadOnceASecondAndSharedByConcurrentCalls) {
  Deferral d;
  EXPECT_EQ(ops_->nodes(Blocking::kNever, d).status().reason(), Reason::kWouldBlock);
  Result<NodesReport> first = ops_->nodes(Blocking::kAllowed, d);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_EQ(first->listing.nodes.size(), 1u);
  EXPECT_EQ(ops_->nodes_registry_reads(), 1u);

  // A second process claims a node ID: within the second the kept listing is answered.
  service::ServiceOptions options;
  options.registry.data_dir = dir_.path() / "data";
  Result<std::unique_ptr<service::Service>> other = service::Service::create(options);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  ASSERT_TRUE((*other)->start().ok());
  clock_.advance(Operations::kNodesCacheTime - std::chrono::milliseconds(1));
  Deferral again;
  Result<NodesReport> cached = ops_->nodes(Blocking::kAllowed, again);
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached->listing.nodes.size(), 1u);
  EXPECT_EQ(ops_->nodes_registry_reads(), 1u);

  // A second later, calls arriving together: one read, every one sees both nodes.
  clock_.advance(std::chrono::milliseconds(1));
  constexpr int kCallers = 8;
  std::vector<std::size_t> seen(kCallers, 0);
  std::latch go(kCallers);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      go.arrive_and_wait();
      Deferral mine;
      Result<NodesReport> r = ops_->nodes(Blocking::kAllowed, mine);
      seen[i] = r.ok() ? r->listing.nodes.size() : 0;
    });
  }
  for (std::thread& t : callers) t.join();
  for (int i = 0; i < kCallers; ++i) EXPECT_EQ(seen[i], 2u) << "caller " << i;
  EXPECT_EQ(ops_->nodes_registry_reads(), 2u);
  (*other)->stop();
}

TEST_F(OperationsTest, WithoutSegmentModeItsOperationsAreNotFound) {
  build(nullptr, formats_.get());
  EXPECT_FALSE(ops_->segments_served());
  std::vector<std::uint64_t> out(1);
  Deferral d;
  const Status st = ops_->segment_ids(tag("x"), count(1), out, Blocking::kAllowed, d);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "segment mode is not served here");
  EXPECT_EQ(ops_->segment_tags(Blocking::kAllowed, d).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ops_->check_order_numbers(tag("x")).code(), StatusCode::kNotFound);
  EXPECT_TRUE(ops_->segment_store_names().empty());
}

// Order numbers of the snowflake generator decode with keys alone: segment mode being off
// changes nothing.
TEST_F(OperationsTest, OrderNumbersWithoutSegmentMode) {
  build(nullptr, formats_.get());
  std::vector<std::uint64_t> ids(4);
  OrderNumbers numbers;
  Deferral d;
  ASSERT_TRUE(
      ops_->new_order_numbers(count(4), std::nullopt, ids, numbers, Blocking::kNever, d).ok());
  ASSERT_EQ(numbers.size(), 4u);
  OrderNumberFault fault;
  Deferral dd;
  const Result<DecodedOrderNumber> decoded =
      ops_->decode_order_number(numbers[2], std::nullopt, fault, Blocking::kNever, dd);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_FALSE(decoded->segment);
  EXPECT_EQ(decoded->id, ids[2]);
  EXPECT_EQ(decoded->decoded.id, ids[2]);
  EXPECT_EQ(decoded->key_version, '1');

  // A mistyped number: INVALID_ARGUMENT with the kind and position, no segment hint.
  std::string typo(numbers[0]);
  typo[3] = typo[3] == '1' ? '2' : '1';
  Deferral td;
  const Result<DecodedOrderNumber> bad =
      ops_->decode_order_number(typo, std::nullopt, fault, Blocking::kNever, td);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fault.kind, OrderDecodeError::Kind::kNone);
  EXPECT_EQ(bad.status().message().find("?tag="), std::string::npos);
}

TEST_F(OperationsTest, OrderNumbersOffAreUnimplemented) {
  build(segments_.get(), nullptr);
  EXPECT_FALSE(ops_->orders_served());
  const Status st = ops_->check_order_numbers(std::nullopt);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("order_key_file"), std::string::npos);
  std::vector<std::uint64_t> ids(1);
  OrderNumbers numbers;
  Deferral d;
  EXPECT_EQ(
      ops_->new_order_numbers(count(1), std::nullopt, ids, numbers, Blocking::kNever, d).code(),
      StatusCode::kUnimplemented);
  OrderNumberFault fault;
  EXPECT_EQ(
      ops_->decode_order_number("123", std::nullopt, fault, Blocking::kNever, d).status().code(),
      StatusCode::kUnimplemented);
}

// A tag's number decodes only to an ID the tag handed out: the stores are read (deferred under
// kNever), and a forged number above max_id is INVALID_ARGUMENT kind no_such_id.
TEST_F(OperationsTest, TagOrderNumbersNeedTheStoredMaxId) {
  ASSERT_NO_FATAL_FAILURE(create("orders"));
  std::vector<std::uint64_t> ids(3);
  OrderNumbers numbers;
  Deferral d;
  Status st = ops_->new_order_numbers(count(3), tag("orders"), ids, numbers, Blocking::kNever, d);
  ASSERT_EQ(st.reason(), Reason::kWouldBlock);  // the tag is not loaded yet
  ASSERT_TRUE(
      ops_->new_order_numbers(count(3), tag("orders"), ids, numbers, Blocking::kAllowed, d).ok());
  ASSERT_EQ(numbers.size(), 3u);
  EXPECT_EQ(ids[0], 1u);

  OrderNumberFault fault;
  Deferral dd;
  Result<DecodedOrderNumber> decoded =
      ops_->decode_order_number(numbers[1], tag("orders"), fault, Blocking::kNever, dd);
  ASSERT_EQ(decoded.status().reason(), Reason::kWouldBlock);
  EXPECT_EQ(dd.pool, Pool::kStore);
  decoded = ops_->decode_order_number(numbers[1], tag("orders"), fault, Blocking::kAllowed, dd);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_TRUE(decoded->segment);
  EXPECT_EQ(decoded->tag, "orders");
  EXPECT_EQ(decoded->id, 2u);

  Result<std::shared_ptr<const OrderNumberFormat>> format = formats_->segment("orders");
  ASSERT_TRUE(format.ok());
  const Result<std::string> forged = (*format)->encode(1'000'000);
  ASSERT_TRUE(forged.ok());
  Deferral fd;
  decoded = ops_->decode_order_number(*forged, tag("orders"), fault, Blocking::kAllowed, fd);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fault.kind, OrderDecodeError::Kind::kNoSuchId);
  EXPECT_NE(decoded.status().message().find("max_id is 101"), std::string::npos)
      << decoded.status().message();

  std::string text;
  service::PrometheusWriter writer(text);
  ops_->write_metrics(writer);
  EXPECT_NE(text.find("flurry_order_numbers_issued_total{source=\"segment\"} 3"),
            std::string::npos);
  EXPECT_NE(text.find("flurry_order_decodes_total{result=\"ok\"} 1"), std::string::npos);
  EXPECT_NE(text.find("flurry_order_decodes_total{result=\"error\"} 1"), std::string::npos);
  EXPECT_NE(text.find("flurry_segment_ids_issued_total{tag=\"orders\"} 3"), std::string::npos);
  EXPECT_NE(text.find("flurry_ids_issued_total"), std::string::npos);
}

// The activity history samples the counters on the ticks of a periodic thread once a second has
// passed on the monotonic clock: the differences per interval, oldest first, at most 300 of them,
// the wall time of the last.
TEST(ActivityHistoryTest, SamplesEverySecondOnTheMonotonicClock) {
  FakeMonotonicClock mono;
  testing::FakeClock wall(TimePoint(std::chrono::milliseconds(1'800'000'000'000)));
  std::uint64_t snowflake = 100;
  std::uint64_t segment = 7;
  ActivityHistory history([&] { return ActivityCounts{snowflake, segment, 3}; }, {wall, mono});
  history.tick();
  ActivitySnapshot a = history.read();
  EXPECT_EQ(a.interval, std::chrono::seconds(1));
  EXPECT_EQ(a.end_unix_ms, 0);
  EXPECT_TRUE(a.series[0].ids.empty());
  EXPECT_EQ(a.series[0].name, "snowflake");
  EXPECT_EQ(a.series[1].name, "segment");
  EXPECT_EQ(a.series[2].name, "order_numbers");

  snowflake += 40;
  segment += 2;
  for (int look = 0; look < 3; ++look) {  // the monitor's looks, 250 ms apart
    mono.advance(std::chrono::milliseconds(250));
    history.tick();
    EXPECT_TRUE(history.read().series[0].ids.empty()) << look;  // not a second yet
  }
  wall.advance(std::chrono::seconds(1));
  mono.advance(std::chrono::milliseconds(260));  // a look a little late: the grid stays
  history.tick();
  a = history.read();
  EXPECT_EQ(a.series[0].ids, std::vector<std::uint64_t>{40});
  EXPECT_EQ(a.series[1].ids, std::vector<std::uint64_t>{2});
  EXPECT_EQ(a.series[2].ids, std::vector<std::uint64_t>{0});
  EXPECT_EQ(a.end_unix_ms, 1'800'000'001'000);
  mono.advance(std::chrono::milliseconds(990));  // 2 s after the first tick
  history.tick();
  EXPECT_EQ(history.read().series[0].ids.size(), 2u);

  for (std::uint64_t i = 0; i < 310; ++i) {
    snowflake += i;
    mono.advance(std::chrono::seconds(1));
    history.tick();
  }
  a = history.read();
  ASSERT_EQ(a.series[0].ids.size(), ActivityHistory::kIntervals);
  EXPECT_EQ(a.series[1].ids.size(), ActivityHistory::kIntervals);
  EXPECT_EQ(a.series[2].ids.size(), ActivityHistory::kIntervals);
  EXPECT_EQ(a.series[0].ids.front(), 10u);  // the oldest 12 intervals were dropped
  EXPECT_EQ(a.series[0].ids.back(), 309u);

  // A pause of 10 s without a tick: one interval holds its IDs, and the grid starts over.
  snowflake += 1000;
  mono.advance(std::chrono::seconds(10));
  history.tick();
  EXPECT_EQ(history.read().series[0].ids.back(), 1000u);
  mono.advance(std::chrono::milliseconds(999));
  history.tick();
  EXPECT_EQ(history.read().series[0].ids.back(), 1000u);
  mono.advance(std::chrono::milliseconds(1));
  history.tick();
  EXPECT_EQ(history.read().series[0].ids.back(), 0u);
}

}  // namespace
}  // namespace flurry::ops

#include "flurry/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace flurry {
namespace {

TEST(StatusTest, DefaultIsOkWithEmptyMessage) {
  const Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.reason(), Reason::kNone);
  EXPECT_EQ(s.message(), "");
  EXPECT_FALSE(s.retryable());
  EXPECT_EQ(s.to_string(), "OK");
}

TEST(StatusTest, OkStatusHelperIsOk) {
  const Status s = OkStatus();
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(s.message().empty());
}

TEST(StatusTest, ConstructingWithOkCodeDropsTheMessage) {
  const Status s(StatusCode::kOk, Reason::kBadInput, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.reason(), Reason::kNone);
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, ErrorCarriesCodeReasonAndMessage) {
  const Status s(StatusCode::kUnavailable, Reason::kClockBehind, "clock is 5ms behind");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.reason(), Reason::kClockBehind);
  EXPECT_EQ(s.message(), "clock is 5ms behind");
  EXPECT_EQ(s.to_string(), "UNAVAILABLE (CLOCK_BEHIND): clock is 5ms behind");
}

TEST(StatusTest, ToStringOmitsReasonNone) {
  const Status s(StatusCode::kInternal, Reason::kNone, "boom");
  EXPECT_EQ(s.to_string(), "INTERNAL: boom");
}

TEST(StatusTest, InvalidArgumentHelper) {
  const Status s = InvalidArgument("bad layout");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.reason(), Reason::kBadInput);
  EXPECT_EQ(s.message(), "bad layout");
  EXPECT_EQ(s.to_string(), "INVALID_ARGUMENT (BAD_INPUT): bad layout");
}

TEST(StatusTest, CodeNamesAndNumbersMatchGrpc) {
  const std::vector<std::pair<StatusCode, std::string_view>> want = {
      {StatusCode::kOk, "OK"},
      {StatusCode::kCancelled, "CANCELLED"},
      {StatusCode::kUnknown, "UNKNOWN"},
      {StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
      {StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
      {StatusCode::kNotFound, "NOT_FOUND"},
      {StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
      {StatusCode::kPermissionDenied, "PERMISSION_DENIED"},
      {StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
      {StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
      {StatusCode::kAborted, "ABORTED"},
      {StatusCode::kOutOfRange, "OUT_OF_RANGE"},
      {StatusCode::kUnimplemented, "UNIMPLEMENTED"},
      {StatusCode::kInternal, "INTERNAL"},
      {StatusCode::kUnavailable, "UNAVAILABLE"},
      {StatusCode::kDataLoss, "DATA_LOSS"},
  };
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(static_cast<int>(want[i].first), static_cast<int>(i));
    EXPECT_EQ(to_string(want[i].first), want[i].second);
  }
  EXPECT_EQ(to_string(static_cast<StatusCode>(99)), "UNKNOWN");
}

TEST(StatusTest, ReasonNames) {
  EXPECT_EQ(to_string(Reason::kNone), "NONE");
  EXPECT_EQ(to_string(Reason::kBadInput), "BAD_INPUT");
  EXPECT_EQ(to_string(Reason::kClockBehind), "CLOCK_BEHIND");
  EXPECT_EQ(to_string(Reason::kClockBeforeEpoch), "CLOCK_BEFORE_EPOCH");
  EXPECT_EQ(to_string(Reason::kTimeExhausted), "TIME_EXHAUSTED");
  EXPECT_EQ(to_string(Reason::kHorizonNotPersisted), "HORIZON_NOT_PERSISTED");
  EXPECT_EQ(to_string(Reason::kBatchTooLarge), "BATCH_TOO_LARGE");
  EXPECT_EQ(to_string(Reason::kShutDown), "SHUT_DOWN");
  EXPECT_EQ(to_string(Reason::kStateMismatch), "STATE_MISMATCH");
  EXPECT_EQ(to_string(Reason::kIo), "IO");
  EXPECT_EQ(to_string(Reason::kLeaseLost), "LEASE_LOST");
  EXPECT_EQ(to_string(Reason::kNoFreeNode), "NO_FREE_NODE");
  EXPECT_EQ(to_string(Reason::kSuspended), "SUSPENDED");
  EXPECT_EQ(to_string(static_cast<Reason>(99)), "NONE");
}

TEST(StatusTest, RetryableCodes) {
  for (int c = 0; c <= 15; ++c) {
    const auto code = static_cast<StatusCode>(c);
    const bool want = code == StatusCode::kUnavailable || code == StatusCode::kAborted ||
                      code == StatusCode::kResourceExhausted ||
                      code == StatusCode::kDeadlineExceeded;
    EXPECT_EQ(Status(code, Reason::kNone, "m").retryable(), want) << to_string(code);
  }
}

TEST(StatusTest, WithPrefix) {
  const Status s(StatusCode::kNotFound, Reason::kIo, "no such file");
  const Status p = s.with_prefix("loading horizon");
  EXPECT_EQ(p.code(), StatusCode::kNotFound);
  EXPECT_EQ(p.reason(), Reason::kIo);
  EXPECT_EQ(p.message(), "loading horizon: no such file");
  // The original is unchanged.
  EXPECT_EQ(s.message(), "no such file");
  // Prefixes nest.
  EXPECT_EQ(p.with_prefix("startup").message(), "startup: loading horizon: no such file");
}

TEST(StatusTest, WithPrefixKeepsOkOk) {
  const Status p = OkStatus().with_prefix("anything");
  EXPECT_TRUE(p.ok());
  EXPECT_EQ(p.message(), "");
}

TEST(StatusTest, CopyIsDeepAndIndependent) {
  Status a(StatusCode::kAborted, Reason::kStateMismatch, "first");
  Status b(a);
  EXPECT_EQ(b.code(), StatusCode::kAborted);
  EXPECT_EQ(b.reason(), Reason::kStateMismatch);
  EXPECT_EQ(b.message(), "first");
  a = Status(StatusCode::kDataLoss, Reason::kIo, "second");
  EXPECT_EQ(b.message(), "first");
  EXPECT_EQ(a.message(), "second");

  Status c;
  c = b;
  EXPECT_EQ(c.to_string(), "ABORTED (STATE_MISMATCH): first");
  c = OkStatus();
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(b.to_string(), "ABORTED (STATE_MISMATCH): first");

  // Self-assignment is harmless.
  Status& alias = b;
  b = alias;
  EXPECT_EQ(b.message(), "first");
}

TEST(StatusTest, CopyOfOkIsOk) {
  const Status ok;
  const Status copy(ok);  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_TRUE(copy.ok());
  Status assigned(StatusCode::kInternal, Reason::kNone, "x");
  assigned = ok;
  EXPECT_TRUE(assigned.ok());
  EXPECT_EQ(assigned.message(), "");
}

TEST(StatusTest, MoveTransfersTheError) {
  Status a(StatusCode::kCancelled, Reason::kShutDown, "closed");
  Status b(std::move(a));
  EXPECT_EQ(b.code(), StatusCode::kCancelled);
  EXPECT_EQ(b.message(), "closed");
  Status c;
  c = std::move(b);
  EXPECT_EQ(c.reason(), Reason::kShutDown);
  EXPECT_EQ(c.message(), "closed");
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
  EXPECT_TRUE(r.status().ok());
  r.value() = 7;
  EXPECT_EQ(*r, 7);
}

TEST(ResultTest, HoldsError) {
  const Result<int> r = InvalidArgument("nope");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().reason(), Reason::kBadInput);
  EXPECT_EQ(r.status().message(), "nope");
}

TEST(ResultTest, ArrowAndMoveOut) {
  Result<std::string> r = std::string("hello");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 5u);
  const std::string taken = std::move(r).value();
  EXPECT_EQ(taken, "hello");
}

TEST(ResultTest, MoveOnlyValue) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(9);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 9);
}

TEST(ResultTest, CopyKeepsStatus) {
  const Result<int> a = Status(StatusCode::kOutOfRange, Reason::kTimeExhausted, "ran out");
  const Result<int> b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.status().to_string(), "OUT_OF_RANGE (TIME_EXHAUSTED): ran out");
}

#ifdef NDEBUG
TEST(ResultTest, OkStatusBecomesInternalInRelease) {
  const Result<int> r = OkStatus();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}
#else
TEST(ResultDeathTest, OkStatusAssertsInDebug) {
  EXPECT_DEATH({ [[maybe_unused]] const Result<int> r = OkStatus(); }, "OK Status");
}
#endif

}  // namespace
}  // namespace flurry

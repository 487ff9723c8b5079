#include "flurry/status.h"

#include <gtest/gtest.h>

#include <iterator>
#include <memory>
#include <string>
#include <string_view>
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
  const Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.reason(), Reason::kNone);
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, ErrorCarriesCodeReasonAndMessage) {
  const Status s(Reason::kClockBehind, "clock is 5ms behind");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.reason(), Reason::kClockBehind);
  EXPECT_EQ(s.message(), "clock is 5ms behind");
  EXPECT_EQ(s.to_string(), "UNAVAILABLE (CLOCK_BEHIND): clock is 5ms behind");
}

TEST(StatusTest, ToStringOmitsReasonNone) {
  const Status s(StatusCode::kInternal, "boom");
  EXPECT_EQ(s.reason(), Reason::kNone);
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
      {StatusCode::kUnauthenticated, "UNAUTHENTICATED"},
  };
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(static_cast<int>(want[i].first), static_cast<int>(i));
    EXPECT_EQ(to_string(want[i].first), want[i].second);
  }
  EXPECT_EQ(to_string(static_cast<StatusCode>(99)), "UNKNOWN");
}

// The canonical table: every reason, its name and the one code it is used under. A reason added
// to the enum without a row here fails EveryReasonIsInTheTable.
struct ReasonRow {
  Reason reason;
  std::string_view name;
  StatusCode code;
};
constexpr ReasonRow kTable[] = {
    {Reason::kBadInput, "BAD_INPUT", StatusCode::kInvalidArgument},
    {Reason::kBatchTooLarge, "BATCH_TOO_LARGE", StatusCode::kInvalidArgument},
    {Reason::kClockBehind, "CLOCK_BEHIND", StatusCode::kUnavailable},
    {Reason::kClockBeforeEpoch, "CLOCK_BEFORE_EPOCH", StatusCode::kFailedPrecondition},
    {Reason::kTimeExhausted, "TIME_EXHAUSTED", StatusCode::kFailedPrecondition},
    {Reason::kHorizonNotPersisted, "HORIZON_NOT_PERSISTED", StatusCode::kUnavailable},
    {Reason::kShutDown, "SHUT_DOWN", StatusCode::kUnavailable},
    {Reason::kSuspended, "SUSPENDED", StatusCode::kUnavailable},
    {Reason::kWouldBlock, "WOULD_BLOCK", StatusCode::kUnavailable},
    {Reason::kIo, "IO", StatusCode::kUnavailable},
    {Reason::kStateMismatch, "STATE_MISMATCH", StatusCode::kFailedPrecondition},
    {Reason::kCorrupt, "CORRUPT", StatusCode::kDataLoss},
    {Reason::kStoreRegressed, "STORE_REGRESSED", StatusCode::kUnavailable},
    {Reason::kNoFreeNode, "NO_FREE_NODE", StatusCode::kResourceExhausted},
    {Reason::kLeaseExpiring, "LEASE_EXPIRING", StatusCode::kUnavailable},
    {Reason::kLeaseLost, "LEASE_LOST", StatusCode::kFailedPrecondition},
    {Reason::kRegistryRegressed, "REGISTRY_REGRESSED", StatusCode::kFailedPrecondition},
    {Reason::kReclaimingNode, "RECLAIMING_NODE", StatusCode::kUnavailable},
    {Reason::kLeaseLive, "LEASE_LIVE", StatusCode::kFailedPrecondition},
    {Reason::kNodeInUse, "NODE_IN_USE", StatusCode::kFailedPrecondition},
    {Reason::kTokenMissing, "TOKEN_MISSING", StatusCode::kUnauthenticated},
    {Reason::kTokenUnknown, "TOKEN_UNKNOWN", StatusCode::kUnauthenticated},
    {Reason::kScopeMissing, "SCOPE_MISSING", StatusCode::kPermissionDenied},
    {Reason::kMethodNotAllowed, "METHOD_NOT_ALLOWED", StatusCode::kUnimplemented},
    {Reason::kExpectationFailed, "EXPECTATION_FAILED", StatusCode::kUnimplemented},
    {Reason::kBodyTooLarge, "BODY_TOO_LARGE", StatusCode::kResourceExhausted},
    {Reason::kHeaderTooLarge, "HEADER_TOO_LARGE", StatusCode::kResourceExhausted},
    {Reason::kResponseBudget, "RESPONSE_BUDGET", StatusCode::kResourceExhausted},
    {Reason::kNotLeader, "NOT_LEADER", StatusCode::kUnavailable},
    {Reason::kNoLeader, "NO_LEADER", StatusCode::kUnavailable},
    {Reason::kTsoOff, "TSO_OFF", StatusCode::kNotFound},
};

TEST(StatusTest, ReasonNamesAndCanonicalCodes) {
  EXPECT_EQ(to_string(Reason::kNone), "NONE");
  EXPECT_EQ(canonical_code(Reason::kNone), StatusCode::kUnknown);
  for (const ReasonRow& row : kTable) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(to_string(row.reason), row.name);
    EXPECT_EQ(canonical_code(row.reason), row.code);
  }
  EXPECT_EQ(to_string(static_cast<Reason>(kReasonCount)), "NONE");
  EXPECT_EQ(to_string(static_cast<Reason>(99)), "NONE");
}

TEST(StatusTest, EveryReasonIsInTheTable) {
  EXPECT_EQ(std::size(kTable), static_cast<std::size_t>(kReasonCount - 1));
  for (int i = 1; i < kReasonCount; ++i) {
    const auto reason = static_cast<Reason>(i);
    SCOPED_TRACE(i);
    // A name of its own, and a real error code: neither OK nor the UNKNOWN of kNone.
    EXPECT_NE(to_string(reason), "NONE");
    EXPECT_NE(canonical_code(reason), StatusCode::kOk);
    EXPECT_NE(canonical_code(reason), StatusCode::kUnknown);
    bool listed = false;
    for (const ReasonRow& row : kTable) listed = listed || row.reason == reason;
    EXPECT_TRUE(listed) << to_string(reason);
    for (int j = 1; j < i; ++j) EXPECT_NE(to_string(static_cast<Reason>(j)), to_string(reason));
  }
}

TEST(StatusTest, ReasonConstructorTakesTheCanonicalCode) {
  for (int i = 1; i < kReasonCount; ++i) {
    const auto reason = static_cast<Reason>(i);
    const Status s(reason, "m");
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.reason(), reason);
    EXPECT_EQ(s.code(), canonical_code(reason)) << to_string(reason);
    EXPECT_EQ(s.message(), "m");
    // Copies, moves and prefixes keep the pair.
    const Status p = s.with_prefix("p");
    EXPECT_EQ(p.code(), canonical_code(reason));
    EXPECT_EQ(p.reason(), reason);
    Status copy(s);
    EXPECT_EQ(copy.code(), s.code());
    const Result<int> r = std::move(copy);
    EXPECT_EQ(r.status().code(), canonical_code(reason));
    EXPECT_EQ(r.status().reason(), reason);
  }
}

TEST(StatusTest, CodeConstructorHasNoReason) {
  for (int c = 1; c <= 16; ++c) {
    const Status s(static_cast<StatusCode>(c), "m");
    EXPECT_EQ(static_cast<int>(s.code()), c);
    EXPECT_EQ(s.reason(), Reason::kNone);
  }
  EXPECT_EQ(InvalidArgument("x").code(), canonical_code(Reason::kBadInput));
}

TEST(StatusTest, LeaseReasonsSplitRetryableFromFinal) {
  // Renewal overdue: issuing is suspended, and a later renewal can resume it.
  EXPECT_TRUE(Status(Reason::kLeaseExpiring, "m").retryable());
  // The node ID belongs to someone else, or the registry went backwards: final for the lease.
  EXPECT_FALSE(Status(Reason::kLeaseLost, "m").retryable());
  EXPECT_FALSE(Status(Reason::kRegistryRegressed, "m").retryable());
  // The service claims another node ID meanwhile: retryable for its callers.
  EXPECT_TRUE(Status(Reason::kReclaimingNode, "m").retryable());
}

TEST(StatusTest, RetryableCodes) {
  for (int c = 0; c <= 16; ++c) {
    const auto code = static_cast<StatusCode>(c);
    const bool want = code == StatusCode::kUnavailable || code == StatusCode::kAborted ||
                      code == StatusCode::kResourceExhausted ||
                      code == StatusCode::kDeadlineExceeded;
    EXPECT_EQ(Status(code, "m").retryable(), want) << to_string(code);
  }
}

// The whole table, code by code and reason by reason: the one retry classification (the
// transports' Retry-After and gRPC retry delay derive from it, flurry/ops/retry.h).
TEST(StatusTest, RetryTableOfEveryReason) {
  for (int r = 1; r < kReasonCount; ++r) {
    const auto reason = static_cast<Reason>(r);
    const StatusCode code = canonical_code(reason);
    const bool want =
        (code == StatusCode::kUnavailable || code == StatusCode::kAborted ||
         code == StatusCode::kResourceExhausted || code == StatusCode::kDeadlineExceeded) &&
        reason != Reason::kBodyTooLarge && reason != Reason::kHeaderTooLarge;
    EXPECT_EQ(Status(reason, "m").retryable(), want) << to_string(reason);
  }
  // Spelled out where a reader might guess otherwise.
  EXPECT_TRUE(Status(Reason::kWouldBlock, "m").retryable());
  EXPECT_TRUE(Status(Reason::kStoreRegressed, "m").retryable());
  EXPECT_TRUE(Status(Reason::kIo, "m").retryable());
  EXPECT_FALSE(Status(Reason::kTimeExhausted, "m").retryable());
  EXPECT_FALSE(Status(Reason::kCorrupt, "m").retryable());
  EXPECT_FALSE(Status(Reason::kTokenUnknown, "m").retryable());
  EXPECT_FALSE(Status(Reason::kScopeMissing, "m").retryable());
  EXPECT_FALSE(Status(Reason::kMethodNotAllowed, "m").retryable());
}

// CANCELLED says the caller went away (a cancelled gRPC call, a broken stream, a closed client):
// the same call does not succeed later for it, so it is never retryable.
TEST(StatusTest, CancelledIsNotRetryable) {
  EXPECT_FALSE(Status(StatusCode::kCancelled, "the client cancelled the call").retryable());
  EXPECT_FALSE(Status(StatusCode::kCancelled, "the client is closed").retryable());
  EXPECT_FALSE(Status(StatusCode::kCancelled, "").with_prefix("x").retryable());
}

TEST(StatusTest, OversizedRequestsAreNotRetryable) {
  // 413 and 431: the same request fails again until the caller makes it smaller.
  EXPECT_FALSE(Status(Reason::kBodyTooLarge, "m").retryable());
  EXPECT_FALSE(Status(Reason::kHeaderTooLarge, "m").retryable());
  // The response budget drains as responses are written: retrying later helps.
  EXPECT_TRUE(Status(Reason::kResponseBudget, "m").retryable());
  EXPECT_TRUE(Status(Reason::kNoFreeNode, "m").retryable());
}

TEST(StatusTest, WithPrefix) {
  const Status s(Reason::kIo, "no such file");
  const Status p = s.with_prefix("loading horizon");
  EXPECT_EQ(p.code(), StatusCode::kUnavailable);
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
  Status a(Reason::kStateMismatch, "first");
  Status b(a);
  EXPECT_EQ(b.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.reason(), Reason::kStateMismatch);
  EXPECT_EQ(b.message(), "first");
  a = Status(Reason::kCorrupt, "second");
  EXPECT_EQ(b.message(), "first");
  EXPECT_EQ(a.message(), "second");

  Status c;
  c = b;
  EXPECT_EQ(c.to_string(), "FAILED_PRECONDITION (STATE_MISMATCH): first");
  c = OkStatus();
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(b.to_string(), "FAILED_PRECONDITION (STATE_MISMATCH): first");

  // Self-assignment is harmless.
  Status& alias = b;
  b = alias;
  EXPECT_EQ(b.message(), "first");
}

TEST(StatusTest, CopyOfOkIsOk) {
  const Status ok;
  const Status copy(ok);  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_TRUE(copy.ok());
  Status assigned(StatusCode::kInternal, "x");
  assigned = ok;
  EXPECT_TRUE(assigned.ok());
  EXPECT_EQ(assigned.message(), "");
}

TEST(StatusTest, MoveTransfersTheError) {
  Status a(Reason::kShutDown, "closed");
  Status b(std::move(a));
  EXPECT_EQ(b.code(), StatusCode::kUnavailable);
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
  const Result<int> a = Status(Reason::kTimeExhausted, "ran out");
  const Result<int> b = a;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.status().to_string(), "FAILED_PRECONDITION (TIME_EXHAUSTED): ran out");
}

#ifdef NDEBUG
TEST(StatusTest, ReasonNoneBecomesUnknownInRelease) {
  const Status s(Reason::kNone, "m");
  EXPECT_EQ(s.code(), StatusCode::kUnknown);
}

TEST(ResultTest, OkStatusBecomesInternalInRelease) {
  const Result<int> r = OkStatus();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}
#else
TEST(StatusDeathTest, ReasonNoneAssertsInDebug) {
  EXPECT_DEATH({ [[maybe_unused]] const Status s(Reason::kNone, "m"); }, "needs a reason");
}

TEST(ResultDeathTest, OkStatusAssertsInDebug) {
  EXPECT_DEATH({ [[maybe_unused]] const Result<int> r = OkStatus(); }, "OK Status");
}
#endif

}  // namespace
}  // namespace flurry

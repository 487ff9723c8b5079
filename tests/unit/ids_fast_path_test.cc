// GET /v1/ids as the HTTP fast path serves it: the ID list writer (json_views.h) against a plain
// conversion of every ID, the route's refusals of a bad query, HEAD and other methods, and no heap
// allocation per request once a connection's buffers are warm (counted by replacing the global
// operator new in this test binary).
#include <gtest/gtest.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "api_fixture.h"
#include "flurry/codec.h"
#include "flurry/wide_id.h"
#include "host_guard_scope.h"
#include "http/api.h"
#include "http/json_views.h"
#include "service/service.h"
#include "test_store.h"

namespace {
// Allocations made by this thread while counting is on.
thread_local bool t_counting = false;
thread_local std::uint64_t t_allocations = 0;

// Out of line, so that the compiler does not pair an inlined operator new with this free().
[[gnu::noinline]] void* counted_malloc(std::size_t size) {
  if (t_counting) ++t_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
[[gnu::noinline]] void counted_free(void* p) noexcept {
  std::free(p);
}
}  // namespace

void* operator new(std::size_t size) {
  if (void* p = counted_malloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  return ::operator new(size);
}
void operator delete(void* p) noexcept {
  counted_free(p);
}
void operator delete[](void* p) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  counted_free(p);
}

namespace flurry::http {
namespace {

using testing::TempDir;

// What the list writer must produce: every ID converted on its own.
std::string plain(IdListFormat format, const IdTextCodec& codec,
                  const std::vector<std::uint64_t>& ids) {
  std::string out;
  const auto text = [&](std::uint64_t id) {
    char buf[IdTextCodec::kMaxTextLength];
    if (format == IdListFormat::kNumber)
      return std::string(buf, std::to_chars(buf, buf + 20, id).ptr);
    return std::string(buf, codec.write(buf, id));
  };
  if (format == IdListFormat::kText) {
    for (std::uint64_t id : ids) out += text(id) + "\n";
    return out;
  }
  out = "{\"ids\":[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += format == IdListFormat::kNumber ? text(ids[i]) : "\"" + text(ids[i]) + "\"";
  }
  return out + "]}\n";
}

std::string written(IdListFormat format, const IdTextCodec& codec,
                    const std::vector<std::uint64_t>& ids, std::string_view& content_type) {
  OutBuf body;
  body.append("head");  // the writer appends after what the buffer holds
  content_type = write_id_list(format, codec, ids, body);
  EXPECT_EQ(body.view().substr(0, 4), "head");
  return std::string(body.view().substr(4));
}

// Runs of consecutive IDs that carry through one, several and every digit (9 -> 10,
// 1999 -> 2000, 99999 -> 100000: one digit more), gaps and repeats within a hundred and across
// hundreds, IDs below 100 (one or two digits in the same hundred), and the ends of uint64.
std::vector<std::vector<std::uint64_t>> id_lists() {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::vector<std::uint64_t>> lists = {
      {0},
      {7},
      {0, 1, 2, 3},
      {8, 9, 10, 11},
      {1997, 1998, 1999, 2000, 2001},
      {99998, 99999, 100000, 100001},
      {251619274886479870, 251619274886479871, 251619274886479872, 251619274886479873},
      {5, 7, 8, 8, 9, 20, 19, 20},
      {5, 15, 95, 99, 100, 105, 199, 200},
      {150, 120, 199, 101, 250, 249, 1250, 1299, 1201},
      {kMax - 2, kMax - 1, kMax},
      {kMax, 0, 1},
      {999999999999999999, 1000000000000000000, 1000000000000000001},
      {9999999999999999999u, 10000000000000000000u, 10000000000000000001u},
  };
  std::vector<std::uint64_t> batch;  // 1,000 across a tick boundary, as a batch looks
  for (std::uint64_t i = 0; i < 600; ++i)
    batch.push_back((std::uint64_t{123456} << 22) + 261900 + i);
  for (std::uint64_t i = 0; i < 400; ++i) batch.push_back((std::uint64_t{123457} << 22) + i);
  lists.push_back(batch);
  return lists;
}

TEST(IdListWriter, WritesWhatConvertingEachIdWrites) {
  const IdTextCodec decimal = IdTextCodec::of(Encoding::kDecimal);
  const IdTextCodec hex = IdTextCodec::of(Encoding::kHex);
  const IdTextCodec base62 = IdTextCodec::of(Encoding::kBase62);
  for (const std::vector<std::uint64_t>& ids : id_lists()) {
    SCOPED_TRACE(ids.size() > 4 ? "a batch" : std::to_string(ids.front()));
    std::string_view type;
    for (const IdTextCodec* codec : {&decimal, &hex, &base62}) {
      EXPECT_EQ(written(IdListFormat::kJson, *codec, ids, type),
                plain(IdListFormat::kJson, *codec, ids));
      EXPECT_EQ(type, "application/json");
      EXPECT_EQ(written(IdListFormat::kText, *codec, ids, type),
                plain(IdListFormat::kText, *codec, ids));
      EXPECT_EQ(type, "text/plain; charset=utf-8");
    }
    EXPECT_EQ(written(IdListFormat::kNumber, decimal, ids, type),
              plain(IdListFormat::kNumber, decimal, ids));
    EXPECT_EQ(type, "application/json");
  }
}

TEST(IdListWriter, ExactText) {
  const IdTextCodec decimal = IdTextCodec::of(Encoding::kDecimal);
  std::string_view type;
  EXPECT_EQ(written(IdListFormat::kJson, decimal, {8, 9, 10, 99, 100}, type),
            "{\"ids\":[\"8\",\"9\",\"10\",\"99\",\"100\"]}\n");
  EXPECT_EQ(written(IdListFormat::kNumber, decimal, {1999, 2000, 2002}, type),
            "{\"ids\":[1999,2000,2002]}\n");
  EXPECT_EQ(written(IdListFormat::kText, decimal, {9, 10, 11}, type), "9\n10\n11\n");
}

class IdsFastPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<service::Service>> started =
        testing::start_service(dir_.path() / "data");
    ASSERT_TRUE(started.ok()) << started.status().to_string();
    service_ = std::move(started).value();
    ops_ = std::make_unique<testing::OpsStack>(*service_, nullptr, nullptr);
    api_ = std::make_unique<Api>(ops_->operations);
  }
  void TearDown() override {
    api_.reset();
    ops_.reset();
    if (service_) service_->stop();
  }

  testing::ApiReply call(std::string_view target, Method method = Method::kGet) {
    return testing::call_api(*api_, scratch_, target, method, {}, {}, Blocking::kNever);
  }

  // Issues one ID and returns it, to see that a refused request issued nothing.
  std::uint64_t issue_one() {
    const testing::ApiReply r = call("/v1/ids?format=number");
    EXPECT_EQ(r.status(), 200) << r.body;
    return r.doc()["ids"][0].get<std::uint64_t>();
  }

  TempDir dir_;
  std::unique_ptr<service::Service> service_;
  std::unique_ptr<testing::OpsStack> ops_;
  std::unique_ptr<Api> api_;
  ApiScratch scratch_;
};

TEST_F(IdsFastPathTest, ABadQueryIsRefusedAndIssuesNothing) {
  const std::uint64_t before = issue_one();
  for (std::string_view target :
       {"/v1/ids?count=0", "/v1/ids?count=abc", "/v1/ids?count=1&count=2", "/v1/ids?bogus=1",
        "/v1/ids?format=xml", "/v1/ids?encoding=nope", "/v1/ids?format=number&encoding=hex",
        "/v1/ids?count=99999999999999999999"}) {
    SCOPED_TRACE(target);
    const testing::ApiReply r = call(target);
    EXPECT_EQ(r.status(), 400) << r.body;
    EXPECT_EQ(r.response.route, Route::kIds);
    EXPECT_EQ(r.code(), "INVALID_ARGUMENT");
  }
  // Nothing was issued in between: the service counted the one ID, and the next ID follows
  // `before`'s directly, or opens a later millisecond (sequence 0) if the clock moved on (the
  // default layout: time:41@1ms above node:10 and seq:12).
  EXPECT_NE(call("/metrics").body.find("\nflurry_ids_issued_total 1\n"), std::string::npos);
  const std::uint64_t after = issue_one();
  if (after >> 22 == before >> 22) {
    EXPECT_EQ(after, before + 1);
  } else {
    EXPECT_GT(after >> 22, before >> 22);
    EXPECT_EQ(after & 0xfff, 0u);
  }
}

TEST_F(IdsFastPathTest, OnlyGetAndHeadAreServed) {
  const testing::ApiReply head = call("/v1/ids?count=5", Method::kHead);
  EXPECT_EQ(head.status(), 200);
  EXPECT_TRUE(head.response.omit_content_length);
  EXPECT_EQ(head.body, "");
  for (Method m : {Method::kPost, Method::kOther}) {
    const testing::ApiReply r = call("/v1/ids?count=1", m);
    EXPECT_EQ(r.status(), 405) << r.body;
    EXPECT_TRUE(r.response.allow);
    EXPECT_EQ(r.response.route, Route::kIds);
  }
  // A prefix of /v1/ids, or more after it, is not /v1/ids.
  EXPECT_EQ(call("/v1/id?count=1").status(), 404);
  EXPECT_EQ(call("/v1/idsx?count=1").status(), 404);
  EXPECT_EQ(call("/v1/ids/").response.route, Route::kIdDecode);
}

TEST_F(IdsFastPathTest, NoAllocationPerRequestOnceWarm) {
  for (std::string_view target :
       {"/v1/ids?count=1", "/v1/ids", "/v1/ids?count=1000", "/v1/ids?count=100&format=text",
        "/v1/ids?count=3&format=number"}) {
    SCOPED_TRACE(target);
    OutBuf body;
    ApiResponse response;
    // Warm: the scratch's ID buffer and the body buffer grow on the first request.
    api_->handle(Method::kGet, target, response, body, scratch_, Blocking::kNever);
    ASSERT_EQ(response.status, 200) << body.view();
    t_allocations = 0;
    t_counting = true;
    for (int i = 0; i < 50; ++i) {
      body.clear();
      response = ApiResponse{};
      api_->handle(Method::kGet, target, response, body, scratch_, Blocking::kNever);
    }
    t_counting = false;
    EXPECT_EQ(response.status, 200) << body.view();
    EXPECT_FALSE(response.deferred);
    EXPECT_EQ(t_allocations, 0u);
  }
}

}  // namespace
}  // namespace flurry::http

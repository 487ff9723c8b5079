// The HTTP API without a transport: a real Service (sqlite registry, default layout) in a
// temporary directory, the operations layer over it, and Api::handle() called directly with a
// method and a request target.
#include "http/api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <regex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api_fixture.h"
#include "app/config.h"
#include "flurry/codec.h"
#include "flurry/decoded_id.h"
#include "flurry/timefmt.h"
#include "flurry/wide_id.h"
#include "held_generator.h"
#include "host_guard_scope.h"
#include "http/json_views.h"
#include "ops/activity.h"
#include "service/event_log.h"
#include "service/service.h"
#include "test_store.h"

namespace flurry::http {
namespace {

using testing::TempDir;

struct Reply {
  ApiResponse response;
  std::string body;
  int status() const { return response.status; }
};

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// The numbers of a JSON array of decimal strings or numbers, or of text lines.
std::vector<std::uint64_t> numbers(const std::string& body) {
  std::vector<std::uint64_t> out;
  static const std::regex kNumber("[0-9]+");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), kNumber);
       it != std::sregex_iterator(); ++it) {
    out.push_back(std::stoull(it->str()));
  }
  return out;
}

// The strings of {"ids":["...",...]}.
std::vector<std::string> json_strings(const std::string& body) {
  std::vector<std::string> out;
  static const std::regex kString("\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), kString);
       it != std::sregex_iterator(); ++it) {
    if ((*it)[1].str() != "ids") out.push_back((*it)[1].str());
  }
  return out;
}

void expect_increasing(const std::vector<std::uint64_t>& ids) {
  for (std::size_t i = 1; i < ids.size(); ++i) EXPECT_LT(ids[i - 1], ids[i]) << i;
}

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start(service::ServiceOptions{})); }
  // Starts a service on `options` (in this test's data directory) and the API over it.
  void start(service::ServiceOptions options) {
    testing::use_own_host_guard_scope();
    options.registry.data_dir = dir_.path() / "data";
    options.registry.host_dir = dir_.path();  // this test's own host
    Result<std::unique_ptr<service::Service>> created =
        service::Service::create(std::move(options));
    ASSERT_TRUE(created.ok()) << created.status().to_string();
    service_ = std::move(created).value();
    const Status st = service_->start();
    ASSERT_TRUE(st.ok()) << st.to_string();
    ops_ = std::make_unique<testing::OpsStack>(*service_, nullptr, nullptr);
    api_ = std::make_unique<Api>(ops_->operations);
  }
  void TearDown() override {
    api_.reset();
    ops_.reset();
    if (service_) service_->stop();
  }

  Reply call(std::string_view target, Method method = Method::kGet) {
    Reply reply;
    OutBuf body;
    api_->handle(method, target, reply.response, body, scratch_);
    reply.body.assign(body.view());
    return reply;
  }

  // Expects a 400 whose message names `needle`.
  void expect_bad(std::string_view target, std::string_view needle) {
    SCOPED_TRACE(target);
    const Reply r = call(target);
    EXPECT_EQ(r.status(), 400) << r.body;
    EXPECT_EQ(r.response.content_type, "application/json");
    EXPECT_HAS(r.body, "\"code\":\"INVALID_ARGUMENT\"");
    // The message is a JSON string: compare it with its quotes unescaped.
    std::string message = r.body;
    for (std::size_t at = 0; (at = message.find("\\\"", at)) != std::string::npos; ++at) {
      message.erase(at, 1);
    }
    EXPECT_HAS(message, needle);
  }

  std::uint64_t issue_one() {
    const Reply r = call("/v1/ids?format=number");
    EXPECT_EQ(r.status(), 200) << r.body;
    const std::vector<std::uint64_t> ids = numbers(r.body);
    EXPECT_EQ(ids.size(), 1u);
    return ids.empty() ? 0 : ids[0];
  }

  TempDir dir_;
  std::unique_ptr<service::Service> service_;
  std::unique_ptr<testing::OpsStack> ops_;
  std::unique_ptr<Api> api_;
  ApiScratch scratch_;
};

TEST_F(ApiTest, IdsDefaultsToOne) {
  const Reply r = call("/v1/ids");
  EXPECT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.route, Route::kIds);
  EXPECT_TRUE(std::regex_match(r.body, std::regex("\\{\"ids\":\\[\"[0-9]+\"\\]\\}\n"))) << r.body;
}

TEST_F(ApiTest, IdsCountThreeAsJsonStrings) {
  const Reply r = call("/v1/ids?count=3");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.content_type, "application/json");
  EXPECT_TRUE(std::regex_match(
      r.body, std::regex("\\{\"ids\":\\[\"[0-9]+\",\"[0-9]+\",\"[0-9]+\"\\]\\}\n")))
      << r.body;
  const std::vector<std::uint64_t> ids = numbers(r.body);
  ASSERT_EQ(ids.size(), 3u);
  expect_increasing(ids);
  EXPECT_LT(ids.back(), std::uint64_t{1} << 63);
  // A later request issues larger IDs.
  EXPECT_GT(issue_one(), ids.back());
}

TEST_F(ApiTest, IdsAsTextAndNumbers) {
  Reply r = call("/v1/ids?count=3&format=text");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.content_type, "text/plain; charset=utf-8");
  EXPECT_TRUE(std::regex_match(r.body, std::regex("([0-9]+\n){3}"))) << r.body;
  std::vector<std::uint64_t> ids = numbers(r.body);
  ASSERT_EQ(ids.size(), 3u);
  expect_increasing(ids);

  r = call("/v1/ids?format=number&count=4");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.content_type, "application/json");
  EXPECT_TRUE(std::regex_match(r.body, std::regex("\\{\"ids\":\\[[0-9]+(,[0-9]+){3}\\]\\}\n")))
      << r.body;
  const std::vector<std::uint64_t> more = numbers(r.body);
  ASSERT_EQ(more.size(), 4u);
  expect_increasing(more);
  EXPECT_GT(more.front(), ids.back());

  r = call("/v1/ids?format=json&encoding=dec");
  EXPECT_EQ(r.status(), 200) << r.body;

  expect_bad("/v1/ids?format=number&encoding=hex", "encoding=hex");
  expect_bad("/v1/ids?format=xml", "format");
  expect_bad("/v1/ids?encoding=base64",
             "\"base64\" is not dec, hex, base32, base62, uuidv7 or ulid");
}

TEST_F(ApiTest, EncodingsRoundTripThroughDecodeId) {
  for (const Encoding e : {Encoding::kHex, Encoding::kBase32, Encoding::kBase62}) {
    const std::string name(to_string(e));
    SCOPED_TRACE(name);
    for (const std::string format : {"json", "text"}) {
      const Reply r = call("/v1/ids?count=3&encoding=" + name + "&format=" + format);
      ASSERT_EQ(r.status(), 200) << r.body;
      std::vector<std::string> texts;
      if (format == "json") {
        texts = json_strings(r.body);
      } else {
        std::size_t pos = 0;
        while (pos < r.body.size()) {
          const std::size_t nl = r.body.find('\n', pos);
          ASSERT_NE(nl, std::string::npos) << r.body;
          texts.push_back(r.body.substr(pos, nl - pos));
          pos = nl + 1;
        }
      }
      ASSERT_EQ(texts.size(), 3u) << r.body;
      std::vector<std::uint64_t> ids;
      for (const std::string& t : texts) {
        Result<std::uint64_t> id = decode_id(t, e);
        ASSERT_TRUE(id.ok()) << t << ": " << id.status().to_string();
        EXPECT_EQ(encode_id(*id, e), t);
        if (e == Encoding::kHex) {
          EXPECT_EQ(t.size(), 16u) << t;
        }
        ids.push_back(*id);
        // The decode route reads the same encoding back.
        const Reply d = call("/v1/ids/" + t + "?encoding=" + name);
        EXPECT_EQ(d.status(), 200) << d.body;
        EXPECT_HAS(d.body, "{\"id\":\"" + std::to_string(*id) + "\"");
      }
      expect_increasing(ids);
    }
  }
}

// uuidv7 and ulid: texts that sort like the IDs inside them, which the decode route gives back.
TEST_F(ApiTest, WideEncodingsRoundTripThroughDecodeId) {
  for (const WideFormatInfo& f : kWideFormats) {
    const std::string name(f.name);
    SCOPED_TRACE(name);
    const Result<WideIdCodec> codec = WideIdCodec::create(service_->layout(), f.format);
    ASSERT_TRUE(codec.ok()) << codec.status().to_string();
    std::uint64_t last = 0;
    for (const std::string format : {"json", "text"}) {
      const Reply r = call("/v1/ids?count=5&encoding=" + name + "&format=" + format);
      ASSERT_EQ(r.status(), 200) << r.body;
      std::vector<std::string> texts;
      if (format == "json") {
        texts = json_strings(r.body);
      } else {
        for (std::size_t pos = 0, nl; (nl = r.body.find('\n', pos)) != std::string::npos;
             pos = nl + 1) {
          texts.push_back(r.body.substr(pos, nl - pos));
        }
      }
      ASSERT_EQ(texts.size(), 5u) << r.body;
      for (std::size_t i = 0; i < texts.size(); ++i) {
        const std::string& t = texts[i];
        ASSERT_EQ(t.size(), codec->text_length()) << t;
        if (i > 0) {
          EXPECT_LT(texts[i - 1], t);
        }
        Result<std::uint64_t> id = codec->decode(t);
        ASSERT_TRUE(id.ok()) << t << ": " << id.status().to_string();
        EXPECT_GT(*id, last) << t;
        last = *id;
        const Reply d = call("/v1/ids/" + t + "?encoding=" + name);
        EXPECT_EQ(d.status(), 200) << d.body;
        EXPECT_HAS(d.body, "{\"id\":\"" + std::to_string(*id) + "\"");
      }
    }
  }
  expect_bad("/v1/ids?format=number&encoding=uuidv7", "encoding=uuidv7");
  expect_bad("/v1/ids/1?encoding=ulid", "ulid ID \"1\": 1 characters, expected 26");
  expect_bad("/v1/ids/01941f29-7fe8-4014-807f-ffffffffffff?encoding=uuidv7", "version 4");
}

// encoding=auto: the text is read in the encoding whose canonical form it is, and the route says
// which, with the other encodings the same text is also an ID in.
TEST_F(ApiTest, DecodeWithAutoNamesTheEncodingItUsed) {
  const std::uint64_t id = issue_one();
  const IdTextCodecs codecs(service_->layout());
  std::vector<std::string> names;
  for (const EncodingInfo& e : kEncodings) names.emplace_back(e.name);
  for (const WideFormatInfo& w : kWideFormats) names.emplace_back(w.name);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const Result<IdEncoding> encoding = parse_id_encoding(name);
    ASSERT_TRUE(encoding.ok());
    const std::string text = codecs.get(*encoding).value()->encode(id);
    const Reply r = call("/v1/ids/" + text + "?encoding=auto");
    ASSERT_EQ(r.status(), 200) << r.body;
    // The same members as with the explicit encoding (the random bits of a wide form aside,
    // which the encodings member does not show), then the two about the choice.
    const Reply explicit_ = call("/v1/ids/" + text + "?encoding=" + name);
    ASSERT_EQ(explicit_.status(), 200) << explicit_.body;
    const std::string members = explicit_.body.substr(0, explicit_.body.size() - 2);  // "}\n"
    EXPECT_TRUE(r.body.starts_with(members)) << r.body << "\nvs\n" << explicit_.body;
    EXPECT_HAS(r.body, ",\"encoding\":\"" + name + "\",\"also_valid_in\":[");
  }
  // Upper-case hex is still hex (canonical up to letter case); 11 decimal digits are also a
  // hex, base32 and base62 text (of other IDs), listed.
  std::string upper = encode_id(id, Encoding::kHex);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_HAS(call("/v1/ids/" + upper + "?encoding=auto").body, ",\"encoding\":\"hex\"");
  const Reply digits = call("/v1/ids/12345678901?encoding=auto");
  ASSERT_EQ(digits.status(), 200) << digits.body;
  EXPECT_HAS(digits.body,
             "\"encoding\":\"dec\",\"also_valid_in\":[\"hex\",\"base32\",\"base62\"]}");
  // Text that is an ID in no encoding: 400 with each encoding's refusal.
  const Reply bad = call("/v1/ids/not-an-id!?encoding=auto");
  EXPECT_EQ(bad.status(), 400) << bad.body;
  EXPECT_HAS(bad.body, "not an ID of this layout in any of its encodings (dec: ");
  EXPECT_HAS(bad.body, "; ulid: ");
}

TEST_F(ApiTest, PercentEncodedParameters) {
  Reply r = call("/v1/ids?count=%33");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(numbers(r.body).size(), 3u);
  r = call("/v1/ids?co%75nt=2&&format=text");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(numbers(r.body).size(), 2u);
}

TEST_F(ApiTest, BadCountsAreRejected) {
  const std::string max = std::to_string(service_->max_batch());
  EXPECT_EQ(service_->max_batch(), 100000u);
  expect_bad("/v1/ids?count=0", "\"count\"");
  expect_bad("/v1/ids?count=-1", "\"count\"");
  expect_bad("/v1/ids?count=1000000000", "\"count\"");
  expect_bad("/v1/ids?count=1000000000", "max_batch (" + max + ")");
  expect_bad("/v1/ids?count=" + std::to_string(service_->max_batch() + 1), "max_batch");
  expect_bad("/v1/ids?count=99999999999999999999999999", "\"count\"");
  expect_bad("/v1/ids?count=abc", "\"count\"");
  expect_bad("/v1/ids?count=3abc", "\"count\"");
  expect_bad("/v1/ids?count=+3", "\"count\"");
  expect_bad("/v1/ids?count=", "\"count\" is empty");
  expect_bad("/v1/ids?count", "\"count\" is empty");
  expect_bad("/v1/ids?count=1&count=2", "\"count\" is given more than once");
  expect_bad("/v1/ids?count=1&co%75nt=2", "\"count\" is given more than once");
  expect_bad("/v1/ids?counts=2", "unknown parameter \"counts\"");
  expect_bad("/v1/ids?count=%zz", "\"count\"");
  expect_bad("/v1/ids?count=%3", "\"count\"");
  expect_bad("/v1/ids?count=3%", "\"count\"");
  expect_bad("/v1/ids?%zz=1", "percent-encoding");
  // Nothing was issued by the rejected requests.
  const Reply m = call("/metrics");
  EXPECT_HAS(m.body, "\nflurry_ids_issued_total 0\n");
}

TEST_F(ApiTest, DecodeAnIssuedId) {
  const auto before = std::chrono::system_clock::now();
  const std::uint64_t id = issue_one();
  const auto after = std::chrono::system_clock::now();
  Result<IdParts> parts = service_->layout().decompose(id);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->node, 0u);
  EXPECT_EQ(service_->node(), 0u);

  const Reply r = call("/v1/ids/" + std::to_string(id));
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.route, Route::kIdDecode);
  EXPECT_HAS(r.body, "{\"id\":\"" + std::to_string(id) + "\"");
  EXPECT_HAS(r.body, ",\"node\":0,");
  EXPECT_HAS(r.body, ",\"seq\":" + std::to_string(parts->seq) + ",");
  EXPECT_HAS(r.body, ",\"ticks\":" + std::to_string(parts->ticks) + ",");
  EXPECT_HAS(r.body, "\"layout\":\"time:41@1ms,node:10,seq:12;");
  EXPECT_HAS(r.body, "\"hex\":\"" + encode_id(id, Encoding::kHex) + "\"");
  EXPECT_HAS(r.body, "\"base62\":\"" + encode_id(id, Encoding::kBase62) + "\"");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.body, m, std::regex("\"unix_ms\":([0-9]+)"))) << r.body;
  const std::int64_t unix_ms = std::stoll(m[1].str());
  const auto ms = [](auto t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  };
  // The time field may run ahead of the clock by max_lead (1 s) and the coarse clock lag a bit.
  EXPECT_GE(unix_ms, ms(before) - 1000);
  EXPECT_LE(unix_ms, ms(after) + 1000);
  EXPECT_TRUE(std::regex_search(r.body, std::regex("\"time\":\"20[0-9-]+T[0-9:.]+Z\""))) << r.body;

  // The whole body, field by field from the core's decode model, in this order.
  const Result<flurry::DecodedId> d = decode_id(service_->layout(), id);
  ASSERT_TRUE(d.ok());
  std::string want = "{\"id\":\"" + std::to_string(id) + "\",\"layout\":\"" +
                     service_->layout().to_string() + "\",\"time\":\"" + format_time(d->time) +
                     "\",\"unix_ms\":" + std::to_string(d->unix_ms) +
                     ",\"ticks\":" + std::to_string(parts->ticks) +
                     ",\"node\":0,\"seq\":" + std::to_string(parts->seq) +
                     ",\"fields\":{\"time\":" + std::to_string(parts->ticks) +
                     ",\"node\":0,\"seq\":" + std::to_string(parts->seq) + "},\"encodings\":{";
  for (const EncodingInfo& e : kEncodings) {
    if (e.encoding != Encoding::kDecimal) want += ",";
    want += "\"" + std::string(e.name) + "\":\"" + encode_id(id, e.encoding) + "\"";
  }
  want += "}}\n";
  EXPECT_EQ(r.body, want);
  // The same ID given in another encoding decodes to the same body.
  EXPECT_EQ(call("/v1/ids/" + encode_id(id, Encoding::kBase32) + "?encoding=base32").body, want);

  // With bit 63 set the default (63-bit) layout cannot have produced it.
  const std::uint64_t high = id | std::uint64_t{1} << 63;
  expect_bad("/v1/ids/" + std::to_string(high), "bit");
  expect_bad("/v1/ids/abc", "");
  expect_bad("/v1/ids/", "empty");
  expect_bad("/v1/ids/%zz", "percent-encoding");
  expect_bad("/v1/ids/1?encoding=base64", "encoding");
  expect_bad("/v1/ids/1?count=1", "unknown parameter \"count\"");
  EXPECT_EQ(call("/v1/ids/1/2").status(), 404);
}

TEST_F(ApiTest, Layout) {
  const Reply r = call("/v1/layout");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.route, Route::kLayout);
  EXPECT_HAS(r.body, "\"preset\":\"flurry\"");
  EXPECT_HAS(r.body, "\"bits\":63,");
  EXPECT_HAS(r.body, "\"node_count\":1024");
  EXPECT_HAS(r.body, ",\"node\":0,");
  EXPECT_HAS(r.body, "\"max_batch\":100000}");
  // The default layout (1 ms unit) can be written as UUIDv7 and ULID.
  EXPECT_HAS(r.body, ",\"encodings\":[\"dec\",\"hex\",\"base32\",\"base62\",\"uuidv7\",\"ulid\"],");
  EXPECT_HAS(r.body, "{\"name\":\"node\",\"bits\":10,\"shift\":12,\"kind\":\"node\"}");
  expect_bad("/v1/layout?x=1", "takes no parameters");
}

// uuidv7 and ulid are listed only for a layout that can carry them (sonyflake's 10 ms unit cannot).
TEST(LayoutJsonTest, ListsTheWideFormsOnlyWhereTheLayoutCarriesThem) {
  Result<Layout> sonyflake = Layout::parse("sonyflake");
  ASSERT_TRUE(sonyflake.ok()) << sonyflake.status().to_string();
  OutBuf body;
  LayoutJson(*sonyflake).write(1, 10, body);
  EXPECT_HAS(std::string(body.view()),
             ",\"encodings\":[\"dec\",\"hex\",\"base32\",\"base62\"],\"node\":1,");
}

TEST_F(ApiTest, LeafRoutes) {
  const Reply r = call("/api/snowflake/get/orders");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.route, Route::kLeafGet);
  EXPECT_EQ(r.response.content_type, "text/plain; charset=utf-8");
  ASSERT_TRUE(std::regex_match(r.body, std::regex("[0-9]+"))) << r.body;
  const std::uint64_t id = std::stoull(r.body);
  EXPECT_GT(std::stoull(call("/api/snowflake/get/other%20key").body), id);
  Result<IdParts> parts = service_->layout().decompose(id);
  ASSERT_TRUE(parts.ok());

  const Reply d = call("/decodeSnowflakeId?snowflakeId=" + std::to_string(id));
  ASSERT_EQ(d.status(), 200) << d.body;
  EXPECT_EQ(d.response.route, Route::kLeafDecode);
  EXPECT_TRUE(std::regex_match(
      d.body, std::regex("\\{\"timestamp\":\"[0-9]+\",\"workerId\":\"0\",\"sequenceId\":\"" +
                         std::to_string(parts->seq) + "\"\\}\n")))
      << d.body;

  expect_bad("/api/snowflake/get/", "empty");
  expect_bad("/api/snowflake/get/k?x=1", "unknown parameter");
  expect_bad("/decodeSnowflakeId", "\"snowflakeId\" is missing");
  expect_bad("/decodeSnowflakeId?snowflakeId=", "\"snowflakeId\" is empty");
  expect_bad("/decodeSnowflakeId?id=1", "unknown parameter \"id\"");
  expect_bad("/decodeSnowflakeId?snowflakeId=" + std::to_string(id | std::uint64_t{1} << 63),
             "bit");
}

TEST_F(ApiTest, HealthAndReadiness) {
  Reply r = call("/healthz");
  EXPECT_EQ(r.status(), 200);
  EXPECT_EQ(r.body, "{\"status\":\"ok\"}\n");
  r = call("/readyz");
  EXPECT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.body, "{\"ready\":true,\"node\":0}\n");
  expect_bad("/healthz?verbose=1", "takes no parameters");

  // After stop() nothing is issued and the service is not ready.
  service_->stop();
  r = call("/readyz");
  EXPECT_EQ(r.status(), 503) << r.body;
  EXPECT_HAS(r.body, "\"ready\":false");
  r = call("/v1/ids");
  EXPECT_EQ(r.status(), 503) << r.body;
  EXPECT_EQ(call("/healthz").status(), 200);
}

TEST_F(ApiTest, TimestampOracleOffIsNotFound) {
  // Without --tso: 404 TSO_OFF whatever the count (it is not checked against a max_batch that
  // does not exist), and /readyz/tso 503 saying why; /healthz has no tso object.
  for (std::string_view target :
       {"/v1/tso", "/v1/tso?count=3", "/v1/tso?count=0", "/v1/tso?count=x"}) {
    SCOPED_TRACE(target);
    const Reply r = call(target);
    EXPECT_EQ(r.status(), 404) << r.body;
    EXPECT_EQ(r.response.route, Route::kTso);
    EXPECT_HAS(r.body, "\"reason\":\"TSO_OFF\"");
    EXPECT_HAS(r.body, "--tso");
    EXPECT_TRUE(r.response.location.empty());
  }
  EXPECT_EQ(call("/v1/tso", Method::kHead).status(), 404);
  expect_bad("/v1/tso?size=1", "unknown parameter \"size\"");
  Reply r = call("/readyz/tso");
  EXPECT_EQ(r.status(), 503) << r.body;
  EXPECT_EQ(r.response.route, Route::kReadyzTso);
  EXPECT_HAS(r.body, "{\"ready\":false,\"reason\":\"TSO_OFF\"");
  expect_bad("/readyz/tso?x=1", "takes no parameters");
  EXPECT_EQ(call("/healthz").body, "{\"status\":\"ok\"}\n");
  EXPECT_EQ(call("/metrics").body.find("flurry_tso_"), std::string::npos);
  EXPECT_EQ(reason_phrase(307), "Temporary Redirect");
}

TEST_F(ApiTest, MetricsCountIssuedIds) {
  EXPECT_EQ(call("/v1/ids?count=3").status(), 200);
  EXPECT_EQ(call("/v1/ids?count=5&format=text").status(), 200);
  EXPECT_EQ(call("/api/snowflake/get/k").status(), 200);
  const Reply r = call("/metrics");
  ASSERT_EQ(r.status(), 200);
  EXPECT_EQ(r.response.route, Route::kMetrics);
  EXPECT_EQ(r.response.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_HAS(r.body, "# TYPE flurry_ids_issued_total counter\n");
  EXPECT_HAS(r.body, "\nflurry_ids_issued_total 9\n");

  api_->set_extra_metrics([](service::PrometheusWriter& out) {
    out.gauge("extra_metric", "A metric of the transport.", 1);
  });
  EXPECT_HAS(call("/metrics").body, "extra_metric 1\n");
}

TEST_F(ApiTest, UnknownRoutesAndMethods) {
  Reply r = call("/nope");
  EXPECT_EQ(r.status(), 404);
  EXPECT_EQ(r.response.route, Route::kOther);
  EXPECT_HAS(r.body, "\"code\":\"NOT_FOUND\"");
  EXPECT_HAS(r.body, "/nope");
  EXPECT_EQ(call("/v1/idsx").status(), 404);
  EXPECT_EQ(call("/").status(), 404);
  EXPECT_EQ(call("/nope", Method::kOther).status(), 404);

  for (std::string_view target : {"/v1/ids", "/v1/ids/1", "/v1/layout", "/healthz", "/readyz",
                                  "/metrics", "/api/snowflake/get/k", "/decodeSnowflakeId"}) {
    SCOPED_TRACE(target);
    r = call(target, Method::kOther);
    EXPECT_EQ(r.status(), 405);
    EXPECT_TRUE(r.response.allow);
    EXPECT_FALSE(r.response.retry_after);
    // The canonical code grpc-gateway uses for 405, with the HTTP reason beside it.
    EXPECT_HAS(r.body, "{\"error\":{\"code\":\"UNIMPLEMENTED\",\"reason\":\"METHOD_NOT_ALLOWED\"");
  }
  // Nothing was issued by the rejected POSTs.
  EXPECT_HAS(call("/metrics").body, "\nflurry_ids_issued_total 0\n");

  r = call("/healthz", Method::kHead);
  EXPECT_EQ(r.status(), 200);
  EXPECT_FALSE(r.response.allow);
  EXPECT_EQ(call("http://example.com/healthz").status(), 200);
  EXPECT_EQ(call("*").status(), 400);
  EXPECT_EQ(call("").status(), 400);
}

TEST_F(ApiTest, HeadIssuesNothing) {
  for (std::string_view target :
       {"/v1/ids?count=100000", "/v1/ids", "/v1/ids?count=5&format=text&encoding=hex",
        "/api/snowflake/get/orders"}) {
    SCOPED_TRACE(target);
    const Reply r = call(target, Method::kHead);
    EXPECT_EQ(r.status(), 200) << r.body;
    EXPECT_TRUE(r.response.omit_content_length);
    EXPECT_FALSE(r.response.deferred);
    EXPECT_EQ(r.body, "");
    EXPECT_EQ(r.response.content_type, call(target).response.content_type);
  }
  // The GETs above issued 100000 + 1 + 5 + 1; the HEADs nothing.
  EXPECT_HAS(call("/metrics").body, "\nflurry_ids_issued_total 100007\n");

  // Bad parameters: the same status and error as GET.
  for (std::string_view target :
       {"/v1/ids?count=0", "/v1/ids?count=100001", "/v1/ids?format=xml", "/v1/ids?x=1",
        "/api/snowflake/get/", "/api/snowflake/get/k?x=1"}) {
    SCOPED_TRACE(target);
    const Reply head = call(target, Method::kHead);
    const Reply get = call(target);
    EXPECT_EQ(head.status(), 400);
    EXPECT_EQ(head.status(), get.status());
    EXPECT_EQ(head.body, get.body);
    EXPECT_FALSE(head.response.omit_content_length);
  }
  // Routes whose body needs no IDs keep their length.
  EXPECT_FALSE(call("/healthz", Method::kHead).response.omit_content_length);
  EXPECT_HAS(call("/metrics").body, "\nflurry_ids_issued_total 100007\n");
}

TEST_F(ApiTest, NeverBlockingFastPathAnswersAtOnce) {
  ApiResponse r;
  OutBuf body;
  api_->handle(Method::kGet, "/v1/ids?count=3", r, body, scratch_, Blocking::kNever);
  EXPECT_FALSE(r.deferred);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(numbers(std::string(body.view())).size(), 3u);
}

// While earlier requests wait for the blocking thread, new ID requests queue behind them
// without trying (fairness under throttling); everything else is still answered at once.
TEST_F(ApiTest, RequestsQueueBehindDeferredOnes) {
  // A request waits on the generator's blocking thread (here: a job held until released).
  testing::HeldGenerator held(ops_->pools);
  ASSERT_EQ(ops_->pools.generator_waiting(), 1u);
  ApiResponse r;
  OutBuf body;
  api_->handle(Method::kGet, "/v1/ids?count=3&format=number", r, body, scratch_, Blocking::kNever);
  EXPECT_TRUE(r.deferred);
  EXPECT_EQ(r.deferral.pool, ops::Pool::kGenerator);
  EXPECT_EQ(body.view(), "");
  ApiResponse leaf;
  api_->handle(Method::kGet, "/api/snowflake/get/k", leaf, body, scratch_, Blocking::kNever);
  EXPECT_TRUE(leaf.deferred);
  ApiResponse health;
  api_->handle(Method::kGet, "/healthz", health, body, scratch_, Blocking::kNever);
  EXPECT_FALSE(health.deferred);
  EXPECT_EQ(health.status, 200);
  EXPECT_HAS(call("/metrics").body, "\nflurry_ids_issued_total 0\n");  // nothing was issued

  // Resumed where blocking is allowed (as the pool does), the request is answered as parsed.
  ApiResponse done;
  OutBuf done_body;
  Api::resume(r, Method::kGet, done, done_body, scratch_);
  EXPECT_FALSE(done.deferred);
  EXPECT_EQ(done.status, 200);
  EXPECT_EQ(done.route, Route::kIds);
  const std::vector<std::uint64_t> ids = numbers(std::string(done_body.view()));
  EXPECT_EQ(ids.size(), 3u);
  expect_increasing(ids);
  EXPECT_EQ(std::string(done_body.view()).rfind("{\"ids\":[", 0), 0u);
  held.release();
  ops_->pools.stop();
  EXPECT_EQ(ops_->pools.generator_waiting(), 0u);
  // Once nothing waits, the fast path answers at once again.
  ApiResponse fast;
  OutBuf fast_body;
  api_->handle(Method::kGet, "/v1/ids", fast, fast_body, scratch_, Blocking::kNever);
  EXPECT_FALSE(fast.deferred);
  EXPECT_EQ(fast.status, 200);
}

// A layout of 4096 IDs a second with max_lead 1 s: a second batch of 8192 has to wait for the
// rate limit, which Blocking::kNever defers instead of sleeping.
class ApiThrottleTest : public ApiTest {
 protected:
  void SetUp() override {
    service::ServiceOptions options;
    options.layout = Layout::parse("time:41@1s,node:10,seq:12;epoch=2025-01-01Z").value();
    ASSERT_NO_FATAL_FAILURE(start(std::move(options)));
    ASSERT_EQ(service_->max_batch(), 8192u);
  }

  Reply never(std::string_view target) {
    Reply reply;
    OutBuf body;
    api_->handle(Method::kGet, target, reply.response, body, scratch_, Blocking::kNever);
    reply.body.assign(body.view());
    return reply;
  }
};

TEST_F(ApiThrottleTest, WouldBlockIsDeferredWithNothingIssued) {
  Reply first = never("/v1/ids?count=8192&format=text");
  ASSERT_EQ(first.status(), 200) << first.body;
  EXPECT_FALSE(first.response.deferred);

  const Reply r = never("/v1/ids?count=8192&format=number");
  ASSERT_TRUE(r.response.deferred) << r.status() << " " << r.body;
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.response.route, Route::kIds);
  EXPECT_EQ(r.response.deferral.pool, ops::Pool::kGenerator);
  const Reply leaf = never("/api/snowflake/get/k");
  ASSERT_TRUE(leaf.response.deferred) << leaf.status() << " " << leaf.body;
  EXPECT_EQ(leaf.response.route, Route::kLeafGet);
  EXPECT_EQ(leaf.response.deferral.pool, ops::Pool::kGenerator);
  // Bad parameters are refused before anything would block.
  EXPECT_EQ(never("/v1/ids?count=0").status(), 400);
  EXPECT_FALSE(never("/v1/ids?count=0").response.deferred);
  EXPECT_HAS(call("/metrics").body, "\nflurry_ids_issued_total 8192\n");

  // How a deferred request is run again on the pool: RequestsQueueBehindDeferredOnes (here it
  // would wait for the rate limit on the real clock).
}

TEST(ApiStatusTest, StatusMapping) {
  struct Case {
    Status status;
    int http;
    bool retry_after;
    bool allow;
  };
  const Case cases[] = {
      {InvalidArgument("x"), 400, false, false},
      {Status(Reason::kBatchTooLarge, "x"), 400, false, false},
      {Status(StatusCode::kOutOfRange, "x"), 400, false, false},
      {Status(StatusCode::kNotFound, "x"), 404, false, false},
      {Status(Reason::kMethodNotAllowed, "x"), 405, false, true},
      {Status(Reason::kExpectationFailed, "x"), 417, false, false},
      {Status(StatusCode::kUnimplemented, "x"), 501, false, false},
      {Status(Reason::kBodyTooLarge, "x"), 413, false, false},
      {Status(Reason::kHeaderTooLarge, "x"), 431, false, false},
      {Status(Reason::kNoFreeNode, "x"), 503, true, false},
      {Status(Reason::kResponseBudget, "x"), 503, true, false},
      {Status(Reason::kClockBehind, "x"), 503, true, false},
      {Status(Reason::kLeaseExpiring, "x"), 503, true, false},
      {Status(Reason::kReclaimingNode, "x"), 503, true, false},
      {Status(Reason::kWouldBlock, "x"), 503, true, false},
      // The caller went away: Status::retryable() is false, so no Retry-After.
      {Status(StatusCode::kCancelled, "x"), 503, false, false},
      {Status(Reason::kLeaseLost, "x"), 503, false, false},
      {Status(Reason::kRegistryRegressed, "x"), 503, false, false},
      {Status(Reason::kTimeExhausted, "x"), 503, false, false},
      {Status(Reason::kClockBeforeEpoch, "x"), 503, false, false},
      {Status(Reason::kStateMismatch, "x"), 500, false, false},
      {Status(Reason::kCorrupt, "x"), 500, false, false},
      {Status(StatusCode::kInternal, "x"), 500, false, false},
  };
  EXPECT_EQ(http_status(OkStatus()).status, 200);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.status.to_string());
    const HttpStatus h = http_status(c.status);
    EXPECT_EQ(h.status, c.http);
    EXPECT_EQ(h.retry_after, c.retry_after);
    EXPECT_EQ(h.allow, c.allow);
  }
  // Segment mode's admin route: credentials, permission and conflicts.
  const HttpStatus unauthenticated = http_status(Status(StatusCode::kUnauthenticated, "x"));
  EXPECT_EQ(unauthenticated.status, 401);
  EXPECT_TRUE(unauthenticated.www_authenticate);
  EXPECT_FALSE(unauthenticated.retry_after);
  EXPECT_EQ(http_status(Status(StatusCode::kPermissionDenied, "x")).status, 403);
  EXPECT_FALSE(http_status(Status(StatusCode::kPermissionDenied, "x")).www_authenticate);
  EXPECT_EQ(http_status(Status(StatusCode::kAlreadyExists, "x")).status, 409);
  EXPECT_EQ(reason_phrase(201), "Created");
  EXPECT_EQ(reason_phrase(401), "Unauthorized");
  EXPECT_EQ(reason_phrase(403), "Forbidden");
  EXPECT_EQ(reason_phrase(409), "Conflict");
  EXPECT_EQ(reason_phrase(405), "Method Not Allowed");
  EXPECT_EQ(reason_phrase(404), "Not Found");
  EXPECT_EQ(reason_phrase(417), "Expectation Failed");
  EXPECT_EQ(reason_phrase(501), "Not Implemented");
}

// Api::error is the one writer of error responses: status, headers and body from the Status.
TEST(ApiStatusTest, ErrorResponse) {
  const auto respond = [](const Status& st, ApiResponse& r) {
    OutBuf body;
    Api::error(st, r, body);
    return std::string(body.view());
  };
  ApiResponse r;
  EXPECT_EQ(respond(Status(Reason::kBodyTooLarge, "too big"), r),
            "{\"error\":{\"code\":\"RESOURCE_EXHAUSTED\",\"reason\":\"BODY_TOO_LARGE\","
            "\"message\":\"too big\"}}\n");
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.content_type, "application/json");

  r = ApiResponse{};
  EXPECT_EQ(respond(Status(Reason::kHeaderTooLarge, "h"), r),
            "{\"error\":{\"code\":\"RESOURCE_EXHAUSTED\",\"reason\":\"HEADER_TOO_LARGE\","
            "\"message\":\"h\"}}\n");
  EXPECT_EQ(r.status, 431);

  r = ApiResponse{};
  EXPECT_EQ(respond(Status(Reason::kResponseBudget, "budget"), r),
            "{\"error\":{\"code\":\"RESOURCE_EXHAUSTED\",\"reason\":\"RESPONSE_BUDGET\","
            "\"message\":\"budget\"}}\n");
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(r.retry_after);

  // BAD_INPUT and NONE say nothing beyond the code: no reason field.
  r = ApiResponse{};
  EXPECT_EQ(respond(InvalidArgument("bad \"x\""), r),
            "{\"error\":{\"code\":\"INVALID_ARGUMENT\",\"message\":\"bad \\\"x\\\"\"}}\n");
  EXPECT_EQ(r.status, 400);
  r = ApiResponse{};
  EXPECT_EQ(respond(Status(StatusCode::kNotFound, "no"), r),
            "{\"error\":{\"code\":\"NOT_FOUND\",\"message\":\"no\"}}\n");

  r = ApiResponse{};
  respond(Status(Reason::kLeaseExpiring, "renewal overdue"), r);
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(r.retry_after);

  r = ApiResponse{};
  respond(Status(Reason::kExpectationFailed, "e"), r);
  EXPECT_EQ(r.status, 417);
  EXPECT_FALSE(r.allow);

  // An OK status is a bug of the caller: reported, never sent as a 200 error.
  r = ApiResponse{};
  EXPECT_HAS(respond(OkStatus(), r), "\"code\":\"INTERNAL\"");
  EXPECT_EQ(r.status, 500);
}

}  // namespace
// A layout of 1 s units cannot carry UUIDv7 or ULID: 400 with the reason on both routes, while
// the other encodings are served.
TEST_F(ApiThrottleTest, WideEncodingsRefusedWithTheReason) {
  for (const std::string_view name : {"uuidv7", "ulid"}) {
    for (const std::string target : {"/v1/ids?encoding=", "/v1/ids/1?encoding="}) {
      expect_bad(target + std::string(name),
                 "parameter \"encoding\": layout \"time:41@1s,node:10,seq:12;epoch=2025-01-01T00:"
                 "00:00.000Z\" cannot be written as " +
                     std::string(name) + ": its time unit is coarser than 1 ms");
    }
  }
  EXPECT_EQ(call("/v1/ids?encoding=base32").status(), 200);
}

// --- The console's read routes ----------------------------------------------------------

// GET /v1/nodes: deferred to the store pool under kNever, then every node ID of the registry
// with this process's row marked, each field as docs/operations.md lists it.
TEST_F(ApiTest, NodesListsTheRegistryWithThisProcess) {
  ApiResponse deferred;
  OutBuf ignored;
  api_->handle(Method::kGet, "/v1/nodes", deferred, ignored, scratch_, Blocking::kNever);
  EXPECT_TRUE(deferred.deferred);
  EXPECT_EQ(deferred.deferral.pool, ops::Pool::kStore);
  EXPECT_EQ(ignored.size(), 0u);

  issue_one();
  const Reply r = call("/v1/nodes");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.route, Route::kNodes);
  const nlohmann::json doc = nlohmann::json::parse(r.body);
  EXPECT_EQ(doc.size(), 6u);
  EXPECT_EQ(doc["registry"], service_->registry_description());
  EXPECT_EQ(doc["layout"], service_->layout().to_string());
  const std::int64_t now = doc["now_unix_ms"].get<std::int64_t>();
  EXPECT_NEAR(static_cast<double>(now),
              static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      SystemClock::coarse().now().time_since_epoch())
                                      .count()),
              5000);
  EXPECT_EQ(doc["this_node"], service_->node());
  EXPECT_EQ(doc["this_token"], service_->state().token);
  ASSERT_TRUE(doc["nodes"].is_array());
  int mine = 0;
  for (const nlohmann::json& n : doc["nodes"]) {
    SCOPED_TRACE(n.dump());
    EXPECT_TRUE(n["state"] == "live" || n["state"] == "free");
    EXPECT_TRUE(n["owner"].is_string());
    EXPECT_TRUE(n["token"].is_number_unsigned());
    EXPECT_TRUE(n.contains("lease_expires_unix_ms"));
    EXPECT_TRUE(n.contains("lease_remaining_ms"));
    EXPECT_TRUE(n.contains("horizon"));
    EXPECT_FALSE(n.contains("horizon_error"));
    if (!n["this_process"].get<bool>()) continue;
    ++mine;
    EXPECT_EQ(n.size(), 9u);
    EXPECT_EQ(n["node"], service_->node());
    EXPECT_EQ(n["state"], "live");
    EXPECT_EQ(n["owner"], service_->state().owner);
    EXPECT_EQ(n["token"], service_->state().token);
    const std::int64_t expires = n["lease_expires_unix_ms"].get<std::int64_t>();
    EXPECT_EQ(n["lease_expires"], format_unix_ms(expires));
    EXPECT_EQ(n["lease_remaining_ms"].get<std::int64_t>(),
              std::max<std::int64_t>(expires - now, 0));
    EXPECT_GT(n["lease_remaining_ms"].get<std::int64_t>(), 0);
    const nlohmann::json& h = n["horizon"];
    ASSERT_TRUE(h.is_object());
    EXPECT_EQ(h.size(), 4u);
    EXPECT_EQ(h["generation"], 0);
    EXPECT_GT(h["ticks"].get<std::int64_t>(), 0);
    const std::int64_t horizon_ms = h["unix_ms"].get<std::int64_t>();
    EXPECT_EQ(h["time"], format_unix_ms(horizon_ms));
    EXPECT_GT(horizon_ms, now - 5000);
  }
  EXPECT_EQ(mine, 1);
  expect_bad("/v1/nodes?x=1", "takes no parameters");
  EXPECT_EQ(call("/v1/nodes", Method::kPost).status(), 405);
}

// GET /v1/status: what the process knows of its node, every field of docs/operations.md.
TEST_F(ApiTest, StatusDescribesThisNode) {
  issue_one();
  const Reply r = call("/v1/status");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.route, Route::kStatus);
  const nlohmann::json doc = nlohmann::json::parse(r.body);
  std::vector<std::string> keys;
  for (auto it = doc.begin(); it != doc.end(); ++it) keys.push_back(it.key());
  std::vector<std::string> expected = {
      "version",   "node",     "owner",         "token",   "registry", "started_unix_ms",
      "uptime_ms", "ready",    "readiness",     "layout",  "clock",    "throttling",
      "lease",     "segments", "order_numbers", "activity"};
  std::sort(keys.begin(), keys.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(doc["version"], service::Service::version());
  EXPECT_EQ(doc["node"], service_->node());
  EXPECT_EQ(doc["owner"], service_->state().owner);
  EXPECT_GE(doc["token"].get<std::uint64_t>(), 1u);
  EXPECT_EQ(doc["registry"], service_->registry_description());
  EXPECT_GT(doc["started_unix_ms"].get<std::int64_t>(), 1'700'000'000'000);
  EXPECT_GE(doc["uptime_ms"].get<std::int64_t>(), 0);
  EXPECT_EQ(doc["ready"], true);
  EXPECT_TRUE(doc["readiness"].is_null());
  EXPECT_EQ(doc["layout"], nlohmann::json::parse(call("/v1/layout").body));
  const nlohmann::json& clock = doc["clock"];
  EXPECT_TRUE(clock["lead_ms"].is_number());
  EXPECT_EQ(clock["max_lead_ms"], 1000);
  EXPECT_GT(clock["horizon_ahead_ms"].get<double>(), 0);
  EXPECT_EQ(clock["generation"], 0);
  EXPECT_EQ(clock["rollback"], "wait");
  EXPECT_EQ(clock["max_wait_ms"], 3000);
  for (const char* counter :
       {"rollback_waits", "rollback_failures", "clock_switches", "steps_detected"}) {
    EXPECT_EQ(clock[counter], 0) << counter;
  }
  EXPECT_EQ(clock.size(), 10u);
  EXPECT_EQ(doc["throttling"], nlohmann::json::parse(R"({"active":false,"waits_total":0})"));
  const nlohmann::json& lease = doc["lease"];
  EXPECT_EQ(lease.size(), 5u);
  EXPECT_EQ(lease["state"], "held");
  EXPECT_EQ(lease["ttl_ms"], 10000);
  EXPECT_GT(lease["remaining_ms"].get<std::int64_t>(), 0);
  EXPECT_LE(lease["remaining_ms"].get<std::int64_t>(), 10000);
  EXPECT_TRUE(lease["renewals"].is_number_unsigned());
  EXPECT_EQ(lease["renewal_failures"], 0);
  EXPECT_EQ(doc["segments"], nlohmann::json::parse(R"({"served":false,"stores":[]})"));
  EXPECT_EQ(doc["order_numbers"], nlohmann::json::parse(R"({"served":false})"));
  // No activity history wired: the series are there, empty.
  const nlohmann::json& activity = doc["activity"];
  EXPECT_EQ(activity["interval_ms"], 1000);
  EXPECT_EQ(activity["end_unix_ms"], 0);
  ASSERT_EQ(activity["series"].size(), 3u);
  EXPECT_EQ(activity["series"][0]["name"], "snowflake");
  EXPECT_EQ(activity["series"][1]["name"], "segment");
  EXPECT_EQ(activity["series"][2]["name"], "order_numbers");
  EXPECT_TRUE(activity["series"][0]["ids"].empty());
  expect_bad("/v1/status?since=1", "takes no parameters");
}

// The activity history's samples appear in /v1/status, oldest first.
TEST_F(ApiTest, StatusShowsTheActivityHistory) {
  ops::ActivityCounts counts;
  ops::ActivityHistory history([&counts] { return counts; }, Clocks::system());
  ops_->operations.set_activity(&history);
  history.sample();
  counts = {5, 0, 2};
  history.sample();
  counts = {12, 3, 2};
  history.sample();
  const nlohmann::json a = nlohmann::json::parse(call("/v1/status").body)["activity"];
  EXPECT_EQ(a["series"][0]["ids"], nlohmann::json::parse("[5,7]"));
  EXPECT_EQ(a["series"][1]["ids"], nlohmann::json::parse("[0,3]"));
  EXPECT_EQ(a["series"][2]["ids"], nlohmann::json::parse("[2,0]"));
  EXPECT_GT(a["end_unix_ms"].get<std::int64_t>(), 0);
  ops_->operations.set_activity(nullptr);
}

// GET /v1/events: the ring, since= a seq; typed details in their order.
TEST_F(ApiTest, EventsSince) {
  const Reply first = call("/v1/events");
  ASSERT_EQ(first.status(), 200) << first.body;
  EXPECT_EQ(first.response.route, Route::kEvents);
  const nlohmann::json doc = nlohmann::json::parse(first.body);
  EXPECT_EQ(doc["capacity"], 512);
  EXPECT_EQ(doc["dropped"], 0);
  ASSERT_GE(doc["events"].size(), 1u);
  const nlohmann::json& claimed = doc["events"][0];
  EXPECT_EQ(claimed["seq"], 1);
  EXPECT_EQ(claimed["kind"], "lease_claimed");
  EXPECT_EQ(claimed["level"], "info");
  EXPECT_EQ(claimed["node"], service_->node());
  EXPECT_EQ(claimed["time"], format_unix_ms(claimed["unix_ms"].get<std::int64_t>()));
  EXPECT_EQ(claimed["details"]["owner"], service_->state().owner);
  EXPECT_TRUE(claimed["details"]["horizon_time"].is_null());
  const std::uint64_t next = doc["next_seq"].get<std::uint64_t>();

  service_->events().record(service::EventLevel::kWarning, "clock_step", 3,
                            "a \"quoted\" <message>",
                            {{"step_ms", std::int64_t{-2004}},
                             {"lead_ms", 2004.5},
                             {"max_lead_ms", std::int64_t{3000}},
                             {"outcome", "absorbed"}},
                            service::EventLog::Line::kAlreadyLogged);
  const Reply since = call("/v1/events?since=" + std::to_string(next - 1));
  ASSERT_EQ(since.status(), 200) << since.body;
  const nlohmann::json later = nlohmann::json::parse(since.body);
  EXPECT_EQ(later["next_seq"], next + 1);
  ASSERT_EQ(later["events"].size(), 1u);
  const nlohmann::json& e = later["events"][0];
  EXPECT_EQ(e.size(), 8u);
  EXPECT_EQ(e["seq"], next);
  EXPECT_EQ(e["level"], "warning");
  EXPECT_EQ(e["kind"], "clock_step");
  EXPECT_EQ(e["node"], 3);
  EXPECT_EQ(e["message"], "a \"quoted\" <message>");
  // In the order recorded (the raw body; nlohmann sorts its object keys).
  EXPECT_HAS(
      since.body,
      R"("details":{"step_ms":-2004,"lead_ms":2004.5,"max_lead_ms":3000,"outcome":"absorbed"})");
  EXPECT_TRUE(nlohmann::json::parse(call("/v1/events?since=" + std::to_string(next)).body)["events"]
                  .empty());
  expect_bad("/v1/events?since=abc", "parameter \"since\": \"abc\" is not a whole number");
  expect_bad("/v1/events?since=-1", "parameter \"since\"");
  expect_bad("/v1/events?since=", "parameter \"since\"");
  expect_bad("/v1/events?until=1", "until");
  EXPECT_EQ(call("/v1/events", Method::kHead).status(), 200);
}

}  // namespace flurry::http

// The HTTP/1.1 request parser alone (src/http/http_request_parser.h): bytes in, "need more",
// "100 Continue", "a request" or "refused" out, with no socket. Every framing case the running
// server is checked for on raw sockets (tests/integration/http_framing.py, expect_continue.py,
// head_requests.py and bad_inputs.py where they are about framing) is here too, and the
// smuggling cases those scripts do not send: a repeated Content-Length, obs-fold, bare LF,
// chunk-size overflow, framing over header_limit in chunk lines and trailers, fields in a
// trailer. Each case is fed whole and in small pieces, as reads from a socket come.
#include "http/http_request_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/status.h"
#include "http/http_options.h"

namespace flurry::http {
namespace {

namespace http = boost::beast::http;
using Step = HttpRequestParser::Step;

// The request that follows a refused one in the smuggling cases: it must never be parsed as a
// request of its own.
constexpr std::string_view kSmuggled = "GET /v1/ids?count=7 HTTP/1.1\r\nHost: localhost\r\n\r\n";

// What the parser made of one request.
struct Parsed {
  Step step = Step::kNeedMore;
  http::verb method = http::verb::unknown;
  int version = 0;
  bool keep_alive = false;
  std::string target;
  std::string authorization;
  std::string body;
  Status refusal;
  int continues = 0;     // how often parse() asked for 100 Continue
  std::string leftover;  // the bytes after the request, not consumed
};

// Feeds `input` to a parser as a connection does: `pieces` bytes at a time (all at once when 0),
// each time with everything not consumed so far; after kContinue it goes on feeding. Stops at
// kDone, kRefused, or kNeedMore with nothing left to feed.
Parsed parse_one(std::string_view input, const HttpOptions& options = {}, std::size_t pieces = 0) {
  Parsed p;
  std::string target;
  std::string authorization = "left over from the previous request";
  std::string body = "left over";
  HttpRequestParser parser(target, authorization, body, options);
  std::string in;
  std::size_t fed = 0;
  for (;;) {
    const std::size_t n = pieces == 0 ? input.size() - fed : std::min(pieces, input.size() - fed);
    in.append(input.substr(fed, n));
    fed += n;
    std::size_t used = 0;
    p.step = parser.parse(in, used);
    EXPECT_LE(used, in.size());
    in.erase(0, used);
    if (p.step == Step::kContinue) {
      ++p.continues;
      if (fed == input.size()) {
        // Nothing more to send yet: what the parser says now that the 100 went out.
        p.step = parser.parse(in, used);
        in.erase(0, used);
        break;
      }
      continue;
    }
    if (p.step != Step::kNeedMore || fed == input.size()) break;
  }
  p.method = parser.method();
  p.version = parser.http_version();
  p.keep_alive = p.step == Step::kDone && parser.keep_alive();
  p.target = target;
  p.authorization = authorization;
  p.body = body;
  p.refusal = parser.refusal();
  p.leftover = in;
  return p;
}

bool contains_nocase(std::string_view text, std::string_view needle) {
  std::string t(text);
  std::string n(needle);
  for (std::string* s : {&t, &n}) {
    std::transform(s->begin(), s->end(), s->begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  return t.find(n) != std::string::npos;
}

// Refused with `reason` (and INVALID_ARGUMENT's code when `reason` is BAD_INPUT), a message
// naming each needle, and the smuggled request after it never parsed.
void expect_refused(std::string_view request, std::vector<std::string_view> needles,
                    Reason reason = Reason::kBadInput, const HttpOptions& options = {}) {
  SCOPED_TRACE(std::string(request.substr(0, 200)));
  const std::string input = std::string(request) + std::string(kSmuggled);
  for (std::size_t pieces : {std::size_t{0}, std::size_t{1}, std::size_t{7}}) {
    SCOPED_TRACE(pieces);
    const Parsed p = parse_one(input, options, pieces);
    ASSERT_EQ(p.step, Step::kRefused);
    EXPECT_FALSE(p.refusal.ok());
    EXPECT_EQ(p.refusal.reason(), reason) << p.refusal.to_string();
    if (reason == Reason::kBadInput) {
      EXPECT_EQ(p.refusal.code(), StatusCode::kInvalidArgument) << p.refusal.to_string();
    }
    for (std::string_view n : needles) {
      EXPECT_TRUE(contains_nocase(p.refusal.message(), n)) << n << ": " << p.refusal.to_string();
    }
  }
}

// A whole request, and `rest` left unconsumed after it.
Parsed expect_done(std::string_view input, std::string_view rest = {},
                   const HttpOptions& options = {}) {
  SCOPED_TRACE(std::string(input.substr(0, 200)));
  Parsed whole;
  for (std::size_t pieces : {std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
    SCOPED_TRACE(pieces);
    Parsed p = parse_one(input, options, pieces);
    EXPECT_EQ(p.step, Step::kDone) << p.refusal.to_string();
    EXPECT_TRUE(p.refusal.ok()) << p.refusal.to_string();
    // Fed piece by piece the parser stops at the end of the request, where all at once the rest
    // is left in the buffer.
    if (pieces == 0) {
      EXPECT_EQ(p.leftover, rest);
      whole = std::move(p);
    }
  }
  return whole;
}

// --- http_framing.py ----------------------------------------------------------------------------

// 1. A Transfer-Encoding other than exactly "chunked": refused, naming Transfer-Encoding; the
// body, which is a request here, is never parsed as one.
TEST(HttpRequestParserTest, UnknownOrMisplacedTransferCodingsAreRefused) {
  for (std::string_view te : {"gzip", "identity", "chunked, foo", "Chunked ,gzip", "gzip, chunked",
                              "chunked, chunked", "chunked;ext=1", "", "  , "}) {
    for (std::string_view start : {"GET /healthz", "POST /v1/ids?count=1"}) {
      std::string request =
          std::string(start) +
          " HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: " + std::string(te) + "\r\n\r\n";
      std::string lower(te);
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      while (!lower.empty() && lower.back() == ' ') lower.pop_back();
      if (lower.ends_with("chunked")) request += "0\r\n\r\n";
      expect_refused(request, {"Transfer-Encoding"});
    }
  }
  // Two fields making "gzip, chunked".
  expect_refused(
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n"
      "Transfer-Encoding: chunked\r\n\r\n",
      {"Transfer-Encoding"});
  // The messages say what is wrong.
  Parsed p =
      parse_one("GET / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked, gzip\r\n\r\n");
  EXPECT_TRUE(contains_nocase(p.refusal.message(), "not the final transfer coding"))
      << p.refusal.to_string();
  p = parse_one("GET / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n");
  EXPECT_TRUE(contains_nocase(p.refusal.message(), "transfer coding \"gzip\" is not supported"))
      << p.refusal.to_string();
  p = parse_one("GET / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked, chunked\r\n\r\n");
  EXPECT_TRUE(contains_nocase(p.refusal.message(), "more than once")) << p.refusal.to_string();
}

// 2. Transfer-Encoding in an HTTP/1.0 request, even chunked.
TEST(HttpRequestParserTest, TransferEncodingInHttp10IsRefused) {
  for (std::string_view te : {"chunked", "gzip"}) {
    expect_refused("GET /healthz HTTP/1.0\r\nHost: localhost\r\nTransfer-Encoding: " +
                       std::string(te) + "\r\n\r\n0\r\n\r\n",
                   {"Transfer-Encoding", "HTTP/1.0"});
  }
}

// 3. Content-Length beside Transfer-Encoding (both orders), codings repeated after chunked, two
// different Content-Lengths.
TEST(HttpRequestParserTest, ContentLengthBesideTransferEncodingIsRefused) {
  expect_refused(
      "POST /v1/ids HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      {"Content-Length", "Transfer-Encoding"});
  expect_refused(
      "POST /v1/ids HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
      "Content-Length: 5\r\n\r\n0\r\n\r\n",
      {"Content-Length", "Transfer-Encoding"});
  expect_refused(
      "POST /v1/ids HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n"
      "Content-Length: 5\r\n\r\nhello",
      {"Transfer-Encoding"});
  expect_refused(
      "POST /v1/ids HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
      "Transfer-Encoding: gzip\r\n\r\nhello",
      {"Content-Length", "Transfer-Encoding"});
  expect_refused(
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      {"Transfer-Encoding"});
  expect_refused(
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
      "Transfer-Encoding: gzip\r\n\r\n0\r\n\r\n",
      {"Transfer-Encoding"});
  expect_refused(
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 2\r\n"
      "\r\nab",
      {"Content-Length"});
}

// Content-Length repeated with another value, or not a single decimal number: refused, so no
// two parsers can disagree on where the body ends. Repeated with the same value it is one length
// (RFC 9110 section 8.6 allows either), and the stream stays in step.
TEST(HttpRequestParserTest, DuplicateOrMalformedContentLength) {
  expect_refused(
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n"
      "Content-Length: 3\r\n\r\nabc",
      {"Content-Length"});
  const Parsed same = expect_done(
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n"
      "Content-Length: 2\r\n\r\nab" +
          std::string(kSmuggled),
      kSmuggled);
  EXPECT_EQ(same.body, "ab");
  for (std::string_view cl : {"-5", "1,2", "0x10", "5 5", "+5", "", "99999999999999999999999"}) {
    expect_refused("POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nContent-Length: " +
                       std::string(cl) + "\r\n\r\nhello",
                   {"Content-Length"});
  }
}

// 4. "chunked" in any case and with whitespace or empty list elements is read as the body, and
// the request after it is left for the next parse: the stream stays in step.
TEST(HttpRequestParserTest, ChunkedBodiesAreReadAndTheStreamStaysInStep) {
  for (std::string_view te : {"chunked", "CHUNKED", " Chunked\t", "chunked,", ", chunked"}) {
    SCOPED_TRACE(std::string(te));
    const std::string request =
        "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\n"
        "Transfer-Encoding:" +
        std::string(te) +
        "\r\n\r\n"
        "5\r\nGET /\r\n3;ext=1\r\nabc\r\n0\r\n\r\n";
    const Parsed p = expect_done(request + std::string(kSmuggled), kSmuggled);
    EXPECT_EQ(p.method, http::verb::post);
    EXPECT_EQ(p.target, "/v1/segments");
    EXPECT_EQ(p.body, "GET /abc");
    EXPECT_TRUE(p.keep_alive);
    // The rest parses as the next request.
    const Parsed next = expect_done(p.leftover);
    EXPECT_EQ(next.target, "/v1/ids?count=7");
  }
  // A GET's body is read and dropped: nothing of it is kept.
  const Parsed get = expect_done(
      "GET /v1/ids?count=3 HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nGET /\r\n0\r\n\r\n");
  EXPECT_EQ(get.target, "/v1/ids?count=3");
  EXPECT_EQ(get.body, "");
  EXPECT_EQ(get.authorization, "");  // the previous request's credential is not kept either
}

// 5. Host: missing or repeated in HTTP/1.1 is refused; HTTP/1.0 without Host, an empty Host and
// one in odd letter case are taken; a Host that does not name this server is refused.
TEST(HttpRequestParserTest, HostMustBeThereOnceAndNameThisServer) {
  expect_refused("GET /v1/ids?count=1 HTTP/1.1\r\n\r\n", {"Host"});
  expect_refused("GET /v1/ids?count=1 HTTP/1.1\r\nX-Host: localhost\r\n\r\n", {"Host"});
  expect_refused("GET /v1/ids?count=1 HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n",
                 {"Host", "more than one"});
  expect_refused("GET /v1/ids?count=1 HTTP/1.1\r\nHost: localhost\r\nhost: localhost\r\n\r\n",
                 {"Host"});
  expect_refused("GET /v1/ids?count=1 HTTP/1.0\r\nHost: localhost\r\nHost: localhost\r\n\r\n",
                 {"Host"});
  const Parsed old = expect_done("GET /v1/ids?count=2 HTTP/1.0\r\n\r\n");
  EXPECT_EQ(old.version, 10);
  EXPECT_FALSE(old.keep_alive);
  const Parsed empty = expect_done("GET /v1/ids?count=2 HTTP/1.1\r\nHost: \r\n\r\n");
  EXPECT_EQ(empty.version, 11);
  EXPECT_TRUE(empty.keep_alive);
  expect_done("GET /healthz HTTP/1.1\r\nhOsT: LocalHost:1\r\n\r\n");
  expect_refused("GET /v1/ids HTTP/1.1\r\nHost: evil.example:7609\r\n\r\n",
                 {"\"evil.example:7609\"", "is not a name of this server", "allowed_hosts"});
  HttpOptions allowed;
  allowed.allowed_hosts = {"ids.example.com"};
  expect_done("GET /v1/ids HTTP/1.1\r\nHost: IDS.Example.COM.\r\n\r\n", {}, allowed);
}

// --- expect_continue.py -------------------------------------------------------------------------

// The header alone asks for 100 Continue once; the body then completes the request. A request
// whose body came with the header, or that has none, is complete without it.
TEST(HttpRequestParserTest, ExpectContinueIsAskedOnceBeforeTheBody) {
  std::string target;
  std::string authorization;
  std::string body;
  const HttpOptions options;
  HttpRequestParser parser(target, authorization, body, options);
  std::string in =
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n"
      "Content-Length: 10\r\n\r\n";
  std::size_t used = 0;
  EXPECT_EQ(parser.parse(in, used), Step::kContinue);
  EXPECT_EQ(used, in.size());
  EXPECT_TRUE(parser.expect_continue());
  in.clear();
  EXPECT_EQ(parser.parse(in, used), Step::kNeedMore);  // asked once only
  in = "01234";
  EXPECT_EQ(parser.parse(in, used), Step::kNeedMore);
  EXPECT_EQ(used, 5u);
  in = "56789";
  EXPECT_EQ(parser.parse(in, used), Step::kDone);
  EXPECT_EQ(body, "0123456789");

  // Chunked, the expectation in another case.
  Parsed p = parse_one(
      "GET /v1/ids?count=1 HTTP/1.1\r\nHost: localhost\r\nExpect: 100-Continue\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(p.continues, 1);
  EXPECT_EQ(p.step, Step::kNeedMore);
  // Header and body in one piece: complete at once, no 100.
  p = parse_one(
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n"
      "Content-Length: 3\r\n\r\nabc");
  EXPECT_EQ(p.step, Step::kDone);
  EXPECT_EQ(p.continues, 0);
  // No body: complete, no 100.
  p = parse_one("GET /v1/ids?count=4 HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(p.step, Step::kDone);
  EXPECT_EQ(p.continues, 0);
}

// A body over body_limit is refused from the header (413), never with a 100 first.
TEST(HttpRequestParserTest, ExpectContinueWithABodyOverTheLimitIsRefusedAtOnce) {
  HttpOptions options;
  options.body_limit = 8192;
  const Parsed p = parse_one(
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n"
      "Content-Length: 100000\r\n\r\n",
      options);
  EXPECT_EQ(p.step, Step::kRefused);
  EXPECT_EQ(p.continues, 0);
  EXPECT_EQ(p.refusal.reason(), Reason::kBodyTooLarge) << p.refusal.to_string();
  EXPECT_TRUE(contains_nocase(p.refusal.message(), "body_limit (8192 bytes)"));
}

// Another expectation: 417 (EXPECTATION_FAILED) naming it; HTTP/1.0 ignores Expect.
TEST(HttpRequestParserTest, OtherExpectationsAreRefusedInHttp11Only) {
  for (std::string_view value : {"200-ok", "100-continue, foo", "100-continue;x=1"}) {
    expect_refused("POST /v1/ids?count=1 HTTP/1.1\r\nHost: localhost\r\nExpect: " +
                       std::string(value) + "\r\nContent-Length: 10\r\n\r\n",
                   {"unsupported expectation", "100-continue"}, Reason::kExpectationFailed);
  }
  const Parsed p =
      expect_done("GET /v1/ids?count=1 HTTP/1.0\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\nab");
  EXPECT_EQ(p.continues, 0);
}

// --- head_requests.py and pipelining (bad_inputs.py) -----------------------------------------

// Pipelined requests, HEAD among them, are parsed one at a time, each leaving the rest.
TEST(HttpRequestParserTest, PipelinedRequestsAreParsedInOrder) {
  const std::string stream =
      "HEAD /v1/ids?count=100000 HTTP/1.1\r\nHost: localhost\r\n\r\n"
      "GET /v1/ids?count=2 HTTP/1.1\r\nHost: localhost\r\n\r\n"
      "GET /nope HTTP/1.1\r\nHost: localhost\r\n\r\n"
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\n"
      "Authorization: Bearer t\r\n\r\nbody"
      "GET /v1/ids?count=3 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  std::string rest = stream;
  std::vector<std::string> targets;
  std::vector<http::verb> methods;
  while (!rest.empty()) {
    std::string target;
    std::string authorization;
    std::string body;
    const HttpOptions options;
    HttpRequestParser parser(target, authorization, body, options);
    std::size_t used = 0;
    ASSERT_EQ(parser.parse(rest, used), Step::kDone) << parser.refusal().to_string();
    rest.erase(0, used);
    targets.push_back(target);
    methods.push_back(parser.method());
    if (parser.method() == http::verb::post) {
      EXPECT_EQ(body, "body");
      EXPECT_EQ(authorization, "Bearer t");
    } else {
      EXPECT_EQ(body, "");
      EXPECT_EQ(authorization, "");
    }
    EXPECT_EQ(parser.keep_alive(), target != "/v1/ids?count=3");
  }
  EXPECT_EQ(targets, (std::vector<std::string>{"/v1/ids?count=100000", "/v1/ids?count=2", "/nope",
                                               "/v1/segments", "/v1/ids?count=3"}));
  EXPECT_EQ(methods.front(), http::verb::head);
}

// --- bad_inputs.py ------------------------------------------------------------------------------

// Half a header or half a body: more bytes are needed, nothing is decided.
TEST(HttpRequestParserTest, UnfinishedRequestsNeedMoreBytes) {
  Parsed p = parse_one("GET /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ");
  EXPECT_EQ(p.step, Step::kNeedMore);
  EXPECT_TRUE(p.refusal.ok());
  p = parse_one(
      "POST /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc");
  EXPECT_EQ(p.step, Step::kNeedMore);
  p = parse_one("");
  EXPECT_EQ(p.step, Step::kNeedMore);
}

// A 64 KiB field, 1100 fields of 64 bytes, a 64 KiB target: 431 (HEADER_TOO_LARGE).
TEST(HttpRequestParserTest, OversizedHeadersAreRefused) {
  expect_refused("GET /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " +
                     std::string(65536, 'a') + "\r\n\r\n",
                 {"header_limit (8192 bytes)"}, Reason::kHeaderTooLarge);
  std::string many = "GET /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; i < 1100; ++i)
    many += "X-H" + std::to_string(i) + ": " + std::string(60, 'v') + "\r\n";
  expect_refused(many + "\r\n", {"header_limit"}, Reason::kHeaderTooLarge);
  expect_refused(
      "GET /v1/ids?count=1&x=" + std::string(65536, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
      {"header_limit"}, Reason::kHeaderTooLarge);
  // header_limit is the setting's: a smaller one refuses a smaller header.
  HttpOptions small;
  small.header_limit = 64;
  expect_refused(
      "GET /v1/ids HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: " + std::string(64, 'a') + "\r\n\r\n",
      {"header_limit (64 bytes)"}, Reason::kHeaderTooLarge, small);
}

// A declared body over body_limit (GET or POST) is refused from the header (413); a chunked one
// once its chunks pass the limit, without buffering them.
TEST(HttpRequestParserTest, BodiesOverTheLimitAreRefused) {
  for (std::string_view method : {"POST", "GET"}) {
    const Parsed p = parse_one(std::string(method) +
                               " /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Content-Length: 67108864\r\n\r\n" +
                               std::string(1024, 'x'));
    EXPECT_EQ(p.step, Step::kRefused) << method;
    EXPECT_EQ(p.refusal.reason(), Reason::kBodyTooLarge) << p.refusal.to_string();
    EXPECT_EQ(p.refusal.code(), StatusCode::kResourceExhausted);
  }
  std::string chunked =
      "POST /v1/segments HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunk = "1000\r\n" + std::string(4096, 'y') + "\r\n";
  for (int i = 0; i < 4; ++i) chunked += chunk;
  const Parsed p = parse_one(chunked + "0\r\n\r\n");
  EXPECT_EQ(p.step, Step::kRefused);
  EXPECT_EQ(p.refusal.reason(), Reason::kBodyTooLarge) << p.refusal.to_string();
  EXPECT_LE(p.body.size(), 8192u);
}

// Byte streams that are not HTTP: refused (400), never a request.
TEST(HttpRequestParserTest, NonHttpStreamsAreRefused) {
  std::mt19937 rnd(42);
  std::string random;
  for (int i = 0; i < 4096; ++i) random.push_back(static_cast<char>(rnd() & 0xff));
  std::string tls_hello = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
  for (int i = 0; i < 500; ++i) tls_hello.push_back(static_cast<char>(rnd() & 0xff));
  for (const std::string& data :
       {random + "\r\n\r\n", tls_hello, std::string("SSH-2.0-OpenSSH_9.2\r\n\r\n"),
        std::string(1000, '\0') + "\r\n\r\n", std::string("GET\r\n\r\n"),
        std::string("GET / HTTP/1.1 extra\r\n\r\n"),
        std::string("GET /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n"),
        std::string("*1\r\n$4\r\nPING\r\n"), std::string("GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
        std::string("GET / HTTP/1.1\r\nHost: a\r\n: empty name\r\n\r\n")}) {
    SCOPED_TRACE(::testing::PrintToString(data.substr(0, 40)));
    const Parsed p = parse_one(data);
    // Some streams end before the parser can tell (no line end yet): then it waits for more,
    // and the idle and request timeouts end the connection; none is ever a request.
    EXPECT_NE(p.step, Step::kDone);
    if (p.step == Step::kRefused) {
      EXPECT_EQ(p.refusal.code(), StatusCode::kInvalidArgument) << p.refusal.to_string();
    }
  }
  // These are refused outright.
  for (std::string_view data :
       {std::string_view("GET\r\n\r\n"), std::string_view("GET / HTTP/1.1 extra\r\n\r\n"),
        std::string_view("SSH-2.0-OpenSSH_9.2\r\n\r\n"),
        std::string_view("*1\r\n$4\r\nPING\r\n")}) {
    EXPECT_EQ(parse_one(data).step, Step::kRefused) << data;
  }
  expect_refused("GET /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n",
                 {"malformed HTTP request"});
}

// --- smuggling cases the scripts do not send -------------------------------------------------

// obs-fold (a field line continued on the next line, RFC 9112 section 5.2) is read as a space
// inside the value, as the RFC allows, so a framing field is checked on the value as folded: a
// folded Transfer-Encoding that is not exactly chunked, or a folded Host, is refused, and a line
// starting with blank space right after another field is never a field of its own.
TEST(HttpRequestParserTest, ObsFoldIsOneValueAndFramingFieldsAreCheckedWhole) {
  const Parsed folded = expect_done(
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer\r\n abc\r\n\r\n");
  EXPECT_EQ(folded.authorization.find('\n'), std::string::npos) << folded.authorization;
  EXPECT_TRUE(folded.authorization.starts_with("Bearer")) << folded.authorization;
  EXPECT_TRUE(folded.authorization.ends_with("abc")) << folded.authorization;
  expect_refused(
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip,\r\n"
      " chunked\r\n\r\n0\r\n\r\n",
      {});
  expect_refused("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\tX-Tab: 1\r\n\r\n", {});
  expect_refused("GET /healthz HTTP/1.1\r\nHost: localhost\r\n evil.example\r\n\r\n", {});
}

// A bare LF where CRLF belongs, and a bare CR: refused, never read as a line end.
TEST(HttpRequestParserTest, BareLineFeedsAreRefused) {
  expect_refused("GET /healthz HTTP/1.1\nHost: localhost\n\n", {"malformed"});
  expect_refused("GET /healthz HTTP/1.1\r\nHost: localhost\n\r\n", {"malformed"});
  expect_refused("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-A: 1\rX-B: 2\r\n\r\n", {});
  expect_refused(
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\nabc\r\n0\r\n\r\n",
      {"malformed"});
}

// A chunk size that overflows 64 bits, or is not hex: refused, never wrapped around.
TEST(HttpRequestParserTest, ChunkSizeOverflowIsRefused) {
  const std::string head =
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (std::string_view size :
       {"10000000000000001", "ffffffffffffffffff", "-1", "0x10", "g", " 3", "1 2"}) {
    expect_refused(head + std::string(size) + "\r\nabc\r\n0\r\n\r\n", {}, Reason::kBadInput);
  }
  // The largest size that fits is not an overflow: it is over body_limit.
  const Parsed p = parse_one(head + "ffffffffffffffff\r\nabc");
  EXPECT_EQ(p.step, Step::kRefused);
  EXPECT_EQ(p.refusal.reason(), Reason::kBodyTooLarge) << p.refusal.to_string();
}

// Chunk-size lines, extensions and the trailer count against header_limit with the header, even
// when they have not ended yet: the caller's buffer stays bounded.
TEST(HttpRequestParserTest, ChunkFramingCountsAgainstTheHeaderLimit) {
  HttpOptions options;
  options.header_limit = 256;
  const std::string head =
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";
  // Many small chunks: their size lines and CRLFs add up.
  std::string small;
  for (int i = 0; i < 80; ++i) small += "1\r\na\r\n";
  Parsed p = parse_one(head + small + "0\r\n\r\n", options);
  EXPECT_EQ(p.step, Step::kRefused);
  EXPECT_EQ(p.refusal.reason(), Reason::kHeaderTooLarge) << p.refusal.to_string();
  EXPECT_TRUE(contains_nocase(p.refusal.message(), "chunk-size lines")) << p.refusal.to_string();
  // One long chunk extension that has not ended: refused before its end comes.
  p = parse_one(head + "1;ext=" + std::string(1000, 'e'), options);
  EXPECT_EQ(p.step, Step::kRefused);
  EXPECT_EQ(p.refusal.reason(), Reason::kHeaderTooLarge) << p.refusal.to_string();
  // A long trailer.
  p = parse_one(head + "1\r\na\r\n0\r\nX-Trailer: " + std::string(1000, 't') + "\r\n\r\n", options);
  EXPECT_EQ(p.step, Step::kRefused);
  EXPECT_EQ(p.refusal.reason(), Reason::kHeaderTooLarge) << p.refusal.to_string();
  // Within the limit the same framing is fine.
  p = parse_one(head + "1;ext=1\r\na\r\n0\r\nX-Trailer: t\r\n\r\n", options);
  EXPECT_EQ(p.step, Step::kDone) << p.refusal.to_string();
  EXPECT_EQ(p.body, "a");
}

// Trailer fields are ignored: a credential or a Host sent there is never used. A
// Transfer-Encoding there is refused (Beast's rule).
TEST(HttpRequestParserTest, TrailerFieldsAreIgnored) {
  const Parsed p = expect_done(
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2\r\nab\r\n0\r\nAuthorization: Bearer smuggled\r\nHost: evil.example\r\n\r\n" +
          std::string(kSmuggled),
      kSmuggled);
  EXPECT_EQ(p.authorization, "");
  EXPECT_EQ(p.body, "ab");
  expect_refused(
      "POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2\r\nab\r\n0\r\nTransfer-Encoding: gzip\r\n\r\n",
      {"Transfer-Encoding"});
}

// Two Authorization headers: neither is used as the credential (the API then refuses it).
TEST(HttpRequestParserTest, TwoAuthorizationHeadersAreNotACredential) {
  const Parsed p = expect_done(
      "GET /v1/ids HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer a\r\n"
      "Authorization: Bearer b\r\n\r\n");
  EXPECT_EQ(p.authorization, "(more than one Authorization header)");
  const Parsed one =
      expect_done("GET /v1/ids HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer a\r\n\r\n");
  EXPECT_EQ(one.authorization, "Bearer a");
}

// After a refusal the parser takes nothing more: the rest of the stream cannot be trusted.
TEST(HttpRequestParserTest, NothingIsParsedAfterARefusal) {
  std::string target;
  std::string authorization;
  std::string body;
  const HttpOptions options;
  HttpRequestParser parser(target, authorization, body, options);
  std::size_t used = 0;
  ASSERT_EQ(parser.parse("GET / HTTP/1.1\r\n\r\n", used), Step::kRefused);
  const Status first = parser.refusal();
  EXPECT_EQ(parser.parse(kSmuggled, used), Step::kRefused);
  EXPECT_EQ(used, 0u);
  EXPECT_EQ(parser.refusal().to_string(), first.to_string());
}

}  // namespace
}  // namespace flurry::http

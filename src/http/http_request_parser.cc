#include "http_request_parser.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <utility>

#include "core/ascii.h"
#include "text.h"

namespace flurry::http {
namespace {

namespace http = boost::beast::http;

// Calls f(element) for each element of a comma-separated field value (RFC 9110 section 5.6.1),
// without the optional whitespace around it; empty elements are skipped.
template <typename F>
void for_each_element(std::string_view value, F&& f) {
  std::size_t pos = 0;
  while (pos <= value.size()) {
    std::size_t comma = value.find(',', pos);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view e = value.substr(pos, comma - pos);
    while (!e.empty() && (e.front() == ' ' || e.front() == '\t')) e.remove_prefix(1);
    while (!e.empty() && (e.back() == ' ' || e.back() == '\t')) e.remove_suffix(1);
    if (!e.empty()) f(e);
    pos = comma + 1;
  }
}

}  // namespace

HttpRequestParser::HttpRequestParser(std::string& target, std::string& authorization,
                                     std::string& body, const HttpOptions& options)
    : target_(target), authorization_(authorization), body_(body), options_(options) {
  authorization_.clear();
  body_.clear();
  header_limit(static_cast<std::uint32_t>(options.header_limit));
  body_limit(options.body_limit);
  eager(true);
}

HttpRequestParser::Step HttpRequestParser::parse(std::string_view input, std::size_t& used) {
  used = 0;
  if (!refusal_.ok()) return Step::kRefused;
  while (used < input.size() && !is_done()) {
    error_code ec;
    const std::size_t n = feed(input.substr(used), ec);
    used += n;
    if (ec == http::error::need_more) break;
    if (ec) {
      refuse(ec);
      return Step::kRefused;
    }
    if (n == 0) break;
  }
  // Past the header, what Beast leaves unconsumed of an unfinished request is an unfinished
  // chunk-size line or trailer (a body is consumed as it comes): it counts as framing, so the
  // caller's input buffer stays within header_limit plus one read however long the line.
  const std::uint64_t limit = options_.header_limit;
  const std::uint64_t pending = is_done() ? 0 : input.size() - used;
  if (is_header_done() && framing_bytes() + pending > limit) {
    refusal_ = Status(Reason::kHeaderTooLarge,
                      "the request header, chunk-size lines, chunk extensions and trailer "
                      "together are larger than header_limit (" +
                          std::to_string(limit) + " bytes; " +
                          std::to_string(framing_bytes() + pending) + " so far)");
    return Step::kRefused;
  }
  if (is_done()) return Step::kDone;
  // The header asked to be told before the body is sent (RFC 9110 section 10.1.1); a final
  // status known from the header alone (413, 417, 400) was a refusal above.
  if (is_header_done() && expect_continue_ && !continue_asked_) {
    continue_asked_ = true;
    return Step::kContinue;
  }
  return Step::kNeedMore;
}

std::size_t HttpRequestParser::feed(std::string_view bytes, error_code& ec) {
  const std::size_t used = put(boost::asio::const_buffer(bytes.data(), bytes.size()), ec);
  consumed_ += used;
  return used;
}

void HttpRequestParser::refuse(const error_code& ec) {
  if (!rejection_.ok()) {
    refusal_ = rejection_;
  } else if (ec == http::error::header_limit) {
    refusal_ =
        Status(Reason::kHeaderTooLarge, "the request header is larger than header_limit (" +
                                            std::to_string(options_.header_limit) + " bytes)");
  } else if (ec == http::error::body_limit) {
    refusal_ = Status(Reason::kBodyTooLarge, "the request body is larger than body_limit (" +
                                                 std::to_string(options_.body_limit) + " bytes)");
  } else {
    refusal_ = InvalidArgument(describe(ec));
  }
}

std::string HttpRequestParser::describe(const error_code& ec) const {
  if ((ec == http::error::bad_transfer_encoding && content_length_seen_) ||
      (ec == http::error::bad_content_length && transfer_encoding_seen_)) {
    return "a request must not have both Content-Length and Transfer-Encoding (RFC 9112 "
           "section 6.1)";
  }
  if (ec == http::error::bad_transfer_encoding) {
    return "Transfer-Encoding goes on after chunked: chunked must be the only transfer coding, "
           "given once (RFC 9112 section 6.3)";
  }
  if (ec == http::error::bad_content_length) {
    return "bad Content-Length (it must be a single decimal number)";
  }
  return "malformed HTTP request: " + ec.message();
}

void HttpRequestParser::on_request_impl(http::verb method, boost::beast::string_view,
                                        boost::beast::string_view target, int version,
                                        error_code&) {
  method_ = method;
  version_ = version;
  target_.assign(target.data(), target.size());
  keep_body_ = method == http::verb::post;
}

void HttpRequestParser::on_field_impl(http::field f, boost::beast::string_view,
                                      boost::beast::string_view value, error_code& ec) {
  if (is_header_done()) return;  // a trailer field: never a credential, a Host or framing
  switch (f) {
    case http::field::host:
      if (++hosts_ == 1 && !host_allowed(std::string_view(value.data(), value.size()), options_)) {
        foreign_host_.assign(value.data(), std::min<std::size_t>(value.size(), 256));
        foreign_ = true;
      }
      return;
    case http::field::content_length:
      content_length_seen_ = true;
      return;
    case http::field::transfer_encoding:
      transfer_encoding_seen_ = true;
      transfer_encoding(std::string_view(value.data(), value.size()), ec);
      return;
    case http::field::expect:
      if (version_ >= 11) expect(std::string_view(value.data(), value.size()));
      return;
    case http::field::authorization:
      // A credential: kept for the API, never logged. Two of them are refused there (the
      // value is then not "Bearer <token>").
      if (++authorizations_ > 1) {
        authorization_ = "(more than one Authorization header)";
      } else {
        authorization_.assign(value.data(), value.size());
      }
      return;
    default:
      return;
  }
}

void HttpRequestParser::on_header_impl(error_code& ec) {
  if (transfer_encoding_seen_ && !chunked()) {
    // Accepted above but not framed as chunked by Beast: never read a body as a request.
    reject(InvalidArgument("Transfer-Encoding must be exactly \"chunked\" (RFC 9112 section 6.1)"),
           ec);
  } else if (hosts_ > 1) {
    reject(InvalidArgument("more than one Host header (" + std::to_string(hosts_) +
                           "); a request must have exactly one (RFC 9112 section 3.2)"),
           ec);
  } else if (hosts_ == 0 && version_ >= 11) {
    reject(InvalidArgument("an HTTP/1.1 request must have a Host header (RFC 9112 section 3.2)"),
           ec);
  } else if (foreign_) {
    // A name rebound to this server's address by a web page's DNS (DNS rebinding) arrives
    // here: nothing is served to it.
    reject(InvalidArgument("Host " + quote(foreign_host_) +
                           " is not a name of this server: requests must name it by an IP "
                           "address, localhost, the listen host or a name in allowed_hosts "
                           "(--allowed-hosts, FLURRY_ALLOWED_HOSTS)"),
           ec);
  } else if (!bad_expectation_.empty()) {
    reject(Status(Reason::kExpectationFailed, "unsupported expectation " + quote(bad_expectation_) +
                                                  " in Expect: only 100-continue is supported"),
           ec);
  }
}

std::size_t HttpRequestParser::on_body_impl(boost::beast::string_view body, error_code&) {
  if (keep_body_) body_.append(body.data(), body.size());
  body_bytes_ += body.size();
  return body.size();
}

std::size_t HttpRequestParser::on_chunk_body_impl(std::uint64_t, boost::beast::string_view body,
                                                  error_code&) {
  if (keep_body_) body_.append(body.data(), body.size());
  body_bytes_ += body.size();
  return body.size();
}

// Only "chunked", once, in HTTP/1.1. Several Transfer-Encoding fields form one list, and Beast
// refuses a second one after chunked, so each field is checked as it comes.
void HttpRequestParser::transfer_encoding(std::string_view value, error_code& ec) {
  if (version_ < 11) {
    reject(InvalidArgument(
               "Transfer-Encoding is not allowed in an HTTP/1.0 request (RFC 9112 section 6.1)"),
           ec);
    return;
  }
  std::size_t elements = 0;
  std::string_view unsupported;
  bool chunked_last = false;
  for_each_element(value, [&](std::string_view e) {
    ++elements;
    chunked_last = internal::iequals(e, "chunked");
    if (chunked_last) {
      ++chunked_;
    } else if (unsupported.empty()) {
      unsupported = e;
    }
  });
  if (elements == 0) {
    reject(InvalidArgument(
               "empty Transfer-Encoding; only \"chunked\" is supported (RFC 9112 section 6.1)"),
           ec);
  } else if (!unsupported.empty()) {
    reject(InvalidArgument(
               "unsupported Transfer-Encoding " + quote(value) + ": " +
               (chunked_ > 0 && !chunked_last
                    ? std::string("chunked is not the final transfer coding, so the body "
                                  "length cannot be determined (RFC 9112 section 6.3)")
                    : "transfer coding " + quote(unsupported) +
                          " is not supported; only \"chunked\" is (RFC 9112 section 6.1)")),
           ec);
  } else if (chunked_ > 1) {
    reject(InvalidArgument(
               "the chunked transfer coding is applied more than once in Transfer-Encoding " +
               quote(value) + " (RFC 9112 section 7)"),
           ec);
  }
}

void HttpRequestParser::expect(std::string_view value) {
  for_each_element(value, [&](std::string_view e) {
    if (internal::iequals(e, "100-continue")) {
      expect_continue_ = true;
    } else if (bad_expectation_.empty()) {
      bad_expectation_.assign(e.substr(0, 64));
    }
  });
}

void HttpRequestParser::reject(Status why, error_code& ec) {
  rejection_ = std::move(why);
  ec = http::error::bad_value;
}

}  // namespace flurry::http

// Internal: the HTTP/1.1 request parser and framing (RFC 9112) of the transport, with no socket:
// bytes in, and one of "need more bytes", "send 100 Continue", "a whole request" or "refused,
// with this Status" out. Boost.Beast's parser reads the request line, the fields and the body
// (Content-Length or chunked); this class adds the rules Beast leaves to its user. The connection
// (http_connection.cc) feeds it what it read; tests/unit/http_request_parser_test.cc feeds it
// strings.
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/verb.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "flurry/status.h"
#include "http/http_options.h"

namespace flurry::http {

// Parses one request without storing its fields: the method, target and version are kept, and
// the Authorization header and (for POST) the body; other bodies are read and dropped. Beast
// enforces the header and body limits and the framing rules it knows (a bad or repeated
// Content-Length, Content-Length beside chunked, a bad chunk size, obs-fold, bare LF); on top of
// them the parser refuses:
//  * a Transfer-Encoding other than exactly "chunked", and any in an HTTP/1.0 request: Beast
//    would ignore it and read the body as the next request (RFC 9112 sections 6.1 and 6.3);
//  * an HTTP/1.1 request without a Host header, and any with more than one (section 3.2);
//  * a Host that does not name this server (host_allowed, http_options.h: against DNS
//    rebinding), with 400 saying how to allow it;
//  * an Expect other than 100-continue (417, RFC 9110 section 10.1.1);
//  * more bytes of framing than header_limit: the header together with the chunk-size lines,
//    chunk extensions, the CRLF after each chunk and the trailer (431). Beast limits only the
//    header and keeps an unfinished chunk-size line or trailer in the input buffer unbounded.
// Trailer fields are ignored: a credential or Host sent there is never used.
//
// One parser per request (Beast's parser cannot be reset): the connection emplaces a new one for
// each. Not thread-safe: one connection's thread uses it.
class HttpRequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  using error_code = boost::system::error_code;

  // What parse() found.
  enum class Step {
    kNeedMore,  // read more bytes and call parse() again with all that is unconsumed
    kContinue,  // the header asked for 100 Continue and the body has not come: send it, then
                // read (returned once per request)
    kDone,      // a whole request: method(), target, authorization, body are set
    kRefused,   // not a request this server takes: answer refusal() and close the connection
  };

  // `target`, `authorization` and `body` are the connection's buffers, reused across requests
  // (authorization and body are cleared here); `options` (header_limit, body_limit,
  // allowed_hosts, the listen host) must outlive the parser.
  HttpRequestParser(std::string& target, std::string& authorization, std::string& body,
                    const HttpOptions& options);

  // Parses from the start of `input`, the bytes not consumed so far (those a previous call left
  // unconsumed, then what came since), and sets `used` to the bytes consumed now: the caller
  // drops them from its buffer. After kDone the bytes past the request (a pipelined request) are
  // left unconsumed. After kRefused nothing more may be parsed.
  [[nodiscard]] Step parse(std::string_view input, std::size_t& used);

  [[nodiscard]] boost::beast::http::verb method() const noexcept { return method_; }
  // 10 or 11.
  [[nodiscard]] int http_version() const noexcept { return version_; }
  // The request asked for 100 Continue (HTTP/1.1 only; HTTP/1.0 expectations are ignored).
  [[nodiscard]] bool expect_continue() const noexcept { return expect_continue_; }
  // Why the request was refused (after Step::kRefused): INVALID_ARGUMENT (400) for bad framing,
  // HEADER_TOO_LARGE (431), BODY_TOO_LARGE (413), EXPECTATION_FAILED (417). OK before.
  [[nodiscard]] const Status& refusal() const noexcept { return refusal_; }

 private:
  // put() that counts the bytes it consumed, for framing_bytes().
  std::size_t feed(std::string_view bytes, error_code& ec);
  // The bytes of this request consumed so far that were not body: the header, chunk-size lines
  // and extensions, the CRLF after each chunk, the trailer.
  [[nodiscard]] std::uint64_t framing_bytes() const noexcept { return consumed_ - body_bytes_; }
  // Sets refusal_ for a Beast error (or keeps the one the callbacks set).
  void refuse(const error_code& ec);
  // A message for a Beast error, naming the framing problem where the fields tell which.
  [[nodiscard]] std::string describe(const error_code& ec) const;

  void on_request_impl(boost::beast::http::verb method, boost::beast::string_view,
                       boost::beast::string_view target, int version, error_code&) override;
  void on_response_impl(int, boost::beast::string_view, int, error_code&) override {}
  void on_field_impl(boost::beast::http::field f, boost::beast::string_view,
                     boost::beast::string_view value, error_code& ec) override;
  void on_header_impl(error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  // Beast enforces body_limit before these see the bytes.
  std::size_t on_body_impl(boost::beast::string_view body, error_code&) override;
  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view body,
                                 error_code&) override;
  void on_finish_impl(error_code&) override {}

  void transfer_encoding(std::string_view value, error_code& ec);
  void expect(std::string_view value);
  void reject(Status why, error_code& ec);

  std::string& target_;
  std::string& authorization_;
  std::string& body_;
  const HttpOptions& options_;
  bool keep_body_ = false;
  bool foreign_ = false;      // the Host header is not one host_allowed() accepts
  std::string foreign_host_;  // its value (at most 256 bytes), for the message
  int authorizations_ = 0;
  boost::beast::http::verb method_ = boost::beast::http::verb::unknown;
  int version_ = 11;
  int hosts_ = 0;
  int chunked_ = 0;
  bool content_length_seen_ = false;
  bool transfer_encoding_seen_ = false;
  bool expect_continue_ = false;
  bool continue_asked_ = false;  // parse() returned kContinue for this request
  std::string bad_expectation_;
  Status rejection_;  // set by the callbacks: why the parser refused on top of Beast's rules
  Status refusal_;
  std::uint64_t consumed_ = 0;
  std::uint64_t body_bytes_ = 0;
};

}  // namespace flurry::http

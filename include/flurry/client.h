// flurry's C++ client (docs/clients.md): IDs from a prefetch buffer, segment numbers from ranges
// held by the client, local decoding with the server's layout, retries and failover over several
// endpoints. HTTP/1.1 over keep-alive connections, http:// or https:// (https through flurry's TLS
// module, flurry_tls.so, loaded only by a client with an https:// endpoint); no Boost or JSON type
// appears here.
//
// Thread safety: a Client and its Segment handles are safe to use from any number of threads at
// once. Errors are values: every call returns a ClientResult<T>, which holds the value or a
// ClientError with everything the failure showed (code, reason, message, HTTP status,
// Retry-After, endpoint). Units: durations are std::chrono durations; Retry-After is whole
// seconds, as sent.
#pragma once

#include <cassert>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "flurry/decoded_id.h"
#include "flurry/status.h"

namespace flurry {

// The client's settings (docs/clients.md, "The shape"). Validated once by Client::open.
struct ClientOptions {
  // "http://HOST:PORT" or "https://HOST:PORT" base URLs, used in this order.
  std::vector<std::string> endpoints;
  std::string token;  // bearer token sent on every request; empty: none
  std::chrono::nanoseconds max_age = std::chrono::seconds(1);  // an older batch is dropped whole
  std::uint32_t min_batch = 256;                               // the first and smallest refill
  std::uint32_t max_batch = 16384;  // the largest refill (also capped by the server's)
  double low_water = 0.5;           // refill when fewer than low_water x batch IDs remain
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);  // one call's deadline, retries in
  std::uint32_t segment_range = 1000;                          // numbers per segment range request
  double segment_prefetch = 0.1;  // share of a range used before the next is fetched
  // https:// only (refused with http:// endpoints): the CA certificates (PEM) that verify the
  // servers (empty: the system's), and a client certificate (PEM) and its unencrypted key for a
  // server that requires one (both or neither).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// Why a call failed: everything the failure showed (docs/clients.md, "Errors and retries").
struct ClientError {
  // The code and reason as flurry's types (the reason only when flurry knows it under that code),
  // with `message`: what a caller branches on.
  Status status = Status(StatusCode::kUnknown, "unknown error");
  std::string code;     // canonical code name, e.g. "UNAVAILABLE" (as the server sent it)
  std::string reason;   // the server's reason name, e.g. "LEASE_EXPIRING"; empty when none
  std::string message;  // the server's message, or the client's description
  int http_status = 0;  // 0 when no HTTP answer came (connection refused, reset, timed out)
  std::optional<int> retry_after;  // seconds from Retry-After; absent without the header
  std::string endpoint;            // the base URL that answered (or failed); empty if none
};

// A value or the ClientError of the call that could not make it. Like Result<T> (ok(), status(),
// value(), *, ->), plus error(). Not safe for concurrent mutation (a value).
template <typename T>
class [[nodiscard]] ClientResult {
 public:
  ClientResult(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  ClientResult(ClientError error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  [[nodiscard]] bool ok() const noexcept { return v_.index() == 0; }
  // OK, or the error's code, reason and message.
  [[nodiscard]] const Status& status() const noexcept {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_).status;
  }
  // The failure; only when !ok().
  [[nodiscard]] const ClientError& error() const& {
    assert(!ok());
    return std::get<1>(v_);
  }
  [[nodiscard]] ClientError&& error() && { return std::get<1>(std::move(v_)); }

  [[nodiscard]] T& value() & { return std::get<0>(v_); }
  [[nodiscard]] const T& value() const& { return std::get<0>(v_); }
  [[nodiscard]] T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, ClientError> v_;
};

// An order number decoded by the server (docs/clients.md, "Order numbers"): a snowflake ID (with
// its fields, decoded locally as decode(id) does) or a segment tag's number (with the tag).
struct DecodedOrder {
  enum class Source { kSnowflake, kSegment };
  std::string order_number;  // as the server read it
  std::string key_version;   // the version of the key that decodes it ("1")
  Source source = Source::kSnowflake;
  std::uint64_t id = 0;              // the snowflake ID, or the tag's number
  std::optional<std::string> tag;    // kSegment only
  std::optional<DecodedId> decoded;  // kSnowflake only
};

// Per call options of Client::decode_order.
struct DecodeOrderOptions {
  std::optional<std::string> tag;    // the segment tag the number was made from (?tag=)
  std::optional<std::string> token;  // instead of the client's token, for this call
};

class Client;
struct ClientTestAccess;  // the client's own tests (clients/cpp/src/client_internal.h)

// One segment tag's numbers (Client::segment). Lives as long as its Client.
class Segment {
 public:
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  // The tag's next number: start, start + delta, ... of the ranges the client holds, each once
  // and in order. NOT_FOUND for an unknown tag, OUT_OF_RANGE when segment_range exceeds the
  // tag's range (neither retried); otherwise the server's or the transport's error after the
  // retries the contract allows within `timeout`; CANCELLED once the client is closed.
  // Thread-safe.
  [[nodiscard]] ClientResult<std::uint64_t> next();
  [[nodiscard]] const std::string& tag() const noexcept;

  struct Impl;

 private:
  friend class Client;
  explicit Segment(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Client {
 public:
  // Validates `options` and makes a client: INVALID_ARGUMENT whose message starts with the
  // setting's name ("max_age: ..."). With an https:// endpoint it loads the TLS module and reads
  // the TLS files here (FAILED_PRECONDITION naming the file, or the module that is missing).
  // No other I/O: the first call connects.
  [[nodiscard]] static ClientResult<std::unique_ptr<Client>> open(ClientOptions options);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();  // close()

  // One ID from the prefetch buffer (no allocation, no I/O when it holds a fresh one). Waits for
  // the one refill in flight when it is empty, until `timeout`: DEADLINE_EXCEEDED when no
  // server answered in time, else the refill's error. Thread-safe.
  [[nodiscard]] ClientResult<std::uint64_t> next();
  // `n` increasing IDs (1 <= n <= the server's max_batch): from the buffer when it holds `n`
  // fresh ones, else one request of its own. INVALID_ARGUMENT for n out of range.
  [[nodiscard]] ClientResult<std::vector<std::uint64_t>> next(std::size_t n);
  // A timestamp from the cluster's timestamp oracle (GET /v1/tso): strictly greater than every
  // timestamp any client got before this call began. Concurrent callers share one request in
  // flight; a caller that arrives while one is in flight waits for the next request, which
  // carries every caller waiting then (at most max_batch). Nothing is prefetched or kept between
  // calls (a value fetched before the call began could be smaller than one another caller already
  // got). A follower's 307 is followed to the leader, which later calls ask directly until it
  // fails (no answer, 502, 503 or 504); then the endpoints again. Errors: the server's (NOT_FOUND
  // with reason TSO_OFF when it does not serve the oracle; UNAVAILABLE NO_LEADER is retried),
  // DEADLINE_EXCEEDED after `timeout`, CANCELLED once closed. Thread-safe.
  [[nodiscard]] ClientResult<std::uint64_t> tso();
  // The handle of `tag` (the same one for the same tag), owned by the client. No I/O.
  [[nodiscard]] Segment& segment(std::string_view tag);

  // Takes `id` apart locally with the server's layout (GET /v1/layout, read once, parsed by
  // flurry's own Layout). INVALID_ARGUMENT for an ID the layout cannot have made.
  [[nodiscard]] ClientResult<DecodedId> decode(std::uint64_t id);
  // As above, from decimal text (plain digits, below 2^64).
  [[nodiscard]] ClientResult<DecodedId> decode(std::string_view text);
  // GET /v1/order-numbers/{code} (with the token; scope orders:decode) as a DecodedOrder. An
  // answer that does not fit is UNKNOWN, quoting it; a number that does not decode is the
  // server's INVALID_ARGUMENT.
  [[nodiscard]] ClientResult<DecodedOrder> decode_order(std::string_view code,
                                                        const DecodeOrderOptions& options = {});

  // The server's layout text (/v1/layout "text"), read once.
  [[nodiscard]] ClientResult<std::string> layout_text();

  // Stops background refills and fetches, drops buffered IDs and ranges; every later call (and
  // every call waiting now) fails with CANCELLED "the client is closed". Idempotent; thread-safe.
  void close();

  struct Impl;

 private:
  friend struct ClientTestAccess;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flurry

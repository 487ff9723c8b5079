// flurry's C++ client (docs/clients.md): IDs from a prefetch buffer, segment numbers from ranges
// held by the client, local decoding with the server's layout, retries and failover over several
// endpoints. HTTP/1.1 over keep-alive connections; no Boost or JSON type appears here.
//
// Thread safety: a Client and its Segment handles are safe to use from any number of threads at
// once. Errors: every call returns a Result (or Status) whose code and reason are the server's
// when flurry knows them; the rest of the failure (HTTP status, Retry-After, endpoint, the
// server's code and reason names as sent) is in last_client_error() on the thread that called.
// Units: durations are std::chrono durations; Retry-After is whole seconds, as sent.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/decoded_id.h"
#include "flurry/status.h"

namespace flurry {

// The client's settings (docs/clients.md, "The shape"). Validated once by Client::open.
struct ClientOptions {
  std::vector<std::string> endpoints;  // "http://HOST:PORT" base URLs, used in this order
  std::string token;                   // bearer token sent on every request; empty: none
  std::chrono::nanoseconds max_age = std::chrono::seconds(1);  // an older batch is dropped whole
  std::uint32_t min_batch = 256;                               // the first and smallest refill
  std::uint32_t max_batch = 16384;  // the largest refill (also capped by the server's)
  double low_water = 0.5;           // refill when fewer than low_water x batch IDs remain
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);  // one call's deadline, retries in
  std::uint32_t segment_range = 1000;                          // numbers per segment range request
  double segment_prefetch = 0.1;  // share of a range used before the next is fetched
};

// What the last failed call on this thread saw, beside its Status.
struct ClientError {
  std::string code;     // canonical code name, e.g. "UNAVAILABLE" (as the server sent it)
  std::string reason;   // the server's reason name, e.g. "LEASE_EXPIRING"; empty when none
  std::string message;  // the server's message, or the client's description
  int http_status = 0;  // 0 when no HTTP answer came (connection refused, reset, timed out)
  std::optional<int> retry_after;  // seconds from Retry-After; absent without the header
  std::string endpoint;            // the base URL that answered (or failed); empty if none
};

// The detail of the last call of any Client on the calling thread that failed (unchanged by
// calls that succeed). Thread-local: each thread sees its own.
[[nodiscard]] const ClientError& last_client_error() noexcept;

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
  // retries the contract allows within `timeout`. Thread-safe.
  [[nodiscard]] Result<std::uint64_t> next();
  [[nodiscard]] const std::string& tag() const noexcept;

 private:
  friend class Client;
  struct ClientTestAccess;  // the client's own tests (clients/cpp/src/client_internal.h)
  struct Impl;
  explicit Segment(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Client {
 public:
  // Validates `options` (INVALID_ARGUMENT naming the setting) and makes a client. No I/O: the
  // first call connects.
  [[nodiscard]] static Result<std::unique_ptr<Client>> open(ClientOptions options);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();  // close()

  // One ID from the prefetch buffer (no allocation, no I/O when it holds a fresh one). Waits for
  // the one refill in flight when it is empty, until `timeout`: DEADLINE_EXCEEDED when no
  // server answered in time, else the refill's error. Thread-safe.
  [[nodiscard]] Result<std::uint64_t> next();
  // `n` increasing IDs (1 <= n <= the server's max_batch): from the buffer when it holds `n`
  // fresh ones, else one request of its own. INVALID_ARGUMENT for n out of range.
  [[nodiscard]] Result<std::vector<std::uint64_t>> next(std::size_t n);
  // The handle of `tag` (the same one for the same tag), owned by the client.
  [[nodiscard]] Segment& segment(std::string_view tag);

  // Takes `id` apart locally with the server's layout (GET /v1/layout, read once, parsed by
  // flurry's own Layout). INVALID_ARGUMENT for an ID the layout cannot have made.
  [[nodiscard]] Result<DecodedId> decode(std::uint64_t id);
  // As above, from decimal text (plain digits, below 2^64).
  [[nodiscard]] Result<DecodedId> decode(std::string_view text);
  // The server's JSON answer to GET /v1/order-numbers/{code} (with the token).
  [[nodiscard]] Result<std::string> decode_order(std::string_view code);

  // The server's layout text (/v1/layout "text"), read once.
  [[nodiscard]] Result<std::string> layout_text();

  // Stops background refills and drops buffered IDs; later calls fail with UNAVAILABLE
  // (SHUT_DOWN). Idempotent; thread-safe.
  void close();

  struct Impl;

 private:
  friend struct ClientTestAccess;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flurry

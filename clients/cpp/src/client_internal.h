// The C++ client's pure functions (docs/clients.md), exposed to its own tests: error answers,
// retry waits and batch sizes, checked against clients/conformance/cases.json.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/client.h"
#include "flurry/status.h"

namespace flurry::client_internal {

enum class Action { kDone, kRetry, kFailover, kFatal };
[[nodiscard]] std::string_view to_string(Action action) noexcept;

// Retry-After as the contract reads it: delta-seconds, any other value 1 s; absent header: none.
[[nodiscard]] std::optional<int> parse_retry_after(std::optional<std::string_view> header);

// One answer made into the error it means and what to do with it. http_status 0: a connection
// error (`body` is then the client's description).
struct Answer {
  ClientError error;
  Status status;
  Action action = Action::kFatal;
};
[[nodiscard]] Answer classify(int http_status, std::optional<std::string_view> retry_after_header,
                              std::string_view body, std::string_view endpoint);

// The Status for a code name and reason name (the reason only when flurry knows it under that
// code).
[[nodiscard]] Status status_of(std::string_view code, std::string_view reason, std::string message);

// The wait before round `round` + 1 (seconds): max(retry_after, min(0.1 * 2^round, 5)) *
// (1 + 0.2 u).
[[nodiscard]] double retry_wait_seconds(int round, int retry_after, double u) noexcept;

// The IDs of a text answer, one decimal per line (LF or CRLF; empty lines skipped), into `out`.
// False for anything else: a character that is no digit, a number of 2^64 or more.
[[nodiscard]] bool parse_text_ids(std::string_view body, std::vector<std::uint64_t>& out);

// Batch sizing: the refill sizes between min_batch and min(max_batch, server_max_batch).
class BatchSizer {
 public:
  BatchSizer(std::uint32_t min_batch, std::uint32_t max_batch, std::uint32_t server_max_batch);
  // The first refill: the smallest size.
  [[nodiscard]] std::uint32_t first() noexcept { return size_ = lo_; }
  // The previous batch ran low without expiring: double.
  [[nodiscard]] std::uint32_t low() noexcept;
  // IDs were dropped for age since the previous refill: halve.
  [[nodiscard]] std::uint32_t expired() noexcept;
  [[nodiscard]] std::uint32_t largest() const noexcept { return hi_; }

 private:
  std::uint32_t lo_;
  std::uint32_t hi_;
  std::uint32_t size_;
};

// Fakes for the retry loop (Client::Impl::call): its clock, its sleep between rounds and its
// jitter draw u in [0, 1). Empty members keep the real ones.
struct TestHooks {
  std::function<std::chrono::steady_clock::time_point()> now;
  std::function<void(std::chrono::steady_clock::duration)> sleep;
  std::function<double()> random;
};

}  // namespace flurry::client_internal

namespace flurry {
// Sets a client's TestHooks before its first call.
struct ClientTestAccess {
  static void set_hooks(Client& client, client_internal::TestHooks hooks);
};
}  // namespace flurry

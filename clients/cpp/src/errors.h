// The C++ client's error answers and retry policy (docs/clients.md, "Errors and retries"): what an
// answer means and what to do with it, and the wait between rounds. Pure functions, checked
// against clients/conformance/cases.json.
#pragma once

#include <optional>
#include <string>
#include <string_view>

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
  Action action = Action::kFatal;
};
[[nodiscard]] Answer classify(int http_status, std::optional<std::string_view> retry_after_header,
                              std::string_view body, std::string_view endpoint);

// The Status for a code name and reason name (the reason only when flurry knows it under that
// code).
[[nodiscard]] Status status_of(std::string_view code, std::string_view reason, std::string message);

// An error of the client's own (no HTTP answer): code and reason names from `status`.
[[nodiscard]] ClientError client_error(Status status, std::string endpoint = {});
// What every call of a closed client returns: CANCELLED "the client is closed".
[[nodiscard]] ClientError closed_error();

// The wait before round `round` + 1 (seconds): max(retry_after, min(0.1 * 2^round, 5)) *
// (1 + 0.2 u).
[[nodiscard]] double retry_wait_seconds(int round, int retry_after, double u) noexcept;

}  // namespace flurry::client_internal

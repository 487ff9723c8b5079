#include "errors.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

namespace flurry::client_internal {

using json = nlohmann::json;

std::string_view to_string(Action action) noexcept {
  switch (action) {
    case Action::kDone:
      return "done";
    case Action::kRetry:
      return "retry";
    case Action::kFailover:
      return "failover";
    case Action::kFatal:
      return "fatal";
  }
  return "fatal";
}

std::optional<int> parse_retry_after(std::optional<std::string_view> header) {
  if (!header) return std::nullopt;
  const std::string_view text = *header;
  int seconds = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || seconds < 0 ||
      text.front() == '-' || text.front() == '+') {
    return 1;  // an HTTP-date, a fraction, a negative number: 1 s (the contract)
  }
  return seconds;
}

Status status_of(std::string_view code, std::string_view reason, std::string message) {
  StatusCode status_code = StatusCode::kUnknown;
  for (int c = 1; c <= static_cast<int>(StatusCode::kUnauthenticated); ++c) {
    if (to_string(static_cast<StatusCode>(c)) == code) status_code = static_cast<StatusCode>(c);
  }
  if (!reason.empty()) {
    for (int r = 1; r < kReasonCount; ++r) {
      const auto known = static_cast<Reason>(r);
      if (to_string(known) == reason && canonical_code(known) == status_code) {
        return Status(known, std::move(message));
      }
    }
  }
  return Status(status_code, std::move(message));
}

ClientError client_error(Status status, std::string endpoint) {
  ClientError e;
  e.code = std::string(to_string(status.code()));
  if (status.reason() != Reason::kNone) e.reason = std::string(to_string(status.reason()));
  e.message = status.message();
  e.endpoint = std::move(endpoint);
  e.status = std::move(status);
  return e;
}

ClientError closed_error() {
  return client_error(Status(StatusCode::kCancelled, "the client is closed"));
}

Answer classify(int http_status, std::optional<std::string_view> retry_after_header,
                std::string_view body, std::string_view endpoint) {
  Answer a;
  a.error.http_status = http_status;
  a.error.endpoint = std::string(endpoint);
  a.error.retry_after = parse_retry_after(retry_after_header);
  if (http_status >= 200 && http_status < 300) {
    a.action = Action::kDone;
    return a;
  }
  if (http_status == 0) {
    a.error.code = "UNAVAILABLE";
    a.error.message = std::string(body);
    a.error.status = Status(StatusCode::kUnavailable, a.error.message);
    a.action = Action::kRetry;
    return a;
  }
  const bool gateway = http_status == 502 || http_status == 503 || http_status == 504;
  a.action = !gateway ? Action::kFatal : a.error.retry_after ? Action::kRetry : Action::kFailover;
  bool parsed = false;
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && doc.contains("error") && doc["error"].is_object()) {
    const json& e = doc["error"];
    if (e.contains("code") && e["code"].is_string()) {
      a.error.code = e["code"].get<std::string>();
      if (e.contains("reason") && e["reason"].is_string()) a.error.reason = e["reason"];
      if (e.contains("message") && e["message"].is_string()) a.error.message = e["message"];
      parsed = true;
    }
  }
  if (!parsed) {
    a.error.code = gateway ? "UNAVAILABLE" : "UNKNOWN";
    a.error.reason.clear();
    a.error.message = "HTTP " + std::to_string(http_status) + " from " + std::string(endpoint) +
                      ": " + std::string(body.substr(0, 200));
  }
  a.error.status = status_of(a.error.code, a.error.reason, a.error.message);
  return a;
}

double retry_wait_seconds(int round, int retry_after, double u) noexcept {
  const double backoff = round >= 6 ? 5.0 : std::min(0.1 * std::ldexp(1.0, round), 5.0);
  return std::max(static_cast<double>(retry_after), backoff) * (1.0 + 0.2 * u);
}

}  // namespace flurry::client_internal

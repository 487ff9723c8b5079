// Internal: the HTTP API without the transport. Takes a method and a request target, writes the
// response body into a buffer and says which status and headers go with it. The connection code
// (http_server.cc) parses requests and writes responses; tests and fuzzers can call this alone.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/server/metrics.h"
#include "flurry/server/service.h"
#include "flurry/status.h"
#include "text.h"

namespace flurry::server {

enum class Method { kGet, kHead, kOther };

struct ApiResponse {
  int status = 200;
  std::string_view content_type = "application/json";
  bool retry_after = false;  // Retry-After: 1
  bool allow = false;        // Allow: GET, HEAD
  bool close = false;        // close the connection after this response
  Route route = Route::kOther;
};

// Per-thread scratch space, reused across requests.
struct ApiScratch {
  std::vector<std::uint64_t> ids;
  std::array<std::string, 4> decoded;  // percent-decoded parameter values
  std::string key;                     // a percent-decoded parameter name
  std::string path;                    // a percent-decoded path segment
};

// HTTP status for a library Status, and whether Retry-After goes with it.
struct HttpStatus {
  int status = 500;
  bool retry_after = false;
};
[[nodiscard]] HttpStatus http_status(const Status& status) noexcept;

// "OK", "Bad Request", ...
[[nodiscard]] std::string_view reason_phrase(int status) noexcept;

class Api {
 public:
  // `service` must be started. The layout is read once here; the node on every request (a lost
  // lease can move the service to another node ID).
  explicit Api(Service& service);

  // Appended to /metrics, e.g. the transport's connection gauges.
  void set_extra_metrics(std::function<void(std::string&)> extra) { extra_ = std::move(extra); }

  // Handles one request: appends the body to `body` and fills `response`. For HEAD the body is
  // written too (the caller sends only its length). Never throws: an internal failure becomes a
  // 500 with nothing issued.
  void handle(Method method, std::string_view target, ApiResponse& response, OutBuf& body,
              ApiScratch& scratch) noexcept;

  // An error response: {"error":{"code":"...","message":"..."}}.
  static void error(int status, std::string_view code, std::string_view message,
                    ApiResponse& response, OutBuf& body);
  static void error(const Status& status, ApiResponse& response, OutBuf& body);

 private:
  void route(Method method, std::string_view target, ApiResponse& r, OutBuf& body,
             ApiScratch& scratch);
  void ids(std::string_view query, ApiResponse& r, OutBuf& body, ApiScratch& scratch);
  void decode(std::string_view raw_id, std::string_view query, ApiResponse& r, OutBuf& body,
              ApiScratch& scratch);
  void leaf_get(std::string_view raw_key, std::string_view query, ApiResponse& r, OutBuf& body,
                ApiScratch& scratch);
  void leaf_decode(std::string_view query, ApiResponse& r, OutBuf& body, ApiScratch& scratch);
  void readyz(ApiResponse& r, OutBuf& body);
  void metrics(ApiResponse& r, OutBuf& body);

  Service& service_;
  std::string layout_json_;
  std::function<void(std::string&)> extra_;
};

}  // namespace flurry::server

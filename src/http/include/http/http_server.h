// The HTTP/1.1 transport (Boost.Beast's parser, Boost.Asio sockets) over the HTTP API: the route
// table of docs/operations.md (src/http/api.h, routes.h) over the operations layer
// (src/ops/), which the server builds from the operations it is handed. The operations, the
// blocking pools and the clocks come from the composition root (`flurry serve`,
// apps/flurry/cmd_serve.cc). Inside: the request parser (http_request_parser.h), the connection
// state machine (http_connection.h) and the workers and life cycle (http_server.cc).
//
// io_threads threads, each running its own io_context; one acceptor hands connections to them
// round-robin. Keep-alive and pipelining; one reusable input buffer and one reusable response
// buffer per connection (freed between requests when they grew beyond 8 KiB, so an idle
// connection holds a few KiB); responses written with a single write. Limits: header_limit (431;
// a chunked body's chunk-size lines, extensions and trailer count against it with the header, so
// the input buffer stays bounded), body_limit (413), max_connections (further connections are
// accepted and closed at once), response_budget (responses over 8 KiB written and not yet sent,
// all connections together; a response that does not fit first drops those not taken for 1 s or
// more, closing their connections, and beyond that is 503 RESOURCE_EXHAUSTED / RESPONSE_BUDGET
// with Retry-After, the IDs dropped unsent), idle_timeout_ms between requests, and 10 s (or
// idle_timeout_ms if shorter) to receive a whole request once it started or to write a
// response, so a slow or half-open client cannot hold the server. A request that does not parse
// as HTTP gets 400 and the connection is closed. Every response carries
// X-Content-Type-Options: nosniff.
//
// Framing (RFC 9112): a Transfer-Encoding other than exactly "chunked", one in an HTTP/1.0
// request, Content-Length beside Transfer-Encoding, and an HTTP/1.1 request without exactly one
// Host header get 400 and the connection is closed (the rest of the stream cannot be trusted).
// Expect: 100-continue gets "100 Continue" once the header is in and the body is not; a final
// status known from the header (413, 400) is sent at once instead; other expectations get 417.
//
// The I/O threads never block: requests are answered with Blocking::kNever, and one the
// operations layer defers (flurry/ops/deferral.h: a clock step back under `wait`, throttling at
// the layout's rate limit, a horizon write on the generator's one blocking thread; a segment
// store, the delayed answer to an unknown token on the store pool) is finished on that pool by
// the closure its route built over the request it parsed and admitted (never parsed, routed or
// admitted again), into a buffer of its own, and the response is posted back to the
// connection's thread; while
// any wait for the generator, new ID requests queue behind them (first come, first served under
// throttling). A store outage therefore never holds an I/O thread or delays snowflake IDs.
// Health, readiness and metrics on other connections answer meanwhile. HEAD on the routes that
// issue IDs issues nothing. POST is accepted on /v1/segments only (its body, at most
// body_limit, and the Authorization header go to the routes; neither is ever logged); other
// routes answer 405 with Allow.
//
// Routes and error shapes: src/http/routes.h and docs/operations.md ("Error responses").
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "flurry/clock.h"
#include "flurry/status.h"
#include "http/http_options.h"
#include "ops/deferral.h"
#include "ops/operations.h"
#include "service/prometheus.h"

namespace flurry::tls {
class ServerContext;  // src/tls/server.h
}  // namespace flurry::tls

namespace flurry::http {

class Api;             // the HTTP API over the route table (src/http/api.h)
class RequestMetrics;  // per-route request counters (http/http_metrics.h)

class HttpServer {
 public:
  // Serves the routes of docs/operations.md over `ops` (the snowflake routes, segment mode's
  // when ops serves segments, the order-number and console routes). `ops`, `pools` (where
  // deferred requests run) and `metrics` (where each request is counted:
  // Service::request_metrics) must outlive the server; `ops` must be ready before start().
  // `clocks` (which must outlive the server too): the monotonic clock is "now" for connection
  // deadlines and request latency, the wall clock the Date header; the timers that wake its
  // threads periodically and the bounds of stop() run on real time, so that a test's clock that
  // stands still never holds stop().
  HttpServer(ops::Operations& ops, ops::Pools& pools, RequestMetrics& metrics,
             const HttpOptions& options, Clocks clocks = Clocks::system());
  ~HttpServer();  // stop(0)
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Opens the listening socket on config.listen. UNAVAILABLE with the system's reason when the
  // address cannot be used (in use, not local, name does not resolve). Call once, before start().
  [[nodiscard]] Status bind();

  // The address actually listened on, e.g. "127.0.0.1:7609" (the real port when the config
  // asked for port 0). Valid after bind().
  [[nodiscard]] std::string local_address() const;

  // The most connections open at once; the default is config.max_connections. The caller lowers
  // it to what the process's descriptor limit allows (cmd_serve.cc). At least 1; only before
  // start().
  void set_max_connections(std::size_t n) noexcept;
  [[nodiscard]] std::size_t max_connections() const noexcept;

  // A connection whose descriptor number is `ceiling` or above is closed at once and counted in
  // flurry_http_connections_rejected_total, whatever the count of connections: the kernel hands
  // out the lowest free number, so such a descriptor means that the table is nearly full, with
  // gRPC's connections too (GrpcOptions::descriptor_ceiling is the same number). 0 (the
  // default): no ceiling. Only before start().
  void set_descriptor_ceiling(std::uint64_t ceiling) noexcept;

  // Appends `writer`'s metrics to /metrics (another front end's, such as gRPC's). `writer` must
  // stay callable until stop() returned. Only before start().
  void add_metrics(std::function<void(service::PrometheusWriter&)> writer);

  // Serves HTTPS instead of HTTP: each connection starts with a TLS handshake (within the
  // request timeout) on `context`'s files as loaded last, so a reload applies to new connections
  // and open ones keep theirs. A failed handshake closes the connection, is counted
  // (flurry_http_tls_handshake_failures_total) and logged at debug level. Only before start().
  void use_tls(std::shared_ptr<tls::ServerContext> context);

  // Starts the I/O threads and accepting. Precondition: bind() succeeded.
  void start();

  // Graceful stop: closes the listening socket and idle connections at once, lets requests in
  // flight finish (their responses carry Connection: close) for up to `drain` (real time),
  // then closes the rest except requests waiting for a pool, which are answered (within about
  // max_wait), waits for this server's pool jobs and joins the I/O threads. The pools stay
  // running (the composition root stops them). Idempotent. Call from one thread, not an I/O
  // thread of this server.
  void stop(std::chrono::milliseconds drain);

  // Open connections now.
  [[nodiscard]] std::size_t connections() const noexcept;

  struct Impl;  // the implementation (http_server.cc)

 private:
  std::unique_ptr<Api> api_;  // declared first: outlives impl_, which refers to it
  std::unique_ptr<Impl> impl_;
};

}  // namespace flurry::http

// The HTTP/1.1 server's workers and life cycle: listening, accepting and handing connections to
// the I/O threads round-robin, the threads themselves (their sweep and drain), start and stop.
// The connections are http_connection.cc, the request parser http_request_parser.cc.
#include "http/http_server.h"

#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <chrono>
#include <ctime>
#include <string_view>
#include <thread>
#include <vector>

#include "api.h"
#include "http_connection.h"
#include "text.h"
#include "tls/server.h"

namespace flurry::http {

using transport::Acceptor;
using transport::Connection;
using transport::error_code;
using transport::Socket;
using transport::Timer;
using transport::Worker;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct HttpServer::Impl : transport::ServerState {
  Impl(Api& a, ops::Pools& p, RequestMetrics& r, const HttpOptions& c, Clocks clocks)
      : ServerState(a, p, r, c, clocks),
        max_connections(static_cast<std::size_t>(c.max_connections)) {}

  void accept();
  void on_accept(const error_code& ec, Socket socket, std::size_t worker);

  // Other front ends' metrics, appended to /metrics (HttpServer::add_metrics).
  std::vector<std::function<void(service::PrometheusWriter&)>> more_metrics;
  std::size_t max_connections;
  // Connections whose descriptor is this or above are closed at once (0: none).
  std::uint64_t descriptor_ceiling = 0;
  std::optional<Acceptor> acceptor;
  std::optional<Timer> accept_retry;
  std::size_t next_worker = 0;
  std::atomic<std::uint64_t> rejected{0};
  std::atomic<bool> draining{false};
  bool started = false;
  bool stopped = false;
  std::string local;
};

namespace transport {

Worker::Worker(ServerState& s) : server(s), ctx(1), sweep(ctx.get_executor()) {
  update_clock();
}

void Worker::run() {
  for (;;) {
    try {
      ctx.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("event=io_thread_error message={}", quote(e.what()));
    } catch (...) {
      spdlog::error("event=io_thread_error message=\"unknown exception\"");
    }
  }
}

void Worker::update_clock() {
  now_ms = to_ms(server.clock.now());
  const std::time_t t = static_cast<std::time_t>(
      std::chrono::floor<std::chrono::seconds>(server.wall.now()).time_since_epoch().count());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  date_len = std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

void Worker::arm_sweep() {
  sweep.expires_after(kSweepPeriod);
  sweep.async_wait([this](const error_code& ec) {
    if (ec || stopping) return;
    update_clock();
    for (Connection* c = head; c != nullptr; c = c->next) {
      if (c->state != Connection::State::kClosed && c->state != Connection::State::kWaiting &&
          c->deadline_ms <= now_ms) {
        c->close();
      } else if (c->state == Connection::State::kIdle || c->state == Connection::State::kReading) {
        c->out.trim(kKeepResponseBuffer);  // not in use between a response and the next
      }
    }
    arm_sweep();
  });
}

void Worker::evict_stalled(std::int64_t now) noexcept {
  for (Connection* c = head; c != nullptr; c = c->next) {
    if (c->charged == 0 || c->state != Connection::State::kWriting ||
        now - c->charged_ms < kStalledResponseMs) {
      continue;
    }
    c->close();
    c->release_response();
    server.budget_evictions.fetch_add(1, std::memory_order_relaxed);
  }
}

void Worker::add(Socket socket) {
  auto* c = new Connection(*this, std::move(socket));
  c->next = head;
  if (head != nullptr) head->prev = c;
  head = c;
  if (draining) {
    c->close();
    c->destroy();
    return;
  }
  c->start();
}

void Worker::remove(Connection* c) noexcept {
  if (c->prev != nullptr) c->prev->next = c->next;
  if (c->next != nullptr) c->next->prev = c->prev;
  if (head == c) head = c->next;
  server.live.fetch_sub(1, std::memory_order_relaxed);
}

void Worker::begin_drain() {
  draining = true;
  for (Connection* c = head; c != nullptr; c = c->next) {
    if (c->state == Connection::State::kIdle && c->in.size() == 0) c->close();
  }
}

void Worker::close_all() {
  closing = true;
  for (Connection* c = head; c != nullptr; c = c->next) {
    if (c->state != Connection::State::kWaiting) c->close();
  }
}

}  // namespace transport

namespace {

std::string endpoint_text(const tcp::endpoint& e) {
  const asio::ip::address a = e.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(e.port());
}

}  // namespace

void HttpServer::Impl::accept() {
  const std::size_t w = next_worker++ % workers.size();
  acceptor->async_accept(workers[w]->ctx, [this, w](const error_code& ec, Socket socket) {
    on_accept(ec, std::move(socket), w);
  });
}

void HttpServer::Impl::on_accept(const error_code& ec, Socket socket, std::size_t w) {
  if (ec == asio::error::operation_aborted || !acceptor || !acceptor->is_open()) return;
  if (ec) {
    // Out of descriptors or memory: pause instead of spinning; anything else: go on.
    if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
        ec == asio::error::no_memory) {
      spdlog::warn("event=accept_failed message={} retry_ms=100", quote(ec.message()));
      accept_retry->expires_after(std::chrono::milliseconds(100));
      accept_retry->async_wait([this](const error_code& e) {
        if (!e && acceptor && acceptor->is_open()) accept();
      });
      return;
    }
    accept();
    return;
  }
  if (draining.load(std::memory_order_relaxed) ||
      live.load(std::memory_order_relaxed) >= max_connections ||
      (descriptor_ceiling != 0 &&
       static_cast<std::uint64_t>(socket.native_handle()) >= descriptor_ceiling)) {
    rejected.fetch_add(1, std::memory_order_relaxed);
    error_code ignored;
    socket.close(ignored);
  } else {
    live.fetch_add(1, std::memory_order_relaxed);
    Worker& worker = *workers[w];
    asio::post(worker.ctx, [&worker, s = std::move(socket)]() mutable {
      try {
        worker.add(std::move(s));
      } catch (const std::exception& e) {
        worker.server.live.fetch_sub(1, std::memory_order_relaxed);
        spdlog::warn("event=connection_setup_failed message={}", quote(e.what()));
      }
    });
  }
  accept();
}

HttpServer::HttpServer(ops::Operations& ops, ops::Pools& pools, RequestMetrics& metrics,
                       const HttpOptions& options, Clocks clocks)
    : api_(std::make_unique<Api>(ops)),
      impl_(std::make_unique<Impl>(*api_, pools, metrics, options, clocks)) {
  impl_->idle_timeout_ms = options.idle_timeout.count();
  impl_->request_timeout_ms = std::min(transport::kRequestTimeoutMs, impl_->idle_timeout_ms);
}

HttpServer::~HttpServer() {
  stop(std::chrono::milliseconds(0));
}

Status HttpServer::bind() {
  Impl& s = *impl_;
  const ListenAddress* listen = &s.config.listen;
  const std::size_t threads = std::max<std::size_t>(1, s.config.io_threads);
  for (std::size_t i = 0; i < threads; ++i) s.workers.push_back(std::make_unique<Worker>(s));
  asio::io_context& ctx = s.workers[0]->ctx;

  error_code ec;
  tcp::endpoint endpoint;
  const asio::ip::address address = asio::ip::make_address(listen->host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, listen->port);
  } else {
    tcp::resolver resolver(ctx);
    auto results = resolver.resolve(listen->host, std::to_string(listen->port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      return Status(Reason::kIo, "cannot listen on " + s.config.listen.to_string() +
                                     ": cannot resolve " + quote(listen->host) +
                                     (ec ? ": " + ec.message() : std::string()));
    }
    endpoint = results.begin()->endpoint();
  }
  const auto failed = [&](std::string_view what) {
    return Status(Reason::kIo, "cannot listen on " + s.config.listen.to_string() + ": " +
                                   std::string(what) + ": " + ec.message());
  };
  s.acceptor.emplace(ctx.get_executor());
  s.acceptor->open(endpoint.protocol(), ec);
  if (ec) return failed("socket");
  s.acceptor->set_option(Acceptor::reuse_address(true), ec);
  if (ec) return failed("SO_REUSEADDR");
  s.acceptor->bind(endpoint, ec);
  if (ec) return failed("bind");
  s.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return failed("listen");
  const tcp::endpoint bound = s.acceptor->local_endpoint(ec);
  s.local = ec ? s.config.listen.to_string() : endpoint_text(bound);
  s.accept_retry.emplace(ctx.get_executor());
  return OkStatus();
}

std::string HttpServer::local_address() const {
  return impl_->local;
}

void HttpServer::set_max_connections(std::size_t n) noexcept {
  if (!impl_->started) impl_->max_connections = std::max<std::size_t>(1, n);
}

void HttpServer::set_descriptor_ceiling(std::uint64_t ceiling) noexcept {
  if (!impl_->started) impl_->descriptor_ceiling = ceiling;
}

std::size_t HttpServer::max_connections() const noexcept {
  return impl_->max_connections;
}

std::size_t HttpServer::connections() const noexcept {
  return impl_->live.load(std::memory_order_relaxed);
}

void HttpServer::start() {
  Impl& s = *impl_;
  if (s.started || !s.acceptor) return;
  s.started = true;
  s.api.set_extra_metrics([&s](service::PrometheusWriter& out) {
    s.metrics.render(out);
    out.gauge("flurry_http_connections", "Open HTTP connections.",
              static_cast<double>(s.live.load(std::memory_order_relaxed)));
    out.counter("flurry_http_connections_rejected_total",
                "Connections closed at once because max_connections were open or the descriptor "
                "ceiling was reached.",
                s.rejected.load(std::memory_order_relaxed));
    out.gauge("flurry_http_response_bytes",
              "Bytes of large responses written and not yet sent (at most response_budget).",
              static_cast<double>(s.response_bytes.load(std::memory_order_relaxed)));
    out.counter("flurry_http_response_budget_refusals_total",
                "Responses refused (503 RESPONSE_BUDGET) because response_budget was held.",
                s.budget_refusals.load(std::memory_order_relaxed));
    out.counter("flurry_http_response_budget_evictions_total",
                "Connections closed because their response, unread for 1 s or more, held "
                "response_budget another response needed.",
                s.budget_evictions.load(std::memory_order_relaxed));
    if (s.tls) {
      out.counter("flurry_http_tls_handshake_failures_total",
                  "HTTPS connections closed because their TLS handshake failed or timed out.",
                  s.tls_handshake_failures.load(std::memory_order_relaxed));
    }
    for (const auto& writer : s.more_metrics) writer(out);
  });
  for (auto& w : s.workers) {
    w->guard.emplace(w->ctx.get_executor());
    w->arm_sweep();
  }
  asio::post(s.workers[0]->ctx, [&s] { s.accept(); });
  for (auto& w : s.workers) {
    Worker* worker = w.get();
    worker->thread = std::thread([worker] { worker->run(); });
  }
}

void HttpServer::use_tls(std::shared_ptr<tls::ServerContext> context) {
  if (impl_->started) return;
  impl_->tls = std::move(context);
  api_->set_https(impl_->tls != nullptr);
}

void HttpServer::add_metrics(std::function<void(service::PrometheusWriter&)> writer) {
  impl_->more_metrics.push_back(std::move(writer));
}

void HttpServer::stop(std::chrono::milliseconds drain) {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  if (!s.started) {
    if (s.acceptor) {
      error_code ec;
      s.acceptor->close(ec);
    }
    return;
  }
  s.draining.store(true, std::memory_order_relaxed);
  asio::post(s.workers[0]->ctx, [&s] {
    error_code ec;
    s.acceptor->close(ec);
    s.accept_retry->cancel();
  });
  for (auto& w : s.workers) {
    Worker* worker = w.get();
    asio::post(worker->ctx, [worker] { worker->begin_drain(); });
  }
  // Real time, not the server's clock: stop() sleeps in real time, and an injected clock that
  // does not move (a test's) would never end the drain.
  MonotonicClock& real = SteadyClock::instance();
  const auto wait_until_empty = [&s](MonotonicClock& clock, MonoTime deadline) {
    while (s.live.load(std::memory_order_relaxed) > 0 && clock.now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  wait_until_empty(real, real.now() + drain);
  for (auto& w : s.workers) {
    Worker* worker = w.get();
    asio::post(worker->ctx, [worker] { worker->close_all(); });
  }
  // A request waiting for a pool (a clock wait, throttling, a store) finishes within about
  // max_wait; it is answered, then closed. No job may outlive the connections it answers: wait
  // for this server's jobs (their completions are then queued on the I/O threads), then give
  // those completions a moment to run. The pools themselves belong to the composition root.
  while (s.outstanding.load(std::memory_order_acquire) > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  wait_until_empty(real, real.now() + std::chrono::seconds(1));
  for (auto& w : s.workers) {
    Worker* worker = w.get();
    asio::post(worker->ctx, [worker] {
      worker->stopping = true;
      worker->sweep.cancel();
      worker->guard.reset();
    });
  }
  for (auto& w : s.workers) {
    if (s.live.load(std::memory_order_relaxed) > 0) w->ctx.stop();
    if (w->thread.joinable()) w->thread.join();
  }
  // Whatever is left (only after a forced stop) is freed without its handlers.
  for (auto& w : s.workers) {
    while (w->head != nullptr) {
      Connection* c = w->head;
      w->head = c->next;
      delete c;
    }
  }
}

}  // namespace flurry::http

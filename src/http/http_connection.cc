// The connection state machine of the HTTP/1.1 transport (http_connection.h).
#include "http_connection.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <cstring>
#include <string_view>
#include <utility>

namespace flurry::http::transport {

namespace http = boost::beast::http;

void Connection::start() {
  error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  if (!ec) {
    const asio::ip::address address = remote.address();
    peer = address.is_v6() && address.to_v6().is_v4_mapped()
               ? asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).to_string()
               : address.to_string();
  }
  if (worker.server.tls) {
    // The handshake has the time of a request: a client that stalls in it is closed by the sweep.
    tls = worker.server.tls->new_stream(socket);
    state = State::kReading;
    deadline_ms = worker.now_ms + worker.server.request_timeout_ms;
    tls->async_handshake(&Connection::handshake_done, this);
    return;
  }
  state = State::kIdle;
  deadline_ms = worker.now_ms + worker.server.idle_timeout_ms;
  read();
}

void Connection::on_handshake(const error_code& ec) {
  if (ec || state == State::kClosed) {
    worker.server.tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
    if (spdlog::should_log(spdlog::level::debug)) {
      error_code ignored;
      const tcp::endpoint peer = socket.remote_endpoint(ignored);
      spdlog::debug("event=tls_handshake_failed peer={} reason={}",
                    peer.address().to_string() + ":" + std::to_string(peer.port()),
                    quote(state == State::kClosed ? std::string("timed out or closed")
                                                  : tls->describe_error(ec)));
    }
    destroy();
    return;
  }
  state = State::kIdle;
  deadline_ms = worker.now_ms + worker.server.idle_timeout_ms;
  read();
}

void Connection::read() {
  if (state == State::kIdle && worker.draining && in.size() == 0) {
    close();
    destroy();
    return;
  }
  if (tls) {
    tls->async_read_some(in.prepare(kReadChunk), &Connection::read_done, this);
    return;
  }
  socket.async_read_some(in.prepare(kReadChunk),
                         [this](const error_code& ec, std::size_t n) { on_read(ec, n); });
}

void Connection::on_read(const error_code& ec, std::size_t n) {
  if (ec || state == State::kClosed) {
    destroy();
    return;
  }
  try {
    in.commit(n);
    if (state == State::kLingering) {
      lingered += in.size();
      in.consume(in.size());
      if (lingered > kLingerBytes) {
        destroy();
        return;
      }
      read();
      return;
    }
    if (state == State::kIdle) {
      state = State::kReading;
      deadline_ms = worker.now_ms + worker.server.request_timeout_ms;
    }
    parse();
  } catch (const std::exception& e) {
    spdlog::debug("event=connection_error message={}", quote(e.what()));
    destroy();
  }
}

void Connection::parse() {
  if (!parser) {
    parser.emplace(target, authorization, body, worker.server.config);
  }
  std::size_t used = 0;
  const HttpRequestParser::Step step =
      parser->parse(std::string_view(static_cast<const char*>(in.data().data()), in.size()), used);
  in.consume(used);
  switch (step) {
    case HttpRequestParser::Step::kDone:
      respond();
      return;
    case HttpRequestParser::Step::kRefused:
      fail_request(parser->refusal());
      return;
    case HttpRequestParser::Step::kContinue:
      // A final status known from the header alone (413, 417, 400) was a refusal instead.
      send_continue();
      return;
    case HttpRequestParser::Step::kNeedMore:
      read();
      return;
  }
}

void Connection::send_continue() {
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  if (tls) {
    tls->async_write(asio::buffer(kContinue.data(), kContinue.size()), &Connection::continue_done,
                     this);
    return;
  }
  asio::async_write(socket, asio::buffer(kContinue.data(), kContinue.size()),
                    [this](const error_code& ec, std::size_t) { on_continue_sent(ec); });
}

void Connection::on_continue_sent(const error_code& ec) {
  if (ec || state == State::kClosed) {
    destroy();
    return;
  }
  read();
}

void Connection::respond() {
  started = worker.server.clock.now();
  const http::verb verb = parser->method();
  version = parser->http_version();
  keep_alive = parser->keep_alive();
  parser.reset();

  const Method method = verb == http::verb::get    ? Method::kGet
                        : verb == http::verb::head ? Method::kHead
                        : verb == http::verb::post ? Method::kPost
                                                   : Method::kOther;
  head = method == Method::kHead;
  out.clear();
  out.resize(kHeadroom);
  ApiResponse r;
  // Never blocks this thread: a request that would wait for the generator or a segment store is
  // deferred to the pool the operations layer names.
  worker.server.api.handle(ApiRequest{method, target, authorization, body, peer}, r, out,
                           worker.scratch, Blocking::kNever);
  authorization.clear();
  body.clear();
  if (r.deferred) {
    defer(std::move(r), method);
    return;
  }
  close_after_write = !keep_alive || r.close || worker.draining || worker.closing;
  send(r, method == Method::kHead, version, keep_alive && version == 10);
}

// Runs the rest of the request (the response's resume: a closure over the request the route
// parsed, routed and admitted) on the pool its deferral names, allowed to block, into a buffer of
// the job's own; the connection's I/O thread sends it. The job does not touch the connection and
// needs none of its buffers (the next request may reuse them); the connection stays allocated
// (kWaiting) until the completion runs, which HttpServer::stop waits for before freeing anything.
void Connection::defer(ApiResponse&& deferred, Method method) {
  state = State::kWaiting;
  Worker* const w = &worker;
  Connection* const self = this;
  ServerState* const server = &worker.server;
  const ops::Pool pool = deferred.deferral.pool;
  server->outstanding.fetch_add(1, std::memory_order_acq_rel);
  // Counted before it is posted (stop() waits for it); uncounted again if posting fails.
  struct Uncount {
    ServerState* server;
    bool posted = false;
    ~Uncount() {
      if (!posted) server->outstanding.fetch_sub(1, std::memory_order_acq_rel);
    }
  } uncount{server};
  server->pools.post(pool, [w, self, server, method, deferred = std::move(deferred)] {
    try {
      ApiResponse r;
      OutBuf buffer;
      buffer.resize(kHeadroom);
      ApiScratch scratch;
      Api::resume(deferred, method, r, buffer, scratch);
      // The buffer itself goes to the connection (no copy of a large response).
      asio::post(w->ctx, [self, r = std::move(r), buffer = std::move(buffer)]() mutable {
        self->on_deferred_done(r, buffer);
      });
    } catch (const std::exception& e) {
      // Out of memory: the connection stays waiting until stop() frees it.
      spdlog::error("event=deferred_request_failed message={}", quote(e.what()));
    }
    server->outstanding.fetch_sub(1, std::memory_order_acq_rel);
  });
  uncount.posted = true;
}

void Connection::on_deferred_done(const ApiResponse& r, OutBuf& response) {
  if (state == State::kClosed) {
    destroy();
    return;
  }
  try {
    out = std::move(response);
    close_after_write = !keep_alive || r.close || worker.draining || worker.closing;
    send(r, head, version, keep_alive && version == 10);
  } catch (const std::exception& e) {
    spdlog::debug("event=connection_error message={}", quote(e.what()));
    destroy();
  }
}

// Answers a request the parser refused and closes the connection after it.
void Connection::fail_request(Status why) {
  started = worker.server.clock.now();
  const int version = 11;
  parser.reset();
  out.clear();
  out.resize(kHeadroom);
  ApiResponse r;
  r.route = Route::kOther;
  Api::error(why, r, out);
  // The framing of what follows is unknown (or the body unread): this is the last response.
  close_after_write = true;
  in.consume(in.size());
  send(r, false, version, false);
}

void Connection::send(const ApiResponse& response, bool head_only, int version,
                      bool keep_alive_header) {
  ApiResponse refused;
  const ApiResponse* chosen = &response;
  if (!charge_response()) {
    // The IDs in the body are dropped unsent, as if the client had gone: never handed out.
    const std::size_t needed = out.capacity();
    out.clear();
    out.trim(kKeepResponseBuffer);
    out.resize(kHeadroom);
    refused.route = response.route;
    Api::error(Status(Reason::kResponseBudget,
                      "the responses being sent already hold most of response_budget (" +
                          std::to_string(worker.server.config.response_budget) +
                          " bytes) and this one needs " + std::to_string(needed) +
                          " bytes; retry later or ask for fewer IDs"),
               refused, out);
    chosen = &refused;
  }
  const ApiResponse& r = *chosen;
  route = r.route;
  status = r.status;
  const std::size_t body_len = out.size() - kHeadroom;

  char head[kHeadroom];
  char* p = head;
  const auto put = [&p](std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  put(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  p = std::to_chars(p, p + 3, r.status).ptr;
  *p++ = ' ';
  put(reason_phrase(r.status));
  put("\r\nServer: flurry\r\nDate: ");
  put(std::string_view(worker.date, worker.date_len));
  put("\r\nContent-Type: ");
  put(r.content_type);
  if (!(head_only && r.omit_content_length)) {
    put("\r\nContent-Length: ");
    p = std::to_chars(p, p + 20, body_len).ptr;
  }
  put("\r\nCache-Control: ");
  put(r.cache_control);
  put("\r\nX-Content-Type-Options: nosniff\r\n");
  std::size_t extra_bytes = 0;
  if (!r.location.empty()) {
    extra_bytes += r.location.size() + 12;
    if (extra_bytes <= kMaxExtraHeaderBytes) {  // fail_leader_only keeps it shorter
      put("Location: ");
      put(r.location);
      put("\r\n");
    }
  }
  for (const HttpHeader& header : r.headers) {
    extra_bytes += header.name.size() + header.value.size() + 4;
    if (extra_bytes > kMaxExtraHeaderBytes) break;  // a route's bug: the headroom holds no more
    put(header.name);
    put(": ");
    put(header.value);
    put("\r\n");
  }
  if (r.retry_after) put("Retry-After: 1\r\n");
  if (r.allow) put(r.allow_post ? "Allow: GET, HEAD, POST\r\n" : "Allow: GET, HEAD\r\n");
  if (r.www_authenticate) put("WWW-Authenticate: Bearer\r\n");
  if (close_after_write) {
    put("Connection: close\r\n");
  } else if (keep_alive_header) {
    put("Connection: keep-alive\r\n");
  }
  put("\r\n");
  const auto head_len = static_cast<std::size_t>(p - head);
  char* const begin = out.data() + (kHeadroom - head_len);
  std::memcpy(begin, head, head_len);
  const std::size_t total = head_only ? head_len : head_len + body_len;

  state = State::kWriting;
  deadline_ms = worker.now_ms + worker.server.request_timeout_ms;
  if (tls) {
    tls->async_write(asio::buffer(begin, total), &Connection::write_done, this);
    return;
  }
  asio::async_write(socket, asio::buffer(begin, total),
                    [this](const error_code& ec, std::size_t) { on_write(ec); });
}

// Draws the response buffer on the server's response budget when the response is larger than a
// connection keeps. False when that would pass response_budget: the response must not be sent. A
// buffer larger than the whole budget still goes when nothing else is held, so that a budget set
// below the largest response cannot refuse it forever.
bool Connection::charge_response() noexcept {
  // A small response in a buffer kept from a larger one (kKeepBusyResponseBuffer) draws nothing.
  const std::size_t bytes = out.size() > kKeepResponseBuffer ? out.capacity() : 0;
  if (bytes == 0) return true;
  std::atomic<std::uint64_t>& used = worker.server.response_bytes;
  const std::uint64_t budget = worker.server.config.response_budget;
  std::uint64_t now = used.load(std::memory_order_relaxed);
  bool evicted = false;
  for (;;) {
    if (now != 0 && now + bytes > budget) {
      if (!evicted) {
        // Stalled responses make room: this worker's at once, the other workers' for the next
        // responses (each on its own thread).
        evicted = true;
        worker.evict_stalled(to_ms(worker.server.clock.now()));
        for (const auto& other : worker.server.workers) {
          if (other.get() == &worker) continue;
          Worker* w = other.get();
          try {
            asio::post(w->ctx, [w] { w->evict_stalled(to_ms(w->server.clock.now())); });
          } catch (...) {  // out of memory: the next refusal tries again
          }
        }
        now = used.load(std::memory_order_relaxed);
        continue;
      }
      worker.server.budget_refusals.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (used.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed)) break;
  }
  charged = bytes;
  charged_ms = to_ms(worker.server.clock.now());
  return true;
}

void Connection::release_response() noexcept {
  if (charged == 0) return;
  worker.server.response_bytes.fetch_sub(charged, std::memory_order_relaxed);
  charged = 0;
}

// After a response: buffers grown beyond what a connection keeps are freed.
void Connection::trim_buffers() noexcept {
  out.trim(kKeepBusyResponseBuffer);
  if (in.size() == 0 && in.capacity() > kKeepInputBuffer) in.shrink_to_fit();
  for (std::string* text : {&target, &authorization, &body}) {
    if (text->capacity() > kKeepRequestText) std::string().swap(*text);
  }
}

void Connection::on_write(const error_code& ec) {
  worker.server.metrics.record(route, status, worker.server.clock.now() - started);
  release_response();
  if (ec || state == State::kClosed) {
    destroy();
    return;
  }
  try {
    trim_buffers();
    if (close_after_write) {
      if (worker.closing) {  // stopping: no lingering
        destroy();
        return;
      }
      linger();
      return;
    }
    if (in.size() > 0) {  // a pipelined request is waiting
      state = State::kReading;
      deadline_ms = worker.now_ms + worker.server.request_timeout_ms;
      parse();
    } else {
      state = State::kIdle;
      deadline_ms = worker.now_ms + worker.server.idle_timeout_ms;
      read();
    }
  } catch (const std::exception& e) {
    spdlog::debug("event=connection_error message={}", quote(e.what()));
    destroy();
  }
}

// After the last response: stop sending and read what the client still sends until it closes,
// so that the response is not lost to a reset caused by unread data.
void Connection::linger() {
  state = State::kLingering;
  deadline_ms = worker.now_ms + kLingerMs;
  if (tls) {
    // TLS's own end: close_notify, then the client's (or its end of the stream, or the linger
    // time), as a plain connection reads until the client closes.
    in.consume(in.size());
    tls->async_shutdown(&Connection::shutdown_done, this);
    return;
  }
  error_code ec;
  socket.shutdown(Socket::shutdown_send, ec);
  if (ec) {
    destroy();
    return;
  }
  in.consume(in.size());
  read();
}

// A pending socket operation completes with operation_aborted and destroys the connection; one
// waiting for the blocking pool is destroyed by the pool's completion.
void Connection::close() noexcept {
  if (state == State::kClosed) return;
  state = State::kClosed;
  error_code ec;
  socket.close(ec);
}

void Connection::destroy() noexcept {
  release_response();
  error_code ec;
  socket.close(ec);
  worker.remove(this);
  delete this;
}

}  // namespace flurry::http::transport

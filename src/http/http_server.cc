#include "http/http_server.h"

#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <chrono>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "api.h"
#include "core/ascii.h"
#include "ops/deferral.h"
#include "text.h"
#include "tls/server.h"

namespace flurry::http {

using internal::iequals;
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
// Sockets and timers bound to a plain io_context executor: no type-erased executor per operation.
using Executor = asio::io_context::executor_type;
using Socket = asio::basic_stream_socket<tcp, Executor>;
using Acceptor = asio::basic_socket_acceptor<tcp, Executor>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                         asio::wait_traits<std::chrono::steady_clock>, Executor>;
using error_code = boost::system::error_code;

constexpr std::size_t kReadChunk = 4096;
// Room in front of the body for the status line and headers, written last.
constexpr std::size_t kHeadroom = 512 + kMaxExtraHeaderBytes;
// Between requests a connection keeps its buffers up to these sizes and frees larger ones (a big
// batch, a long target or body), so an idle keep-alive connection holds a few KiB whatever it was
// answered before (1,000 idle connections after count=40000 held 751 MiB when 1 MiB was kept).
// A response larger than kKeepResponseBuffer also draws its buffer on the response budget
// (HttpOptions::response_budget) until it is sent.
constexpr std::size_t kKeepResponseBuffer = std::size_t{8} << 10;
// A response buffer up to this size (count=1000 in any encoding) is kept from one response to
// the next, until the idle sweep finds the connection between requests: freeing and faulting in
// a fresh 24 KiB buffer for every count=1000 response cost a quarter of the server's CPU.
constexpr std::size_t kKeepBusyResponseBuffer = std::size_t{64} << 10;
constexpr std::size_t kKeepInputBuffer = std::size_t{8} << 10;
constexpr std::size_t kKeepRequestText = std::size_t{1} << 10;
constexpr std::int64_t kRequestTimeoutMs = 10'000;
constexpr std::int64_t kLingerMs = 2'000;
constexpr std::size_t kLingerBytes = std::size_t{1} << 20;
constexpr std::chrono::milliseconds kSweepPeriod{250};
// A response the client has not taken whole after this long is stalled: when the response budget
// cannot hold another response, stalled ones are dropped (their connections closed) to make room,
// so clients that never read cannot keep the budget from those that do.
constexpr std::int64_t kStalledResponseMs = 1'000;
std::int64_t to_ms(MonoTime t) noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// Calls f(element) for each element of a comma-separated field value (RFC 9110 section 5.6.1),
// without the optional whitespace around it; empty elements are skipped.
template <typename F>
void for_each_element(std::string_view value, F&& f) {
  std::size_t pos = 0;
  while (pos <= value.size()) {
    std::size_t comma = value.find(',', pos);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view e = value.substr(pos, comma - pos);
    while (!e.empty() && (e.front() == ' ' || e.front() == '\t')) e.remove_prefix(1);
    while (!e.empty() && (e.back() == ' ' || e.back() == '\t')) e.remove_suffix(1);
    if (!e.empty()) f(e);
    pos = comma + 1;
  }
}

// Parses one request without storing its fields: the method, target and version are kept, and
// the Authorization header and (for POST) the body; other bodies are read and dropped. Beast
// enforces the header and body limits and the framing rules it knows (a bad Content-Length,
// Content-Length beside chunked); on top of them the parser refuses, with the Status of
// rejection():
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
class RequestParser final : public http::basic_parser<true> {
 public:
  // `target`, `authorization` and `body` are the connection's buffers, reused across requests;
  // `options` (allowed_hosts, the listen host) must outlive this.
  RequestParser(std::string& target, std::string& authorization, std::string& body,
                const HttpOptions& options)
      : target_(target), authorization_(authorization), body_(body), options_(options) {
    authorization_.clear();
    body_.clear();
  }

  [[nodiscard]] http::verb method() const noexcept { return method_; }
  [[nodiscard]] int http_version() const noexcept { return version_; }
  // The request asked for 100 Continue (HTTP/1.1 only; HTTP/1.0 expectations are ignored).
  [[nodiscard]] bool expect_continue() const noexcept { return expect_continue_; }
  // Why the parser refused the request on top of Beast's rules; OK when it did not.
  [[nodiscard]] const Status& rejection() const noexcept { return rejection_; }

  // put() that counts the bytes it consumed, for framing_bytes().
  std::size_t feed(boost::asio::const_buffer buffer, error_code& ec) {
    const std::size_t used = put(buffer, ec);
    consumed_ += used;
    return used;
  }
  // The bytes of this request consumed so far that were not body: the header, chunk-size lines
  // and extensions, the CRLF after each chunk, the trailer.
  [[nodiscard]] std::uint64_t framing_bytes() const noexcept { return consumed_ - body_bytes_; }
  // Refuses the request: its framing (framing_bytes() and `pending` bytes not yet consumed, an
  // unfinished chunk-size line or trailer) is larger than `limit`.
  void refuse_framing(std::uint64_t pending, std::uint64_t limit) {
    rejection_ = Status(Reason::kHeaderTooLarge,
                        "the request header, chunk-size lines, chunk extensions and trailer "
                        "together are larger than header_limit (" +
                            std::to_string(limit) + " bytes; " +
                            std::to_string(framing_bytes() + pending) + " so far)");
  }

  // A message for a Beast error, naming the framing problem where the fields tell which.
  [[nodiscard]] std::string describe(const error_code& ec) const {
    if ((ec == http::error::bad_transfer_encoding && content_length_seen_) ||
        (ec == http::error::bad_content_length && transfer_encoding_seen_)) {
      return "a request must not have both Content-Length and Transfer-Encoding (RFC 9112 "
             "section 6.1)";
    }
    if (ec == http::error::bad_transfer_encoding) {
      return "Transfer-Encoding goes on after chunked: chunked must be the only transfer coding, "
             "given once (RFC 9112 section 6.3)";
    }
    if (ec == http::error::bad_content_length) {
      return "bad Content-Length (it must be a single decimal number)";
    }
    return "malformed HTTP request: " + ec.message();
  }

 private:
  void on_request_impl(http::verb method, beast::string_view, beast::string_view target,
                       int version, error_code&) override {
    method_ = method;
    version_ = version;
    target_.assign(target.data(), target.size());
    keep_body_ = method == http::verb::post;
  }
  void on_response_impl(int, beast::string_view, int, error_code&) override {}
  void on_field_impl(http::field f, beast::string_view, beast::string_view value,
                     error_code& ec) override {
    if (is_header_done()) return;  // a trailer field: never a credential, a Host or framing
    switch (f) {
      case http::field::host:
        if (++hosts_ == 1 &&
            !host_allowed(std::string_view(value.data(), value.size()), options_)) {
          foreign_host_.assign(value.data(), std::min<std::size_t>(value.size(), 256));
          foreign_ = true;
        }
        return;
      case http::field::content_length:
        content_length_seen_ = true;
        return;
      case http::field::transfer_encoding:
        transfer_encoding_seen_ = true;
        transfer_encoding(std::string_view(value.data(), value.size()), ec);
        return;
      case http::field::expect:
        if (version_ >= 11) expect(std::string_view(value.data(), value.size()));
        return;
      case http::field::authorization:
        // A credential: kept for the API, never logged. Two of them are refused there (the
        // value is then not "Bearer <token>").
        if (++authorizations_ > 1) {
          authorization_ = "(more than one Authorization header)";
        } else {
          authorization_.assign(value.data(), value.size());
        }
        return;
      default:
        return;
    }
  }
  void on_header_impl(error_code& ec) override {
    if (transfer_encoding_seen_ && !chunked()) {
      // Accepted above but not framed as chunked by Beast: never read a body as a request.
      reject(
          InvalidArgument("Transfer-Encoding must be exactly \"chunked\" (RFC 9112 section 6.1)"),
          ec);
    } else if (hosts_ > 1) {
      reject(InvalidArgument("more than one Host header (" + std::to_string(hosts_) +
                             "); a request must have exactly one (RFC 9112 section 3.2)"),
             ec);
    } else if (hosts_ == 0 && version_ >= 11) {
      reject(InvalidArgument("an HTTP/1.1 request must have a Host header (RFC 9112 section 3.2)"),
             ec);
    } else if (foreign_) {
      // A name rebound to this server's address by a web page's DNS (DNS rebinding) arrives
      // here: nothing is served to it.
      reject(InvalidArgument("Host " + quote(foreign_host_) +
                             " is not a name of this server: requests must name it by an IP "
                             "address, localhost, the listen host or a name in allowed_hosts "
                             "(--allowed-hosts, FLURRY_ALLOWED_HOSTS)"),
             ec);
    } else if (!bad_expectation_.empty()) {
      reject(
          Status(Reason::kExpectationFailed, "unsupported expectation " + quote(bad_expectation_) +
                                                 " in Expect: only 100-continue is supported"),
          ec);
    }
  }
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  // Beast enforces body_limit before these see the bytes.
  std::size_t on_body_impl(beast::string_view body, error_code&) override {
    if (keep_body_) body_.append(body.data(), body.size());
    body_bytes_ += body.size();
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, beast::string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, beast::string_view body, error_code&) override {
    if (keep_body_) body_.append(body.data(), body.size());
    body_bytes_ += body.size();
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  // Only "chunked", once, in HTTP/1.1. Several Transfer-Encoding fields form one list, and Beast
  // refuses a second one after chunked, so each field is checked as it comes.
  void transfer_encoding(std::string_view value, error_code& ec) {
    if (version_ < 11) {
      reject(InvalidArgument(
                 "Transfer-Encoding is not allowed in an HTTP/1.0 request (RFC 9112 section 6.1)"),
             ec);
      return;
    }
    std::size_t elements = 0;
    std::string_view unsupported;
    bool chunked_last = false;
    for_each_element(value, [&](std::string_view e) {
      ++elements;
      chunked_last = iequals(e, "chunked");
      if (chunked_last) {
        ++chunked_;
      } else if (unsupported.empty()) {
        unsupported = e;
      }
    });
    if (elements == 0) {
      reject(InvalidArgument(
                 "empty Transfer-Encoding; only \"chunked\" is supported (RFC 9112 section 6.1)"),
             ec);
    } else if (!unsupported.empty()) {
      reject(InvalidArgument(
                 "unsupported Transfer-Encoding " + quote(value) + ": " +
                 (chunked_ > 0 && !chunked_last
                      ? std::string("chunked is not the final transfer coding, so the body "
                                    "length cannot be determined (RFC 9112 section 6.3)")
                      : "transfer coding " + quote(unsupported) +
                            " is not supported; only \"chunked\" is (RFC 9112 section 6.1)")),
             ec);
    } else if (chunked_ > 1) {
      reject(InvalidArgument(
                 "the chunked transfer coding is applied more than once in Transfer-Encoding " +
                 quote(value) + " (RFC 9112 section 7)"),
             ec);
    }
  }

  void expect(std::string_view value) {
    for_each_element(value, [&](std::string_view e) {
      if (iequals(e, "100-continue")) {
        expect_continue_ = true;
      } else if (bad_expectation_.empty()) {
        bad_expectation_.assign(e.substr(0, 64));
      }
    });
  }

  void reject(Status why, error_code& ec) {
    rejection_ = std::move(why);
    ec = http::error::bad_value;
  }

  std::string& target_;
  std::string& authorization_;
  std::string& body_;
  const HttpOptions& options_;
  bool keep_body_ = false;
  bool foreign_ = false;      // the Host header is not one host_allowed() accepts
  std::string foreign_host_;  // its value (at most 256 bytes), for the message
  int authorizations_ = 0;
  http::verb method_ = http::verb::unknown;
  int version_ = 11;
  int hosts_ = 0;
  int chunked_ = 0;
  bool content_length_seen_ = false;
  bool transfer_encoding_seen_ = false;
  bool expect_continue_ = false;
  std::string bad_expectation_;
  Status rejection_;
  std::uint64_t consumed_ = 0;
  std::uint64_t body_bytes_ = 0;
};

struct Worker;

struct Connection {
  // kWaiting: the request waits for the blocking pool (issuing would have blocked the I/O
  // thread); no socket operation is pending, and only the pool's completion frees the
  // connection, so neither the idle sweep nor draining touches it meanwhile.
  enum class State { kIdle, kReading, kWaiting, kWriting, kLingering, kClosed };

  Connection(Worker& w, Socket s) : worker(w), socket(std::move(s)) {}

  void start();
  void on_handshake(const error_code& ec);
  void read();
  void on_read(const error_code& ec, std::size_t n);
  void parse();
  void send_continue();
  void respond();
  void defer(Method method, const ops::Deferral& deferral);
  void on_deferred_done(const ApiResponse& r, OutBuf& response);
  void fail_request(const error_code& ec);
  void send(const ApiResponse& r, bool head_only, int version, bool keep_alive_header);
  [[nodiscard]] bool charge_response() noexcept;
  void release_response() noexcept;
  void trim_buffers() noexcept;
  void on_write(const error_code& ec);
  void linger();
  void close() noexcept;
  void destroy() noexcept;

  // The completions of the TLS stream's operations (tls::IoCallback): `target` is the
  // connection.
  static void handshake_done(void* target, const error_code& ec, std::size_t) {
    static_cast<Connection*>(target)->on_handshake(ec);
  }
  static void read_done(void* target, const error_code& ec, std::size_t n) {
    static_cast<Connection*>(target)->on_read(ec, n);
  }
  static void continue_done(void* target, const error_code& ec, std::size_t) {
    static_cast<Connection*>(target)->on_continue_sent(ec);
  }
  static void write_done(void* target, const error_code& ec, std::size_t) {
    static_cast<Connection*>(target)->on_write(ec);
  }
  static void shutdown_done(void* target, const error_code&, std::size_t) {
    static_cast<Connection*>(target)->destroy();
  }
  void on_continue_sent(const error_code& ec);

  Worker& worker;
  Socket socket;
  // Over `socket` when the server speaks TLS (declared after it: destroyed first); null for plain
  // HTTP, whose reads and writes go to the socket directly.
  std::unique_ptr<tls::ServerStream> tls;
  beast::flat_buffer in;
  OutBuf out;
  std::string target;
  std::string authorization;  // the request's Authorization header: never logged
  std::string body;           // the request's body (POST only)
  // The client's address without the port (an IPv4-mapped IPv6 address as IPv4): the token
  // brake's client (ops::GuessBrake). Set once, at start().
  std::string peer;
  std::optional<RequestParser> parser;
  State state = State::kIdle;
  std::int64_t deadline_ms = 0;
  bool close_after_write = false;
  bool continue_sent = false;  // 100 Continue written for the request being read
  std::size_t lingered = 0;
  // Bytes of `out` drawn on the response budget until the response is sent (0: none), since
  // charged_ms (the server's monotonic clock).
  std::size_t charged = 0;
  std::int64_t charged_ms = 0;
  // The request being answered.
  int version = 11;
  bool keep_alive = true;
  bool head = false;  // a HEAD request: the response goes without its body
  MonoTime started;   // on the server's monotonic clock
  Route route = Route::kOther;
  int status = 0;
  // The worker's list of connections.
  Connection* prev = nullptr;
  Connection* next = nullptr;
};

}  // namespace

struct HttpServer::Impl {
  Impl(Api& a, ops::Pools& p, RequestMetrics& r, const HttpOptions& c, Clocks clocks)
      : api(a),
        pools(p),
        metrics(r),
        config(c),
        wall(clocks.wall),
        clock(clocks.monotonic),
        max_connections(static_cast<std::size_t>(c.max_connections)) {}

  void accept();
  void on_accept(const error_code& ec, Socket socket, std::size_t worker);

  // The route table and the blocking pools, handed over by the composition root.
  Api& api;
  ops::Pools& pools;
  RequestMetrics& metrics;
  // Other front ends' metrics, appended to /metrics (HttpServer::add_metrics).
  std::vector<std::function<void(service::PrometheusWriter&)>> more_metrics;
  const HttpOptions config;
  // The Date header's time.
  Clock& wall;
  // What "now" is read from: connection deadlines, request latency, the drain in stop(). The
  // asio timers that wake the threads periodically run on real time.
  MonotonicClock& clock;
  std::size_t max_connections;
  // Connections whose descriptor is this or above are closed at once (0: none).
  std::uint64_t descriptor_ceiling = 0;
  std::vector<std::unique_ptr<Worker>> workers;
  // Requests handed to the pools and not answered yet: stop() waits for them.
  std::atomic<std::size_t> outstanding{0};
  std::optional<Acceptor> acceptor;
  std::optional<Timer> accept_retry;
  std::size_t next_worker = 0;
  std::atomic<std::size_t> live{0};
  std::atomic<std::uint64_t> rejected{0};
  // Bytes of response buffers larger than a connection keeps, from when their response is
  // written until it is sent; at most config.response_budget (Connection::charge_response).
  std::atomic<std::uint64_t> response_bytes{0};
  std::atomic<std::uint64_t> budget_refusals{0};
  // Connections closed because their stalled response held budget another response needed.
  std::atomic<std::uint64_t> budget_evictions{0};
  std::atomic<bool> draining{false};
  // HTTPS when set (use_tls): every connection's handshake runs on it.
  std::shared_ptr<tls::ServerContext> tls;
  std::atomic<std::uint64_t> tls_handshake_failures{0};
  bool started = false;
  bool stopped = false;
  std::int64_t idle_timeout_ms = 30'000;
  std::int64_t request_timeout_ms = kRequestTimeoutMs;
  std::string local;
};

namespace {

struct Worker {
  explicit Worker(HttpServer::Impl& s) : server(s), ctx(1), sweep(ctx.get_executor()) {
    update_clock();
  }

  void run() {
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

  void update_clock() {
    now_ms = to_ms(server.clock.now());
    const std::time_t t = static_cast<std::time_t>(
        std::chrono::floor<std::chrono::seconds>(server.wall.now()).time_since_epoch().count());
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    date_len = std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  }

  void arm_sweep() {
    sweep.expires_after(kSweepPeriod);
    sweep.async_wait([this](const error_code& ec) {
      if (ec || stopping) return;
      update_clock();
      for (Connection* c = head; c != nullptr; c = c->next) {
        if (c->state != Connection::State::kClosed && c->state != Connection::State::kWaiting &&
            c->deadline_ms <= now_ms) {
          c->close();
        } else if (c->state == Connection::State::kIdle ||
                   c->state == Connection::State::kReading) {
          c->out.trim(kKeepResponseBuffer);  // not in use between a response and the next
        }
      }
      arm_sweep();
    });
  }

  // Closes the connections of this worker whose response has been held on the response budget
  // for kStalledResponseMs or more (stalled readers), giving their bytes back at once. On this
  // worker's thread.
  void evict_stalled(std::int64_t now) noexcept {
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

  void add(Socket socket) {
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

  void remove(Connection* c) noexcept {
    if (c->prev != nullptr) c->prev->next = c->next;
    if (c->next != nullptr) c->next->prev = c->prev;
    if (head == c) head = c->next;
    server.live.fetch_sub(1, std::memory_order_relaxed);
  }

  // Draining: connections between requests close now; the others after their response.
  void begin_drain() {
    draining = true;
    for (Connection* c = head; c != nullptr; c = c->next) {
      if (c->state == Connection::State::kIdle && c->in.size() == 0) c->close();
    }
  }

  // The drain time is over: close every connection except those waiting for the blocking pool,
  // which send their response (with Connection: close) when it comes and then close.
  void close_all() {
    closing = true;
    for (Connection* c = head; c != nullptr; c = c->next) {
      if (c->state != Connection::State::kWaiting) c->close();
    }
  }

  HttpServer::Impl& server;
  asio::io_context ctx;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  Timer sweep;
  Connection* head = nullptr;
  std::int64_t now_ms = 0;
  char date[64] = {};
  std::size_t date_len = 0;
  ApiScratch scratch;
  bool draining = false;
  bool closing = false;  // close_all() ran: a response written is the connection's last
  bool stopping = false;
  std::thread thread;
};

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
    parser->header_limit(static_cast<std::uint32_t>(worker.server.config.header_limit));
    parser->body_limit(worker.server.config.body_limit);
    parser->eager(true);
    continue_sent = false;
  }
  while (in.size() > 0 && !parser->is_done()) {
    error_code ec;
    const std::size_t used = parser->feed(in.data(), ec);
    in.consume(used);
    if (ec == http::error::need_more) break;
    if (ec) {
      fail_request(ec);
      return;
    }
    if (used == 0) break;
  }
  // Past the header, what Beast leaves unconsumed of an unfinished request is an unfinished
  // chunk-size line or trailer (a body is consumed as it comes): it counts as framing, so the
  // input buffer stays within header_limit plus one read however long the line.
  const std::uint64_t limit = worker.server.config.header_limit;
  const std::uint64_t pending = parser->is_done() ? 0 : in.size();
  if (parser->is_header_done() && parser->framing_bytes() + pending > limit) {
    parser->refuse_framing(pending, limit);
    fail_request(http::error::header_limit);
    return;
  }
  if (parser->is_done()) {
    respond();
    return;
  }
  // The header asked to be told before the body is sent (RFC 9110 section 10.1.1); a final
  // status known from the header alone (413, 417, 400) went out at once through fail_request.
  if (parser->is_header_done() && parser->expect_continue() && !continue_sent) {
    send_continue();
    return;
  }
  read();
}

void Connection::send_continue() {
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  continue_sent = true;
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
  if (r.deferred) defer(method, r.deferral);
  authorization.clear();
  body.clear();
  if (r.deferred) return;
  close_after_write = !keep_alive || r.close || worker.draining || worker.closing;
  send(r, method == Method::kHead, version, keep_alive && version == 10);
}

// Runs the request again on the pool its deferral names, allowed to block, into a buffer of the
// job's own; the connection's I/O thread sends it. The job does not touch the connection; the
// connection stays allocated (kWaiting) until the completion runs, which HttpServer::stop waits
// for before freeing anything. The request's text goes with the job.
void Connection::defer(Method method, const ops::Deferral& deferral) {
  state = State::kWaiting;
  Worker* const w = &worker;
  Connection* const self = this;
  HttpServer::Impl* const server = &worker.server;
  server->outstanding.fetch_add(1, std::memory_order_acq_rel);
  // Counted before it is posted (stop() waits for it); uncounted again if posting fails.
  struct Uncount {
    HttpServer::Impl* server;
    bool posted = false;
    ~Uncount() {
      if (!posted) server->outstanding.fetch_sub(1, std::memory_order_acq_rel);
    }
  } uncount{server};
  server->pools.post(deferral.pool, [w, self, server, method, target = target, peer = peer,
                                     authorization = authorization, body = body, deferral] {
    try {
      ApiResponse r;
      OutBuf buffer;
      buffer.resize(kHeadroom);
      ApiScratch scratch;
      server->api.handle(ApiRequest{method, target, authorization, body, peer}, r, buffer, scratch,
                         Blocking::kAllowed, deferral);
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

void Connection::fail_request(const error_code& ec) {
  started = worker.server.clock.now();
  const int version = 11;
  const HttpOptions& config = worker.server.config;
  Status why;
  if (parser && !parser->rejection().ok()) {
    why = parser->rejection();
  } else if (ec == http::error::header_limit) {
    why = Status(Reason::kHeaderTooLarge, "the request header is larger than header_limit (" +
                                              std::to_string(config.header_limit) + " bytes)");
  } else if (ec == http::error::body_limit) {
    why = Status(Reason::kBodyTooLarge, "the request body is larger than body_limit (" +
                                            std::to_string(config.body_limit) + " bytes)");
  } else {
    why =
        InvalidArgument(parser ? parser->describe(ec) : "malformed HTTP request: " + ec.message());
  }
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

HttpRouter::HttpRouter(ops::Operations& ops) : api_(std::make_unique<Api>(ops)) {}

HttpRouter::~HttpRouter() = default;

HttpServer::HttpServer(HttpRouter& router, ops::Pools& pools, RequestMetrics& metrics,
                       const HttpOptions& options, Clocks clocks)
    : impl_(std::make_unique<Impl>(router.api(), pools, metrics, options, clocks)) {
  impl_->idle_timeout_ms = options.idle_timeout.count();
  impl_->request_timeout_ms = std::min(kRequestTimeoutMs, impl_->idle_timeout_ms);
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
  if (!impl_->started) impl_->tls = std::move(context);
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
  const auto wait_until_empty = [&s](MonoTime deadline) {
    while (s.live.load(std::memory_order_relaxed) > 0 && s.clock.now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  wait_until_empty(s.clock.now() + drain);
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
  wait_until_empty(s.clock.now() + std::chrono::seconds(1));
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

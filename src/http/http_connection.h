// Internal: the HTTP/1.1 transport's connections and the state they share with the server
// (http_server.cc: listening, accepting, the I/O threads, stop). One connection is a state
// machine on its worker's thread: read, parse (http_request_parser.h), dispatch to the route
// table (api.h), or defer to a pool, write, then keep-alive, pipelining or linger; with the
// deadlines the worker's sweep enforces and the response budget all connections share.
// Everything here runs on the connection's worker thread except what is atomic in
// ServerState and the pool jobs of Connection::defer, which touch no connection.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api.h"
#include "flurry/clock.h"
#include "http/http_metrics.h"
#include "http/http_options.h"
#include "http_request_parser.h"
#include "ops/deferral.h"
#include "text.h"
#include "tls/server.h"

namespace flurry::http::transport {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
// Sockets and timers bound to a plain io_context executor: no type-erased executor per operation.
using Executor = asio::io_context::executor_type;
using Socket = asio::basic_stream_socket<tcp, Executor>;
using Acceptor = asio::basic_socket_acceptor<tcp, Executor>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                         asio::wait_traits<std::chrono::steady_clock>, Executor>;
using error_code = boost::system::error_code;

inline constexpr std::size_t kReadChunk = 4096;
// Room in front of the body for the status line and headers, written last.
inline constexpr std::size_t kHeadroom = 512 + kMaxExtraHeaderBytes;
// Between requests a connection keeps its buffers up to these sizes and frees larger ones (a big
// batch, a long target or body), so an idle keep-alive connection holds a few KiB whatever it was
// answered before (1,000 idle connections after count=40000 held 751 MiB when 1 MiB was kept).
// A response larger than kKeepResponseBuffer also draws its buffer on the response budget
// (HttpOptions::response_budget) until it is sent.
inline constexpr std::size_t kKeepResponseBuffer = std::size_t{8} << 10;
// A response buffer up to this size (count=1000 in any encoding) is kept from one response to
// the next, until the idle sweep finds the connection between requests: freeing and faulting in
// a fresh 24 KiB buffer for every count=1000 response cost a quarter of the server's CPU.
inline constexpr std::size_t kKeepBusyResponseBuffer = std::size_t{64} << 10;
inline constexpr std::size_t kKeepInputBuffer = std::size_t{8} << 10;
inline constexpr std::size_t kKeepRequestText = std::size_t{1} << 10;
inline constexpr std::int64_t kRequestTimeoutMs = 10'000;
inline constexpr std::int64_t kLingerMs = 2'000;
inline constexpr std::size_t kLingerBytes = std::size_t{1} << 20;
inline constexpr std::chrono::milliseconds kSweepPeriod{250};
// A response the client has not taken whole after this long is stalled: when the response budget
// cannot hold another response, stalled ones are dropped (their connections closed) to make room,
// so clients that never read cannot keep the budget from those that do.
inline constexpr std::int64_t kStalledResponseMs = 1'000;
inline std::int64_t to_ms(MonoTime t) noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

struct Worker;

// What the connections of every worker share with the server: set up before start() and then
// read-only, except the atomics.
struct ServerState {
  ServerState(Api& a, ops::Pools& p, RequestMetrics& r, const HttpOptions& c, Clocks clocks)
      : api(a), pools(p), metrics(r), config(c), wall(clocks.wall), clock(clocks.monotonic) {}

  // The route table and the blocking pools, handed over by the composition root.
  Api& api;
  ops::Pools& pools;
  RequestMetrics& metrics;
  const HttpOptions config;
  // The Date header's time.
  Clock& wall;
  // What "now" is read from: connection deadlines, request latency. The asio timers that wake
  // the threads periodically, and stop()'s bounds, run on real time.
  MonotonicClock& clock;
  // One per I/O thread; filled by bind(), before any thread runs.
  std::vector<std::unique_ptr<Worker>> workers;
  // Requests handed to the pools and not answered yet: stop() waits for them.
  std::atomic<std::size_t> outstanding{0};
  // Open connections.
  std::atomic<std::size_t> live{0};
  // Bytes of response buffers larger than a connection keeps, from when their response is
  // written until it is sent; at most config.response_budget (Connection::charge_response).
  std::atomic<std::uint64_t> response_bytes{0};
  std::atomic<std::uint64_t> budget_refusals{0};
  // Connections closed because their stalled response held budget another response needed.
  std::atomic<std::uint64_t> budget_evictions{0};
  // HTTPS when set (use_tls): every connection's handshake runs on it.
  std::shared_ptr<tls::ServerContext> tls;
  std::atomic<std::uint64_t> tls_handshake_failures{0};
  std::int64_t idle_timeout_ms = 30'000;
  std::int64_t request_timeout_ms = kRequestTimeoutMs;
};

// One accepted connection, owned by its worker's list and used on the worker's thread only; it
// frees itself (destroy()) when its last socket operation completes.
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
  void defer(ApiResponse&& deferred, Method method);
  void on_deferred_done(const ApiResponse& r, OutBuf& response);
  void fail_request(Status why);
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
  std::optional<HttpRequestParser> parser;  // the request being read
  State state = State::kIdle;
  std::int64_t deadline_ms = 0;
  bool close_after_write = false;
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

// One I/O thread: its io_context, its connections (a list only this thread touches), the
// sweep that closes connections past their deadline, and the clock readings and scratch space
// its connections share. Defined in http_server.cc (the workers' life cycle).
struct Worker {
  explicit Worker(ServerState& s);

  // Runs the io_context until it is out of work (stop()), logging what a handler throws.
  void run();
  // Reads the clocks into now_ms and date (the Date header).
  void update_clock();
  // Every kSweepPeriod: closes connections past their deadline (except those waiting for a
  // pool) and trims idle ones' response buffers.
  void arm_sweep();
  // Closes the connections of this worker whose response has been held on the response budget
  // for kStalledResponseMs or more (stalled readers), giving their bytes back at once.
  void evict_stalled(std::int64_t now) noexcept;
  // Takes an accepted connection (closed at once when draining).
  void add(Socket socket);
  void remove(Connection* c) noexcept;
  // Draining: connections between requests close now; the others after their response.
  void begin_drain();
  // The drain time is over: close every connection except those waiting for the blocking pool,
  // which send their response (with Connection: close) when it comes and then close.
  void close_all();

  ServerState& server;
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

}  // namespace flurry::http::transport

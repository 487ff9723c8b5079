// flurry's C++ client: see include/flurry/client.h and docs/clients.md.
#include "flurry/client.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "client_internal.h"
#include "flurry/codec.h"
#include "flurry/host_port.h"
#include "flurry/layout.h"

namespace flurry {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Steady = std::chrono::steady_clock;
using json = nlohmann::json;

namespace {
thread_local ClientError t_last_error;
}  // namespace

const ClientError& last_client_error() noexcept {
  return t_last_error;
}

namespace client_internal {

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
    a.status = Status(StatusCode::kUnavailable, a.error.message);
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
  a.status = status_of(a.error.code, a.error.reason, a.error.message);
  return a;
}

namespace {

// 8 bytes as a little-endian word: the first byte lowest.
std::uint64_t load_le64(const char* p) noexcept {
  std::uint64_t w = 0;
  std::memcpy(&w, p, 8);
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
  return w;
}

// True when all 8 bytes of `w` are ASCII digits.
bool eight_digits(std::uint64_t w) noexcept {
  return ((w & 0xF0F0F0F0F0F0F0F0) | (((w + 0x0606060606060606) & 0xF0F0F0F0F0F0F0F0) >> 4)) ==
         0x3333333333333333;
}

// The value of 8 ASCII digits, the first in the lowest byte (three multiplications, no loop).
std::uint64_t eight_digits_value(std::uint64_t w) noexcept {
  w -= 0x3030303030303030;
  w = w * 10 + (w >> 8);
  return ((w & 0x000000FF000000FF) * (100 + (1000000ULL << 32)) +
          ((w >> 16) & 0x000000FF000000FF) * (1 + (10000ULL << 32))) >>
         32;
}

}  // namespace

bool parse_text_ids(std::string_view body, std::vector<std::uint64_t>& out) {
  out.clear();
  out.reserve(body.size() / 16 + 1);
  const char* p = body.data();
  const char* const end = p + body.size();
  while (p < end) {
    if (*p == '\n' || *p == '\r') {  // an empty line, or the LF of a CRLF
      ++p;
      continue;
    }
    // A refill's IDs have 16 to 19 digits: the first 16 two words at a time, the rest one by one.
    std::uint64_t v = 0;
    const char* const start = p;
    if (end - p >= 16 && eight_digits(load_le64(p)) && eight_digits(load_le64(p + 8))) {
      v = eight_digits_value(load_le64(p)) * 100000000 + eight_digits_value(load_le64(p + 8));
      p += 16;
    }
    for (; p < end && *p >= '0' && *p <= '9'; ++p) {
      if (__builtin_mul_overflow(v, 10, &v) ||
          __builtin_add_overflow(v, static_cast<std::uint64_t>(*p - '0'), &v)) {
        return false;  // 2^64 or more
      }
    }
    if (p == start || (p < end && *p != '\n' && *p != '\r')) return false;
    out.push_back(v);
  }
  return true;
}

double retry_wait_seconds(int round, int retry_after, double u) noexcept {
  const double backoff = round >= 6 ? 5.0 : std::min(0.1 * std::ldexp(1.0, round), 5.0);
  return std::max(static_cast<double>(retry_after), backoff) * (1.0 + 0.2 * u);
}

BatchSizer::BatchSizer(std::uint32_t min_batch, std::uint32_t max_batch,
                       std::uint32_t server_max_batch)
    : lo_(std::min(min_batch, std::min(max_batch, server_max_batch))),
      hi_(std::min(max_batch, server_max_batch)),
      size_(lo_) {}

std::uint32_t BatchSizer::low() noexcept {
  size_ = static_cast<std::uint32_t>(std::min<std::uint64_t>(std::uint64_t{size_} * 2, hi_));
  return size_;
}

std::uint32_t BatchSizer::expired() noexcept {
  size_ = std::max(size_ / 2, lo_);
  return size_;
}

}  // namespace client_internal

using namespace client_internal;

namespace {

struct Endpoint {
  std::string url;  // as given, without a trailing '/'
  HostPort address;
};

Result<Endpoint> parse_endpoint(std::string_view url) {
  constexpr std::string_view kHttp = "http://";
  if (url.starts_with("https://")) {
    return InvalidArgument("endpoints: \"" + std::string(url) +
                           "\": https:// is not supported by the C++ client yet (use http://)");
  }
  if (!url.starts_with(kHttp)) {
    return InvalidArgument("endpoints: \"" + std::string(url) + "\" is not an http:// URL");
  }
  std::string_view rest = url.substr(kHttp.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  Result<HostPort> hp = parse_host_port(rest, HostPortUse::kConnect);
  if (!hp.ok()) return hp.status().with_prefix("endpoints");
  return Endpoint{std::string(kHttp) + std::string(rest), std::move(hp).value()};
}

Status validate(const ClientOptions& o, std::vector<Endpoint>& endpoints) {
  if (o.endpoints.empty()) return InvalidArgument("endpoints: at least one URL is needed");
  for (const std::string& url : o.endpoints) {
    Result<Endpoint> e = parse_endpoint(url);
    if (!e.ok()) return e.status();
    endpoints.push_back(std::move(e).value());
  }
  if (o.max_age <= std::chrono::nanoseconds::zero()) return InvalidArgument("max_age: must be > 0");
  if (o.timeout <= std::chrono::nanoseconds::zero()) return InvalidArgument("timeout: must be > 0");
  if (o.min_batch < 1) return InvalidArgument("min_batch: must be at least 1");
  if (o.max_batch < o.min_batch) return InvalidArgument("min_batch: larger than max_batch");
  if (o.max_batch > (1u << 24)) return InvalidArgument("max_batch: at most 16777216");
  if (!(o.low_water > 0 && o.low_water < 1)) return InvalidArgument("low_water: must be in (0, 1)");
  if (!(o.segment_prefetch > 0 && o.segment_prefetch < 1)) {
    return InvalidArgument("segment_prefetch: must be in (0, 1)");
  }
  if (o.segment_range < 1) return InvalidArgument("segment_range: must be at least 1");
  for (char c : o.token) {
    if (c < 0x21 || c > 0x7e) return InvalidArgument("token: visible ASCII only");
  }
  return OkStatus();
}

// One keep-alive HTTP/1.1 connection. Async operations run on its own io_context so that every
// step keeps the call's deadline.
struct Connection {
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  bool connected = false;
};

struct Reply {
  int status = 0;  // 0: no HTTP answer
  std::optional<std::string> retry_after;
  std::string body;  // the body, or what failed
};

constexpr std::uint64_t kMaxBody = std::uint64_t{64} << 20;

Reply exchange(Connection& c, const Endpoint& ep, const std::string& target,
               const std::string& authorization, Steady::time_point deadline, bool& reused) {
  Reply reply;
  beast::error_code ec;
  const auto run = [&c] {
    c.ioc.restart();
    c.ioc.run();
  };
  reused = c.connected;
  if (!c.connected) {
    c.stream.close();
    tcp::resolver resolver(c.ioc);
    const auto addresses = resolver.resolve(ep.address.host, std::to_string(ep.address.port), ec);
    if (ec) {
      reply.body = "cannot resolve " + ep.address.host + ": " + ec.message();
      return reply;
    }
    c.stream.expires_at(deadline);
    c.stream.async_connect(addresses, [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
    run();
    if (ec) {
      reply.body = "cannot connect to " + ep.url + ": " + ec.message();
      return reply;
    }
    c.stream.socket().set_option(tcp::no_delay(true), ec);
    c.connected = true;
    c.buffer.clear();
  }
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, ep.address.to_string());
  req.keep_alive(true);
  if (!authorization.empty()) req.set(http::field::authorization, authorization);
  c.stream.expires_at(deadline);
  http::async_write(c.stream, req, [&ec](beast::error_code e, std::size_t) { ec = e; });
  run();
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxBody);
  bool body_read = false;  // read straight into reply.body, not through the parser
  if (!ec) {
    c.stream.expires_at(deadline);
    http::async_read_header(c.stream, c.buffer, parser,
                            [&ec](beast::error_code e, std::size_t) { ec = e; });
    run();
  }
  if (!ec && !parser.is_done()) {
    if (const auto length = parser.content_length(); length && *length <= kMaxBody) {
      // A refill's ~330 KB: into one string sized from Content-Length, in reads as large as the
      // socket has data for. Beast sizes each read from the flat buffer's spare capacity (under
      // 1 KB after the header): ~480 reads per refill, each an epoll wait and a timer update.
      reply.body.resize(static_cast<std::size_t>(*length));
      const std::size_t have = std::min(c.buffer.size(), reply.body.size());
      asio::buffer_copy(asio::buffer(reply.body), c.buffer.data(), have);
      c.buffer.consume(have);
      const std::size_t want = reply.body.size() - have;
      asio::async_read(
          c.stream, asio::buffer(reply.body.data() + have, want),
          [want](beast::error_code e, std::size_t done) -> std::size_t {
            return e || done >= want ? 0 : want - done;
          },
          [&ec](beast::error_code e, std::size_t) { ec = e; });
      run();
      body_read = true;
    } else {
      http::async_read(c.stream, c.buffer, parser,
                       [&ec](beast::error_code e, std::size_t) { ec = e; });
      run();
    }
  }
  if (ec) {
    c.connected = false;
    c.stream.close();
    reply.body = std::string(ec == beast::error::timeout ? "timed out waiting for " : "lost ") +
                 ep.url + ": " + ec.message();
    return reply;
  }
  auto& res = parser.get();
  reply.status = static_cast<int>(res.result_int());
  if (auto it = res.find(http::field::retry_after); it != res.end()) {
    reply.retry_after = std::string(it->value());
  }
  if (!body_read) reply.body = std::move(res.body());
  if (!res.keep_alive()) {
    c.connected = false;
    c.stream.close();
  }
  return reply;
}

// CLOCK_MONOTONIC_COARSE (about 5 ns to read, against 25 for the precise clock) plus a margin
// covering its lag behind CLOCK_MONOTONIC (steady_clock): at least the precise time, so a batch it
// calls fresh is fresh. The hot path uses it; only the slow path drops a batch, by the precise
// clock.
std::int64_t coarse_ns_upper_bound() noexcept {
  static const std::int64_t slack = [] {
    timespec res{};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    const std::int64_t ns = res.tv_sec * 1'000'000'000 + res.tv_nsec;
    return std::max<std::int64_t>(2 * ns, 1'000'000);
  }();
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return now.tv_sec * 1'000'000'000 + now.tv_nsec + slack;
}

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch())
      .count();
}

Status fail(ClientError detail, Status status) {
  t_last_error = std::move(detail);
  return status;
}

Status client_failure(StatusCode code, Reason reason, std::string message) {
  ClientError e;
  Status s = reason == Reason::kNone ? Status(code, message) : Status(reason, message);
  e.code = std::string(to_string(s.code()));
  if (reason != Reason::kNone) e.reason = std::string(to_string(reason));
  e.message = std::move(message);
  t_last_error = std::move(e);
  return s;
}

constexpr std::uint64_t kClosedIndex = 0x80000000u;
constexpr std::uint64_t kIndexMask = 0xffffffffu;

// Makes `object` anew in a forked child without destroying the copy from the parent: a thread the
// child does not have can be neither joined nor detached (and a joinable std::thread may not be
// destroyed), and a condition variable or mutex that such a thread waited on or held may not be
// destroyed either. The copy's resources (a thread's stack, nothing else) are left to the child.
template <typename T>
void remake(T& object) noexcept {
  ::new (static_cast<void*>(&object)) T();
}

}  // namespace

struct Segment::Impl {
  Client::Impl* client = nullptr;
  std::string tag;
  std::mutex mu;
  std::condition_variable cv;
  struct Range {
    std::uint64_t start = 0, end = 0, delta = 1;
  };
  std::optional<Range> current;
  std::uint64_t next_value = 0;
  std::uint64_t used = 0;
  std::optional<Range> pending;
  bool fetching = false;
  std::uint64_t fetch_seq = 0;  // completed fetches
  std::optional<std::pair<Status, ClientError>> fetch_error;
  std::thread worker;

  void start_fetch_locked();
  Result<std::uint64_t> next();
  // In a forked child, with `mu` held by the fork's prepare handler: drops the ranges and the
  // fetch in flight, then unlocks `mu`.
  void fork_child() noexcept;
};

struct Client::Impl {
  ClientOptions options;
  std::vector<Endpoint> endpoints;
  std::string authorization;
  std::atomic<std::size_t> preferred{0};
  std::atomic<bool> closed{false};

  // Idle keep-alive connections per endpoint.
  std::mutex pool_mu;
  std::vector<std::vector<std::unique_ptr<Connection>>> pool;

  // Jitter source; the sleep between rounds wakes on close.
  std::mutex random_mu;
  std::mt19937_64 random{std::random_device{}()};
  std::uniform_real_distribution<double> uniform{0.0, 1.0};
  std::mutex sleep_mu;
  std::condition_variable sleep_cv;

  // The layout, read once: layout_fetch_mu lets one caller at a time fetch it (held across the
  // request, it guards no data); layout_mu guards the fields below, held only to read or set them.
  std::mutex layout_fetch_mu;
  std::mutex layout_mu;
  std::optional<Layout> layout;
  std::string layout_text;
  std::uint32_t server_max_batch = 0;

  // The active batch: a seqlock-guarded array. state = generation << 32 | next index; readers
  // claim an index with fetch_add and keep the ID only if the generation did not move meanwhile.
  std::atomic<std::uint64_t> state{kClosedIndex};
  std::atomic<std::uint32_t> count{0};
  std::atomic<std::uint32_t> low_mark{0};
  std::atomic<std::int64_t> expires_ns{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> ids;
  std::uint32_t capacity = 0;
  std::atomic<bool> refill_busy{false};  // a refill runs or its batch waits: no new refill

  // Refills: one in flight, run by `refiller`.
  std::mutex mu;
  std::condition_variable cv;         // callers waiting for a refill to end
  std::condition_variable refill_cv;  // the refiller waiting for work: woken alone
  bool refill_requested = false;
  bool refill_running = false;
  std::uint64_t refill_seq = 0;  // completed refills
  std::optional<std::pair<Status, ClientError>> refill_error;
  std::vector<std::uint64_t> pending;
  std::int64_t pending_expires_ns = 0;
  bool has_pending = false;
  bool expired_since_refill = false;
  bool first_refill = true;
  std::optional<BatchSizer> sizer;
  std::thread refiller;

  TestHooks hooks;  // fakes for the retry loop's clock, sleep and jitter (tests only)
  [[nodiscard]] Steady::time_point now() const { return hooks.now ? hooks.now() : Steady::now(); }

  std::mutex segments_mu;
  std::map<std::string, std::unique_ptr<Segment>, std::less<>> segments;

  // GET `target` with the contract's retries and failover until `deadline`; `sent`, when given,
  // receives the time the request that succeeded was sent (the steady clock).
  Result<std::string> call(const std::string& target, Steady::time_point deadline,
                           Steady::time_point* sent = nullptr);
  Reply request(std::size_t index, const std::string& target, Steady::time_point deadline);
  Status ensure_layout(Steady::time_point deadline);
  // Claims the next ID of the active batch. `precise`: judge its age by the precise clock (the
  // slow path); otherwise by the coarse clock's upper bound (the hot path), which may call a
  // batch that is about to expire stale, never a stale one fresh.
  bool try_take(std::uint64_t& id, bool& want_refill, bool precise) noexcept;
  void close_active() noexcept;
  void install_pending_locked();
  void start_refill_locked();
  void refill_loop();
  Result<std::uint64_t> next_slow(Steady::time_point deadline);
  void shutdown();

  // fork() (docs/clients.md, "Fork"). The prepare handler locks every mutex that guards data (none
  // is held across I/O), so the child's copy of that data is consistent and no lock in it is held
  // by a thread the child does not have; the parent handler unlocks them. The child handler drops
  // the active batch, the batch waiting, the refill in flight, every segment's ranges and fetch,
  // and the idle connections, makes the condition variables and the lock held across I/O anew,
  // forgets the parent's threads, and unlocks. The hot path is not involved.
  void fork_prepare() noexcept;
  void fork_parent() noexcept;
  void fork_child() noexcept;

  Impl();
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
};

namespace {

// Every live client, for the fork handlers; a client is added when made and removed before it is
// destroyed. The prepare handler holds g_clients_mu until the parent or child handler runs.
std::mutex g_clients_mu;
std::vector<Client::Impl*> g_clients;

void clients_fork_prepare() noexcept {
  g_clients_mu.lock();
  for (Client::Impl* c : g_clients) c->fork_prepare();
}

void clients_fork_parent() noexcept {
  for (auto it = g_clients.rbegin(); it != g_clients.rend(); ++it) (*it)->fork_parent();
  g_clients_mu.unlock();
}

void clients_fork_child() noexcept {
  for (auto it = g_clients.rbegin(); it != g_clients.rend(); ++it) (*it)->fork_child();
  g_clients_mu.unlock();
}

}  // namespace

Client::Impl::Impl() {
  static const int registered =
      pthread_atfork(clients_fork_prepare, clients_fork_parent, clients_fork_child);
  (void)registered;  // fails only for want of memory: then no handler runs
  std::lock_guard lock(g_clients_mu);
  g_clients.push_back(this);
}

Client::Impl::~Impl() {
  std::lock_guard lock(g_clients_mu);
  std::erase(g_clients, this);
}

// The order is the code's own nesting (segments_mu before a segment's mu; no other lock is taken
// while one of these is held), so the prepare handler cannot deadlock with a caller.
void Client::Impl::fork_prepare() noexcept {
  segments_mu.lock();
  for (auto& [tag, segment] : segments) segment->impl_->mu.lock();
  mu.lock();
  layout_mu.lock();
  pool_mu.lock();
  random_mu.lock();
}

void Client::Impl::fork_parent() noexcept {
  random_mu.unlock();
  pool_mu.unlock();
  layout_mu.unlock();
  mu.unlock();
  for (auto& [tag, segment] : segments) segment->impl_->mu.unlock();
  segments_mu.unlock();
}

void Client::Impl::fork_child() noexcept {
  // The child has only the thread that called fork(): the refiller and anyone waiting or
  // sleeping in a call are gone, with whatever they held.
  remake(refiller);
  remake(cv);
  remake(refill_cv);
  remake(sleep_mu);
  remake(sleep_cv);
  remake(layout_fetch_mu);
  // No ID of the parent's is handed out here: the active batch is closed, the waiting one and the
  // refill in flight (its answer goes to the parent) dropped. The first call refills, starting
  // again from min_batch.
  close_active();
  count.store(0, std::memory_order_relaxed);
  pending.clear();
  has_pending = false;
  refill_running = false;
  refill_requested = false;
  refill_error.reset();
  expired_since_refill = false;
  first_refill = true;
  refill_busy.store(false, std::memory_order_relaxed);
  // The child's copies of the idle connections' sockets are closed; the parent's stay open
  // (closing a descriptor does not shut the connection down, and asio removes nothing from the
  // shared epoll set when it closes a socket it opened). Connections other threads were using
  // are not reachable here: their descriptors stay open in the child.
  for (auto& idle : pool) idle.clear();
  // The child's retries get their own jitter, not the parent's sequence.
  try {
    random.seed(std::random_device{}());
  } catch (...) {  // no entropy source: the parent's stream, moved by the child's PID
    random.seed(random() ^ static_cast<std::uint64_t>(getpid()));
  }
  random_mu.unlock();
  pool_mu.unlock();
  layout_mu.unlock();
  mu.unlock();
  for (auto& [tag, segment] : segments) segment->impl_->fork_child();
  segments_mu.unlock();
}

void Segment::Impl::fork_child() noexcept {
  remake(worker);
  remake(cv);
  current.reset();
  pending.reset();
  next_value = 0;
  used = 0;
  fetching = false;
  fetch_error.reset();
  mu.unlock();
}

Reply Client::Impl::request(std::size_t index, const std::string& target,
                            Steady::time_point deadline) {
  std::unique_ptr<Connection> conn;
  {
    std::lock_guard lock(pool_mu);
    if (!pool[index].empty()) {
      conn = std::move(pool[index].back());
      pool[index].pop_back();
    }
  }
  if (!conn) conn = std::make_unique<Connection>();
  bool reused = false;
  Reply reply = exchange(*conn, endpoints[index], target, authorization, deadline, reused);
  if (reply.status == 0 && reused && Steady::now() < deadline) {
    // A kept-alive connection the server closed meanwhile: once more on a fresh one.
    reply = exchange(*conn, endpoints[index], target, authorization, deadline, reused);
  }
  if (conn->connected) {
    std::lock_guard lock(pool_mu);
    pool[index].push_back(std::move(conn));
  }
  return reply;
}

Result<std::string> Client::Impl::call(const std::string& target, Steady::time_point deadline,
                                       Steady::time_point* sent) {
  const std::size_t n = endpoints.size();
  std::vector<bool> out(n, false);
  std::optional<Answer> last;
  bool answered = false;  // an HTTP answer came
  const std::size_t first = preferred.load(std::memory_order_relaxed) % n;
  for (int round = 0;; ++round) {
    int round_retry_after = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (first + k) % n;
      if (out[i]) continue;
      if (closed.load())
        return client_failure(StatusCode::kUnavailable, Reason::kShutDown, "the client is closed");
      if (now() >= deadline) break;
      if (sent) *sent = Steady::now();
      Reply reply = request(i, target, deadline);
      Answer a = classify(reply.status, reply.retry_after, reply.body, endpoints[i].url);
      if (a.action == Action::kDone) {
        preferred.store(i, std::memory_order_relaxed);
        return std::move(reply.body);
      }
      answered = answered || reply.status != 0;
      if (a.action == Action::kFatal) return fail(a.error, a.status);
      if (a.action == Action::kFailover) out[i] = true;
      if (a.action == Action::kRetry) {
        round_retry_after = std::max(round_retry_after, a.error.retry_after.value_or(0));
      }
      last = std::move(a);
    }
    if (!answered && now() >= deadline) {
      Status s = client_failure(StatusCode::kDeadlineExceeded, Reason::kNone,
                                "no server answered within the timeout" +
                                    (last ? ": " + last->error.message : std::string()));
      if (last) t_last_error.endpoint = last->error.endpoint;
      return s;
    }
    if (!last) {
      return client_failure(StatusCode::kDeadlineExceeded, Reason::kNone,
                            "the timeout ran out before any request");
    }
    if (std::all_of(out.begin(), out.end(), [](bool b) { return b; })) {
      return fail(last->error, last->status);
    }
    double u = 0;
    if (hooks.random) {
      u = hooks.random();
    } else {
      std::lock_guard lock(random_mu);
      u = uniform(random);
    }
    const auto wait = std::chrono::duration_cast<Steady::duration>(
        std::chrono::duration<double>(retry_wait_seconds(round, round_retry_after, u)));
    if (now() + wait > deadline) return fail(last->error, last->status);
    if (hooks.sleep) {
      hooks.sleep(wait);
      continue;
    }
    std::unique_lock lock(sleep_mu);
    sleep_cv.wait_for(lock, wait, [this] { return closed.load(); });
  }
}

Status Client::Impl::ensure_layout(Steady::time_point deadline) {
  const auto known = [this] {
    std::lock_guard lock(layout_mu);
    return layout.has_value();
  };
  if (known()) return OkStatus();
  std::lock_guard fetching(layout_fetch_mu);
  if (known()) return OkStatus();  // another caller fetched it meanwhile
  Result<std::string> body = call("/v1/layout", deadline);
  if (!body.ok()) return body.status();
  const json doc = json::parse(*body, nullptr, false);
  if (!doc.is_object() || !doc.contains("text") || !doc["text"].is_string() ||
      !doc.contains("max_batch") || !doc["max_batch"].is_number_unsigned()) {
    return client_failure(StatusCode::kUnknown, Reason::kNone,
                          "GET /v1/layout: not a layout: " + body->substr(0, 200));
  }
  Result<Layout> parsed = Layout::parse(doc["text"].get<std::string>());
  if (!parsed.ok()) return parsed.status().with_prefix("GET /v1/layout");
  std::lock_guard lock(layout_mu);
  layout_text = doc["text"].get<std::string>();
  server_max_batch = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(doc["max_batch"].get<std::uint64_t>(), 1u << 24));
  layout = std::move(parsed).value();
  return OkStatus();
}

bool Client::Impl::try_take(std::uint64_t& id, bool& want_refill, bool precise) noexcept {
  const std::uint64_t v = state.fetch_add(1, std::memory_order_acq_rel);
  const std::uint64_t index = v & kIndexMask;
  const std::uint32_t n = count.load(std::memory_order_relaxed);
  if (index >= n) return false;
  const std::int64_t expires = expires_ns.load(std::memory_order_relaxed);
  const std::uint32_t low = low_mark.load(std::memory_order_relaxed);
  const std::uint64_t value = ids[index].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if ((state.load(std::memory_order_relaxed) >> 32) != (v >> 32)) return false;  // recycled
  // Too old (or maybe, by the coarse clock): the slow path decides, and drops the batch.
  if ((precise ? steady_ns() : coarse_ns_upper_bound()) >= expires) return false;
  want_refill = n - index - 1 < low;
  id = value;
  return true;
}

void Client::Impl::close_active() noexcept {
  const std::uint64_t generation = (state.load(std::memory_order_relaxed) >> 32) + 1;
  state.store(generation << 32 | kClosedIndex, std::memory_order_release);
}

void Client::Impl::install_pending_locked() {
  const std::uint64_t generation = (state.load(std::memory_order_relaxed) >> 32) + 1;
  state.store(generation << 32 | kClosedIndex, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(pending.size(), capacity));
  for (std::uint32_t i = 0; i < n; ++i) ids[i].store(pending[i], std::memory_order_relaxed);
  count.store(n, std::memory_order_relaxed);
  low_mark.store(static_cast<std::uint32_t>(options.low_water * n), std::memory_order_relaxed);
  expires_ns.store(pending_expires_ns, std::memory_order_relaxed);
  state.store(generation << 32, std::memory_order_release);
  has_pending = false;
  pending.clear();
  refill_busy.store(refill_running, std::memory_order_relaxed);
}

void Client::Impl::start_refill_locked() {
  if (refill_running || has_pending || closed.load()) return;
  refill_running = true;
  refill_requested = true;
  refill_busy.store(true, std::memory_order_relaxed);
  if (!refiller.joinable()) refiller = std::thread([this] { refill_loop(); });
  refill_cv.notify_one();
}

void Client::Impl::refill_loop() {
  std::unique_lock lock(mu);
  for (;;) {
    refill_cv.wait(lock, [this] { return refill_requested || closed.load(); });
    if (closed.load()) return;
    refill_requested = false;
    const bool expired = expired_since_refill;
    expired_since_refill = false;
    lock.unlock();
    const Steady::time_point deadline = now() + options.timeout;
    Steady::time_point sent = Steady::now();  // when the answering request went out
    Status status = ensure_layout(deadline);
    Result<std::string> body = status.ok() ? Result<std::string>(std::string()) : status;
    std::uint32_t size = 0;
    if (status.ok()) {
      std::lock_guard guard(mu);
      if (!sizer) {
        sizer.emplace(options.min_batch, options.max_batch, server_max_batch);
        capacity = sizer->largest();
        ids = std::make_unique<std::atomic<std::uint64_t>[]>(capacity);
      }
      size = first_refill ? sizer->first() : expired ? sizer->expired() : sizer->low();
      first_refill = false;
    }
    if (status.ok())
      body = call("/v1/ids?count=" + std::to_string(size) + "&format=text", deadline, &sent);
    std::vector<std::uint64_t> fetched;
    std::optional<std::pair<Status, ClientError>> error;
    if (!body.ok()) {
      error.emplace(body.status(), t_last_error);
    } else if (!parse_text_ids(*body, fetched) || fetched.empty()) {
      Status s = client_failure(StatusCode::kUnknown, Reason::kNone,
                                "GET /v1/ids: not a list of IDs: " + body->substr(0, 200));
      error.emplace(std::move(s), t_last_error);
    }
    lock.lock();
    refill_running = false;
    if (error) {
      refill_error = std::move(error);
      refill_busy.store(has_pending, std::memory_order_relaxed);
    } else {
      refill_error.reset();
      pending = std::move(fetched);
      pending_expires_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(sent.time_since_epoch()).count() +
          options.max_age.count();
      has_pending = true;
    }
    ++refill_seq;
    cv.notify_all();
  }
}

Result<std::uint64_t> Client::Impl::next_slow(Steady::time_point deadline) {
  std::unique_lock lock(mu);
  for (;;) {
    if (closed.load()) {
      return client_failure(StatusCode::kUnavailable, Reason::kShutDown, "the client is closed");
    }
    std::uint64_t id = 0;
    bool want_refill = false;
    if (try_take(id, want_refill, /*precise=*/true)) {
      if (want_refill) start_refill_locked();
      return id;
    }
    // The active batch is used up or too old.
    const std::uint64_t v = state.load(std::memory_order_relaxed);
    if ((v & kIndexMask) < count.load(std::memory_order_relaxed)) expired_since_refill = true;
    close_active();
    if (has_pending) {
      if (steady_ns() < pending_expires_ns) {
        install_pending_locked();
      } else {
        has_pending = false;
        pending.clear();
        expired_since_refill = true;
        refill_busy.store(refill_running, std::memory_order_relaxed);
      }
      continue;
    }
    start_refill_locked();
    const std::uint64_t seq = refill_seq;
    if (!cv.wait_until(lock, deadline, [&] { return refill_seq != seq || closed.load(); })) {
      return client_failure(StatusCode::kDeadlineExceeded, Reason::kNone,
                            "no IDs within the timeout (a refill is still running)");
    }
    if (refill_error && !has_pending) {
      t_last_error = refill_error->second;
      return refill_error->first;
    }
  }
}

void Client::Impl::shutdown() {
  if (closed.exchange(true)) return;
  {
    std::lock_guard lock(mu);
    close_active();
    cv.notify_all();
    refill_cv.notify_all();
  }
  {
    std::lock_guard lock(sleep_mu);
    sleep_cv.notify_all();
  }
  if (refiller.joinable()) refiller.join();
  // The handles live as long as the client; segments_mu is not held while a worker is joined
  // (a fork's prepare handler takes it).
  std::vector<Segment::Impl*> handles;
  {
    std::lock_guard lock(segments_mu);
    for (auto& [tag, segment] : segments) handles.push_back(segment->impl_.get());
  }
  for (Segment::Impl* segment : handles) {
    {
      std::lock_guard guard(segment->mu);
      segment->cv.notify_all();
    }
    if (segment->worker.joinable()) segment->worker.join();
  }
}

void Segment::Impl::start_fetch_locked() {
  if (fetching || pending || client->closed.load()) return;
  fetching = true;
  if (worker.joinable()) worker.join();  // finished: it cleared `fetching` before returning
  worker = std::thread([this] {
    const auto deadline = client->now() + client->options.timeout;
    Result<std::string> body = client->call(
        "/v1/segments/" + tag + "/range?size=" + std::to_string(client->options.segment_range),
        deadline);
    std::optional<Range> range;
    std::optional<std::pair<Status, ClientError>> error;
    if (body.ok()) {
      const json doc = json::parse(*body, nullptr, false);
      const auto number = [&doc](const char* key) -> std::optional<std::uint64_t> {
        if (!doc.is_object() || !doc.contains(key)) return std::nullopt;
        const json& v = doc[key];
        if (v.is_number_unsigned()) return v.get<std::uint64_t>();
        if (!v.is_string()) return std::nullopt;
        std::uint64_t out = 0;
        const std::string& s = v.get_ref<const std::string&>();
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
        if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
        return out;
      };
      const auto start = number("start"), end = number("end"), delta = number("delta");
      if (start && end && delta && *delta > 0 && *end > *start) {
        range = Range{*start, *end, *delta};
      } else {
        Status s = client_failure(
            StatusCode::kUnknown, Reason::kNone,
            "GET /v1/segments/" + tag + "/range: not a range: " + body->substr(0, 200));
        error.emplace(std::move(s), t_last_error);
      }
    } else {
      error.emplace(body.status(), t_last_error);
    }
    std::lock_guard lock(mu);
    fetching = false;
    pending = range;
    fetch_error = std::move(error);
    ++fetch_seq;
    cv.notify_all();
  });
}

Result<std::uint64_t> Segment::Impl::next() {
  const auto deadline = client->now() + client->options.timeout;
  std::unique_lock lock(mu);
  for (;;) {
    if (client->closed.load()) {
      return client_failure(StatusCode::kUnavailable, Reason::kShutDown, "the client is closed");
    }
    if (current && next_value < current->end) {
      const std::uint64_t value = next_value;
      next_value += current->delta;
      ++used;
      const std::uint64_t size = (current->end - current->start) / current->delta;
      if (static_cast<double>(used) >=
          client->options.segment_prefetch * static_cast<double>(size)) {
        start_fetch_locked();
      }
      return value;
    }
    if (pending) {
      current = pending;
      pending.reset();
      next_value = current->start;
      used = 0;
      continue;
    }
    start_fetch_locked();
    const std::uint64_t seq = fetch_seq;
    if (!cv.wait_until(lock, deadline, [&] { return fetch_seq != seq || client->closed.load(); })) {
      return client_failure(StatusCode::kDeadlineExceeded, Reason::kNone,
                            "no segment range within the timeout");
    }
    if (fetch_error && !pending) {
      t_last_error = fetch_error->second;
      return fetch_error->first;
    }
  }
}

Segment::Segment(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Segment::~Segment() {
  if (impl_ && impl_->worker.joinable()) impl_->worker.join();
}
Result<std::uint64_t> Segment::next() {
  return impl_->next();
}
const std::string& Segment::tag() const noexcept {
  return impl_->tag;
}

Result<std::unique_ptr<Client>> Client::open(ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  if (Status s = validate(options, impl->endpoints); !s.ok()) return s;
  impl->options = std::move(options);
  if (!impl->options.token.empty()) impl->authorization = "Bearer " + impl->options.token;
  impl->pool.resize(impl->endpoints.size());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

void ClientTestAccess::set_hooks(Client& client, TestHooks hooks) {
  client.impl_->hooks = std::move(hooks);
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  close();
}

void Client::close() {
  impl_->shutdown();
}

Result<std::uint64_t> Client::next() {
  std::uint64_t id = 0;
  bool want_refill = false;
  if (impl_->try_take(id, want_refill, /*precise=*/false)) [[likely]] {
    if (want_refill && !impl_->refill_busy.load(std::memory_order_relaxed)) [[unlikely]] {
      std::lock_guard lock(impl_->mu);
      impl_->start_refill_locked();
    }
    return id;
  }
  return impl_->next_slow(Steady::now() + impl_->options.timeout);
}

Result<std::vector<std::uint64_t>> Client::next(std::size_t n) {
  const auto deadline = impl_->now() + impl_->options.timeout;
  if (Status s = impl_->ensure_layout(deadline); !s.ok()) return s;
  if (n < 1 || n > impl_->server_max_batch) {
    return client_failure(StatusCode::kInvalidArgument, Reason::kBadInput,
                          "next(n): n = " + std::to_string(n) + " is not in 1.." +
                              std::to_string(impl_->server_max_batch));
  }
  // From the buffer when it holds n fresh IDs.
  std::uint64_t v = impl_->state.load(std::memory_order_acquire);
  for (;;) {
    const std::uint64_t index = v & kIndexMask;
    if (index + n > impl_->count.load(std::memory_order_relaxed) ||
        steady_ns() >= impl_->expires_ns.load(std::memory_order_relaxed)) {
      break;
    }
    if (impl_->state.compare_exchange_weak(v, v + n, std::memory_order_acq_rel)) {
      std::vector<std::uint64_t> out(n);
      for (std::size_t i = 0; i < n; ++i) {
        out[i] = impl_->ids[index + i].load(std::memory_order_relaxed);
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      if ((impl_->state.load(std::memory_order_relaxed) >> 32) == (v >> 32)) return out;
      break;  // recycled meanwhile: those IDs are dropped
    }
  }
  Result<std::string> body =
      impl_->call("/v1/ids?count=" + std::to_string(n) + "&format=text", deadline);
  if (!body.ok()) return body.status();
  std::vector<std::uint64_t> out;
  if (!parse_text_ids(*body, out) || out.size() != n) {
    return client_failure(StatusCode::kUnknown, Reason::kNone,
                          "GET /v1/ids: not a list of " + std::to_string(n) + " IDs");
  }
  return out;
}

Segment& Client::segment(std::string_view tag) {
  std::lock_guard lock(impl_->segments_mu);
  auto it = impl_->segments.find(tag);
  if (it == impl_->segments.end()) {
    auto impl = std::make_unique<Segment::Impl>();
    impl->client = impl_.get();
    impl->tag = std::string(tag);
    it = impl_->segments
             .emplace(std::string(tag), std::unique_ptr<Segment>(new Segment(std::move(impl))))
             .first;
  }
  return *it->second;
}

Result<DecodedId> Client::decode(std::uint64_t id) {
  if (Status s = impl_->ensure_layout(impl_->now() + impl_->options.timeout); !s.ok()) return s;
  Result<DecodedId> d = decode_id(*impl_->layout, id);
  if (!d.ok()) return client_failure(d.status().code(), d.status().reason(), d.status().message());
  return d;
}

Result<DecodedId> Client::decode(std::string_view text) {
  if (Status s = impl_->ensure_layout(impl_->now() + impl_->options.timeout); !s.ok()) return s;
  Result<DecodedId> d = decode_id(*impl_->layout, text, Encoding::kDecimal);
  if (!d.ok()) return client_failure(d.status().code(), d.status().reason(), d.status().message());
  return d;
}

Result<std::string> Client::decode_order(std::string_view code) {
  std::string target = "/v1/order-numbers/";
  for (char c : code) {
    const bool plain = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                       c == '-' || c == '_' || c == '.' || c == '~';
    if (plain) {
      target += c;
    } else {
      constexpr char kHex[] = "0123456789ABCDEF";
      const auto byte = static_cast<unsigned char>(c);
      target += '%';
      target += kHex[byte >> 4];
      target += kHex[byte & 15];
    }
  }
  return impl_->call(target, impl_->now() + impl_->options.timeout);
}

Result<std::string> Client::layout_text() {
  if (Status s = impl_->ensure_layout(impl_->now() + impl_->options.timeout); !s.ok()) return s;
  return impl_->layout_text;
}

}  // namespace flurry

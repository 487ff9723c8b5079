#include "tls/http_client.h"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/host_port.h"

namespace flurry::tls {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// As the TLS module's client (tls/client.h): how long and how many idle connections are kept.
constexpr std::chrono::seconds kIdleConnectionLifetime{10};
constexpr std::size_t kIdleConnectionsPerPeer = 2;

// How a connection the server closed (after its idle timeout) fails: an orderly end or a reset.
bool closed_by_peer(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

}  // namespace

// One plain connection with the io_context that runs its operations (kept while idle, so it
// cannot share the io_context of an exchange).
struct HttpClient::Connection {
  // Declared first, destroyed last: handlers left pending at a timeout are destroyed with it.
  asio::io_context ioc{1};
  beast::tcp_stream stream{ioc};
  Clock::time_point idle_since;

  // Whether an idle connection has nothing to read, as it should: a server sends nothing unasked
  // in HTTP/1.1, so anything there is its close (the end of the stream, a reset).
  bool quiet() {
    char byte = 0;
    const ssize_t peeked =
        ::recv(stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
};

HttpClient::HttpClient(std::shared_ptr<ClientContext> tls) : tls_(std::move(tls)) {}

HttpClient::~HttpClient() = default;

Result<HttpResponse> HttpClient::exchange(const HttpPeer& peer, const HttpRequest& request,
                                          std::chrono::milliseconds timeout, std::size_t body_limit,
                                          const std::string& where) {
  if (peer.https) {
    if (tls_ == nullptr) {
      return Status(StatusCode::kFailedPrecondition, where + ": https:// without a TLS context");
    }
    return tls_->exchange(peer.host, peer.port, request, timeout, body_limit, where);
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  const std::string key = HostPort{peer.host, peer.port}.to_string();
  Result<HttpResponse> out = Status(StatusCode::kInternal, where + ": no exchange");
  std::unique_ptr<Connection> idle = take_idle(key);
  // One the server has closed (or written to) meanwhile is not worth a try: a new connection.
  while (idle != nullptr && !idle->quiet()) idle = take_idle(key);
  if (idle != nullptr) {
    const Outcome outcome = attempt(std::move(idle), /*fresh=*/false, peer, key, request, deadline,
                                    timeout, body_limit, where, out);
    // Ended before any answer (the server's keep-alive timeout crossed the request): sent again
    // once, on a new connection.
    if (outcome != Outcome::kClosedBeforeAnswer) return out;
  }
  attempt(std::make_unique<Connection>(), /*fresh=*/true, peer, key, request, deadline, timeout,
          body_limit, where, out);
  return out;
}

HttpClient::Outcome HttpClient::attempt(std::unique_ptr<Connection> connection, bool fresh,
                                        const HttpPeer& peer, const std::string& key,
                                        const HttpRequest& request, Clock::time_point deadline,
                                        std::chrono::milliseconds timeout, std::size_t body_limit,
                                        const std::string& where, Result<HttpResponse>& out) {
  asio::io_context& ioc = connection->ioc;
  ioc.restart();
  beast::tcp_stream& stream = connection->stream;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(body_limit);
  // A body of known length is read straight into one string sized from Content-Length, in reads
  // as large as the socket has data for (the parser would size each read from the flat buffer's
  // spare capacity: under 1 KB after the header, ~480 reads for a refill's 330 KB).
  std::string body;
  bool body_read = false;

  bool done = false;
  beast::error_code failure;
  std::string_view stage = fresh ? "resolving the host" : "sending the request";
  const auto fail = [&](beast::error_code ec) {
    failure = ec;
    done = true;
  };
  const Clock::duration remaining = deadline - Clock::now();
  // The stream's timer covers connect, write and read; run_for() the name resolution too.
  stream.expires_after(remaining);
  const auto read_body = [&] {
    const auto length = parser.content_length();
    if (!length || *length > body_limit) {
      http::async_read(stream, buffer, parser, [&](beast::error_code ec, std::size_t) {
        if (ec) return fail(ec);
        done = true;
      });
      return;
    }
    body.resize(static_cast<std::size_t>(*length));
    const std::size_t have = std::min(buffer.size(), body.size());
    asio::buffer_copy(asio::buffer(body), buffer.data(), have);
    buffer.consume(have);
    const std::size_t want = body.size() - have;
    asio::async_read(
        stream, asio::buffer(body.data() + have, want),
        [want](beast::error_code ec, std::size_t got) -> std::size_t {
          return ec || got >= want ? 0 : want - got;
        },
        [&](beast::error_code ec, std::size_t) {
          if (ec) return fail(ec);
          body_read = true;
          done = true;
        });
  };
  const auto send = [&] {
    stage = "sending the request";
    http::async_write(stream, request, [&](beast::error_code ec, std::size_t) {
      if (ec) return fail(ec);
      stage = "waiting for the answer";
      http::async_read_header(stream, buffer, parser, [&](beast::error_code ec, std::size_t) {
        if (ec) return fail(ec);
        if (parser.is_done()) {
          done = true;
          return;
        }
        read_body();
      });
    });
  };
  tcp::resolver resolver(ioc);
  if (!fresh) {
    send();
  } else {
    resolver.async_resolve(peer.host, std::to_string(peer.port), tcp::resolver::numeric_service,
                           [&](beast::error_code ec, const tcp::resolver::results_type& results) {
                             if (ec) return fail(ec);
                             stage = "connecting";
                             stream.async_connect(
                                 results, [&](beast::error_code ec, const tcp::endpoint&) {
                                   if (ec) return fail(ec);
                                   // A request and its answer are small and sent at once: no wait
                                   // for delayed ACKs.
                                   beast::error_code ignored;
                                   stream.socket().set_option(tcp::no_delay(true), ignored);
                                   send();
                                 });
                           });
  }
  if (remaining > Clock::duration::zero()) ioc.run_for(remaining);

  if (!fresh && done && failure && failure != beast::error::timeout &&
      (stage == "sending the request" ||
       (closed_by_peer(failure) && !parser.got_some() && buffer.size() == 0))) {
    return Outcome::kClosedBeforeAnswer;
  }
  if (!done || failure) forget_peer(key);
  if (!done || failure == beast::error::timeout) {
    out = Status(Reason::kIo, where + ": no answer within " + std::to_string(timeout.count()) +
                                  " ms (while " + std::string(stage) + ")");
    return Outcome::kFailed;
  }
  if (failure) {
    out = Status(Reason::kIo, where + ": " + std::string(stage) + ": " + failure.message());
    return Outcome::kFailed;
  }
  // Kept when both sides allow it and nothing is left unread.
  const bool reusable = request.keep_alive() && parser.keep_alive() && buffer.size() == 0;
  HttpResponse response = parser.release();
  if (body_read) response.body() = std::move(body);
  out = std::move(response);
  if (reusable) {
    put_idle(key, std::move(connection));
  } else {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }
  return Outcome::kAnswered;
}

std::unique_ptr<HttpClient::Connection> HttpClient::take_idle(const std::string& key) {
  std::vector<std::unique_ptr<Connection>> expired;  // closed outside the lock
  MutexLock lock(mu_);
  const Clock::time_point now = Clock::now();
  for (auto it = idle_.begin(); it != idle_.end();) {
    std::deque<std::unique_ptr<Connection>>& connections = it->second;  // oldest first
    while (!connections.empty() &&
           now - connections.front()->idle_since >= kIdleConnectionLifetime) {
      expired.push_back(std::move(connections.front()));
      connections.pop_front();
    }
    it = connections.empty() ? idle_.erase(it) : std::next(it);
  }
  const auto it = idle_.find(key);
  if (it == idle_.end()) return nullptr;
  std::unique_ptr<Connection> taken = std::move(it->second.back());
  it->second.pop_back();
  if (it->second.empty()) idle_.erase(it);
  return taken;
}

void HttpClient::put_idle(const std::string& key, std::unique_ptr<Connection> connection) {
  connection->idle_since = Clock::now();
  std::unique_ptr<Connection> oldest;  // closed outside the lock
  MutexLock lock(mu_);
  std::deque<std::unique_ptr<Connection>>& connections = idle_[key];
  connections.push_back(std::move(connection));
  if (connections.size() > kIdleConnectionsPerPeer) {
    oldest = std::move(connections.front());
    connections.pop_front();
  }
}

void HttpClient::forget_peer(const std::string& key) {
  std::deque<std::unique_ptr<Connection>> closed;  // closed outside the lock
  MutexLock lock(mu_);
  const auto it = idle_.find(key);
  if (it == idle_.end()) return;
  closed = std::move(it->second);
  idle_.erase(it);
}

}  // namespace flurry::tls

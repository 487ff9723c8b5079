// flurry's one HTTP/1.1 client exchange, for every HTTP client in the tree: the etcd registry
// (registry/etcd_client.cc), the command-line tool (apps/flurry/http_client.cc) and the C++
// client library (clients/cpp). Plain http:// here; https:// through a ClientContext
// (tls/client.h), whose OpenSSL lives in the module flurry_tls.so, loaded by
// make_client_context() and not before: an HttpClient without TLS maps no OpenSSL.
//
// Both kinds behave alike (ClientContext's contract): one request and its answer with one
// deadline for all of it (name resolution, connect, TLS handshake, write, read); errors name
// `where` and the stage; any HTTP status is a success here (the caller reads it); no redirect is
// followed. A connection is kept for the next exchange with the same peer when neither the
// request nor the answer says "Connection: close" (at most 2 idle per host:port, each for at most
// 10 s); a kept connection the server closed meanwhile is not used, and a request whose kept
// connection turns out closed before any byte of the answer is sent again once on a new one,
// within the same deadline (tls/client.h says why that is safe). A request with keep_alive(false)
// may go on a kept connection too, which is closed after its answer.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "flurry/mutex.h"
#include "flurry/status.h"
#include "tls/client.h"
#include "tls/http_message.h"

namespace flurry::tls {

// Where an exchange goes: the scheme, and the host (a name or an address, IPv6 without brackets)
// and port.
struct HttpPeer {
  bool https = false;
  std::string host;
  std::uint16_t port = 0;
};

// Thread-safe: exchanges may run from any number of threads at once (each on its own connection;
// only the idle-connection pool is shared, under a mutex).
class HttpClient {
 public:
  // `tls`: the context of https:// peers (make_client_context); null: plain HTTP only, and an
  // https:// exchange fails with FAILED_PRECONDITION.
  explicit HttpClient(std::shared_ptr<ClientContext> tls = nullptr);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` (as given: set Host and prepare the payload first) to `peer` and reads the
  // answer, whose body may hold at most `body_limit` bytes. UNAVAILABLE (IO) when the peer
  // cannot be reached, the exchange fails or takes longer than `timeout`:
  // "<where>: no answer within N ms (while connecting)", "<where>: sending the request: <error>";
  // over TLS also the handshake's reasons (ClientContext::exchange).
  [[nodiscard]] Result<HttpResponse> exchange(const HttpPeer& peer, const HttpRequest& request,
                                              std::chrono::milliseconds timeout,
                                              std::size_t body_limit, const std::string& where);

  // fork(): a process that forks while other threads may use this client takes the pool's lock
  // in its prepare handler (lock_for_fork) and releases it in the parent's and the child's
  // (unlock_after_fork), so that the child's copy of the pool is consistent and not locked by a
  // thread the child does not have; the child may then destroy its copy.
  void lock_for_fork() FLURRY_ACQUIRE(mu_) { mu_.lock(); }
  void unlock_after_fork() FLURRY_RELEASE(mu_) { mu_.unlock(); }

  // The TLS context (null without one).
  [[nodiscard]] const std::shared_ptr<ClientContext>& tls() const noexcept { return tls_; }

 private:
  struct Connection;
  enum class Outcome { kAnswered, kFailed, kClosedBeforeAnswer };
  Outcome attempt(std::unique_ptr<Connection> connection, bool fresh, const HttpPeer& peer,
                  const std::string& key, const HttpRequest& request,
                  std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds timeout,
                  std::size_t body_limit, const std::string& where, Result<HttpResponse>& out);
  std::unique_ptr<Connection> take_idle(const std::string& key) FLURRY_EXCLUDES(mu_);
  void put_idle(const std::string& key, std::unique_ptr<Connection> connection)
      FLURRY_EXCLUDES(mu_);
  void forget_peer(const std::string& key) FLURRY_EXCLUDES(mu_);

  const std::shared_ptr<ClientContext> tls_;
  Mutex mu_;
  // host:port -> its idle plain connections, oldest first (at most 2)
  std::map<std::string, std::deque<std::unique_ptr<Connection>>> idle_ FLURRY_GUARDED_BY(mu_);
};

}  // namespace flurry::tls

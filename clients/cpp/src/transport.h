// The C++ client's transport: GET with the contract's retries and failover over the endpoints
// (docs/clients.md, "Errors and retries"), each request through flurry's one HTTP/1.1 client
// exchange (tls/http_client.h: keep-alive connections, http:// or https:// through the TLS
// module).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "flurry/client.h"
#include "flurry/mutex.h"
#include "settings.h"
#include "tls/client.h"
#include "tls/http_client.h"

namespace flurry::client_internal {

using Steady = std::chrono::steady_clock;

// Fakes for the retry loop (Transport::get): its clock, its sleep between rounds and its jitter
// draw u in [0, 1). Empty members keep the real ones.
struct TestHooks {
  std::function<Steady::time_point()> now;
  std::function<void(Steady::duration)> sleep;
  std::function<double()> random;
};

// Thread-safe: get() may run from any number of threads at once; close() from any thread.
class Transport {
 public:
  // `tls`: the context of the https:// endpoints (null when there is none).
  Transport(Settings settings, std::string token, std::shared_ptr<tls::ClientContext> tls);

  // GET `target` with the contract's retries and failover until `deadline`. `sent`, when given,
  // receives the time the request that succeeded was sent (the steady clock). `token`, when
  // given, replaces the client's token for this call. CANCELLED once closed (also a call
  // sleeping between rounds, at once).
  // `location`, when given, makes a 307 with a Location end the call: its typed error
  // (NOT_LEADER) is returned and *location receives the header (Client::tso follows it).
  [[nodiscard]] ClientResult<std::string> get(const std::string& target,
                                              Steady::time_point deadline,
                                              Steady::time_point* sent = nullptr,
                                              const std::optional<std::string>& token = {},
                                              std::string* location = nullptr);

  // One answer of one GET (status 0: no HTTP answer; `body` then says what failed).
  struct Reply {
    int status = 0;
    std::optional<std::string> retry_after;
    std::optional<std::string> location;
    std::string body;
  };
  // One GET of `target` to `endpoint` (a timestamp oracle leader, not one of the endpoints) with
  // the client's token, no retries, until `deadline`. CANCELLED once closed.
  [[nodiscard]] ClientResult<Reply> get_once(const Endpoint& endpoint, const std::string& target,
                                             Steady::time_point deadline);

  // Waits the time between retry rounds after `round` failed rounds (jitter included), unless it
  // would end after `deadline`: then false at once. close() ends the wait (then true).
  [[nodiscard]] bool wait_round(int round, Steady::time_point deadline) FLURRY_EXCLUDES(sleep_mu_);

  // Every later get() fails with CANCELLED; a get() waiting between rounds wakes now.
  void close() FLURRY_EXCLUDES(sleep_mu_);
  [[nodiscard]] bool closed() const noexcept { return closed_.load(); }

  // The hooks' clock, or the steady clock.
  [[nodiscard]] Steady::time_point now() const { return hooks_.now ? hooks_.now() : Steady::now(); }
  // Before the first call only.
  void set_hooks(TestHooks hooks) { hooks_ = std::move(hooks); }

  // fork() (docs/clients.md, "Fork"), called by the client's handlers: prepare takes the locks
  // that guard data, parent releases them, child makes the exchange (and its idle connections,
  // its TLS context) anew at the next request, gets its own jitter, and releases them.
  void fork_prepare() noexcept FLURRY_NO_THREAD_SAFETY_ANALYSIS;
  void fork_parent() noexcept FLURRY_NO_THREAD_SAFETY_ANALYSIS;
  void fork_child() noexcept FLURRY_NO_THREAD_SAFETY_ANALYSIS;

 private:
  Reply request(const Endpoint& endpoint, const std::string& target, Steady::time_point deadline,
                const std::string& authorization);
  // The exchange, made at the first request (again after a fork).
  [[nodiscard]] std::shared_ptr<tls::HttpClient> http() FLURRY_EXCLUDES(http_mu_);
  [[nodiscard]] double jitter() FLURRY_EXCLUDES(random_mu_);

  const Settings settings_;
  const std::string authorization_;  // "Bearer <token>", or empty
  std::atomic<std::size_t> preferred_{0};
  std::atomic<bool> closed_{false};
  TestHooks hooks_;

  Mutex http_mu_;
  std::shared_ptr<tls::ClientContext> tls_ FLURRY_GUARDED_BY(http_mu_);
  std::shared_ptr<tls::HttpClient> http_ FLURRY_GUARDED_BY(http_mu_);

  // Jitter source.
  Mutex random_mu_;
  std::mt19937_64 random_ FLURRY_GUARDED_BY(random_mu_){std::random_device{}()};
  std::uniform_real_distribution<double> uniform_ FLURRY_GUARDED_BY(random_mu_){0.0, 1.0};
  // The sleep between rounds, woken by close(). It guards no data: only the wake-up.
  Mutex sleep_mu_;
  std::condition_variable sleep_cv_;
};

}  // namespace flurry::client_internal

#include "transport.h"

#include <unistd.h>

#include <algorithm>
#include <boost/beast/http.hpp>
#include <new>
#include <utility>
#include <vector>

#include "errors.h"
#include "flurry/host_port.h"

namespace flurry::client_internal {

namespace http = boost::beast::http;

namespace {

// Largest answer taken: a refill of 16M IDs is ~330 MB, far beyond any max_batch a server allows;
// a bound against a runaway peer.
constexpr std::size_t kMaxBody = std::size_t{64} << 20;

}  // namespace

Transport::Transport(Settings settings, std::string token, std::shared_ptr<tls::ClientContext> tls)
    : settings_(std::move(settings)),
      authorization_(token.empty() ? std::string() : "Bearer " + token),
      tls_(std::move(tls)) {}

std::shared_ptr<tls::HttpClient> Transport::http() {
  MutexLock lock(http_mu_);
  if (http_ == nullptr) {
    // After a fork the child's copy of the TLS context is left alone (a thread it does not have
    // may have held its locks): a new one from the same files, the module being loaded already.
    if (tls_ == nullptr && settings_.tls) {
      Result<std::shared_ptr<tls::ClientContext>> made = tls::make_client_context(*settings_.tls);
      if (made.ok()) tls_ = std::move(made).value();
    }
    http_ = std::make_shared<tls::HttpClient>(tls_);
  }
  return http_;
}

double Transport::jitter() {
  if (hooks_.random) return hooks_.random();
  MutexLock lock(random_mu_);
  return uniform_(random_);
}

Transport::Reply Transport::request(const Endpoint& endpoint, const std::string& target,
                                    Steady::time_point deadline, const std::string& authorization) {
  http::request<http::string_body> req{http::verb::get, target, 11};
  req.set(http::field::host, HostPort{endpoint.peer.host, endpoint.peer.port}.to_string());
  req.keep_alive(true);
  if (!authorization.empty()) req.set(http::field::authorization, authorization);
  // The exchange's deadline in whole milliseconds, rounded up (at least 1).
  const auto timeout = std::max(std::chrono::ceil<std::chrono::milliseconds>(deadline - now()),
                                std::chrono::milliseconds(1));
  Result<tls::HttpResponse> answer =
      http()->exchange(endpoint.peer, req, timeout, kMaxBody, endpoint.url);
  Reply reply;
  if (!answer.ok()) {
    reply.body = answer.status().message();
    return reply;
  }
  reply.status = static_cast<int>(answer->result_int());
  if (auto it = answer->find(http::field::retry_after); it != answer->end()) {
    reply.retry_after = std::string(it->value());
  }
  if (auto it = answer->find(http::field::location); it != answer->end()) {
    reply.location = std::string(it->value());
  }
  reply.body = std::move(answer->body());
  return reply;
}

ClientResult<std::string> Transport::get(const std::string& target, Steady::time_point deadline,
                                         Steady::time_point* sent,
                                         const std::optional<std::string>& token,
                                         std::string* location) {
  const std::string authorization =
      token ? (token->empty() ? std::string() : "Bearer " + *token) : authorization_;
  const std::size_t n = settings_.endpoints.size();
  std::vector<bool> out(n, false);
  std::optional<Answer> last;
  bool answered = false;  // an HTTP answer came
  const std::size_t first = preferred_.load(std::memory_order_relaxed) % n;
  for (int round = 0;; ++round) {
    int round_retry_after = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (first + k) % n;
      if (out[i]) continue;
      if (closed()) return closed_error();
      if (now() >= deadline) break;
      if (sent) *sent = Steady::now();
      Reply reply = request(settings_.endpoints[i], target, deadline, authorization);
      Answer a = classify(reply.status, reply.retry_after, reply.body, settings_.endpoints[i].url);
      if (a.action == Action::kDone) {
        preferred_.store(i, std::memory_order_relaxed);
        return std::move(reply.body);
      }
      if (closed()) return closed_error();
      if (location != nullptr && reply.status == 307 && reply.location) {
        preferred_.store(i, std::memory_order_relaxed);
        *location = std::move(*reply.location);
        return std::move(a.error);
      }
      answered = answered || reply.status != 0;
      if (a.action == Action::kFatal) return std::move(a.error);
      if (a.action == Action::kFailover) out[i] = true;
      if (a.action == Action::kRetry) {
        round_retry_after = std::max(round_retry_after, a.error.retry_after.value_or(0));
      }
      last = std::move(a);
    }
    if (!answered && now() >= deadline) {
      ClientError e = client_error(Status(StatusCode::kDeadlineExceeded,
                                          "no server answered within the timeout" +
                                              (last ? ": " + last->error.message : std::string())),
                                   last ? last->error.endpoint : std::string());
      return e;
    }
    if (!last) {
      return client_error(
          Status(StatusCode::kDeadlineExceeded, "the timeout ran out before any request"));
    }
    if (std::all_of(out.begin(), out.end(), [](bool b) { return b; })) {
      return std::move(last->error);
    }
    const auto wait = std::chrono::duration_cast<Steady::duration>(
        std::chrono::duration<double>(retry_wait_seconds(round, round_retry_after, jitter())));
    if (now() + wait > deadline) return std::move(last->error);
    if (hooks_.sleep) {
      hooks_.sleep(wait);
      continue;
    }
    MutexLock lock(sleep_mu_);
    lock.wait_for(sleep_cv_, wait, [this] { return closed(); });
  }
}

ClientResult<Transport::Reply> Transport::get_once(const Endpoint& endpoint,
                                                   const std::string& target,
                                                   Steady::time_point deadline) {
  if (closed()) return closed_error();
  Reply reply = request(endpoint, target, deadline, authorization_);
  if (closed()) return closed_error();  // what came back is dropped, never handed out
  return reply;
}

bool Transport::wait_round(int round, Steady::time_point deadline) {
  const auto wait = std::chrono::duration_cast<Steady::duration>(
      std::chrono::duration<double>(retry_wait_seconds(round, 0, jitter())));
  if (now() + wait > deadline) return false;
  if (hooks_.sleep) {
    hooks_.sleep(wait);
    return true;
  }
  MutexLock lock(sleep_mu_);
  lock.wait_for(sleep_cv_, wait, [this] { return closed(); });
  return true;
}

void Transport::close() {
  closed_.store(true);
  MutexLock lock(sleep_mu_);
  sleep_cv_.notify_all();
}

void Transport::fork_prepare() noexcept {
  http_mu_.lock();
  if (http_ != nullptr) http_->lock_for_fork();
  random_mu_.lock();
}

void Transport::fork_parent() noexcept {
  random_mu_.unlock();
  if (http_ != nullptr) http_->unlock_after_fork();
  http_mu_.unlock();
}

void Transport::fork_child() noexcept {
  // The child has only the thread that called fork(): a thread sleeping between rounds is gone,
  // with the sleep lock if it held it. The copies of the exchange (its idle connections) and of
  // the TLS context are left as they are, not destroyed: a thread the child does not have may
  // have held their locks, and an idle connection's io_context waits, when destroyed, for its
  // resolver thread, which the child does not have either. Their descriptors stay open in the
  // child (the parent's connections are not shut down by that). The next request makes both anew.
  ::new (static_cast<void*>(&sleep_mu_)) Mutex();
  ::new (static_cast<void*>(&sleep_cv_)) std::condition_variable();
  if (http_ != nullptr) http_->unlock_after_fork();
  ::new (static_cast<void*>(&http_)) std::shared_ptr<tls::HttpClient>();
  if (settings_.tls) ::new (static_cast<void*>(&tls_)) std::shared_ptr<tls::ClientContext>();
  // The child's retries get their own jitter, not the parent's sequence.
  try {
    random_.seed(std::random_device{}());
  } catch (...) {  // no entropy source: the parent's stream, moved by the child's PID
    random_.seed(random_() ^ static_cast<std::uint64_t>(getpid()));
  }
  random_mu_.unlock();
  http_mu_.unlock();
}

}  // namespace flurry::client_internal

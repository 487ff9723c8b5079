// Client::tso(): timestamps from the cluster's timestamp oracle (GET /v1/tso) with PD's batching
// rule (docs/clients.md, "Timestamps"): one request in flight per client; a caller that arrives
// while one is in flight waits for the next request, which carries every caller waiting then. The
// request is sent by one of its callers (no thread of the client's own); nothing is prefetched.
#include <charconv>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "client_impl.h"
#include "errors.h"
#include "tso_answer.h"

namespace flurry {

using client_internal::Steady;
using json = nlohmann::json;

namespace {

// Redirects one request follows before it gives up with the last answer's error (a leader
// change in the middle of a call takes one or two).
constexpr int kMaxRedirects = 4;

}  // namespace

namespace client_internal {

std::optional<Endpoint> tso_leader_of(std::string_view location) {
  const std::size_t scheme_end = location.find("://");
  if (scheme_end == std::string_view::npos) return std::nullopt;
  const std::size_t end = location.find_first_of("/?#", scheme_end + 3);
  Result<Endpoint> e = parse_endpoint(location.substr(0, end));
  if (!e.ok()) return std::nullopt;
  return std::move(e).value();
}

ClientResult<std::uint64_t> parse_tso_grant(const std::string& body, std::uint64_t count,
                                            const std::string& endpoint) {
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_object() && doc.contains("first") && doc["first"].is_string() &&
      doc.contains("count") && doc["count"].is_number_unsigned() &&
      doc["count"].get<std::uint64_t>() == count) {
    const std::string& text = doc["first"].get_ref<const std::string&>();
    std::uint64_t first = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), first);
    if (ec == std::errc() && end == text.data() + text.size() && !text.empty() &&
        first + (count - 1) >= first) {
      return first;
    }
  }
  return client_internal::client_error(
      Status(StatusCode::kUnknown, "a tso answer that does not fit a request for " +
                                       std::to_string(count) + ": " + body.substr(0, 200)),
      endpoint);
}

}  // namespace client_internal

ClientResult<std::uint64_t> Client::tso() {
  return impl_->tso();
}

ClientResult<std::uint64_t> Client::Impl::tso() {
  if (closed.load()) return client_internal::closed_error();
  const Steady::time_point until = deadline();
  auto me = std::make_shared<TsoWaiter>();
  MutexLock lock(tso_mu);
  tso_queue.push_back(me);
  const auto leave = [&]() FLURRY_REQUIRES(tso_mu) {
    // Not yet in a request: out of the queue. In one: its value is skipped, never reused.
    if (!me->taken) std::erase(tso_queue, me);
  };
  while (!me->done) {
    if (closed.load()) {
      leave();
      return client_internal::closed_error();
    }
    if (!tso_busy) {
      // This caller sends the next request; it is in it, or (more than max_batch waiting) in a
      // later one. The lock is let go for the round trip only.
      std::vector<std::shared_ptr<TsoWaiter>> batch = tso_take_batch_locked();
      lock.unlock();
      ClientResult<std::uint64_t> first = tso_fetch(batch.size(), deadline());
      lock.lock();
      tso_deliver_locked(batch, first);
      continue;
    }
    if (now() >= until) {
      leave();
      return client_internal::client_error(
          Status(StatusCode::kDeadlineExceeded,
                 "no timestamp within the timeout: the tso request in flight has not answered"));
    }
    lock.wait_until(tso_cv, until);
  }
  if (me->error) return *me->error;
  return me->value;
}

auto Client::Impl::tso_take_batch_locked() -> std::vector<std::shared_ptr<TsoWaiter>> {
  std::vector<std::shared_ptr<TsoWaiter>> batch;
  while (!tso_queue.empty() && batch.size() < options.max_batch) {
    batch.push_back(std::move(tso_queue.front()));
    tso_queue.pop_front();
    batch.back()->taken = true;
  }
  tso_busy = true;
  return batch;
}

void Client::Impl::tso_deliver_locked(const std::vector<std::shared_ptr<TsoWaiter>>& batch,
                                      const ClientResult<std::uint64_t>& first) {
  for (std::size_t k = 0; k < batch.size(); ++k) {
    TsoWaiter& w = *batch[k];
    if (first.ok()) {
      w.value = *first + k;
    } else {
      w.error = first.error();
    }
    w.done = true;
  }
  tso_busy = false;
  tso_cv.notify_all();
}

// A leader that failed in this call is asked again only after the wait between retry rounds (the
// other servers may redirect to it until its lease has run out), until the deadline.
ClientResult<std::uint64_t> Client::Impl::tso_fetch(std::uint64_t count, Steady::time_point until) {
  const std::string target = "/v1/tso?count=" + std::to_string(count);
  std::optional<ClientError> last;
  std::map<std::string, ClientError> failed;  // leaders that failed in this call, by URL
  int hops = 0;
  int rounds = 0;
  const auto set_leader = [this](std::optional<client_internal::Endpoint> leader) {
    MutexLock lock(tso_mu);
    tso_leader = std::move(leader);
  };
  for (;;) {
    std::optional<client_internal::Endpoint> leader;
    {
      MutexLock lock(tso_mu);
      leader = tso_leader;
    }
    if (!leader) {
      std::string location;
      ClientResult<std::string> body = transport->get(target, until, nullptr, {}, &location);
      if (body.ok()) return client_internal::parse_tso_grant(*body, count, std::string());
      if (location.empty()) return std::move(body).error();
      last = std::move(body).error();
      leader = client_internal::tso_leader_of(location);
      if (!leader) return *last;  // a redirect to nowhere we can go: the answer as it came
      if (auto it = failed.find(leader->url); it != failed.end()) {
        if (!transport->wait_round(rounds++, until)) return it->second;
        if (closed.load()) return client_internal::closed_error();
      } else if (++hops > kMaxRedirects) {
        return *last;
      }
      set_leader(std::move(leader));
      continue;
    }
    if (now() >= until) {
      if (last) return *last;
      return client_internal::client_error(
          Status(StatusCode::kDeadlineExceeded, "the timeout ran out before the leader answered"),
          leader->url);
    }
    ClientResult<client_internal::Transport::Reply> reply =
        transport->get_once(*leader, target, until);
    if (!reply.ok()) return std::move(reply).error();  // closed
    client_internal::Answer a =
        client_internal::classify(reply->status, reply->retry_after, reply->body, leader->url);
    if (a.action == client_internal::Action::kDone) {
      return client_internal::parse_tso_grant(reply->body, count, leader->url);
    }
    last = std::move(a.error);
    if (reply->status == 307 && reply->location) {
      if (++hops > kMaxRedirects) return *last;
      std::optional<client_internal::Endpoint> next =
          client_internal::tso_leader_of(*reply->location);
      if (!next) return *last;
      set_leader(std::move(next));
    } else if (reply->status == 0 || reply->status == 502 || reply->status == 503 ||
               reply->status == 504) {
      failed.insert_or_assign(leader->url, *last);
      set_leader(std::nullopt);  // back to the endpoints
    } else {
      return *last;
    }
  }
}

}  // namespace flurry

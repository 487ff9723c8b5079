// The C++ client's segment numbers (docs/clients.md, "Segment numbers: a double buffer on the
// client"): the range in use and the next one, fetched by the tag's worker thread once
// segment_prefetch of the current range is used.
#include <charconv>
#include <nlohmann/json.hpp>
#include <utility>

#include "client_impl.h"
#include "errors.h"

namespace flurry {

using namespace client_internal;
using json = nlohmann::json;

namespace {

// A field of the range answer: a JSON number, or decimal text (64-bit values travel as text).
std::optional<std::uint64_t> number(const json& doc, const char* key) {
  if (!doc.is_object() || !doc.contains(key)) return std::nullopt;
  const json& v = doc[key];
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (!v.is_string()) return std::nullopt;
  std::uint64_t out = 0;
  const std::string& s = v.get_ref<const std::string&>();
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return out;
}

}  // namespace

void Segment::Impl::start_fetch_locked() {
  if (fetching || pending || client->closed.load()) return;
  fetching = true;
  if (worker.joinable()) worker.join();  // finished: it cleared `fetching` before returning
  worker = std::thread([this] {
    ClientResult<std::string> body = client->transport->get(
        "/v1/segments/" + tag + "/range?size=" + std::to_string(client->options.segment_range),
        client->deadline());
    std::optional<Range> range;
    std::optional<ClientError> error;
    if (body.ok()) {
      const json doc = json::parse(*body, nullptr, false);
      const auto start = number(doc, "start"), end = number(doc, "end"),
                 delta = number(doc, "delta");
      if (start && end && delta && *delta > 0 && *end > *start) {
        range = Range{*start, *end, *delta};
      } else {
        error = client_error(
            Status(StatusCode::kUnknown,
                   "GET /v1/segments/" + tag + "/range: not a range: " + body->substr(0, 200)));
      }
    } else {
      error = body.error();
    }
    MutexLock lock(mu);
    fetching = false;
    pending = range;
    fetch_error = std::move(error);
    ++fetch_seq;
    cv.notify_all();
  });
}

ClientResult<std::uint64_t> Segment::Impl::next() {
  const auto deadline = client->deadline();
  MutexLock lock(mu);
  for (;;) {
    if (client->closed.load()) return closed_error();
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
    if (!lock.wait_until(cv, deadline, [&]() FLURRY_REQUIRES(mu) {
          return fetch_seq != seq || client->closed.load();
        })) {
      return client_error(
          Status(StatusCode::kDeadlineExceeded, "no segment range within the timeout"));
    }
    if (client->closed.load()) return closed_error();
    if (fetch_error && !pending) return *fetch_error;
  }
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

Segment::Segment(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Segment::~Segment() {
  if (impl_ && impl_->worker.joinable()) impl_->worker.join();
}

ClientResult<std::uint64_t> Segment::next() {
  return impl_->next();
}

const std::string& Segment::tag() const noexcept {
  return impl_->tag;
}

}  // namespace flurry

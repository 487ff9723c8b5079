// flurry's C++ client: see include/flurry/client.h and docs/clients.md. This file is the facade:
// opening, the layout and decoding, closing, and fork(). The rest, one concern a file: settings.cc
// (validation), transport.cc (retries and failover over the one HTTP exchange), errors.cc (what an
// answer means), prefetch_buffer.cc (IDs), segment.cc (segment numbers), tso.cc (timestamps),
// order_decode.cc, ids_parser.cc and batch_sizer.cc.
#include "flurry/client.h"

#include <pthread.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "client_impl.h"
#include "client_internal.h"
#include "errors.h"
#include "flurry/codec.h"
#include "order_decode.h"
#include "settings.h"

namespace flurry {

using namespace client_internal;
using json = nlohmann::json;

namespace {

// Every live client, for the fork handlers; a client is added when made and removed before it is
// destroyed. The prepare handler holds g_clients_mu until the parent or child handler runs.
Mutex g_clients_mu;
std::vector<Client::Impl*> g_clients FLURRY_GUARDED_BY(g_clients_mu);

void clients_fork_prepare() noexcept FLURRY_NO_THREAD_SAFETY_ANALYSIS {
  g_clients_mu.lock();
  for (Client::Impl* c : g_clients) c->fork_prepare();
}

void clients_fork_parent() noexcept FLURRY_NO_THREAD_SAFETY_ANALYSIS {
  for (auto it = g_clients.rbegin(); it != g_clients.rend(); ++it) (*it)->fork_parent();
  g_clients_mu.unlock();
}

void clients_fork_child() noexcept FLURRY_NO_THREAD_SAFETY_ANALYSIS {
  for (auto it = g_clients.rbegin(); it != g_clients.rend(); ++it) (*it)->fork_child();
  g_clients_mu.unlock();
}

// A decode error of flurry's own (the layout refused the ID).
ClientError decode_error(const Status& status) {
  return client_error(status);
}

}  // namespace

Client::Impl::Impl() {
  static const int registered =
      pthread_atfork(clients_fork_prepare, clients_fork_parent, clients_fork_child);
  (void)registered;  // fails only for want of memory: then no handler runs
  MutexLock lock(g_clients_mu);
  g_clients.push_back(this);
}

Client::Impl::~Impl() {
  MutexLock lock(g_clients_mu);
  std::erase(g_clients, this);
}

// The order is the code's own nesting (segments_mu before a segment's mu; no other lock is taken
// while one of these is held), so the prepare handler cannot deadlock with a caller.
void Client::Impl::fork_prepare() noexcept {
  segments_mu.lock();
  for (auto& [tag, segment] : segments) segment->impl_->mu.lock();
  mu.lock();
  layout_mu.lock();
  tso_mu.lock();
  transport->fork_prepare();
}

void Client::Impl::fork_parent() noexcept {
  transport->fork_parent();
  tso_mu.unlock();
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
  // tso(): the parent's callers, and the one sending their request, are not in the child.
  remake(tso_cv);
  tso_queue.clear();
  tso_busy = false;
  // The idle connections and the exchange are made anew (transport.h).
  transport->fork_child();
  tso_mu.unlock();
  layout_mu.unlock();
  mu.unlock();
  for (auto& [tag, segment] : segments) segment->impl_->fork_child();
  segments_mu.unlock();
}

ClientResult<const Layout*> Client::Impl::ready_layout(Steady::time_point deadline) {
  const auto known = [this]() -> const Layout* {
    MutexLock lock(layout_mu);
    return layout ? &*layout : nullptr;
  };
  if (const Layout* l = known()) return l;
  if (closed.load()) return closed_error();
  MutexLock fetching(layout_fetch_mu);
  if (const Layout* l = known()) return l;  // another caller fetched it meanwhile
  ClientResult<std::string> body = transport->get("/v1/layout", deadline);
  if (!body.ok()) return std::move(body).error();
  const json doc = json::parse(*body, nullptr, false);
  if (!doc.is_object() || !doc.contains("text") || !doc["text"].is_string() ||
      !doc.contains("max_batch") || !doc["max_batch"].is_number_unsigned()) {
    return client_error(
        Status(StatusCode::kUnknown, "GET /v1/layout: not a layout: " + body->substr(0, 200)));
  }
  Result<Layout> parsed = Layout::parse(doc["text"].get<std::string>());
  if (!parsed.ok()) return client_error(parsed.status().with_prefix("GET /v1/layout"));
  MutexLock lock(layout_mu);
  layout_text = doc["text"].get<std::string>();
  server_max_batch.store(static_cast<std::uint32_t>(
      std::min<std::uint64_t>(doc["max_batch"].get<std::uint64_t>(), 1u << 24)));
  layout = std::move(parsed).value();
  return &*layout;
}

void Client::Impl::shutdown() {
  if (closed.exchange(true)) return;
  transport->close();
  {
    MutexLock lock(mu);
    close_active();
    cv.notify_all();
    refill_cv.notify_all();
  }
  {
    MutexLock lock(tso_mu);
    tso_cv.notify_all();
  }
  if (refiller.joinable()) refiller.join();
  // The handles live as long as the client; segments_mu is not held while a worker is joined
  // (a fork's prepare handler takes it).
  std::vector<Segment::Impl*> handles;
  {
    MutexLock lock(segments_mu);
    for (auto& [tag, segment] : segments) handles.push_back(segment->impl_.get());
  }
  for (Segment::Impl* segment : handles) {
    std::thread worker;
    {
      MutexLock guard(segment->mu);
      segment->current.reset();  // the ranges held are never handed out
      segment->pending.reset();
      segment->cv.notify_all();
      worker = std::move(segment->worker);
    }
    if (worker.joinable()) worker.join();
  }
}

ClientResult<std::unique_ptr<Client>> Client::open(ClientOptions options) {
  Result<Settings> settings = check_settings(options);
  if (!settings.ok()) return client_error(settings.status());
  std::shared_ptr<tls::ClientContext> context;
  if (settings->tls) {
    // The module is loaded and the files are read here, once: an error names the file.
    Result<std::shared_ptr<tls::ClientContext>> made = tls::make_client_context(*settings->tls);
    if (!made.ok()) return client_error(made.status());
    context = std::move(made).value();
  }
  auto impl = std::make_unique<Impl>();
  impl->transport =
      std::make_unique<Transport>(std::move(settings).value(), options.token, std::move(context));
  impl->options = std::move(options);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

void ClientTestAccess::set_hooks(Client& client, TestHooks hooks) {
  client.impl_->transport->set_hooks(std::move(hooks));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  close();
}

void Client::close() {
  impl_->shutdown();
}

ClientResult<std::uint64_t> Client::next() {
  std::uint64_t id = 0;
  bool want_refill = false;
  if (impl_->try_take(id, want_refill, /*precise=*/false)) [[likely]] {
    if (want_refill) [[unlikely]] {
      impl_->start_refill_if_idle();
    }
    return id;
  }
  return impl_->next_slow(Steady::now() + impl_->options.timeout);
}

ClientResult<std::vector<std::uint64_t>> Client::next(std::size_t n) {
  if (impl_->closed.load()) return closed_error();
  const auto deadline = impl_->deadline();
  if (auto l = impl_->ready_layout(deadline); !l.ok()) return std::move(l).error();
  const std::uint32_t most = impl_->server_max_batch.load();
  if (n < 1 || n > most) {
    return client_error(Status(Reason::kBadInput, "next(n): n = " + std::to_string(n) +
                                                      " is not in 1.." + std::to_string(most)));
  }
  std::vector<std::uint64_t> out;
  if (impl_->try_take_many(n, out)) return out;
  ClientResult<std::string> body =
      impl_->transport->get("/v1/ids?count=" + std::to_string(n) + "&format=text", deadline);
  if (!body.ok()) return std::move(body).error();
  if (!parse_text_ids(*body, out) || out.size() != n) {
    return client_error(
        Status(StatusCode::kUnknown, "GET /v1/ids: not a list of " + std::to_string(n) + " IDs"));
  }
  return out;
}

Segment& Client::segment(std::string_view tag) {
  MutexLock lock(impl_->segments_mu);
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

ClientResult<DecodedId> Client::decode(std::uint64_t id) {
  if (impl_->closed.load()) return closed_error();
  ClientResult<const Layout*> layout = impl_->ready_layout(impl_->deadline());
  if (!layout.ok()) return std::move(layout).error();
  Result<DecodedId> d = decode_id(**layout, id);
  if (!d.ok()) return decode_error(d.status());
  return std::move(d).value();
}

ClientResult<DecodedId> Client::decode(std::string_view text) {
  if (impl_->closed.load()) return closed_error();
  ClientResult<const Layout*> layout = impl_->ready_layout(impl_->deadline());
  if (!layout.ok()) return std::move(layout).error();
  Result<DecodedId> d = decode_id(**layout, text, Encoding::kDecimal);
  if (!d.ok()) return decode_error(d.status());
  return std::move(d).value();
}

ClientResult<DecodedOrder> Client::decode_order(std::string_view code,
                                                const DecodeOrderOptions& options) {
  if (impl_->closed.load()) return closed_error();
  const auto deadline = impl_->deadline();
  ClientResult<std::string> body = impl_->transport->get(order_decode_target(code, options.tag),
                                                         deadline, nullptr, options.token);
  if (!body.ok()) return std::move(body).error();
  Result<DecodedOrder> order = parse_decoded_order(*body);
  if (!order.ok()) return client_error(order.status());
  if (order->source == DecodedOrder::Source::kSnowflake) {
    ClientResult<const Layout*> layout = impl_->ready_layout(deadline);
    if (!layout.ok()) return std::move(layout).error();
    Result<DecodedId> d = decode_id(**layout, order->id);
    if (!d.ok()) {
      return client_error(Status(StatusCode::kUnknown,
                                 "GET /v1/order-numbers: the ID " + std::to_string(order->id) +
                                     " does not fit the layout: " + d.status().message()));
    }
    order->decoded = std::move(d).value();
  }
  return std::move(order).value();
}

ClientResult<std::string> Client::layout_text() {
  if (impl_->closed.load()) return closed_error();
  ClientResult<const Layout*> layout = impl_->ready_layout(impl_->deadline());
  if (!layout.ok()) return std::move(layout).error();
  MutexLock lock(impl_->layout_mu);
  return impl_->layout_text;
}

}  // namespace flurry

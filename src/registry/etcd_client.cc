#include "etcd_client.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>
#include <utility>

#include "core/private_files.h"
#include "core/quote.h"
#include "etcd_module/etcd_module_api.h"
#include "tls/module_loader.h"

namespace flurry::internal {
namespace {

namespace api = etcd_module_api;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// etcd checks a password with bcrypt, on purpose slow (tens of ms a check, seconds when many
// clients authenticate at once on a busy host): an authentication gets more time than other calls.
constexpr milliseconds kAuthenticateTimeout{5000};
// etcd's default --grpc-keepalive-min-time: pings more often than this get the connection closed.
constexpr milliseconds kMinPingInterval{5000};
// How often history() asks for a progress answer (etcd 3.4 answers only once the watcher is
// synced, so the request is repeated until one comes).
constexpr milliseconds kProgressInterval{30};
// etcd moves a watcher that starts in the past through its backlog in rounds every 100 ms (each
// round sends a watcher's events of up to 1000 revisions). history() of a key absent at `until`
// takes a progress answer as its end only after this long without events.
constexpr milliseconds kCatchUp{300};
// A watch that cannot reach any endpoint tries again after this long (or `timeout`, if shorter).
constexpr milliseconds kWatchRetryPause{500};
// Largest PEM file read (a CA bundle of the whole web is about 200 kB).
constexpr std::uintmax_t kMaxPemBytes = std::uintmax_t{1} << 20;

Result<const api::EtcdModule*> etcd_module() {
  static const Result<const api::EtcdModule*> loaded = []() -> Result<const api::EtcdModule*> {
    Result<LoadedModule> found = load_module(
        module_paths("flurry_etcd.so"), api::kEtcdModuleEntry, "the etcd module",
        "the etcd registry needs flurry_etcd.so, which is not installed",
        "; install it beside the flurry binary or in lib/flurry/ (or set FLURRY_MODULE_DIR)");
    if (!found.ok()) return found.status();
    const auto* module = static_cast<const api::EtcdModule*>(found->entry);
    if (module->version == nullptr || std::strcmp(module->version, FLURRY_VERSION) != 0 ||
        module->make_channel == nullptr || module->common_name == nullptr) {
      return Status(StatusCode::kFailedPrecondition,
                    "the etcd module " + quote(found->path.string()) + " was built from flurry " +
                        quote(module->version != nullptr ? module->version : "?") +
                        ", this binary is " FLURRY_VERSION
                        ": install the module of the same build");
    }
    return module;
  }();
  return loaded;
}

// The contents of a PEM file given as `setting`.
Result<std::string> read_pem(const std::filesystem::path& file, std::string_view setting) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) {
    return Status(Reason::kIo, std::string(setting) + " " + quote(file.string()) +
                                   " cannot be read: " + ec.message());
  }
  if (size > kMaxPemBytes) {
    return InvalidArgument(std::string(setting) + " " + quote(file.string()) + " has " +
                           std::to_string(size) + " bytes, more than a PEM file needs (at most " +
                           std::to_string(kMaxPemBytes) + ")");
  }
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    return Status(Reason::kIo,
                  std::string(setting) + " " + quote(file.string()) + " cannot be read");
  }
  return text;
}

const char* code_name(int code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN";
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// A stream's end reported as a gRPC status: an OK end of a stream that should go on is a break.
api::RawStatus broken_if_ok(api::RawStatus status) {
  if (status.ok()) return {14, "the stream ended"};
  return status;
}

// What is shared by the client and its watches (which may outlive it): the channels, the token,
// the counters, the error mapping.
class Core {
 public:
  Core(std::vector<EtcdEndpoint> endpoints, milliseconds timeout, std::optional<EtcdAuth> auth,
       std::string common_name, bool tls_without_certificate,
       std::vector<std::unique_ptr<api::RawChannel>> channels)
      : endpoints_(std::move(endpoints)),
        timeout_(timeout),
        auth_(std::move(auth)),
        user_(auth_ ? auth_->user : std::string()),
        common_name_(std::move(common_name)),
        tls_without_certificate_(tls_without_certificate),
        channels_(std::move(channels)) {
    for (const EtcdEndpoint& ep : endpoints_) names_.push_back(ep.to_string());
  }

  [[nodiscard]] std::size_t size() const noexcept { return channels_.size(); }
  [[nodiscard]] api::RawChannel& channel(std::size_t i) const { return *channels_[i % size()]; }
  [[nodiscard]] const std::string& name(std::size_t i) const { return names_[i % size()]; }
  [[nodiscard]] std::size_t preferred() const noexcept {
    return preferred_.load(std::memory_order_relaxed) % size();
  }
  void prefer(std::size_t i) const noexcept {
    preferred_.store(i % size(), std::memory_order_relaxed);
  }
  [[nodiscard]] milliseconds timeout() const noexcept { return timeout_; }
  [[nodiscard]] const std::string& user() const noexcept { return user_; }
  [[nodiscard]] bool has_user() const noexcept { return !user_.empty(); }

  // Who the calls are made as, for messages.
  [[nodiscard]] std::string who() const {
    if (has_user()) return "user " + quote(user_);
    if (!common_name_.empty()) {
      return "user " + quote(common_name_) + " (the Common Name of the client certificate)";
    }
    return "no user";
  }

  // etcd's error `raw` of `call` ("etcd HOST:PORT Range") as a Status (the top of etcd_client.h).
  // `retry_elsewhere`: another endpoint may do better; `stale_token`: etcd refused the token as
  // expired or stale (worth authenticating again).
  [[nodiscard]] Status to_status(const api::RawStatus& raw, const std::string& call,
                                 bool& retry_elsewhere, bool& stale_token) const {
    retry_elsewhere = false;
    stale_token = false;
    const std::string what = call + ": " + code_name(raw.code) + ": " + quote(raw.message, 256);
    const auto says = [&](std::string_view text) { return contains(raw.message, text); };
    switch (raw.code) {
      case 1:   // CANCELLED
      case 2:   // UNKNOWN: "context deadline exceeded" while the member has no leader
      case 4:   // DEADLINE_EXCEEDED
      case 14:  // UNAVAILABLE: no leader, leader changed, request timed out, no connection
        retry_elsewhere = true;
        if (tls_without_certificate_ && says("failed to connect")) {
          // What gRPC reports when etcd (--client-cert-auth) closes a TLS connection without one.
          return Status(Reason::kIo, what +
                                         " (no client certificate is configured: etcd with "
                                         "--client-cert-auth refuses TLS connections without "
                                         "one; set etcd_cert_file and etcd_key_file)");
        }
        return Status(Reason::kIo, what);
      case 16:  // UNAUTHENTICATED: "invalid auth token" (expired, unknown)
        if (has_user() && says("invalid auth token")) {
          stale_token = true;
          return Status(StatusCode::kUnauthenticated,
                        what + ": etcd refused the token of " + who());
        }
        return Status(StatusCode::kUnauthenticated, what);
      case 3:  // INVALID_ARGUMENT: etcd's authentication errors among others
        if (has_user() && says("revision of auth store is old")) {
          stale_token = true;
          return Status(StatusCode::kUnauthenticated,
                        what + ": etcd refused the token of " + who());
        }
        if (says("user name is empty")) {
          return Status(StatusCode::kUnauthenticated,
                        what +
                            ": etcd requires authentication; set etcd_user and "
                            "etcd_password_file, or use a client certificate whose Common "
                            "Name is an etcd user");
        }
        if (says("authentication failed")) {
          return Status(StatusCode::kUnauthenticated,
                        "etcd refused " + who() +
                            ": authentication failed (wrong password or unknown user; " + what +
                            ")");
        }
        return Status(StatusCode::kInternal, what);
      case 9:  // FAILED_PRECONDITION: "authentication is not enabled"
        if (says("authentication is not enabled")) {
          return Status(StatusCode::kFailedPrecondition,
                        "etcd_user " + quote(user_) +
                            " is set but etcd has authentication disabled (" + what +
                            "); enable it (etcdctl auth enable) or unset etcd_user");
        }
        return Status(StatusCode::kInternal, what);
      case 5:  // NOT_FOUND: the lease is not found
        return Status(StatusCode::kNotFound, what);
      case 7:  // PERMISSION_DENIED: the user's roles do not cover the key
        if (!has_user() && common_name_.empty()) {
          return Status(StatusCode::kUnauthenticated,
                        what +
                            ": etcd requires authentication (it denies calls without a user); "
                            "set etcd_user and etcd_password_file");
        }
        return Status(StatusCode::kPermissionDenied,
                      what + ": etcd denied " + who() +
                          (auth_ && !auth_->needs.empty() ? "; its role needs " + auth_->needs
                                                          : std::string()));
      case 8:  // RESOURCE_EXHAUSTED: too many requests, database space exceeded
        return Status(StatusCode::kUnavailable, what);
      case 11:  // OUT_OF_RANGE: the revision asked for was compacted (or is in the future)
        return Status(StatusCode::kOutOfRange, what);
      default:
        return Status(StatusCode::kInternal, what);
    }
  }

  // One unary call with failover (each endpoint once, from the preferred one): `fn(channel,
  // token, timeout)` gives the gRPC status. The token etcd refused as stale, if it did, in
  // `stale_token` (set to true).
  template <typename Fn>
  [[nodiscard]] Status failover(std::string_view method, const std::string& token,
                                milliseconds timeout, bool& stale_token, Fn&& fn) const {
    const std::size_t n = size();
    const std::size_t first = preferred();
    std::string failures;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (first + k) % n;
      requests_.fetch_add(1, std::memory_order_relaxed);
      const api::RawStatus raw = fn(channel(i), token, timeout);
      if (raw.ok()) {
        prefer(i);
        return OkStatus();
      }
      bool retry_elsewhere = false;
      const std::string call = "etcd " + name(i) + " " + std::string(method);
      Status st =
          raw.code == 4  // DEADLINE_EXCEEDED: this attempt's deadline passed
              ? Status(Reason::kIo, call + ": no answer within " + std::to_string(timeout.count()) +
                                        " ms (" + quote(raw.message, 256) + ")")
              : to_status(raw, call, retry_elsewhere, stale_token);
      if (raw.code == 4) retry_elsewhere = true;
      if (!retry_elsewhere) return st;
      failures += failures.empty() ? "" : "; ";
      failures += st.message();
    }
    return Status(Reason::kIo,
                  "no etcd endpoint answered " + std::string(method) + " (" + failures + ")");
  }

  // A unary call as `fn` with failover, the token, and one repeat after authenticating again.
  template <typename Fn>
  [[nodiscard]] Status unary(std::string_view method, Fn&& fn) const {
    bool stale_token = false;
    if (!has_user()) return failover(method, std::string(), timeout_, stale_token, fn);
    Result<std::string> current = token(std::string());
    if (!current.ok()) return current.status();
    Status st = failover(method, *current, timeout_, stale_token, fn);
    if (st.ok() || !stale_token) return st;
    // The token expired or went stale: authenticate again (unless another call did meanwhile)
    // and repeat the call once. Refused again, the answer stays UNAUTHENTICATED.
    Result<std::string> fresh = token(*current);
    if (!fresh.ok()) return fresh.status();
    return failover(method, *fresh, timeout_, stale_token, fn);
  }

  // The current token ("" without a user), authenticating first when there is none or when the
  // one the caller was refused with (`refused`, non-empty) is still the current one.
  [[nodiscard]] Result<std::string> token(const std::string& refused) const
      FLURRY_EXCLUDES(auth_mu_) {
    if (!has_user()) return std::string();
    MutexLock lock(auth_mu_);
    if (!token_.empty() && token_ != refused) return token_;
    authentications_.fetch_add(1, std::memory_order_relaxed);
    std::string fresh;
    bool stale_token = false;
    Status st =
        failover("Authenticate", std::string(), std::max(timeout_, kAuthenticateTimeout),
                 stale_token, [&](api::RawChannel& ch, const std::string&, milliseconds timeout) {
                   return ch.authenticate(auth_->user, auth_->password, timeout, fresh);
                 });
    if (!st.ok()) {
      if (st.code() == StatusCode::kUnauthenticated ||
          st.code() == StatusCode::kFailedPrecondition) {
        return st;
      }
      return st.with_prefix("cannot authenticate to etcd as user " + quote(auth_->user));
    }
    if (fresh.empty()) {
      return Status(StatusCode::kInternal, "etcd answered the authentication of user " +
                                               quote(auth_->user) + " without a token");
    }
    token_ = std::move(fresh);
    return token_;
  }

  [[nodiscard]] EtcdClientCounters counters() const {
    EtcdClientCounters c;
    c.requests = requests_.load(std::memory_order_relaxed);
    c.keep_alive_messages = keep_alive_messages_.load(std::memory_order_relaxed);
    c.watch_streams = watch_streams_.load(std::memory_order_relaxed);
    c.authentications = authentications_.load(std::memory_order_relaxed);
    return c;
  }
  void count_keep_alive() const { keep_alive_messages_.fetch_add(1, std::memory_order_relaxed); }
  void count_watch_stream() const { watch_streams_.fetch_add(1, std::memory_order_relaxed); }

  // Waits until channel `i` is connected, at most until `deadline` and while `go_on()` holds,
  // in slices (so that a watch being destroyed does not wait for a whole timeout); false at once
  // when its connection failed (a refused connection costs no timeout).
  template <typename Pred>
  [[nodiscard]] bool connect(std::size_t i, SteadyClock::time_point deadline, Pred go_on) const {
    constexpr milliseconds kSlice{100};
    while (go_on()) {
      const auto now = SteadyClock::now();
      if (now >= deadline) return false;
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - now);
      const int connected = channel(i).wait_connected(std::min(left + milliseconds(1), kSlice));
      if (connected != 0) return connected > 0;
    }
    return false;
  }

 private:
  const std::vector<EtcdEndpoint> endpoints_;
  std::vector<std::string> names_;
  const milliseconds timeout_;
  const std::optional<EtcdAuth> auth_;
  const std::string user_;
  const std::string common_name_;       // of the client certificate, "" without one
  const bool tls_without_certificate_;  // https:// endpoints, no client certificate
  const std::vector<std::unique_ptr<api::RawChannel>> channels_;
  mutable Mutex auth_mu_;
  mutable std::string token_ FLURRY_GUARDED_BY(auth_mu_);
  mutable std::atomic<std::size_t> preferred_{0};
  mutable std::atomic<std::uint64_t> requests_{0};
  mutable std::atomic<std::uint64_t> keep_alive_messages_{0};
  mutable std::atomic<std::uint64_t> watch_streams_{0};
  mutable std::atomic<std::uint64_t> authentications_{0};
};

// ---- The keep-alive stream ----

// A caller of keep_alive() waiting for its answer.
// A watch etcd cancelled: PERMISSION_DENIED when its reason says so (`denied` set), otherwise
// UNAVAILABLE, both named by `call`.
Status cancelled_watch(const Core& core, const std::string& reason, const std::string& call,
                       bool& denied) {
  bool retry_elsewhere = false;
  bool stale = false;
  const int code = contains(reason, "permission denied") ? 7 : 14;
  denied = code == 7;
  return core.to_status({code, reason.empty() ? "the watch was cancelled" : reason}, call,
                        retry_elsewhere, stale);
}

struct KeepAliveWaiter {
  bool done = false;
  std::int64_t ttl_seconds = 0;
};

// One LeaseKeepAlive stream on one endpoint and its reader thread.
struct KeepAliveSession {
  std::size_t endpoint = 0;
  std::string token;
  std::unique_ptr<api::RawKeepAliveStream> stream;
  std::thread reader;
  Mutex write_mu;  // writes serialized; finish() after the last write
  bool finished FLURRY_GUARDED_BY(write_mu) = false;
  Mutex mu;
  std::condition_variable cv;
  bool broken FLURRY_GUARDED_BY(mu) = false;
  api::RawStatus end FLURRY_GUARDED_BY(mu);
  // Callers waiting for an answer, by lease ID, first come first served (answers to the same
  // lease come back in the order their requests went out).
  std::multimap<std::int64_t, KeepAliveWaiter*> waiting FLURRY_GUARDED_BY(mu);

  void read_answers() {
    std::int64_t id = 0;
    std::int64_t ttl = 0;
    while (stream->read(id, ttl)) {
      MutexLock lock(mu);
      const auto it = waiting.find(id);
      if (it == waiting.end()) continue;  // a caller that gave up
      it->second->done = true;
      it->second->ttl_seconds = ttl;
      waiting.erase(it);
      cv.notify_all();
    }
    api::RawStatus status;
    {
      MutexLock lock(write_mu);
      finished = true;
      status = broken_if_ok(stream->finish());
    }
    MutexLock lock(mu);
    broken = true;
    end = std::move(status);
    cv.notify_all();
  }
};

// ---- Watches ----

class GrpcEtcdWatch final : public EtcdWatch {
 public:
  GrpcEtcdWatch(std::shared_ptr<const Core> core, std::string key, std::string range_end,
                std::int64_t after_revision, EtcdWatchCallback callback)
      : core_(std::move(core)),
        key_(std::move(key)),
        range_end_(std::move(range_end)),
        next_(after_revision > 0 ? after_revision + 1 : 0),
        callback_(std::move(callback)) {
    thread_ = std::thread([this] { run(); });
  }

  ~GrpcEtcdWatch() override {
    {
      MutexLock lock(mu_);
      stopping_ = true;
      if (stream_ != nullptr) stream_->cancel();
      cv_.notify_all();
    }
    thread_.join();
  }

 private:
  [[nodiscard]] bool stopping() const FLURRY_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return stopping_;
  }

  // Sleeps `pause` unless the watch is being destroyed; false then.
  [[nodiscard]] bool pause(milliseconds pause) FLURRY_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return !lock.wait_for(cv_, pause, [&]() FLURRY_REQUIRES(mu_) { return stopping_; });
  }

  void end_with(const Status& error) { callback_({}, error); }

  // The watch's thread: a stream on one endpoint after the other until the watch is destroyed or
  // ends for good.
  void run() {
    std::size_t endpoint = core_->preferred();
    std::size_t failed_in_row = 0;
    std::string refused_token;  // the token a watch was refused with (authenticated again once)
    while (!stopping()) {
      if (failed_in_row >= core_->size()) {
        failed_in_row = 0;
        if (!pause(std::min(core_->timeout(), kWatchRetryPause))) return;
      }
      const std::size_t i = endpoint % core_->size();
      if (!core_->connect(i, SteadyClock::now() + core_->timeout(), [&] { return !stopping(); })) {
        ++endpoint;
        ++failed_in_row;
        continue;
      }
      Result<std::string> token = core_->token(refused_token);
      if (!token.ok()) {
        if (token.status().code() == StatusCode::kUnavailable) {
          ++failed_in_row;
          continue;
        }
        return end_with(token.status());
      }
      std::unique_ptr<api::RawWatchStream> stream = core_->channel(i).watch(*token);
      {
        MutexLock lock(mu_);
        if (stopping_) return;
        stream_ = stream.get();
      }
      core_->count_watch_stream();
      const std::string call = "etcd " + core_->name(i) + " Watch " + quote(key_);
      Status ended;
      bool denied = false;
      if (stream->create(key_, range_end_, next_)) {
        api::RawWatchResponse r;
        while (ended.ok() && stream->read(r)) {
          failed_in_row = 0;
          if (r.compact_revision > 0) {
            ended = Status(StatusCode::kOutOfRange,
                           call + ": the history from revision " + std::to_string(next_) +
                               " was compacted (etcd keeps revisions from " +
                               std::to_string(r.compact_revision) + " on)");
          } else if (r.canceled) {
            ended = cancelled_watch(*core_, r.cancel_reason, call, denied);
          } else if (r.created) {
            if (next_ == 0) next_ = r.revision + 1;
          } else if (!r.events.empty()) {
            std::vector<EtcdEvent> events;
            events.reserve(r.events.size());
            for (api::RawWatchEvent& e : r.events) {
              events.push_back(
                  {e.put ? EtcdEvent::Type::kPut : EtcdEvent::Type::kDelete, std::move(e.kv)});
            }
            next_ = events.back().kv.mod_revision + 1;
            callback_(events, OkStatus());
          }
        }
      }
      api::RawStatus status{};
      if (ended.ok()) status = broken_if_ok(stream->finish());
      {
        MutexLock lock(mu_);
        stream_ = nullptr;
        if (stopping_) return;
      }
      stream.reset();
      if (!ended.ok()) {
        // etcd refuses a watch whose token expired as "permission denied": authenticate again,
        // once, before taking the refusal as final.
        if (denied && core_->has_user() && refused_token != *token) {
          refused_token = *token;
          continue;
        }
        return end_with(ended);
      }
      bool retry_elsewhere = false;
      bool stale = false;
      Status st = core_->to_status(status, call, retry_elsewhere, stale);
      if (stale && refused_token != *token) {
        refused_token = *token;
        continue;
      }
      if (!retry_elsewhere) return end_with(st);
      ++endpoint;  // resumed from next_ on the next endpoint
      ++failed_in_row;
    }
  }

  const std::shared_ptr<const Core> core_;
  const std::string key_;
  const std::string range_end_;
  std::int64_t next_;  // the first revision not seen yet (0: from now); the thread's own
  const EtcdWatchCallback callback_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ FLURRY_GUARDED_BY(mu_) = false;
  api::RawWatchStream* stream_ FLURRY_GUARDED_BY(mu_) = nullptr;  // the open stream, to cancel
  std::thread thread_;
};

// ---- The client ----

class GrpcEtcdClient final : public EtcdClient {
 public:
  explicit GrpcEtcdClient(std::shared_ptr<Core> core) : core_(std::move(core)) {}

  ~GrpcEtcdClient() override {
    std::vector<std::shared_ptr<KeepAliveSession>> sessions;
    {
      MutexLock lock(ka_mu_);
      if (ka_ != nullptr) sessions.push_back(std::move(ka_));
      for (auto& s : ka_retired_) sessions.push_back(std::move(s));
      ka_retired_.clear();
    }
    for (const auto& s : sessions) s->stream->cancel();
    for (const auto& s : sessions) {
      if (s->reader.joinable()) s->reader.join();
    }
  }

  Result<EtcdRange> range(std::string_view key, std::string_view range_end, bool keys_only,
                          std::int64_t revision) const override {
    EtcdRange out;
    const std::string k(key);
    const std::string end(range_end);
    Status st = core_->unary(
        "Range", [&](api::RawChannel& ch, const std::string& token, milliseconds timeout) {
          return ch.range(k, end, keys_only, revision, token, timeout, out);
        });
    if (!st.ok()) return st;
    return out;
  }

  Result<EtcdTxnResult> txn(const EtcdTxn& txn) const override {
    EtcdTxnResult out;
    Status st =
        core_->unary("Txn", [&](api::RawChannel& ch, const std::string& token,
                                milliseconds timeout) { return ch.txn(txn, token, timeout, out); });
    if (!st.ok()) return st;
    const std::size_t expected = out.succeeded ? txn.success.size() : txn.failure.size();
    if (out.responses.size() != expected) {
      return Status(StatusCode::kInternal,
                    "etcd " + core_->name(core_->preferred()) + " answered Txn with " +
                        std::to_string(out.responses.size()) + " responses for " +
                        std::to_string(expected) + " operations");
    }
    return out;
  }

  Result<EtcdLeaseGrant> grant(std::int64_t ttl_seconds) const override {
    EtcdLeaseGrant out;
    Status st = core_->unary(
        "LeaseGrant", [&](api::RawChannel& ch, const std::string& token, milliseconds timeout) {
          return ch.grant(ttl_seconds, token, timeout, out);
        });
    if (!st.ok()) return st;
    return out;
  }

  Status revoke(std::int64_t id) const override {
    return core_->unary("LeaseRevoke",
                        [&](api::RawChannel& ch, const std::string& token, milliseconds timeout) {
                          return ch.revoke(id, token, timeout);
                        });
  }

  Result<EtcdLeaseTtl> time_to_live(std::int64_t id) const override {
    EtcdLeaseTtl out;
    Status st = core_->unary("LeaseTimeToLive", [&](api::RawChannel& ch, const std::string& token,
                                                    milliseconds timeout) {
      return ch.time_to_live(id, token, timeout, out);
    });
    if (!st.ok()) return st;
    return out;
  }

  Result<std::optional<std::int64_t>> keep_alive(std::int64_t id) const override;
  Result<EtcdHistory> history(std::string_view key, std::int64_t until) const override;

  Result<std::unique_ptr<EtcdWatch>> watch(std::string key, std::string range_end,
                                           std::int64_t after_revision,
                                           EtcdWatchCallback callback) const override {
    if (!callback) return InvalidArgument("an etcd watch needs a callback");
    return std::unique_ptr<EtcdWatch>(std::make_unique<GrpcEtcdWatch>(
        core_, std::move(key), std::move(range_end), after_revision, std::move(callback)));
  }

  std::string describe() const override {
    std::string out;
    for (std::size_t i = 0; i < core_->size(); ++i) {
      out += out.empty() ? "" : ",";
      out += core_->name(i);
    }
    return out;
  }
  const std::string& user() const noexcept override { return core_->user(); }
  milliseconds timeout() const noexcept override { return core_->timeout(); }
  EtcdClientCounters counters() const override { return core_->counters(); }

 private:
  // The open keep-alive stream, or a new one on the first endpoint from `start` that connects
  // before `deadline` (with the current token). `failures` gathers why endpoints were passed.
  [[nodiscard]] Result<std::shared_ptr<KeepAliveSession>> keep_alive_session(
      SteadyClock::time_point deadline, const std::string& refused_token,
      std::string& failures) const FLURRY_EXCLUDES(ka_mu_);
  // Ends `session` (the stream cancelled; its reader joined later) unless it was replaced already.
  void retire(const std::shared_ptr<KeepAliveSession>& session) const FLURRY_EXCLUDES(ka_mu_);

  const std::shared_ptr<const Core> core_;
  mutable Mutex ka_mu_;
  mutable std::shared_ptr<KeepAliveSession> ka_ FLURRY_GUARDED_BY(ka_mu_);
  // Sessions whose stream broke or was cancelled: their readers, joined on the next open.
  mutable std::vector<std::shared_ptr<KeepAliveSession>> ka_retired_ FLURRY_GUARDED_BY(ka_mu_);
  // Where the next stream is opened first (after a break: the endpoint after the broken one).
  mutable std::size_t ka_next_ FLURRY_GUARDED_BY(ka_mu_) = 0;
  mutable bool ka_started_ FLURRY_GUARDED_BY(ka_mu_) = false;
};

Result<std::shared_ptr<KeepAliveSession>> GrpcEtcdClient::keep_alive_session(
    SteadyClock::time_point deadline, const std::string& refused_token,
    std::string& failures) const {
  MutexLock lock(ka_mu_);
  if (ka_ != nullptr) {
    MutexLock session_lock(ka_->mu);
    if (!ka_->broken) return ka_;
  }
  if (ka_ != nullptr) {
    ka_next_ = ka_->endpoint + 1;
    ka_retired_.push_back(std::move(ka_));
  }
  // The readers of broken streams have ended or are ending (their streams were cancelled).
  for (auto& old : ka_retired_) {
    if (old->reader.joinable()) old->reader.join();
  }
  ka_retired_.clear();
  if (!ka_started_) {
    ka_started_ = true;
    ka_next_ = core_->preferred();
  }
  const std::size_t n = core_->size();
  const std::size_t start = ka_next_;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (start + k) % n;
    if (SteadyClock::now() >= deadline) break;  // this endpoint is tried first next time
    if (!core_->connect(i, deadline, [] { return true; })) {
      failures += failures.empty() ? "" : "; ";
      failures += "etcd " + core_->name(i) + " LeaseKeepAlive: no connection";
      ka_next_ = i + 1;  // the next call starts with the next endpoint
      continue;
    }
    Result<std::string> token = core_->token(refused_token);
    if (!token.ok()) return token.status();
    auto session = std::make_shared<KeepAliveSession>();
    session->endpoint = i;
    session->token = *token;
    session->stream = core_->channel(i).keep_alive(*token);
    session->reader = std::thread([s = session.get()] { s->read_answers(); });
    ka_next_ = i;
    ka_ = session;
    return session;
  }
  return Status(Reason::kIo, "no etcd endpoint answered LeaseKeepAlive (" + failures + ")");
}

void GrpcEtcdClient::retire(const std::shared_ptr<KeepAliveSession>& session) const {
  session->stream->cancel();
  MutexLock lock(ka_mu_);
  if (ka_ == session) {
    ka_next_ = session->endpoint + 1;
    ka_retired_.push_back(std::move(ka_));
  }
}

Result<std::optional<std::int64_t>> GrpcEtcdClient::keep_alive(std::int64_t id) const {
  const auto deadline = SteadyClock::now() + core_->timeout();
  std::string failures;
  std::string refused_token;
  for (std::size_t attempt = 0; attempt <= core_->size(); ++attempt) {
    Result<std::shared_ptr<KeepAliveSession>> opened =
        keep_alive_session(deadline, refused_token, failures);
    if (!opened.ok()) return opened.status();
    const std::shared_ptr<KeepAliveSession> session = std::move(opened).value();
    const std::string call = "etcd " + core_->name(session->endpoint) + " LeaseKeepAlive";
    KeepAliveWaiter waiter;
    std::multimap<std::int64_t, KeepAliveWaiter*>::iterator entry;
    {
      MutexLock lock(session->mu);
      if (session->broken) continue;  // broke meanwhile: the next attempt reopens
      entry = session->waiting.emplace(id, &waiter);
    }
    bool wrote = false;
    {
      MutexLock lock(session->write_mu);
      if (!session->finished) wrote = session->stream->write(id);
    }
    core_->count_keep_alive();
    MutexLock lock(session->mu);
    if (wrote) {
      lock.wait_until(session->cv, deadline, [&]() FLURRY_REQUIRES(session->mu) {
        return waiter.done || session->broken;
      });
    }
    if (waiter.done) {
      if (waiter.ttl_seconds <= 0) return std::optional<std::int64_t>();
      return std::optional<std::int64_t>(waiter.ttl_seconds);
    }
    session->waiting.erase(entry);
    if (!session->broken && wrote) {
      // No answer in time: the stream is given up (the next call opens one on the next endpoint),
      // so that a late answer is never taken for another request's.
      lock.unlock();
      retire(session);
      return Status(Reason::kIo, call + ": no answer within " +
                                     std::to_string(core_->timeout().count()) + " ms" +
                                     (failures.empty() ? "" : " (" + failures + ")"));
    }
    const api::RawStatus end = session->broken ? session->end : api::RawStatus{14, "write failed"};
    lock.unlock();
    retire(session);
    bool retry_elsewhere = false;
    bool stale = false;
    Status st = core_->to_status(end, call, retry_elsewhere, stale);
    if (stale && refused_token != session->token) {
      refused_token = session->token;
      continue;
    }
    if (!retry_elsewhere) return st;
    failures += failures.empty() ? "" : "; ";
    failures += st.message();
    if (SteadyClock::now() >= deadline) break;
  }
  return Status(Reason::kIo, "no etcd endpoint answered LeaseKeepAlive (" + failures + ")");
}

Result<EtcdHistory> GrpcEtcdClient::history(std::string_view key, std::int64_t until) const {
  const std::string k(key);
  // The fence: the key as of `until`. Its last put up to `until` (mod_revision) is the last event
  // the watch must deliver; none when the key did not exist then (never, or deleted).
  Result<EtcdRange> at_until = range(k, {}, false, until);
  if (!at_until.ok()) return at_until.status();
  const std::int64_t fence = at_until->kvs.empty() ? 0 : at_until->kvs.front().mod_revision;
  std::string failures;
  std::string refused_token;
  const std::size_t n = core_->size();
  const std::size_t first = core_->preferred();
  for (std::size_t attempt = 0; attempt < n + 1; ++attempt) {
    const std::size_t i = (first + std::min(attempt, n - 1)) % n;
    const std::string call = "etcd " + core_->name(i) + " Watch (history of " + quote(k) + ")";
    const auto deadline = SteadyClock::now() + core_->timeout();
    if (!core_->connect(i, deadline, [] { return true; })) {
      failures += failures.empty() ? "" : "; ";
      failures += call + ": no connection";
      if (attempt + 1 >= n) break;
      continue;
    }
    Result<std::string> token = core_->token(refused_token);
    if (!token.ok()) return token.status();
    std::unique_ptr<api::RawWatchStream> stream = core_->channel(i).watch(*token);
    core_->count_watch_stream();
    // Progress requests every kProgressInterval until done, and the stream cancelled at the
    // deadline, from a helper thread (read() blocks).
    Mutex mu;
    std::condition_variable cv;
    bool done = false;
    Mutex write_mu;
    bool wrote = false;
    {
      MutexLock lock(write_mu);
      wrote = stream->create(k, std::string(), 1);
    }
    std::thread helper([&] {
      MutexLock lock(mu);
      while (!done) {
        if (lock.wait_until(cv, std::min(deadline, SteadyClock::now() + kProgressInterval),
                            [&]() FLURRY_REQUIRES(mu) { return done; })) {
          break;
        }
        if (SteadyClock::now() >= deadline) {
          stream->cancel();
          break;
        }
        lock.unlock();
        {
          MutexLock write_lock(write_mu);
          (void)stream->request_progress();
        }
        lock.lock();
      }
    });
    EtcdHistory history;
    bool complete = false;
    Status ended;
    bool denied = false;
    api::RawWatchResponse r;
    std::optional<SteadyClock::time_point> created_at;
    std::optional<SteadyClock::time_point> last_events_at;
    while (wrote && !complete && ended.ok() && stream->read(r)) {
      if (r.compact_revision > 0) {
        // Compacted (etcd cancelled this watch): what is left is the version current at
        // compact_revision, which a range at that revision reads, and the events after it.
        const std::int64_t compacted = r.compact_revision;
        history.compacted_below = compacted;
        history.versions.clear();
        Result<EtcdRange> at = range(k, {}, false, compacted);
        if (!at.ok()) {
          if (at.status().code() != StatusCode::kOutOfRange) {
            ended = at.status();
            break;
          }
          // Compacted again meanwhile: start over (etcd answers with the new compaction).
          MutexLock write_lock(write_mu);
          if (!stream->create(k, std::string(), 1)) break;
          continue;
        }
        const bool fenced = !at->kvs.empty() && at->kvs.front().mod_revision == fence;
        if (!at->kvs.empty() && at->kvs.front().mod_revision <= until) {
          history.versions.push_back(std::move(at->kvs.front()));
        }
        if (compacted >= until || fenced) {
          complete = true;
          break;
        }
        MutexLock write_lock(write_mu);
        if (!stream->create(k, std::string(), compacted + 1)) break;
        continue;
      }
      if (r.canceled) {
        ended = cancelled_watch(*core_, r.cancel_reason, call, denied);
        break;
      }
      if (r.created) {
        created_at = SteadyClock::now();
        continue;
      }
      for (api::RawWatchEvent& e : r.events) {
        if (e.kv.mod_revision >= until || (fence > 0 && e.kv.mod_revision == fence)) {
          complete = true;
        }
        if (e.put && e.kv.mod_revision <= until) history.versions.push_back(std::move(e.kv));
        last_events_at = SteadyClock::now();
      }
      // A progress answer (no events). etcd 3.4 answers it at once, before a watcher that started
      // in the past has caught up, so it ends the read only for a key absent at `until` (no put to
      // wait for), and only once etcd has had several rounds of catching up (kCatchUp) since the
      // watch was created and since the last events.
      if (r.events.empty() && fence == 0 && r.revision >= until && created_at.has_value() &&
          SteadyClock::now() - *created_at >= kCatchUp &&
          (!last_events_at || SteadyClock::now() - *last_events_at >= kCatchUp)) {
        complete = true;
      }
    }
    {
      MutexLock lock(mu);
      done = true;
      cv.notify_all();
    }
    helper.join();
    stream->cancel();
    const api::RawStatus status = broken_if_ok(stream->finish());
    if (complete) {
      core_->prefer(i);
      return history;
    }
    if (!ended.ok()) {
      if (denied && core_->has_user() && refused_token != *token) {
        refused_token = *token;
        continue;
      }
      return ended;
    }
    bool retry_elsewhere = false;
    bool stale = false;
    Status st = SteadyClock::now() >= deadline
                    ? Status(Reason::kIo, call + ": not complete within " +
                                              std::to_string(core_->timeout().count()) + " ms")
                    : core_->to_status(status, call, retry_elsewhere, stale);
    if (SteadyClock::now() >= deadline) retry_elsewhere = true;
    if (stale && refused_token != *token) {
      refused_token = *token;
      continue;
    }
    if (!retry_elsewhere) return st;
    failures += failures.empty() ? "" : "; ";
    failures += st.message();
    if (attempt + 1 >= n) break;
  }
  return Status(Reason::kIo,
                "no etcd endpoint answered Watch (history of " + quote(k) + ") (" + failures + ")");
}

}  // namespace

Result<std::unique_ptr<EtcdClient>> EtcdClient::open(std::vector<EtcdEndpoint> endpoints,
                                                     std::chrono::milliseconds timeout,
                                                     std::optional<EtcdAuth> auth,
                                                     EtcdTlsFiles tls) {
  if (endpoints.empty()) return InvalidArgument("the etcd client needs at least one endpoint");
  if (timeout <= milliseconds(0)) {
    return InvalidArgument("the etcd request timeout must be positive, not " +
                           std::to_string(timeout.count()) + " ms");
  }
  if (Status st = check_etcd_transport(endpoints, tls); !st.ok()) return st;
  api::ChannelSettings settings;
  settings.tls = endpoints.front().tls;
  settings.ping_interval = std::max(timeout, kMinPingInterval);
  settings.ping_timeout = timeout;
  if (tls.ca_file) {
    Result<std::string> pem = read_pem(*tls.ca_file, "etcd_ca_file");
    if (!pem.ok()) return pem.status();
    settings.ca_pem = std::move(pem).value();
  }
  if (tls.cert_file) {
    if (Status st = check_private_key_file(*tls.key_file, "etcd_key_file"); !st.ok()) return st;
    Result<std::string> cert = read_pem(*tls.cert_file, "etcd_cert_file");
    if (!cert.ok()) return cert.status();
    Result<std::string> key = read_pem(*tls.key_file, "etcd_key_file");
    if (!key.ok()) return key.status();
    settings.cert_pem = std::move(cert).value();
    settings.key_pem = std::move(key).value();
  }
  Result<const api::EtcdModule*> module = etcd_module();
  if (!module.ok()) return module.status();
  std::string common_name;
  if (!settings.cert_pem.empty()) {
    std::string error;
    if (!(*module)->common_name(settings.cert_pem, common_name, error)) {
      return InvalidArgument("etcd_cert_file " + quote(tls.cert_file->string()) + ": " + error);
    }
  }
  std::vector<std::unique_ptr<api::RawChannel>> channels;
  for (const EtcdEndpoint& ep : endpoints) {
    settings.target = ep.address.to_string();
    std::string error;
    std::unique_ptr<api::RawChannel> channel = (*module)->make_channel(settings, error);
    if (channel == nullptr) return InvalidArgument("TLS to etcd: " + error);
    channels.push_back(std::move(channel));
  }
  if (auth && auth->user.empty()) {
    auth->password.clear();  // no user: no authentication, `needs` kept for messages
  }
  const bool tls_without_certificate = settings.tls && settings.cert_pem.empty();
  auto core =
      std::make_shared<Core>(std::move(endpoints), timeout, std::move(auth), std::move(common_name),
                             tls_without_certificate, std::move(channels));
  return std::unique_ptr<EtcdClient>(std::make_unique<GrpcEtcdClient>(std::move(core)));
}

Status check_etcd_cluster_name(std::string_view name) {
  if (name.empty() || name.size() > 64) {
    return InvalidArgument("the cluster name must have 1 to 64 characters, not " +
                           std::to_string(name.size()));
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return InvalidArgument("the cluster name " + quote(name) + " has the character " +
                             quote_char(c) + " (allowed: A-Z a-z 0-9 . _ -)");
    }
  }
  if (name == "." || name == "..")
    return InvalidArgument("the cluster name cannot be " + quote(name));
  return OkStatus();
}

}  // namespace flurry::internal

namespace flurry {

std::string EtcdEndpoint::to_string() const {
  return (tls ? "https://" : "") + address.to_string();
}

Result<EtcdEndpoint> parse_etcd_endpoint(std::string_view text) {
  EtcdEndpoint out;
  std::string_view rest = text;
  if (rest.substr(0, 8) == "https://") {
    out.tls = true;
    rest.remove_prefix(8);
  } else if (rest.substr(0, 7) == "http://") {
    rest.remove_prefix(7);
  } else if (rest.find("://") != std::string_view::npos) {
    return InvalidArgument("etcd endpoint " + internal::quote_redacted(text) +
                           ": only http:// and https:// endpoints are known");
  }
  // Credentials in the endpoint are refused and never shown: an etcd user is etcd_user, its
  // password is read from etcd_password_file.
  if (rest.find('@') != std::string_view::npos) {
    return InvalidArgument("etcd endpoint " + internal::quote_redacted(text) +
                           ": user information in an endpoint is not used; give the user as "
                           "etcd_user and its password in etcd_password_file");
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);  // "https://h:2379/"
  if (rest.find_first_of("/?#") != std::string_view::npos) {
    return InvalidArgument("etcd endpoint " + internal::quote_redacted(text) +
                           ": has a path or query; give only the scheme, host and port");
  }
  Result<HostPort> address = parse_host_port(rest, HostPortUse::kConnect);
  if (!address.ok()) return address.status();
  out.address = std::move(address).value();
  return out;
}

}  // namespace flurry

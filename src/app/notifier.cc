#include "app/notifier.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace flurry::app {
namespace {

constexpr const char* kLibsystemd = "libsystemd.so.0";
// A STATUS= line is one line for `systemctl status`: the message of a readiness error is cut here.
constexpr std::size_t kMaxMessage = 120;

// One line of printable text, at most `limit` characters ("..." when cut).
std::string one_line(std::string_view text, std::size_t limit) {
  std::string out;
  for (const char ch : text) {
    if (out.size() >= limit) {
      out += "...";
      break;
    }
    const auto byte = static_cast<unsigned char>(ch);
    out += byte < 0x20 || byte == 0x7f ? ' ' : ch;
  }
  return out;
}

// What a change of readiness is judged by: the node and code/reason (messages carry changing
// numbers, such as how far the clock is behind).
std::string state_key(std::uint64_t node, const Status& st) {
  return std::to_string(node) + "/" + std::string(to_string(st.code())) + "/" +
         std::string(to_string(st.reason()));
}

class SystemdSink final : public NotifySink {
 public:
  explicit SystemdSink(decltype(&::sd_notify) notify) : notify_(notify) {}

  void send(const std::string& state) override {
    const int rc = notify_(0, state.c_str());
    if (rc >= 0 || warned_.exchange(true)) return;
    // Once: the service manager may be gone (a unit of Type=notify then fails its start anyway).
    spdlog::warn("event=sd_notify_failed error=\"{}\" notify_socket=\"{}\"", std::strerror(-rc),
                 std::getenv("NOTIFY_SOCKET") != nullptr ? std::getenv("NOTIFY_SOCKET") : "");
  }

 private:
  decltype(&::sd_notify) const notify_;
  std::atomic<bool> warned_{false};
};

}  // namespace

Result<std::unique_ptr<NotifySink>> systemd_notify_sink() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket == nullptr || *socket == '\0') return std::unique_ptr<NotifySink>();
  // RTLD_LOCAL: its symbols stay out of the global scope. Never closed (one per process).
  void* handle = ::dlopen(kLibsystemd, RTLD_NOW | RTLD_LOCAL);
  const char* error = handle == nullptr ? ::dlerror() : nullptr;
  void* symbol = handle != nullptr ? ::dlsym(handle, "sd_notify") : nullptr;
  if (symbol == nullptr) {
    if (error == nullptr) error = ::dlerror();
    return Status(StatusCode::kFailedPrecondition,
                  std::string("NOTIFY_SOCKET is set, so the service manager waits for READY=1, "
                              "which flurry sends through ") +
                      kLibsystemd + " (Debian's package libsystemd0); it cannot be loaded: " +
                      (error != nullptr ? error : "unknown error"));
  }
  return std::unique_ptr<NotifySink>(
      std::make_unique<SystemdSink>(reinterpret_cast<decltype(&::sd_notify)>(symbol)));
}

std::string ReadinessNotifier::status_text(std::uint64_t node, std::string_view registry,
                                           const Status& readiness) {
  std::string text = "node " + std::to_string(node) + ", registry " + one_line(registry, 80);
  if (readiness.ok()) return text + ": ready";
  const std::string_view why = readiness.reason() != Reason::kNone ? to_string(readiness.reason())
                                                                   : to_string(readiness.code());
  return text + ": not ready: " + std::string(why) + " " +
         one_line(readiness.message(), kMaxMessage);
}

void ReadinessNotifier::starting(std::string_view registry_kind) {
  if (sink_ == nullptr) return;
  MutexLock lock(mu_);
  if (stopping_) return;
  sink_->send("STATUS=starting: claiming a node ID (registry " + one_line(registry_kind, 80) + ")");
}

void ReadinessNotifier::serving(std::uint64_t node, std::string registry, const Status& readiness) {
  if (sink_ == nullptr) return;
  MutexLock lock(mu_);
  registry_ = std::move(registry);
  serving_ = true;
  known_ = true;
  node_ = node;
  readiness_ = readiness;
  publish_locked();
}

void ReadinessNotifier::update(std::uint64_t node, const Status& readiness) {
  if (sink_ == nullptr) return;
  MutexLock lock(mu_);
  known_ = true;
  node_ = node;
  readiness_ = readiness;
  publish_locked();
}

void ReadinessNotifier::publish_locked() {
  // Before the front ends accept requests /readyz cannot answer, and once stopping it says
  // SHUT_DOWN: neither is news for the service manager.
  if (!serving_ || stopping_ || !known_) return;
  std::string state;
  if (readiness_.ok() && !ready_sent_) {
    state = "READY=1\n";
    ready_sent_ = true;
  }
  const std::string key = state_key(node_, readiness_);
  if (key != last_state_) {
    state += "STATUS=" + status_text(node_, registry_, readiness_);
    last_state_ = key;
  }
  if (!state.empty()) sink_->send(state);
}

void ReadinessNotifier::stopping(std::string_view signal) {
  if (sink_ == nullptr) return;
  MutexLock lock(mu_);
  if (stopping_) return;
  stopping_ = true;
  std::string status = "STOPPING=1\nSTATUS=stopping (" + std::string(signal) + "): ";
  if (known_) {
    status += "draining requests, then releasing node " + std::to_string(node_);
  } else {
    status += "the start is abandoned";
  }
  sink_->send(status);
}

}  // namespace flurry::app

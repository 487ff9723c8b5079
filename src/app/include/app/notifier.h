// Internal: tells the service manager how `flurry serve` is doing, the sd_notify(3) protocol of a
// systemd unit with Type=notify. The composition root (apps/flurry/cmd_serve.cc) makes one
// ReadinessNotifier over the sink systemd_notify_sink() returns (none when NOTIFY_SOCKET is unset:
// then nothing is loaded, opened or sent) and calls it at each step of the server's life; tests
// hand it a sink of their own.
//
// What is sent, and when:
//   starting()  STATUS=starting: claiming a node ID (registry <kind>)
//   serving()   the front ends accept requests: READY=1 with the first readiness that is OK, which
//               is when /readyz first answers 200 (the lease is held and IDs can be issued with
//               proof of uniqueness); never before, also when the start waited for the clock.
//   update()    a STATUS= line whenever readiness changes (lease suspended or lost, a node ID
//               claimed again, the clock behind): "node N, registry R: ready" or "...: not ready:
//               REASON message". Called by the service's monitor (every 250 ms); repeated states
//               send nothing.
//   stopping()  STOPPING=1 and a last STATUS= when a graceful stop begins, before the transports
//               drain and the lease is released. Once; updates after it send nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "flurry/mutex.h"
#include "flurry/status.h"

namespace flurry::app {

// Where notifications go.
class NotifySink {
 public:
  virtual ~NotifySink() = default;
  // Sends one notification: VARIABLE=value assignments separated by newlines (sd_notify(3)).
  // Errors are the sink's to report (a notification is never worth stopping the server for).
  virtual void send(const std::string& state) = 0;
};

// The service manager's socket through libsystemd's sd_notify(), or null when NOTIFY_SOCKET is
// unset or empty (not started by systemd, or by a unit that is not Type=notify): then nothing is
// loaded. libsystemd.so.0 is opened with dlopen() only when NOTIFY_SOCKET is set, so a server that
// is not under systemd maps none of it or what it brings (libgcrypt, libzstd, liblzma, liblz4,
// libcap: about 1.2 MB resident). FAILED_PRECONDITION naming the library and the package when
// NOTIFY_SOCKET is set and it cannot be loaded.
[[nodiscard]] Result<std::unique_ptr<NotifySink>> systemd_notify_sink();

class ReadinessNotifier {
 public:
  // `sink` may be null (every call is then a no-op) and must outlive the notifier.
  explicit ReadinessNotifier(NotifySink* sink) : sink_(sink) {}
  ReadinessNotifier(const ReadinessNotifier&) = delete;
  ReadinessNotifier& operator=(const ReadinessNotifier&) = delete;

  // See the top of this file. Thread-safe: update() comes from the monitor thread, stopping()
  // from the signal thread, the others from the main thread.
  // `registry_kind`: the registry setting ("sqlite", "etcd", ...); `registry`: the open registry's
  // description (Service::registry_description, e.g. "sqlite:/var/lib/flurry/registry.db").
  void starting(std::string_view registry_kind);
  void serving(std::uint64_t node, std::string registry, const Status& readiness);
  void update(std::uint64_t node, const Status& readiness);
  void stopping(std::string_view signal);

  // The STATUS= text for a node and its readiness (at most about 200 characters).
  [[nodiscard]] static std::string status_text(std::uint64_t node, std::string_view registry,
                                               const Status& readiness);

 private:
  void publish_locked() FLURRY_REQUIRES(mu_);

  NotifySink* const sink_;
  // Guards everything below; held while sending, so notifications go out in the order decided.
  Mutex mu_;
  std::string registry_ FLURRY_GUARDED_BY(mu_);
  bool serving_ FLURRY_GUARDED_BY(mu_) = false;
  bool ready_sent_ FLURRY_GUARDED_BY(mu_) = false;
  bool stopping_ FLURRY_GUARDED_BY(mu_) = false;
  bool known_ FLURRY_GUARDED_BY(mu_) = false;  // node_ and readiness_ hold a report
  std::uint64_t node_ FLURRY_GUARDED_BY(mu_) = 0;
  Status readiness_ FLURRY_GUARDED_BY(mu_);
  // Node and code/reason of the last STATUS= sent.
  std::string last_state_ FLURRY_GUARDED_BY(mu_);
};

}  // namespace flurry::app

// A real etcd server for tests: one per test process, started on first use and stopped at exit.
//
// EtcdServer::shared() starts `etcd` (the one on PATH, or $FLURRY_ETCD) as a single-member
// cluster on 127.0.0.1 with free client and peer ports and a data directory in a TempDir, and
// waits until it answers a read. The server is stopped by PID (SIGTERM, then SIGKILL after 5 s)
// when the process exits, and it gets SIGKILL if the thread that started it dies first
// (PR_SET_PDEATHSIG), so it never outlives the test. Tests share it by using their own key
// prefixes (the etcd registry's cluster names).
//
// Not a fake: a test that cannot start etcd fails (endpoint() returns the reason), it is never
// skipped. shared() must be called first from the thread that lives longest (the main thread):
// PR_SET_PDEATHSIG follows that thread. Thread-safe after that.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "flurry/status.h"
#include "free_port.h"
#include "registry/etcd_client.h"
#include "test_store.h"

namespace flurry::testing {

class EtcdServer {
 public:
  // The process's server, started on the first call.
  static EtcdServer& shared() {
    static EtcdServer server;
    return server;
  }

  // "127.0.0.1:PORT" of the running server, or why it could not be started (UNAVAILABLE).
  [[nodiscard]] Result<std::string> endpoint() const {
    if (!error_.empty()) return Status(StatusCode::kUnavailable, error_);
    return "127.0.0.1:" + std::to_string(client_port_);
  }

  // A client of this server (requests time out after 5 s).
  [[nodiscard]] internal::EtcdClient client() const {
    return internal::EtcdClient({HostPort{"127.0.0.1", client_port_}}, std::chrono::seconds(5));
  }

  ~EtcdServer() { stop(); }
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

 private:
  static constexpr int kStartAttempts = 5;
  static constexpr std::chrono::seconds kStartTimeout{30};

  EtcdServer() {
    for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
      error_ = start(attempt);
      if (error_.empty()) return;
      stop();  // a port taken meanwhile, most likely: try others
    }
  }

  [[nodiscard]] std::string log_tail() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
  }

  // Starts etcd and waits for it; "" or why it failed.
  std::string start(int attempt) {
    client_port_ = free_port();
    const std::uint16_t peer_port = free_port();
    if (client_port_ == 0 || peer_port == 0 || client_port_ == peer_port) {
      return "no free ports for etcd";
    }
    const char* binary = std::getenv("FLURRY_ETCD");
    const std::string etcd = binary != nullptr && *binary != '\0' ? binary : "etcd";
    const std::string client_url = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port);
    const std::string data = (dir_.path() / ("data-" + std::to_string(attempt))).string();
    log_ = (dir_.path() / "etcd.log").string();
    std::vector<std::string> args = {etcd,
                                     "--name=flurry-test",
                                     "--data-dir=" + data,
                                     "--listen-client-urls=" + client_url,
                                     "--advertise-client-urls=" + client_url,
                                     "--listen-peer-urls=" + peer_url,
                                     "--initial-advertise-peer-urls=" + peer_url,
                                     "--initial-cluster=flurry-test=" + peer_url,
                                     "--logger=zap",
                                     "--log-level=warn"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int log_fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) return "cannot create " + log_;
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(log_fd);
      return "fork failed";
    }
    if (pid == 0) {  // only async-signal-safe calls until exec
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
      const int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) ::dup2(null, STDIN_FILENO);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(log_fd);
    pid_ = pid;
    owner_ = parent;

    const internal::EtcdClient probe({HostPort{"127.0.0.1", client_port_}},
                                     std::chrono::milliseconds(500));
    const auto give_up = std::chrono::steady_clock::now() + kStartTimeout;
    std::string last;
    while (std::chrono::steady_clock::now() < give_up) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "etcd (" + etcd + ") exited at start (status " + std::to_string(status) +
               "); its log:\n" + log_tail();
      }
      Result<internal::EtcdRange> r = probe.range("/flurry-test-probe");
      if (r.ok()) return "";
      last = r.status().to_string();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "etcd did not answer within " + std::to_string(kStartTimeout.count()) +
           " s (last: " + last + "); its log:\n" + log_tail();
  }

  void stop() {
    // Only the process that started etcd stops it (not a forked child of the test).
    if (pid_ <= 0 || ::getpid() != owner_) return;
    ::kill(pid_, SIGTERM);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= give_up) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }

  TempDir dir_;
  std::string log_;
  std::uint16_t client_port_ = 0;
  pid_t pid_ = -1;
  pid_t owner_ = -1;  // the process that started it
  std::string error_;
};

}  // namespace flurry::testing

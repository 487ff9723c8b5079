// A real etcd server for tests: one per test process, started on first use and stopped at exit.
//
// EtcdServer::shared() starts `etcd` (the one on PATH, or $FLURRY_ETCD) as a single-member
// cluster on 127.0.0.1 with free client and peer ports and a data directory in a TempDir, and
// waits until it answers a read. The server is stopped by PID (SIGTERM, then SIGKILL after 5 s)
// when the process exits, and it gets SIGKILL if the thread that started it dies first
// (PR_SET_PDEATHSIG), so it never outlives the test. Tests share it by using their own key
// prefixes (the etcd registry's cluster names).
//
// EtcdServer::secured() is a second server with authentication enabled (and TLS: server.pem from
// tests/testing/make_certs.sh, --client-cert-auth, peer TLS on an https peer URL) and a short
// --auth-token-ttl (2 s), so that tokens expire between requests. Its users: root, `flurry`
// (role flurry: readwrite on the prefixes /flurry/ and /flurry-cluster-names/, which the
// conformance suite's many cluster names need), `narrow` (role narrow: readwrite on
// /flurry/narrow/ and /flurry-cluster-names/narrow only, what one cluster needs) and `norole`
// (no role). Passwords: password_of(user). client() authenticates as root. make_certs.sh makes
// client certificates with the Common Names root, flurry and norole (client-<CN>.pem), which
// etcd (--client-cert-auth) takes as the user when a client sends no token.
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
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
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
    static EtcdServer server(false);
    return server;
  }
  // The process's secured server (see above), started on the first call.
  static EtcdServer& secured() {
    static EtcdServer server(true);
    return server;
  }

  // "127.0.0.1:PORT" of the running server ("https://127.0.0.1:PORT" for the secured one), or why
  // it could not be started (UNAVAILABLE).
  [[nodiscard]] Result<std::string> endpoint() const {
    if (!error_.empty()) return Status(StatusCode::kUnavailable, error_);
    return this_endpoint().to_string();
  }

  // A client of this server (requests time out after 5 s); of the secured one, as root. The
  // client can always be made (errors come from its calls, or abort the test here).
  [[nodiscard]] std::unique_ptr<internal::EtcdClient> client() const {
    std::optional<internal::EtcdAuth> auth;
    if (secured_) auth = internal::EtcdAuth{"root", password_of("root"), {}};
    Result<std::unique_ptr<internal::EtcdClient>> made =
        internal::EtcdClient::open({this_endpoint()}, std::chrono::seconds(5), auth, client_tls());
    if (!made.ok()) {
      std::fprintf(stderr, "EtcdServer::client: %s\n", made.status().to_string().c_str());
      std::abort();
    }
    return std::move(made).value();
  }

  // The secured server's TLS files for a client: make_certs.sh's CA and client-nocn.
  [[nodiscard]] EtcdTlsFiles client_tls() const {
    if (!kTls || !secured_) return {};
    return {certs_ / "ca.pem", certs_ / "client-nocn.pem", certs_ / "client-nocn.key"};
  }
  // The certificates make_certs.sh made for the secured server (empty for the other).
  [[nodiscard]] const std::filesystem::path& certs() const { return certs_; }
  [[nodiscard]] static std::string password_of(std::string_view user) {
    return std::string(user) + "-secret-password";
  }
  // Runs etcdctl against this server (the secured one as root) with `args`; its output, or why
  // it failed.
  [[nodiscard]] Result<std::string> etcdctl(const std::string& args) const {
    std::string command =
        "ETCDCTL_API=3 etcdctl --command-timeout=10s --endpoints=" + this_endpoint().to_string() +
        " --user=root:" + password_of("root");
    if (kTls && secured_) {
      command += " --cacert=" + (certs_ / "ca.pem").string() +
                 " --cert=" + (certs_ / "client-root.pem").string() +
                 " --key=" + (certs_ / "client-root.key").string();
    }
    const std::string out = (dir_.path() / "etcdctl.out").string();
    command += " " + args + " >" + out + " 2>&1";
    const int rc = std::system(command.c_str());
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    if (rc != 0) return Status(StatusCode::kInternal, "etcdctl " + args + ": " + ss.str());
    return ss.str();
  }

  ~EtcdServer() { stop(); }
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

 private:
  static constexpr int kStartAttempts = 5;
  static constexpr std::chrono::seconds kStartTimeout{30};
  // The secured server speaks TLS (once the etcd client has it).
  static constexpr bool kTls = true;

  explicit EtcdServer(bool secured) : secured_(secured) {
    if (secured_) {
      certs_ = dir_.path() / "certs";
      const std::string make = std::string(FLURRY_SOURCE_DIR) + "/tests/testing/make_certs.sh " +
                               certs_.string() + " root flurry norole >" +
                               (dir_.path() / "make_certs.out").string() + " 2>&1";
      if (std::system(make.c_str()) != 0) {
        error_ = "make_certs.sh failed: " + make;
        return;
      }
    }
    for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
      error_ = start(attempt);
      if (error_.empty()) error_ = secure();
      if (error_.empty()) return;
      stop();  // a port taken meanwhile, most likely: try others
    }
  }

  [[nodiscard]] EtcdEndpoint this_endpoint() const {
    return EtcdEndpoint{{"127.0.0.1", client_port_}, secured_ && kTls};
  }

  // Users, roles and `auth enable` on the secured server; "" or why it failed.
  std::string secure() {
    if (!secured_) return "";
    const std::string root = password_of("root");
    const std::vector<std::string> steps = {
        "user add root:" + root,
        "role add flurry",
        "role add narrow",
        "role grant-permission flurry readwrite /flurry/ --prefix=true",
        "role grant-permission flurry readwrite /flurry-cluster-names/ --prefix=true",
        "role grant-permission narrow readwrite /flurry/narrow/ --prefix=true",
        "role grant-permission narrow readwrite /flurry-cluster-names/narrow",
        "user add flurry:" + password_of("flurry"),
        "user add narrow:" + password_of("narrow"),
        "user add norole:" + password_of("norole"),
        "user grant-role root root",
        "user grant-role flurry flurry",
        "user grant-role narrow narrow",
        "auth enable"};
    for (const std::string& args : steps) {
      // Before `auth enable` etcdctl's --user is ignored.
      Result<std::string> r = etcdctl(args);
      if (!r.ok()) return r.status().message();
    }
    return "";
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
    const std::string scheme = secured_ && kTls ? "https://" : "http://";
    const std::string client_url = scheme + "127.0.0.1:" + std::to_string(client_port_);
    const std::string peer_url = scheme + "127.0.0.1:" + std::to_string(peer_port);
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
    if (secured_) args.push_back("--auth-token-ttl=2");
    if (secured_ && kTls) {
      const std::string server = (certs_ / "server.pem").string();
      const std::string key = (certs_ / "server.key").string();
      const std::string ca = (certs_ / "ca.pem").string();
      for (std::string a : {"--cert-file=" + server, "--key-file=" + key, "--trusted-ca-file=" + ca,
                            std::string("--client-cert-auth"), "--peer-cert-file=" + server,
                            "--peer-key-file=" + key, "--peer-trusted-ca-file=" + ca,
                            std::string("--peer-client-cert-auth")}) {
        args.push_back(std::move(a));
      }
    }
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

    // Before `auth enable`: no user yet.
    Result<std::unique_ptr<internal::EtcdClient>> opened = internal::EtcdClient::open(
        {this_endpoint()}, std::chrono::milliseconds(500), std::nullopt, client_tls());
    if (!opened.ok()) return "cannot make an etcd client: " + opened.status().to_string();
    const internal::EtcdClient& probe = **opened;
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
  bool secured_ = false;
  std::filesystem::path certs_;
  std::string log_;
  std::uint16_t client_port_ = 0;
  pid_t pid_ = -1;
  pid_t owner_ = -1;  // the process that started it
  std::string error_;
};

}  // namespace flurry::testing

// A real PostgreSQL server for tests: a fresh cluster (initdb) in a temporary directory, the
// server on 127.0.0.1 and a free port, and a database per test fixture. No mock: the registry
// under test talks to this server over TCP as it would to any other.
//
// PostgreSQL refuses to run as root: when the tests run as root, initdb and postgres run as the
// `postgres` user (the child drops its credentials itself before exec, so the PID kept is the
// server's own and PR_SET_PDEATHSIG survives: the server never outlives the test process, or
// rather the thread that started it). Otherwise they run as the current user. The binaries come
// from $FLURRY_PG_BINDIR or the newest /usr/lib/postgresql/<version>/bin (Debian's layout).
//
// Every failure to set the server up aborts with a message: the fixture is broken, not the code
// under test. Not thread-safe, except that a started server may be used from any thread.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "free_port.h"
#include "test_store.h"

namespace flurry::testing {

class PostgresServer {
 public:
  // Creates the cluster and starts the server; aborts when either fails. Tests run without fsync
  // (fast, and a test never survives a power cut); `durable` keeps PostgreSQL's defaults, so that
  // a benchmark's commit costs what it costs in production on this disk.
  explicit PostgresServer(bool durable = false) : durable_(durable) {
    bindir_ = find_bindir();
    if (::geteuid() == 0) {
      const passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr)
        die("running as root, and there is no 'postgres' user to run PostgreSQL as");
      user_ = RunAs{pw->pw_uid, pw->pw_gid, pw->pw_name};
      if (::chown(dir_.path().c_str(), pw->pw_uid, pw->pw_gid) != 0)
        die("cannot chown the temp dir");
    }
    const int rc = run_and_wait({bindir_ / "initdb", "-D", data_dir().string(), "-U", "postgres",
                                 "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"});
    if (rc != 0) die("initdb failed (exit " + std::to_string(rc) + ")");
    start();
  }
  ~PostgresServer() { stop(); }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // One server for the whole test binary, started on first use (call it first from the main
  // thread: the server dies with the thread that started it) and stopped at exit.
  static PostgresServer& shared() {
    static PostgresServer server;
    return server;
  }

  // Starts the server (again, after stop(): same cluster, same port when it is still free) and
  // waits until it accepts connections.
  void start() {
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (port_ == 0 || attempt > 0) port_ = testing::free_port();
      if (port_ == 0) die("cannot find a free port");
      std::vector<std::string> argv = {
          bindir_ / "postgres",  "-D", data_dir().string(),   "-k", dir_.path().string(),    "-h",
          "127.0.0.1",           "-p", std::to_string(port_), "-c", "synchronous_commit=on", "-c",
          "max_connections=200", "-c", "shared_buffers=16MB"};
      if (!durable_) argv.insert(argv.end(), {"-c", "fsync=off", "-c", "full_page_writes=off"});
      pid_ = spawn(argv);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          break;  // exited: the port was taken, or worse (the log says)
        }
        if (PQping(admin_conninfo("postgres").c_str()) == PQPING_OK) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (pid_ > 0) die("the server did not accept connections within 60 s");
      if (log_text().find("already in use") == std::string::npos) die("the server exited at start");
    }
    die("no free port for the server after 5 attempts");
  }

  // Stops the server (fast shutdown: SIGINT, then SIGKILL after 10 s) and waits for it.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGINT);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }

  [[nodiscard]] bool running() const { return pid_ > 0; }
  [[nodiscard]] int port() const { return port_; }

  // A URL for `database` as the superuser, as the registry under test is given one.
  [[nodiscard]] std::string url(std::string_view database) const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + std::string(database);
  }

  // A new, empty database with a name unique in this server.
  [[nodiscard]] std::string create_database() {
    static std::atomic<int> counter{0};
    const std::string name =
        "flurry_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    exec("postgres", "CREATE DATABASE " + name);
    return name;
  }
  // Drops `database`, ending its sessions (the handles still open see a broken connection).
  void drop_database(const std::string& database) {
    exec("postgres", "DROP DATABASE IF EXISTS " + database + " WITH (FORCE)");
  }

  // Runs one statement as the superuser in `database`; the rows it changed. Aborts on failure.
  long exec(const std::string& database, const std::string& sql) const {
    PGconn* conn = PQconnectdb(admin_conninfo(database).c_str());
    if (PQstatus(conn) != CONNECTION_OK) {
      const std::string why = PQerrorMessage(conn);
      PQfinish(conn);
      die("cannot connect to " + database + ": " + why);
    }
    PGresult* result = PQexec(conn, sql.c_str());
    const ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      const std::string why = PQresultErrorMessage(result);
      PQclear(result);
      PQfinish(conn);
      die(sql + ": " + why);
    }
    const char* tuples = PQcmdTuples(result);
    const long changed = tuples != nullptr && *tuples != '\0' ? std::atol(tuples) : 0;
    PQclear(result);
    PQfinish(conn);
    return changed;
  }

  // The server's log so far (its stderr).
  [[nodiscard]] std::string log_text() const {
    std::ifstream in(log_path());
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

 private:
  struct RunAs {
    uid_t uid;
    gid_t gid;
    std::string name;
  };

  [[noreturn]] void die(const std::string& why) const {
    std::cerr << "postgres test server: " << why << "\n--- server log (" << log_path().string()
              << ") ---\n"
              << log_text() << std::endl;
    std::abort();
  }

  [[nodiscard]] std::filesystem::path data_dir() const { return dir_.path() / "data"; }
  [[nodiscard]] std::filesystem::path log_path() const { return dir_.path() / "server.log"; }
  [[nodiscard]] std::string admin_conninfo(const std::string& database) const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=" + database +
           " connect_timeout=5";
  }

  static std::filesystem::path find_bindir() {
    if (const char* env = std::getenv("FLURRY_PG_BINDIR"); env != nullptr && *env != '\0') {
      return env;
    }
    std::optional<std::filesystem::path> best;
    int best_version = -1;
    std::error_code ec;
    for (std::filesystem::directory_iterator it("/usr/lib/postgresql", ec), end; !ec && it != end;
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      const int version = std::atoi(name.c_str());
      if (version > best_version && std::filesystem::exists(it->path() / "bin" / "postgres")) {
        best_version = version;
        best = it->path() / "bin";
      }
    }
    if (!best) {
      std::cerr << "postgres test server: no /usr/lib/postgresql/<version>/bin/postgres (install "
                   "the Debian package postgresql, or set FLURRY_PG_BINDIR)"
                << std::endl;
      std::abort();
    }
    return *best;
  }

  // Forks and execs `argv` as the server's user, its output appended to the log; the PID.
  pid_t spawn(const std::vector<std::string>& argv) const {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const std::string log = log_path().string();
    const std::string cwd = dir_.path().string();
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) die("fork failed");
    if (pid > 0) return pid;
    // The child: only async-signal-safe calls from here on.
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) ::_exit(126);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    if (user_) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(user_->gid) != 0 || ::setuid(user_->uid) != 0) {
        ::_exit(126);
      }
    }
    // After the credentials change, which would clear it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // the parent is gone already
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execv(args[0], args.data());
    ::_exit(127);
  }

  int run_and_wait(const std::vector<std::string>& argv) const {
    const pid_t pid = spawn(argv);
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  TempDir dir_;  // first: removed after the server stopped
  std::filesystem::path bindir_;
  bool durable_ = false;
  std::optional<RunAs> user_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace flurry::testing

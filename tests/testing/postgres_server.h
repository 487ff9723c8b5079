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
// TLS mode (Security::kTls): certificates from tests/testing/make_certs.sh, the server with
// ssl=on (its key a copy owned by the server's user, 0600) and a pg_hba.conf with no `host` line,
// so that plain TCP is refused: `hostssl ... cert` for role "flurry" (authenticated by the client
// certificate whose CN is its name) and `hostssl ... scram-sha-256` for role "flurry_pw" (password
// kPasswordUserPassword). Both roles may use every database create_database() makes. The fixture's
// own statements go over the Unix socket.
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
#include <sys/stat.h>
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
  enum class Security { kPlain, kTls };
  // The password of role "flurry_pw" (TLS mode).
  static constexpr const char* kPasswordUserPassword = "pw-Fl0rry-s3cret";

  // Creates the cluster and starts the server; aborts when either fails. Tests run without fsync
  // (fast, and a test never survives a power cut); `durable` keeps PostgreSQL's defaults, so that
  // a benchmark's commit costs what it costs in production on this disk.
  explicit PostgresServer(bool durable = false, Security security = Security::kPlain)
      : durable_(durable), tls_(security == Security::kTls) {
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
    if (tls_) set_up_tls();
    start();
    if (tls_) {
      exec("postgres", "CREATE ROLE flurry LOGIN");
      exec("postgres", std::string("CREATE ROLE flurry_pw LOGIN IN ROLE flurry PASSWORD '") +
                           kPasswordUserPassword + "'");
      // Its sessions act as flurry, so that what either role creates both may use.
      exec("postgres", "ALTER ROLE flurry_pw SET role = 'flurry'");
    }
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
  // The same in TLS mode: a second server, started on first use.
  static PostgresServer& shared_tls() {
    static PostgresServer server(/*durable=*/false, Security::kTls);
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
  [[nodiscard]] bool tls() const { return tls_; }
  // TLS mode: the directory of make_certs.sh's certificates (ca.pem, wronghost.pem, ...).
  [[nodiscard]] std::filesystem::path certs_dir() const { return dir_.path() / "certs"; }

  // A URL for `database` as the registry under test is given one: as the superuser, or in TLS
  // mode as role "flurry" over sslmode=verify-full, authenticated by its client certificate.
  [[nodiscard]] std::string url(std::string_view database) const {
    if (tls_) {
      return "postgresql://flurry@127.0.0.1:" + std::to_string(port_) + "/" +
             std::string(database) + "?" + tls_query("flurry");
    }
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + std::string(database);
  }
  // TLS mode: the query parameters of sslmode=verify-full with the test CA, and the client
  // certificate of `client` ("flurry") when not empty.
  [[nodiscard]] std::string tls_query(std::string_view client) const {
    std::string q = "sslmode=verify-full&sslrootcert=" + (certs_dir() / "ca.pem").string();
    if (!client.empty()) {
      const std::string base = (certs_dir() / ("client-" + std::string(client))).string();
      q += "&sslcert=" + base + ".pem&sslkey=" + base + ".key";
    }
    return q;
  }

  // A new, empty database with a name unique in this server.
  [[nodiscard]] std::string create_database() {
    static std::atomic<int> counter{0};
    const std::string name =
        "flurry_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    // TLS mode: owned by "flurry" (and so usable by "flurry_pw", its member), whose public
    // schema it may create tables in.
    exec("postgres", "CREATE DATABASE " + name + (tls_ ? " OWNER flurry" : ""));
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

  // TLS mode: the server presents certificate `name` ("wronghost": make_certs.sh's certificate
  // for another host; "server": the right one) to the connections made from now on.
  void use_certificate(const std::string& name) const {
    exec("postgres", "ALTER SYSTEM SET ssl_cert_file = '" + name + ".pem'");
    exec("postgres", "ALTER SYSTEM SET ssl_key_file = '" + name + ".key'");
    exec("postgres", "SELECT pg_reload_conf()");
    // The postmaster reloads on its signal: wait until it says it did.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (value("postgres", "SELECT current_setting('ssl_cert_file') = '" + name + ".pem'") ==
          "t") {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    die("the server did not reload its certificate");
  }

  // The first column of the first row of `sql` in `database`, as text. Aborts on failure.
  std::string value(const std::string& database, const std::string& sql) const {
    PGconn* conn = PQconnectdb(admin_conninfo(database).c_str());
    PGresult* result = PQexec(conn, sql.c_str());
    if (PQresultStatus(result) != PGRES_TUPLES_OK || PQntuples(result) < 1) {
      const std::string why = PQerrorMessage(conn);
      PQclear(result);
      PQfinish(conn);
      die(sql + ": " + why);
    }
    std::string out = PQgetvalue(result, 0, 0);
    PQclear(result);
    PQfinish(conn);
    return out;
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
  // TLS mode: over the Unix socket, the only way in without a certificate.
  [[nodiscard]] std::string admin_conninfo(const std::string& database) const {
    return "host=" + (tls_ ? dir_.path().string() : std::string("127.0.0.1")) +
           " port=" + std::to_string(port_) + " user=postgres dbname=" + database +
           " connect_timeout=5";
  }

  // Certificates (make_certs.sh, beside this header: FLURRY_TESTING_DIR names the directory), the
  // server's copies in the data directory owned by its user (PostgreSQL refuses a key others can
  // read), and a pg_hba.conf that takes TCP connections over TLS only.
  void set_up_tls() const {
#ifdef FLURRY_TESTING_DIR
    const std::filesystem::path script =
        std::filesystem::path(FLURRY_TESTING_DIR) / "make_certs.sh";
#else
    const std::filesystem::path script =
        std::filesystem::path(__FILE__).parent_path() / "make_certs.sh";
#endif
    const std::string command = "bash '" + script.string() + "' '" + certs_dir().string() +
                                "' flurry flurry_pw >>'" + log_path().string() + "' 2>&1";
    if (std::system(command.c_str()) != 0) die("make_certs.sh failed: " + command);
    for (const char* name :
         {"server.pem", "server.key", "wronghost.pem", "wronghost.key", "ca.pem"}) {
      const std::filesystem::path to = data_dir() / name;
      std::filesystem::copy_file(certs_dir() / name, to,
                                 std::filesystem::copy_options::overwrite_existing);
      ::chmod(to.c_str(), 0600);
      if (user_ && ::chown(to.c_str(), user_->uid, user_->gid) != 0)
        die("cannot chown " + to.string());
    }
    const std::filesystem::path hba = data_dir() / "pg_hba.conf";
    {
      std::ofstream out(hba, std::ios::trunc);
      out << "local all all trust\n"
             "hostssl all flurry 127.0.0.1/32 cert\n"
             "hostssl all flurry ::1/128 cert\n"
             "hostssl all flurry_pw 127.0.0.1/32 scram-sha-256\n"
             "hostssl all flurry_pw ::1/128 scram-sha-256\n";
      if (!out) die("cannot write " + hba.string());
    }
    if (user_ && ::chown(hba.c_str(), user_->uid, user_->gid) != 0) die("cannot chown pg_hba.conf");
    // In postgresql.conf, not on the command line, so that use_certificate() can override it.
    std::ofstream conf(data_dir() / "postgresql.conf", std::ios::app);
    conf << "ssl = on\nssl_cert_file = 'server.pem'\nssl_key_file = 'server.key'\n"
            "ssl_ca_file = 'ca.pem'\n";
    if (!conf) die("cannot write postgresql.conf");
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
  bool tls_ = false;
  std::optional<RunAs> user_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace flurry::testing

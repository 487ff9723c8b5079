// Internal: the one libpq session of the PostgreSQL registry and the PostgreSQL segment store. A
// connection made from a parsed PostgresUrl, run non-blocking, every wait on its socket bounded
// by a deadline on the injected monotonic clock; statements with text parameters; one mapping of
// failures onto a Status for both owners: a connection that failed, broke or went silent, and a
// statement PostgreSQL refused (by its SQLSTATE). Not thread-safe: its owner serializes calls
// (each owner holds one session behind its own mutex).
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/status.h"
#include "postgres_conninfo.h"

namespace flurry::internal {

struct PgResultClearer {
  void operator()(PGresult* result) const noexcept { PQclear(result); }
};
using PgResult = std::unique_ptr<PGresult, PgResultClearer>;

// The rows a statement returned, read as text.
class PgRows {
 public:
  explicit PgRows(PgResult result) : result_(std::move(result)) {}
  [[nodiscard]] int size() const { return PQntuples(result_.get()); }
  [[nodiscard]] bool null(int row, int col) const {
    return PQgetisnull(result_.get(), row, col) != 0;
  }
  [[nodiscard]] std::string text(int row, int col) const;
  // A boolean column: true only for a non-NULL 't'.
  [[nodiscard]] bool boolean(int row, int col) const {
    return !null(row, col) && text(row, col) == "t";
  }
  // An integer column; nullopt when NULL or not a number (which PostgreSQL never sends for one).
  [[nodiscard]] std::optional<std::int64_t> integer(int row, int col) const;

 private:
  PgResult result_;
};

class PgSession {
 public:
  // Errors of query() and connect(), the same for every owner:
  //  - a connection that cannot be made, broke, or gave no answer before the deadline, and a
  //    statement refused because the connection is going (SQLSTATE class 08, 57P01-57P03, 25P03):
  //    UNAVAILABLE / IO "<where>: <what>: <why> (retry)", the connection dropped;
  //  - busy or temporarily unable (a statement or lock timeout, a serialization failure or
  //    deadlock, class 53: too many connections, out of memory or disk; a standby that takes no
  //    writes; class 58, the server's own I/O): UNAVAILABLE / IO "... (retry)";
  //  - no privilege (42501): PERMISSION_DENIED; a number out of range (22003): OUT_OF_RANGE;
  //  - any other SQL error: INTERNAL with PostgreSQL's message.
  // Every message names `where`, `what`, PostgreSQL's or libpq's reason (any password in it
  // masked) and the SQLSTATE when there is one.
  struct Options {
    // Whose session, for messages: "postgres registry <redacted URL>".
    std::string where;
    // Each operation's deadline from its start (deadline()), shown in the timeout's message; also
    // handed to libpq as connect_timeout (whole seconds, at least 1) unless the URL or
    // PGCONNECT_TIMEOUT sets one, as libpq applies it where it moves from host to host itself.
    std::chrono::milliseconds timeout{2000};
    // application_name unless the URL or PGAPPNAME names one.
    std::string application_name = "flurry";
  };

  // `clock` measures every deadline; it must outlive the session.
  PgSession(PostgresUrl url, MonotonicClock& clock, Options options);

  [[nodiscard]] const PostgresUrl& url() const noexcept { return url_; }
  [[nodiscard]] const std::string& where() const noexcept { return options_.where; }
  // The deadline of an operation starting now: now + timeout, on the injected clock.
  [[nodiscard]] MonoTime deadline() const noexcept { return clock_.now() + options_.timeout; }
  [[nodiscard]] bool expired(MonoTime deadline) const noexcept { return clock_.now() >= deadline; }

  [[nodiscard]] bool connected() const noexcept { return conn_ != nullptr; }
  [[nodiscard]] PGconn* conn() const noexcept { return conn_.get(); }
  // True while a transaction is open (or failed) on the connection.
  [[nodiscard]] bool in_transaction() const noexcept {
    return conn_ != nullptr && PQtransactionStatus(conn_.get()) != PQTRANS_IDLE;
  }
  void drop() noexcept { conn_.reset(); }

  // A new connection (dropping any old one), non-blocking, NOTICEs silenced, made and
  // configured before `deadline` or failed (UNAVAILABLE / IO): statement_timeout, lock_timeout
  // and idle_in_transaction_session_timeout at Options::timeout, synchronous_commit raised to on
  // from off or local.
  [[nodiscard]] Status connect(MonoTime deadline);
  // False when the idle connection was closed by the server (it restarted, or ended the
  // session): found before a statement is sent, so nothing is in doubt.
  [[nodiscard]] bool idle_alive() const;

  // One statement with its text parameters, its rows; errors as Options says.
  [[nodiscard]] Result<PgRows> query(MonoTime deadline, const char* sql,
                                     const std::vector<std::string>& params, std::string_view what);
  [[nodiscard]] Status exec(MonoTime deadline, const char* sql,
                            const std::vector<std::string>& params, std::string_view what) {
    Result<PgRows> r = query(deadline, sql, params, what);
    return r.ok() ? OkStatus() : r.status();
  }
  // The SQLSTATE of the last statement's error; empty after a success or a connection failure.
  [[nodiscard]] const std::string& last_sqlstate() const noexcept { return last_sqlstate_; }
  // Statements sent since the last reset_statements().
  [[nodiscard]] int statements() const noexcept { return statements_; }
  void reset_statements() noexcept { statements_ = 0; }

  // The connection is dropped; UNAVAILABLE / IO "<where>: <what>: <libpq's message on one line,
  // password masked> (retry)".
  [[nodiscard]] Status connection_error(std::string_view what, const char* pq_message);

 private:
  struct ConnCloser {
    void operator()(PGconn* conn) const noexcept { PQfinish(conn); }
  };

  // Waits until the socket is ready for `events` or the deadline passes (then the connection is
  // dropped). Polls in short slices, so a deadline on the injected clock is seen when it passes.
  [[nodiscard]] Status wait_socket(short events, MonoTime deadline, std::string_view what);
  // The Status of a statement PostgreSQL refused, as Options says.
  [[nodiscard]] Status statement_error(const PGresult* result, std::string_view what);

  const PostgresUrl url_;
  MonotonicClock& clock_;
  const Options options_;
  std::unique_ptr<PGconn, ConnCloser> conn_;
  int statements_ = 0;
  std::string last_sqlstate_;
};

}  // namespace flurry::internal

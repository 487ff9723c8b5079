// Internal: the one libpq session of the PostgreSQL registry and the PostgreSQL segment store. A
// connection made from a parsed PostgresUrl, run non-blocking, every wait on its socket bounded
// by a deadline on the injected monotonic clock; statements with text parameters; the errors of
// a connection that failed, broke or went silent. Not thread-safe: its owner serializes calls
// (each owner holds one session behind its own mutex).
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/registry.h"
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
  // Makes the Status of a connection that failed, broke or timed out from its whole message
  // ("<where>: <what>: <why> (retry)"): the registry says UNAVAILABLE, the segment store IO.
  using FailureStatus = Status (*)(std::string message);
  // Maps a failed statement onto a Status; it may call drop() (the connection is going).
  using StatementError = std::function<Status(const PGresult*, std::string_view what)>;

  struct Options {
    // Whose session, for messages: "postgres registry <redacted URL>".
    std::string where;
    // Each operation's deadline from its start (deadline()), shown in the timeout's message.
    std::chrono::milliseconds timeout{2000};
    // application_name unless the URL or PGAPPNAME names one.
    std::string application_name = "flurry";
    // Also hand libpq connect_timeout (the timeout in whole seconds, at least 1) unless the URL
    // or PGCONNECT_TIMEOUT sets one: libpq applies it where it moves from host to host itself.
    bool libpq_connect_timeout = false;
    FailureStatus failure = nullptr;
    StatementError statement_error;
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

  // A new connection (dropping any old one), non-blocking, NOTICEs silenced, made before
  // `deadline` or failed (options.failure). The caller configures the session after it.
  [[nodiscard]] Status connect(MonoTime deadline);
  // False when the idle connection was closed by the server (it restarted, or ended the
  // session): found before a statement is sent, so nothing is in doubt.
  [[nodiscard]] bool idle_alive() const;

  // One statement with its text parameters, its rows; a connection failure (options.failure) or
  // the statement's error (options.statement_error).
  [[nodiscard]] Result<PgRows> query(MonoTime deadline, const char* sql,
                                     const std::vector<std::string>& params, std::string_view what);
  [[nodiscard]] Status exec(MonoTime deadline, const char* sql,
                            const std::vector<std::string>& params, std::string_view what) {
    Result<PgRows> r = query(deadline, sql, params, what);
    return r.ok() ? OkStatus() : r.status();
  }
  // Statements sent since the last reset_statements().
  [[nodiscard]] int statements() const noexcept { return statements_; }
  void reset_statements() noexcept { statements_ = 0; }

  // The connection is dropped; options.failure of "<where>: <what>: <libpq's message on one
  // line, password masked> (retry)".
  [[nodiscard]] Status connection_error(std::string_view what, const char* pq_message);

 private:
  struct ConnCloser {
    void operator()(PGconn* conn) const noexcept { PQfinish(conn); }
  };

  // Waits until the socket is ready for `events` or the deadline passes (then the connection is
  // dropped). Polls in short slices, so a deadline on the injected clock is seen when it passes.
  [[nodiscard]] Status wait_socket(short events, MonoTime deadline, std::string_view what);

  const PostgresUrl url_;
  MonotonicClock& clock_;
  const Options options_;
  std::unique_ptr<PGconn, ConnCloser> conn_;
  int statements_ = 0;
};

// open_postgres_registry (registry.h) of a connection string already parsed, so that nothing
// below the edge that parsed it (open_registry) parses or checks it again.
[[nodiscard]] Result<std::unique_ptr<NodeRegistry>> open_postgres_registry(
    PostgresUrl url, std::chrono::milliseconds ttl, std::string_view layout, MonotonicClock& clock);

}  // namespace flurry::internal

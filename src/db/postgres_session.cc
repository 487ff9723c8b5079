#include "db/postgres_session.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "libpq_loader.h"

namespace flurry::internal {
namespace {

using std::chrono::milliseconds;

// The longest single poll() on the socket: the deadline is measured on the injected clock,
// which only the loop around poll() reads, so a wait must come back to look at it.
constexpr milliseconds kPollSlice{50};

}  // namespace

std::string PgRows::text(int row, int col) const {
  return std::string(PQgetvalue(result_.get(), row, col),
                     static_cast<std::size_t>(PQgetlength(result_.get(), row, col)));
}

std::optional<std::int64_t> PgRows::integer(int row, int col) const {
  if (null(row, col)) return std::nullopt;
  const char* begin = PQgetvalue(result_.get(), row, col);
  const char* end = begin + PQgetlength(result_.get(), row, col);
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

PgSession::PgSession(PostgresUrl url, MonotonicClock& clock, Options options)
    : url_(std::move(url)), clock_(clock), options_(std::move(options)) {}

Status PgSession::connection_error(std::string_view what, const char* pq_message) {
  // libpq's messages span lines ("...failed: Connection refused\n\tIs the server running...").
  std::string why;
  bool new_line = false;
  for (const char* p = pq_message != nullptr ? pq_message : ""; *p != '\0'; ++p) {
    if (*p == '\n') {
      new_line = true;
    } else if (*p != '\t' && !(new_line && *p == ' ')) {
      if (new_line && !why.empty()) why += "; ";
      new_line = false;
      why += *p;
    }
  }
  if (why.empty()) why = "the connection is broken";
  drop();
  return Status(Reason::kIo, options_.where + ": " + std::string(what) + ": " +
                                 scrub_postgres_password(std::move(why), url_.text()) + " (retry)");
}

Status PgSession::statement_error(const PGresult* result, std::string_view what) {
  const char* state_field = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
  const std::string state = state_field != nullptr ? state_field : "";
  last_sqlstate_ = state;
  std::string why = primary != nullptr ? primary : PQresultErrorMessage(result);
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  std::string msg = options_.where + ": " + std::string(what) + ": " +
                    scrub_postgres_password(std::move(why), url_.text()) +
                    (state.empty() ? std::string() : " (SQLSTATE " + state + ")");
  const std::string_view cls = std::string_view(state).substr(0, 2);
  // The connection is gone or going: the server shuts down, or ended the session.
  if (cls == "08" || state == "57P01" || state == "57P02" || state == "57P03" || state == "25P03") {
    drop();
    return Status(Reason::kIo, std::move(msg) + " (retry)");
  }
  // Busy or temporarily unable: a timeout, a lock, a serialization failure or deadlock, too many
  // connections or no memory or disk, a standby that does not take writes (after a failover), the
  // server's own I/O.
  if (state == "57014" || state == "55P03" || state == "40001" || state == "40P01" || cls == "53" ||
      state == "25006" || cls == "58") {
    return Status(Reason::kIo, std::move(msg) + " (retry)");
  }
  if (state == "42501") return Status(StatusCode::kPermissionDenied, std::move(msg));
  if (state == "22003") return Status(StatusCode::kOutOfRange, std::move(msg));
  return Status(StatusCode::kInternal, std::move(msg));
}

Status PgSession::wait_socket(short events, MonoTime deadline, std::string_view what) {
  for (;;) {
    const auto left = std::chrono::ceil<milliseconds>(deadline - clock_.now());
    if (left <= milliseconds(0)) {
      drop();
      return Status(Reason::kIo, options_.where + ": " + std::string(what) +
                                     ": no answer from the server within " +
                                     std::to_string(options_.timeout.count()) + " ms (retry)");
    }
    pollfd pfd{};
    pfd.fd = PQsocket(conn_.get());
    pfd.events = events;
    if (pfd.fd < 0) return connection_error(what, PQerrorMessage(conn_.get()));
    const int n = ::poll(&pfd, 1, static_cast<int>(std::min(left, kPollSlice).count()));
    if (n > 0) return OkStatus();
    if (n < 0 && errno != EINTR) return connection_error(what, std::strerror(errno));
  }
}

Status PgSession::connect(MonoTime deadline) {
  drop();
  const std::string what = "cannot connect";
  std::vector<const char*> keys;
  std::vector<const char*> values;
  for (const auto& [key, value] : url_.settings()) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  // Defaults where neither the string nor libpq's environment variable says otherwise.
  if (url_.setting("application_name").empty() && std::getenv("PGAPPNAME") == nullptr) {
    keys.push_back("application_name");
    values.push_back(options_.application_name.c_str());
  }
  // With several hosts (a primary and standbys), connect to the one that takes writes.
  if (url_.setting("target_session_attrs").empty() &&
      std::getenv("PGTARGETSESSIONATTRS") == nullptr) {
    keys.push_back("target_session_attrs");
    values.push_back("read-write");
  }
  const std::string connect_timeout = std::to_string(
      std::max<std::int64_t>(1, std::chrono::ceil<std::chrono::seconds>(options_.timeout).count()));
  if (url_.setting("connect_timeout").empty() && std::getenv("PGCONNECT_TIMEOUT") == nullptr) {
    keys.push_back("connect_timeout");
    values.push_back(connect_timeout.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  if (Status st = load_libpq(); !st.ok()) return st;
  conn_.reset(PQconnectStartParams(keys.data(), values.data(), /*expand_dbname=*/0));
  if (conn_ == nullptr) return connection_error(what, "out of memory");
  if (PQstatus(conn_.get()) == CONNECTION_BAD) {
    return connection_error(what, PQerrorMessage(conn_.get()));
  }
  // PQconnectPoll's protocol: wait for the socket as it asks, starting with writable. The
  // deadline bounds the whole of it.
  PostgresPollingStatusType polling = PGRES_POLLING_WRITING;
  while (polling != PGRES_POLLING_OK) {
    if (polling == PGRES_POLLING_FAILED) return connection_error(what, PQerrorMessage(conn_.get()));
    if (Status st =
            wait_socket(polling == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline, what);
        !st.ok()) {
      return st;
    }
    polling = PQconnectPoll(conn_.get());
  }
  // NOTICEs ("relation already exists, skipping") are not errors, and not for stderr.
  PQsetNoticeProcessor(
      conn_.get(), [](void*, const char*) {}, nullptr);
  if (PQsetnonblocking(conn_.get(), 1) != 0) {
    return connection_error(what, PQerrorMessage(conn_.get()));
  }
  // The server's side of the deadline, so that a statement or transaction given up on holds no
  // lock for long; and commits durable whatever the database's default (off and local return
  // before a synchronous standby has the commit; stronger settings are kept).
  const std::string ms = std::to_string(options_.timeout.count());
  Result<PgRows> configured =
      query(deadline,
            "SELECT set_config('statement_timeout', $1, false), "
            "set_config('lock_timeout', $1, false), "
            "set_config('idle_in_transaction_session_timeout', $1, false), "
            "CASE WHEN current_setting('synchronous_commit') IN ('off', 'local') "
            "THEN set_config('synchronous_commit', 'on', false) END",
            {ms}, "cannot configure the session");
  return configured.ok() ? OkStatus() : configured.status();
}

bool PgSession::idle_alive() const {
  if (PQstatus(conn_.get()) != CONNECTION_OK || PQisBusy(conn_.get()) != 0) return false;
  pollfd pfd{};
  pfd.fd = PQsocket(conn_.get());
  pfd.events = POLLIN;
  if (pfd.fd < 0) return false;
  const int n = ::poll(&pfd, 1, 0);
  // Nothing from the server: as alive as can be told without asking. The server sends nothing
  // to an idle session that listens for no notifications, except when it ends it (a FATAL error,
  // then the end of the stream, perhaps not both yet): anything readable means a new connection.
  if (n == 0) return true;
  return n < 0 && errno == EINTR;
}

Result<PgRows> PgSession::query(MonoTime deadline, const char* sql,
                                const std::vector<std::string>& params, std::string_view what) {
  last_sqlstate_.clear();
  if (conn_ == nullptr) return connection_error(what, "not connected");
  ++statements_;
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const std::string& p : params) values.push_back(p.c_str());
  PGconn* conn = conn_.get();
  if (PQsendQueryParams(conn, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                        nullptr, 0) == 0) {
    return connection_error(what, PQerrorMessage(conn));
  }
  for (;;) {
    const int flushed = PQflush(conn);
    if (flushed == 0) break;
    if (flushed < 0) return connection_error(what, PQerrorMessage(conn));
    if (Status st = wait_socket(POLLIN | POLLOUT, deadline, what); !st.ok()) return st;
    if (PQconsumeInput(conn) == 0) return connection_error(what, PQerrorMessage(conn));
  }
  // One statement: its result, then the end of results. The first error wins.
  PgResult result;
  bool failed = false;
  for (;;) {
    while (PQisBusy(conn) != 0) {
      if (Status st = wait_socket(POLLIN, deadline, what); !st.ok()) return st;
      if (PQconsumeInput(conn) == 0) return connection_error(what, PQerrorMessage(conn));
    }
    PgResult next(PQgetResult(conn));
    if (next == nullptr) break;
    if (failed) continue;
    const ExecStatusType status = PQresultStatus(next.get());
    failed = status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK;
    result = std::move(next);
  }
  if (result == nullptr || PQstatus(conn) == CONNECTION_BAD) {
    return connection_error(what, PQerrorMessage(conn));
  }
  const ExecStatusType status = PQresultStatus(result.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return statement_error(result.get(), what);
  }
  return PgRows(std::move(result));
}

}  // namespace flurry::internal

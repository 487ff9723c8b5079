// The PostgreSQL segment store: Meituan Leaf's own table, so that a Leaf database can be pointed at
// as it is,
//   leaf_alloc(biz_tag varchar(128) PRIMARY KEY, max_id bigint, step integer,
//              description varchar(256), update_time timestamp)
// and flurry's flurry_segment_residues(biz_tag, delta, remainder) beside it (no row: delta 1,
// remainder 0). Both are created when missing.
//
// Every operation is one statement, so one round trip and its own transaction: an allocation
// raises max_id and reads the residues in one UPDATE ... RETURNING, whose row lock orders
// concurrent allocators on any number of hosts. Sessions run with synchronous_commit on, so an
// allocation acknowledged survives a crash of the server whatever the database's default.
//
// One connection per store object, behind a mutex, made on first use (never by open) and made
// again on the call after it broke. Every call has a deadline of the store's timeout from its
// start, covering the connection and the statement: libpq runs non-blocking and the store waits
// on the socket with poll() until the deadline, then drops the connection. The server bounds its
// side too (statement_timeout and lock_timeout at the same value). A statement whose outcome is
// unknown (the connection broke after it was sent) is reported UNAVAILABLE and never repeated: an
// allocation that did commit is then lost, never handed out twice.
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/quote.h"
#include "flurry/segment_store.h"
#include "registry/postgres_conninfo.h"
#include "stores.h"

namespace flurry {
namespace {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

constexpr const char* kCreateTables[] = {
    // Leaf's DDL (its PostgreSQL form), unchanged.
    "CREATE TABLE IF NOT EXISTS leaf_alloc ("
    "biz_tag varchar(128) NOT NULL DEFAULT '' PRIMARY KEY, "
    "max_id bigint NOT NULL DEFAULT 1, "
    "step integer NOT NULL, "
    "description varchar(256) DEFAULT NULL, "
    "update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    "CREATE TABLE IF NOT EXISTS flurry_segment_residues ("
    "biz_tag varchar(128) PRIMARY KEY, "
    "delta bigint NOT NULL, "
    "remainder bigint NOT NULL)",
};

// The columns read_tag() reads, in this order. update_time is a timestamp without time zone
// (Leaf's), written as now() in the session's time zone: read back in that time zone too.
constexpr std::string_view kSelectTags =
    "SELECT a.biz_tag, a.max_id, a.step, a.description, "
    "floor(extract(epoch FROM a.update_time::timestamptz) * 1000)::bigint, "
    "coalesce(r.delta, 1), coalesce(r.remainder, 0) "
    "FROM leaf_alloc a LEFT JOIN flurry_segment_residues r ON r.biz_tag = a.biz_tag";

// The allocation: raises max_id by $2 only where the row is one a store writes and has room for
// $2 (so that nothing changes on any error), and returns the new max_id, the base step and the
// residues, atomically. $3 is kMaxSegmentDelta.
constexpr const char* kAllocate =
    "WITH u AS (UPDATE leaf_alloc SET max_id = max_id + $2::bigint, update_time = now() "
    "WHERE biz_tag = $1 AND max_id >= 0 AND max_id <= 9223372036854775807 - $2::bigint "
    "AND max_id >= $4::bigint AND step >= 1 AND NOT EXISTS (SELECT 1 FROM flurry_segment_residues "
    "x "
    "WHERE x.biz_tag = $1 AND NOT (x.delta BETWEEN 1 AND $3::bigint "
    "AND x.remainder >= 0 AND x.remainder < x.delta)) "
    "RETURNING biz_tag, max_id, step) "
    "SELECT u.max_id, u.step, coalesce(r.delta, 1), coalesce(r.remainder, 0) "
    "FROM u LEFT JOIN flurry_segment_residues r USING (biz_tag)";

// A tag's row and, unless delta is 1 and remainder 0, its residue row, in one statement; one row
// back with the number of tags inserted (0: it exists). A residue row left by a deleted tag is
// replaced or removed.
constexpr const char* kCreateTag =
    "WITH a AS (INSERT INTO leaf_alloc(biz_tag, max_id, step, description, update_time) "
    "VALUES ($1, $2::bigint, $3::integer, NULLIF($4, ''), now()) "
    "ON CONFLICT (biz_tag) DO NOTHING RETURNING biz_tag), "
    "r AS (INSERT INTO flurry_segment_residues(biz_tag, delta, remainder) "
    "SELECT biz_tag, $5::bigint, $6::bigint FROM a WHERE $5::bigint <> 1 OR $6::bigint <> 0 "
    "ON CONFLICT (biz_tag) DO UPDATE SET delta = EXCLUDED.delta, remainder = EXCLUDED.remainder), "
    "d AS (DELETE FROM flurry_segment_residues WHERE biz_tag IN (SELECT biz_tag FROM a) "
    "AND $5::bigint = 1 AND $6::bigint = 0) "
    "SELECT count(*) FROM a";

struct ConnCloser {
  void operator()(PGconn* conn) const noexcept { PQfinish(conn); }
};
struct ResultClearer {
  void operator()(PGresult* result) const noexcept { PQclear(result); }
};
using Conn = std::unique_ptr<PGconn, ConnCloser>;
using PgResult = std::unique_ptr<PGresult, ResultClearer>;

// The rows a statement returned, read as text.
class Rows {
 public:
  explicit Rows(PgResult result) : result_(std::move(result)) {}
  [[nodiscard]] int size() const { return PQntuples(result_.get()); }
  [[nodiscard]] bool null(int row, int col) const {
    return PQgetisnull(result_.get(), row, col) != 0;
  }
  [[nodiscard]] std::string text(int row, int col) const {
    return std::string(PQgetvalue(result_.get(), row, col),
                       static_cast<std::size_t>(PQgetlength(result_.get(), row, col)));
  }
  // An integer column; nullopt when NULL or not a number (which PostgreSQL never sends for one).
  [[nodiscard]] std::optional<std::int64_t> integer(int row, int col) const {
    if (null(row, col)) return std::nullopt;
    const char* begin = PQgetvalue(result_.get(), row, col);
    const char* end = begin + PQgetlength(result_.get(), row, col);
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(begin, end, v);
    if (ec != std::errc() || ptr != end) return std::nullopt;
    return v;
  }

 private:
  PgResult result_;
};

class PostgresSegmentStore final : public SegmentStore {
 public:
  PostgresSegmentStore(std::string url, milliseconds timeout)
      : url_(std::move(url)), redacted_(internal::redact_postgres_url(url_)), timeout_(timeout) {}

  Status create_tag(const SegmentTagSpec& spec) override;
  using SegmentStore::allocate;
  Result<SegmentAllocation> allocate(std::string_view tag, std::uint64_t step,
                                     std::uint64_t floor) override;
  Result<SegmentTagInfo> tag(std::string_view tag) override;
  Result<std::vector<SegmentTagInfo>> list_tags() override;
  std::string describe() const override { return redacted_; }

  // current_setting(name) on this store's session.
  [[nodiscard]] Result<std::string> setting(std::string_view name);

 private:
  [[nodiscard]] std::string where() const { return "segment store " + redacted_; }

  // Runs `body(deadline)` under mu_ with a connection (made now if there is none, or if the one
  // there was closed by the server while idle) and the call's deadline. A connection the body
  // leaves inside a transaction (it failed half-way) is dropped.
  template <typename Body>
  auto run(Body body) -> decltype(body(SteadyTime()));

  // A new connection, configured, with the tables.
  [[nodiscard]] Status connect(SteadyTime deadline);
  // False when the idle connection was closed by the server (it restarted, or ended the
  // session): found before a statement is sent, so nothing is in doubt.
  [[nodiscard]] bool idle_connection_alive();
  void drop_connection() { conn_.reset(); }
  // Waits until the connection's socket is ready for `events` or the deadline passes.
  [[nodiscard]] Status wait_socket(short events, SteadyTime deadline, std::string_view what);
  // One statement with its text parameters; its rows. last_sqlstate_ is the SQLSTATE of its
  // error ("" for none, or a connection failure).
  [[nodiscard]] Result<Rows> query(SteadyTime deadline, const char* sql,
                                   const std::vector<std::string>& params, std::string_view what);
  // The UNAVAILABLE / IO error for a connection that failed or broke (and is dropped).
  [[nodiscard]] Status connection_error(std::string_view what, const char* pq_message);
  // Maps a failed statement's SQLSTATE onto a Status naming the store, `what` and PostgreSQL's
  // message.
  [[nodiscard]] Status statement_error(const PGresult* result, std::string_view what);
  [[nodiscard]] Status ensure_tables(SteadyTime deadline);
  // The row of kSelectTags at `row`.
  [[nodiscard]] Result<SegmentTagInfo> read_tag(const Rows& rows, int row) const;

  const std::string url_;
  const std::string redacted_;
  const milliseconds timeout_;
  std::mutex mu_;  // serialises calls; guards everything below
  Conn conn_;
  std::string last_sqlstate_;
};

// ---- Connection and statements ----

Status PostgresSegmentStore::connection_error(std::string_view what, const char* pq_message) {
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
  drop_connection();
  return Status(Reason::kIo, where() + ": " + std::string(what) + ": " +
                                 internal::scrub_postgres_password(std::move(why), url_) +
                                 " (retry)");
}

Status PostgresSegmentStore::wait_socket(short events, SteadyTime deadline, std::string_view what) {
  for (;;) {
    const auto left = std::chrono::ceil<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= milliseconds(0)) {
      drop_connection();
      return Status(Reason::kIo, where() + ": " + std::string(what) +
                                     ": no answer from the server within " +
                                     std::to_string(timeout_.count()) + " ms (retry)");
    }
    pollfd pfd{};
    pfd.fd = PQsocket(conn_.get());
    pfd.events = events;
    if (pfd.fd < 0) return connection_error(what, PQerrorMessage(conn_.get()));
    const int n = ::poll(&pfd, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 60'000)));
    if (n > 0) return OkStatus();
    if (n < 0 && errno != EINTR) return connection_error(what, std::strerror(errno));
  }
}

Status PostgresSegmentStore::connect(SteadyTime deadline) {
  const std::string what = "cannot connect";
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(url_.c_str(), &error);
  if (parsed == nullptr) {
    Status st = connection_error(what, error != nullptr ? error : "out of memory");
    if (error != nullptr) PQfreemem(error);
    return st;
  }
  std::vector<const char*> keys;
  std::vector<const char*> values;
  bool has_application_name = false;
  bool has_session_attrs = false;
  bool has_connect_timeout = false;
  for (const PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const std::string_view key(o->keyword);
    has_application_name |= key == "application_name";
    has_session_attrs |= key == "target_session_attrs";
    has_connect_timeout |= key == "connect_timeout";
    keys.push_back(o->keyword);
    values.push_back(o->val);
  }
  // Defaults where neither the string nor libpq's environment variable says otherwise.
  if (!has_application_name && std::getenv("PGAPPNAME") == nullptr) {
    keys.push_back("application_name");
    values.push_back("flurry-segments");
  }
  // With several hosts (a primary and standbys), connect to the one that takes writes.
  if (!has_session_attrs && std::getenv("PGTARGETSESSIONATTRS") == nullptr) {
    keys.push_back("target_session_attrs");
    values.push_back("read-write");
  }
  // The store's timeout in whole seconds, at least 1. The poll loop below enforces the exact
  // deadline; libpq applies connect_timeout where it connects by itself (with several hosts, it
  // moves on to the next one after that long).
  const std::string connect_timeout = std::to_string(
      std::max<std::int64_t>(1, std::chrono::ceil<std::chrono::seconds>(timeout_).count()));
  if (!has_connect_timeout && std::getenv("PGCONNECT_TIMEOUT") == nullptr) {
    keys.push_back("connect_timeout");
    values.push_back(connect_timeout.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  Conn conn(PQconnectStartParams(keys.data(), values.data(), /*expand_dbname=*/0));
  PQconninfoFree(parsed);
  if (conn == nullptr) return connection_error(what, "out of memory");
  conn_ = std::move(conn);
  if (PQstatus(conn_.get()) == CONNECTION_BAD) {
    return connection_error(what, PQerrorMessage(conn_.get()));
  }
  // PQconnectPoll's protocol: wait for the socket as it asks, starting with writable.
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
  // The server's side of the deadline, and durable commits whatever the database's default.
  const std::string ms = std::to_string(timeout_.count());
  Result<Rows> configured = query(deadline,
                                  "SELECT set_config('statement_timeout', $1, false), "
                                  "set_config('lock_timeout', $1, false), "
                                  "set_config('idle_in_transaction_session_timeout', $1, false), "
                                  "set_config('synchronous_commit', 'on', false)",
                                  {ms}, "cannot configure the session");
  if (!configured.ok()) return configured.status();
  return ensure_tables(deadline);
}

bool PostgresSegmentStore::idle_connection_alive() {
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

Result<Rows> PostgresSegmentStore::query(SteadyTime deadline, const char* sql,
                                         const std::vector<std::string>& params,
                                         std::string_view what) {
  last_sqlstate_.clear();
  if (conn_ == nullptr) return connection_error(what, "not connected");
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
  return Rows(std::move(result));
}

Status PostgresSegmentStore::statement_error(const PGresult* result, std::string_view what) {
  const char* state_field = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
  const std::string state = state_field != nullptr ? state_field : "";
  last_sqlstate_ = state;
  std::string why = primary != nullptr ? primary : PQresultErrorMessage(result);
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  std::string msg = where() + ": " + std::string(what) + ": " +
                    internal::scrub_postgres_password(std::move(why), url_) +
                    (state.empty() ? std::string() : " (SQLSTATE " + state + ")");
  const std::string_view cls = std::string_view(state).substr(0, 2);
  // The connection is gone or going: the server shuts down, or ended the session.
  if (cls == "08" || state == "57P01" || state == "57P02" || state == "57P03" || state == "25P03") {
    drop_connection();
    return Status(Reason::kIo, std::move(msg) + " (retry)");
  }
  // Busy or temporarily unable: a timeout, a lock, a serialization failure or deadlock, too many
  // connections or no disk space, a standby that does not take writes (after a failover), the
  // server's own I/O.
  if (state == "57014" || state == "55P03" || state == "40001" || state == "40P01" || cls == "53" ||
      state == "25006" || cls == "58") {
    return Status(Reason::kIo, std::move(msg) + " (retry)");
  }
  if (state == "42501") return Status(StatusCode::kPermissionDenied, std::move(msg));
  if (state == "22003") return Status(StatusCode::kOutOfRange, std::move(msg));
  return Status(StatusCode::kInternal, std::move(msg));
}

template <typename Body>
auto PostgresSegmentStore::run(Body body) -> decltype(body(SteadyTime())) {
  std::lock_guard lock(mu_);
  const SteadyTime deadline = std::chrono::steady_clock::now() + timeout_;
  if (conn_ != nullptr && !idle_connection_alive()) drop_connection();
  if (conn_ == nullptr) {
    if (Status st = connect(deadline); !st.ok()) {
      drop_connection();
      return st;
    }
  }
  auto result = body(deadline);
  // Every body is one statement outside any transaction; one left open failed half-way.
  if (conn_ != nullptr && PQtransactionStatus(conn_.get()) != PQTRANS_IDLE) drop_connection();
  return result;
}

Status PostgresSegmentStore::ensure_tables(SteadyTime deadline) {
  // Existing tables need no DDL (nor the right to create tables).
  Result<Rows> existing = query(deadline,
                                "SELECT to_regclass('leaf_alloc') IS NOT NULL "
                                "AND to_regclass('flurry_segment_residues') IS NOT NULL",
                                {}, "cannot look for the tables");
  if (!existing.ok()) return existing.status();
  if (existing->text(0, 0) == "t") return OkStatus();
  for (const char* ddl : kCreateTables) {
    // Concurrent CREATE TABLE IF NOT EXISTS of one table can fail on the catalog's unique
    // indexes once the other creator commits (23505 unique_violation, 42P07 duplicate_table, or
    // 42710 duplicate_object for the table's row type): the second try sees the table and skips
    // it.
    for (int attempt = 0;; ++attempt) {
      Result<Rows> created = query(deadline, ddl, {}, "cannot create the tables");
      if (created.ok()) break;
      if (attempt > 0 ||
          (last_sqlstate_ != "23505" && last_sqlstate_ != "42P07" && last_sqlstate_ != "42710")) {
        return created.status();
      }
    }
  }
  return OkStatus();
}

Result<SegmentTagInfo> PostgresSegmentStore::read_tag(const Rows& rows, int row) const {
  SegmentTagInfo info;
  info.tag = rows.text(row, 0);
  const std::optional<std::int64_t> max_id = rows.integer(row, 1);
  const std::optional<std::int64_t> step = rows.integer(row, 2);
  const std::optional<std::int64_t> updated = rows.integer(row, 4);
  const std::optional<std::int64_t> delta = rows.integer(row, 5);
  const std::optional<std::int64_t> remainder = rows.integer(row, 6);
  if (!max_id || !step || !delta || !remainder) {
    return Status(Reason::kCorrupt, "segment tag " + internal::quote(info.tag) + " in " +
                                        redacted_ + ": a column is NULL or not an integer");
  }
  if (Status st = internal::check_stored_segment_row(redacted_, info.tag, *max_id, *step, *delta,
                                                     *remainder);
      !st.ok()) {
    return st;
  }
  info.max_id = static_cast<std::uint64_t>(*max_id);
  info.step = static_cast<std::uint64_t>(*step);
  info.description = rows.text(row, 3);
  info.update_time_unix_ms = updated.value_or(0);
  info.delta = static_cast<std::uint64_t>(*delta);
  info.remainder = static_cast<std::uint64_t>(*remainder);
  return info;
}

// ---- Operations ----

Status PostgresSegmentStore::create_tag(const SegmentTagSpec& spec) {
  if (Status st = check_segment_tag_spec(spec); !st.ok()) return st;
  if (spec.step > internal::kMaxPostgresBaseStep) {
    return InvalidArgument("step: " + std::to_string(spec.step) + " is above " +
                           std::to_string(internal::kMaxPostgresBaseStep) +
                           ", the largest base step a PostgreSQL store keeps (Leaf's "
                           "leaf_alloc.step is a 32-bit integer)");
  }
  const std::string what = "cannot create segment tag " + internal::quote(spec.tag);
  return run([&](SteadyTime deadline) -> Status {
    Result<Rows> created =
        query(deadline, kCreateTag,
              {spec.tag, std::to_string(spec.start), std::to_string(spec.step), spec.description,
               std::to_string(spec.delta), std::to_string(spec.remainder)},
              what);
    if (!created.ok()) return created.status();
    if (created->size() != 1 || !created->integer(0, 0)) {
      return Status(StatusCode::kInternal, where() + ": " + what + ": unexpected answer");
    }
    if (*created->integer(0, 0) == 0) return internal::segment_tag_exists(redacted_, spec.tag);
    return OkStatus();
  });
}

Result<SegmentAllocation> PostgresSegmentStore::allocate(std::string_view tag, std::uint64_t step,
                                                         std::uint64_t floor) {
  if (Status st = check_segment_tag(tag); !st.ok()) return st;
  if (Status st = internal::check_allocation_step(step); !st.ok()) return st;
  const std::string name(tag);
  const std::string what = "cannot allocate for segment tag " + internal::quote(tag);
  return run([&](SteadyTime deadline) -> Result<SegmentAllocation> {
    Result<Rows> raised =
        query(deadline, kAllocate,
              {name, std::to_string(step), std::to_string(kMaxSegmentDelta),
               std::to_string(std::min<std::uint64_t>(floor, 9223372036854775807ULL))},
              what);
    if (!raised.ok()) return raised.status();
    if (raised->size() == 0) {
      // Nothing raised: no such tag, or one that cannot take `step`, or an unreadable row.
      const std::string sql = std::string(kSelectTags) + " WHERE a.biz_tag = $1";
      Result<Rows> row = query(deadline, sql.c_str(), {name}, what);
      if (!row.ok()) return row.status();
      if (row->size() == 0) return internal::segment_tag_not_found(redacted_, tag);
      Result<SegmentTagInfo> info = read_tag(*row, 0);
      if (!info.ok()) return info.status();
      if (info->max_id < floor) {
        return internal::segment_store_regressed(redacted_, tag, info->max_id, floor);
      }
      Status why = internal::explain_refused_allocation(
          redacted_, tag, static_cast<std::int64_t>(info->max_id),
          static_cast<std::int64_t>(info->step), static_cast<std::int64_t>(info->delta),
          static_cast<std::int64_t>(info->remainder), step);
      if (!why.ok()) return why;
      return Status(Reason::kIo, where() + ": " + what +
                                     ": the tag's row changed during the allocation (retry)");
    }
    const std::optional<std::int64_t> max_id = raised->integer(0, 0);
    const std::optional<std::int64_t> base = raised->integer(0, 1);
    const std::optional<std::int64_t> delta = raised->integer(0, 2);
    const std::optional<std::int64_t> remainder = raised->integer(0, 3);
    if (raised->size() != 1 || !max_id || !base || !delta || !remainder) {
      return Status(Reason::kCorrupt, where() + ": " + what + ": the allocation's answer is " +
                                          "unreadable (the range is lost, never handed out)");
    }
    const std::int64_t start = *max_id - static_cast<std::int64_t>(step);
    if (Status st =
            internal::check_stored_segment_row(redacted_, tag, start, *base, *delta, *remainder);
        !st.ok()) {
      return st;
    }
    SegmentAllocation out;
    out.start = static_cast<std::uint64_t>(start);
    out.end = static_cast<std::uint64_t>(*max_id);
    out.delta = static_cast<std::uint64_t>(*delta);
    out.remainder = static_cast<std::uint64_t>(*remainder);
    out.base_step = static_cast<std::uint64_t>(*base);
    return out;
  });
}

Result<SegmentTagInfo> PostgresSegmentStore::tag(std::string_view tag) {
  if (Status st = check_segment_tag(tag); !st.ok()) return st;
  const std::string name(tag);
  const std::string what = "cannot read segment tag " + internal::quote(tag);
  return run([&](SteadyTime deadline) -> Result<SegmentTagInfo> {
    const std::string sql = std::string(kSelectTags) + " WHERE a.biz_tag = $1";
    Result<Rows> row = query(deadline, sql.c_str(), {name}, what);
    if (!row.ok()) return row.status();
    if (row->size() == 0) return internal::segment_tag_not_found(redacted_, tag);
    return read_tag(*row, 0);
  });
}

Result<std::vector<SegmentTagInfo>> PostgresSegmentStore::list_tags() {
  return run([&](SteadyTime deadline) -> Result<std::vector<SegmentTagInfo>> {
    const std::string sql = std::string(kSelectTags) + " ORDER BY a.biz_tag COLLATE \"C\"";
    Result<Rows> rows = query(deadline, sql.c_str(), {}, "cannot list the segment tags");
    if (!rows.ok()) return rows.status();
    std::vector<SegmentTagInfo> out;
    out.reserve(static_cast<std::size_t>(rows->size()));
    for (int i = 0; i < rows->size(); ++i) {
      Result<SegmentTagInfo> info = read_tag(*rows, i);
      if (!info.ok()) return info.status();
      out.push_back(std::move(info).value());
    }
    // Bytewise by name, as the SQLite store sorts (COLLATE "C" does so already).
    std::sort(out.begin(), out.end(),
              [](const SegmentTagInfo& a, const SegmentTagInfo& b) { return a.tag < b.tag; });
    return out;
  });
}

Result<std::string> PostgresSegmentStore::setting(std::string_view name) {
  const std::string key(name);
  return run([&](SteadyTime deadline) -> Result<std::string> {
    Result<Rows> got =
        query(deadline, "SELECT current_setting($1)", {key}, "cannot read a setting");
    if (!got.ok()) return got.status();
    return got->text(0, 0);
  });
}

}  // namespace

Result<std::unique_ptr<SegmentStore>> internal::open_postgres_segment_store(
    const std::string& url, const SegmentStoreOptions& options) {
  if (Status st = internal::check_postgres_url(url); !st.ok()) {
    return st.with_prefix("segment store");
  }
  if (options.timeout.count() <= 0) {
    return InvalidArgument("timeout: a segment store's timeout must be positive");
  }
  return std::unique_ptr<SegmentStore>(
      std::make_unique<PostgresSegmentStore>(url, options.timeout));
}

Result<std::string> internal::postgres_segment_store_setting(SegmentStore& store,
                                                             std::string_view name) {
  auto* postgres = dynamic_cast<PostgresSegmentStore*>(&store);
  if (postgres == nullptr) {
    return InvalidArgument(store.describe() + " is not a PostgreSQL segment store");
  }
  return postgres->setting(name);
}

}  // namespace flurry

// The PostgreSQL node registry: one row per node ID in a database that processes on many hosts
// share (docs/design.md, "The registries").
//
// Lease times are the database's: every expiry is now() + ttl and every "expired" is
// expires_at <= now(), both evaluated by the server, so the clocks of the hosts never meet. Rows
// are created lazily: a claim takes the lowest free row (released or expired, locked with FOR
// UPDATE SKIP LOCKED so that concurrent claimers pass each other) below the lowest node ID that
// has no row yet, or else inserts that one (ON CONFLICT DO NOTHING: a claimer that loses the race
// for it looks again).
//
// One connection per registry object, behind a mutex, made on first use and made again on the
// operation after it broke. Every operation has a deadline of min(ttl/3, 2 s) from its start,
// covering the connection and every statement: libpq runs non-blocking and the registry waits
// on the socket with poll() until the deadline, then drops the connection. The server bounds its
// side too (statement_timeout, lock_timeout and idle_in_transaction_session_timeout at the same
// value), so a statement or transaction the registry gave up on does not hold row locks for long.
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
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/quote.h"
#include "flurry/registry.h"
#include "flurry/timefmt.h"
#include "postgres_conninfo.h"

namespace flurry {
namespace {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr milliseconds kMaxOperationTime{2000};
// pg_advisory_xact_lock key serializing the schema's creation ("flurry" in ASCII).
constexpr const char* kSchemaLockKey = "112599727337081";
// How often a claim looks again after another claimer inserted the row it was about to insert.
constexpr int kMaxClaimRaces = 16;

constexpr const char* kCreateSchema[] = {
    "CREATE TABLE IF NOT EXISTS flurry_nodes("
    "node bigint PRIMARY KEY, "
    "owner text, "  // NULL: released
    "token bigint NOT NULL, "
    "expires_at timestamptz, "  // NULL: released
    "horizon text)",
    // key 'layout': the canonical layout text the registry belongs to.
    "CREATE TABLE IF NOT EXISTS flurry_meta(key text PRIMARY KEY, value text NOT NULL)",
};

// A lease is live while it has an owner and has not expired, by the database's clock. Never NULL
// (a row with an owner but no expiry is free), so that NOT kLive is exactly "free".
constexpr std::string_view kLive = "coalesce(owner IS NOT NULL AND expires_at > now(), false)";

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
  [[nodiscard]] bool boolean(int row, int col) const {
    return !null(row, col) && text(row, col) == "t";
  }
  // A bigint column; nullopt when NULL or not a number (which PostgreSQL never sends for bigint).
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

// "horizon 123 (generation 0)" or, with several generations, "horizons 123 -1 (generation 0)".
std::string format_horizons(const HorizonRecord& r) {
  std::string out = r.horizons.size() == 1 ? "horizon" : "horizons";
  for (std::int64_t h : r.horizons) {
    out += ' ';
    out += std::to_string(h);
  }
  return out + " (generation " + std::to_string(r.generation) + ")";
}

std::string unix_ms_text(std::int64_t ms) {
  return format_time(TimePoint(milliseconds(ms)));
}

// The lowest node ID a claim may take: a row that is free, or the first node ID without a row.
struct FreeNode {
  std::int64_t node = 0;
  bool existing = false;       // it has a row (released or expired), which the claim updates
  std::int64_t old_token = 0;  // the row's fencing token, when it exists
  std::optional<std::string> horizon_text;  // the row's horizon, when it has one
};

class PostgresRegistry final : public NodeRegistry {
 public:
  PostgresRegistry(std::string url, milliseconds ttl, std::string layout)
      : url_(std::move(url)),
        redacted_(internal::redact_postgres_url(url_)),
        layout_(std::move(layout)),
        ttl_(ttl),
        op_timeout_(std::max<milliseconds>(std::min<milliseconds>(kMaxOperationTime, ttl / 3),
                                           milliseconds(1))) {}

  // Connects, creates the tables when they are missing and checks the layout, so that an
  // unreachable server or another layout fails at open rather than at the first claim. The first
  // claim records the layout.
  [[nodiscard]] Status init();

  Result<Claim> claim(std::string_view owner, std::uint64_t node_count) override;
  Status renew(const Lease& lease) override;
  Status save_horizon(const Lease& lease, const HorizonRecord& record) override;
  Status release(const Lease& lease) override;
  Result<RegistryListing> list() override;
  Status release_node(std::uint64_t node, bool force) override;
  std::string describe() const override { return "postgres:" + redacted_; }

 private:
  [[nodiscard]] std::string where() const { return "postgres registry " + redacted_; }

  // Runs `body(deadline)` with a connection (made now if there is none), under mu_, with the
  // operation's deadline. A transaction the body leaves open (it failed half-way) is rolled back,
  // or the connection dropped. When a connection made by an earlier operation turns out broken
  // on the body's first statement (the server restarted or dropped idle connections), the body
  // runs once more on a new connection: every body's first statement is BEGIN or harmless to
  // repeat.
  template <typename Body>
  auto run(Body body) -> decltype(body(SteadyTime()));

  [[nodiscard]] Status connect(SteadyTime deadline);
  void drop_connection() { conn_.reset(); }
  // Waits until the connection's socket is ready for `events` or the deadline passes.
  [[nodiscard]] Status wait_socket(short events, SteadyTime deadline, std::string_view what);
  // One statement with its text parameters; its rows. Errors as registry.h says, naming `what`.
  [[nodiscard]] Result<Rows> query(SteadyTime deadline, const char* sql,
                                   const std::vector<std::string>& params, std::string_view what);
  [[nodiscard]] Status exec(SteadyTime deadline, const char* sql,
                            const std::vector<std::string>& params, std::string_view what) {
    Result<Rows> r = query(deadline, sql, params, what);
    return r.ok() ? OkStatus() : r.status();
  }
  // The UNAVAILABLE error for a connection that failed or broke (and is dropped).
  [[nodiscard]] Status connection_error(std::string_view what, const char* pq_message);
  // Maps a failed statement's SQLSTATE onto a Status naming the server, `what` and PostgreSQL's
  // message.
  [[nodiscard]] Status statement_error(const PGresult* result, std::string_view what);

  // Steps of the operations, inside run().
  [[nodiscard]] Status ensure_schema(SteadyTime deadline);
  // OK when the registry belongs to layout_, or to none yet; with `record` (in a transaction)
  // a registry of no layout is given layout_.
  [[nodiscard]] Status check_layout(SteadyTime deadline, bool record);
  [[nodiscard]] Result<FreeNode> find_free_node(SteadyTime deadline, std::int64_t limit,
                                                std::uint64_t node_count);
  [[nodiscard]] Result<std::optional<HorizonRecord>> inherited_horizon(const FreeNode& free) const;
  // Writes the claim of `free` for `owner`; false when the row was inserted by another claimer
  // first (look again).
  [[nodiscard]] Result<bool> write_claim(SteadyTime deadline, const FreeNode& free,
                                         std::string_view owner, std::int64_t token);
  // The LEASE_LOST (or REGISTRY_REGRESSED) error for `lease`, saying what became of the node.
  [[nodiscard]] Status lease_lost(SteadyTime deadline, const Lease& lease, std::string_view what);

  const std::string url_;
  const std::string redacted_;
  const std::string layout_;
  const milliseconds ttl_;
  const milliseconds op_timeout_;
  std::mutex mu_;  // serializes operations; guards everything below
  Conn conn_;
  // The connection was made by an earlier operation (it may have broken since).
  bool reused_ = false;
  // Statements sent by the current operation.
  int statements_ = 0;
  // Per node: the token and record of this object's last successful save_horizon.
  std::map<std::uint64_t, std::pair<std::uint64_t, HorizonRecord>> saved_;
};

// ---- Connection and statements ----

Status PostgresRegistry::connection_error(std::string_view what, const char* pq_message) {
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
  return Status(StatusCode::kUnavailable,
                where() + ": " + std::string(what) + ": " +
                    internal::scrub_postgres_password(std::move(why), url_) + " (retry)");
}

Status PostgresRegistry::wait_socket(short events, SteadyTime deadline, std::string_view what) {
  for (;;) {
    const auto left = std::chrono::ceil<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= milliseconds(0)) {
      drop_connection();
      return Status(StatusCode::kUnavailable,
                    where() + ": " + std::string(what) + ": no answer from the server within " +
                        std::to_string(op_timeout_.count()) + " ms (retry)");
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

Status PostgresRegistry::connect(SteadyTime deadline) {
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
  for (const PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const std::string_view key(o->keyword);
    has_application_name |= key == "application_name";
    has_session_attrs |= key == "target_session_attrs";
    keys.push_back(o->keyword);
    values.push_back(o->val);
  }
  // Defaults where neither the string nor libpq's environment variable says otherwise.
  if (!has_application_name && std::getenv("PGAPPNAME") == nullptr) {
    keys.push_back("application_name");
    values.push_back("flurry");
  }
  // With several hosts (a primary and standbys), connect to the one that takes writes.
  if (!has_session_attrs && std::getenv("PGTARGETSESSIONATTRS") == nullptr) {
    keys.push_back("target_session_attrs");
    values.push_back("read-write");
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
  // PQconnectPoll's protocol: wait for the socket as it asks, starting with writable. The
  // connect_timeout setting does not apply here; the deadline does.
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
  reused_ = false;
  // The server's side of the deadline, and durable commits whatever the database's default.
  const std::string ms = std::to_string(op_timeout_.count());
  return exec(deadline,
              "SELECT set_config('statement_timeout', $1, false), "
              "set_config('lock_timeout', $1, false), "
              "set_config('idle_in_transaction_session_timeout', $1, false), "
              "CASE WHEN current_setting('synchronous_commit') = 'off' "
              "THEN set_config('synchronous_commit', 'on', false) END",
              {ms}, "cannot configure the session");
}

Result<Rows> PostgresRegistry::query(SteadyTime deadline, const char* sql,
                                     const std::vector<std::string>& params,
                                     std::string_view what) {
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
  return Rows(std::move(result));
}

Status PostgresRegistry::statement_error(const PGresult* result, std::string_view what) {
  const char* state_field = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
  const std::string state = state_field != nullptr ? state_field : "";
  std::string why = primary != nullptr ? primary : PQresultErrorMessage(result);
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  std::string msg = where() + ": " + std::string(what) + ": " + why +
                    (state.empty() ? std::string() : " (SQLSTATE " + state + ")");
  const std::string_view cls = std::string_view(state).substr(0, 2);
  // The connection is gone or going: the server shuts down, or ended the session.
  if (cls == "08" || state == "57P01" || state == "57P02" || state == "57P03" || state == "25P03") {
    drop_connection();
    return Status(StatusCode::kUnavailable, std::move(msg) + " (retry)");
  }
  // Busy or temporarily unable: a timeout, a lock, a serialization failure or deadlock, too many
  // connections, a standby that does not take writes (after a failover).
  if (state == "57014" || state == "55P03" || state == "40001" || state == "40P01" || cls == "53" ||
      state == "25006") {
    if (state == "53100") return Status(Reason::kIo, std::move(msg));  // disk full
    return Status(StatusCode::kUnavailable, std::move(msg) + " (retry)");
  }
  if (cls == "58") return Status(Reason::kIo, std::move(msg));  // the server's I/O
  return Status(StatusCode::kInternal, std::move(msg));
}

template <typename Body>
auto PostgresRegistry::run(Body body) -> decltype(body(SteadyTime())) {
  std::lock_guard lock(mu_);
  const SteadyTime deadline = std::chrono::steady_clock::now() + op_timeout_;
  for (int attempt = 0;; ++attempt) {
    if (conn_ == nullptr) {
      statements_ = 0;
      if (Status st = connect(deadline); !st.ok()) return st;
    }
    const bool reused = reused_;
    reused_ = true;
    statements_ = 0;
    auto result = body(deadline);
    if (conn_ == nullptr) {
      // The connection broke. If it was an old one that broke on the first statement, nothing
      // was done: try once more on a new one.
      if (!result.ok() && reused && statements_ <= 1 && attempt == 0 &&
          std::chrono::steady_clock::now() < deadline) {
        continue;
      }
      return result;
    }
    if (PQtransactionStatus(conn_.get()) != PQTRANS_IDLE) {
      // The body failed inside its transaction; a bounded rollback, or a new connection next time.
      const SteadyTime rollback_deadline = std::chrono::steady_clock::now() + op_timeout_;
      if (!exec(rollback_deadline, "ROLLBACK", {}, "cannot roll back").ok() ||
          (conn_ != nullptr && PQtransactionStatus(conn_.get()) != PQTRANS_IDLE)) {
        drop_connection();
      }
    }
    return result;
  }
}

// ---- Schema and layout ----

Status PostgresRegistry::ensure_schema(SteadyTime deadline) {
  // Existing tables need no DDL (nor the right to create tables).
  Result<Rows> existing = query(deadline,
                                "SELECT to_regclass('flurry_nodes') IS NOT NULL, "
                                "to_regclass('flurry_meta') IS NOT NULL",
                                {}, "cannot look for the registry's tables");
  if (!existing.ok()) return existing.status();
  if (existing->boolean(0, 0) && existing->boolean(0, 1)) return OkStatus();
  // Concurrent CREATE TABLE IF NOT EXISTS can fail on the catalog's unique index: one at a time.
  if (Status st = exec(deadline, "BEGIN", {}, "cannot begin creating the tables"); !st.ok()) {
    return st;
  }
  if (Status st = exec(deadline, "SELECT pg_advisory_xact_lock($1::bigint)", {kSchemaLockKey},
                       "cannot lock the schema");
      !st.ok()) {
    return st;
  }
  for (const char* ddl : kCreateSchema) {
    if (Status st = exec(deadline, ddl, {}, "cannot create the registry's tables"); !st.ok()) {
      return st;
    }
  }
  return exec(deadline, "COMMIT", {}, "cannot commit the registry's tables");
}

Status PostgresRegistry::check_layout(SteadyTime deadline, bool record) {
  for (int pass = 0; pass < 2; ++pass) {
    Result<Rows> got = query(deadline, "SELECT value FROM flurry_meta WHERE key = 'layout'", {},
                             "cannot read the registry's layout");
    if (!got.ok()) return got.status();
    if (got->size() > 0) {
      const std::string recorded = got->text(0, 0);
      if (recorded == layout_) return OkStatus();
      return Status(Reason::kStateMismatch,
                    where() + " belongs to layout \"" + recorded +
                        "\"; this process uses layout \"" + layout_ +
                        "\". IDs of two layouts over one registry collide even when their node "
                        "IDs differ: give the other layout its own database");
    }
    if (!record || pass > 0) return OkStatus();
    // Another claimer may record a layout at the same time: whichever is first stays, and is
    // read back.
    if (Status st = exec(deadline,
                         "INSERT INTO flurry_meta(key, value) VALUES('layout', $1) "
                         "ON CONFLICT (key) DO NOTHING",
                         {layout_}, "cannot record the registry's layout");
        !st.ok()) {
      return st;
    }
  }
  return OkStatus();
}

Status PostgresRegistry::init() {
  return run([&](SteadyTime deadline) -> Status {
    if (Status st = ensure_schema(deadline); !st.ok()) return st;
    return check_layout(deadline, /*record=*/false);
  });
}

// ---- Claims ----

Result<FreeNode> PostgresRegistry::find_free_node(SteadyTime deadline, std::int64_t limit,
                                                  std::uint64_t node_count) {
  // The first node ID without a row (limit when every one below it has a row).
  Result<Rows> gap =
      query(deadline,
            "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM flurry_nodes WHERE node = 0) "
            "THEN 0 ELSE (SELECT COALESCE(min(a.node) + 1, $1::bigint) "
            "FROM flurry_nodes a WHERE a.node >= 0 AND a.node < $1::bigint "
            "AND NOT EXISTS (SELECT 1 FROM flurry_nodes b "
            "WHERE b.node = a.node + 1)) END",
            {std::to_string(limit)}, "cannot read the nodes table");
  if (!gap.ok()) return gap.status();
  const std::optional<std::int64_t> first_gap = gap->integer(0, 0);
  if (!first_gap) {
    return Status(StatusCode::kInternal, where() + ": the lowest unused node ID is unreadable");
  }
  // A free row below it: rows another claimer is taking right now are skipped, not waited for.
  const std::string sql =
      "SELECT node, token, horizon FROM flurry_nodes "
      "WHERE node >= 0 AND node < $1::bigint AND NOT " +
      std::string(kLive) + " ORDER BY node LIMIT 1 FOR UPDATE SKIP LOCKED";
  Result<Rows> row =
      query(deadline, sql.c_str(), {std::to_string(*first_gap)}, "cannot read the nodes table");
  if (!row.ok()) return row.status();
  FreeNode free;
  if (row->size() > 0) {
    const std::optional<std::int64_t> node = row->integer(0, 0);
    const std::optional<std::int64_t> token = row->integer(0, 1);
    if (!node || !token) {
      return Status(StatusCode::kInternal, where() + ": a row of the nodes table is unreadable");
    }
    free.node = *node;
    free.existing = true;
    free.old_token = *token;
    if (!row->null(0, 2)) free.horizon_text = row->text(0, 2);
    return free;
  }
  if (*first_gap >= limit) {
    return Status(Reason::kNoFreeNode,
                  "all " + std::to_string(node_count) + " node IDs are leased in " + where() +
                      "; wait for a lease to expire (ttl " + std::to_string(ttl_.count()) +
                      " ms) or use a layout with more node bits");
  }
  free.node = *first_gap;
  return free;
}

Result<std::optional<HorizonRecord>> PostgresRegistry::inherited_horizon(
    const FreeNode& free) const {
  if (!free.horizon_text) return std::optional<HorizonRecord>();
  const std::string node_name = "node " + std::to_string(free.node);
  // Never read an unreadable horizon as "none": the next owner could repeat IDs.
  Result<HorizonRecord> record = parse_horizon_record(*free.horizon_text);
  if (!record.ok()) {
    return record.status().with_prefix("the horizon of " + node_name + " in " + where());
  }
  if (record->node != static_cast<std::uint64_t>(free.node)) {
    return Status(Reason::kCorrupt, "the horizon of " + node_name + " in " + where() +
                                        " was written for node " + std::to_string(record->node));
  }
  return std::optional<HorizonRecord>(std::move(record).value());
}

Result<bool> PostgresRegistry::write_claim(SteadyTime deadline, const FreeNode& free,
                                           std::string_view owner, std::int64_t token) {
  const std::string what = "cannot claim node " + std::to_string(free.node);
  const std::vector<std::string> params = {std::to_string(free.node), std::string(owner),
                                           std::to_string(token), std::to_string(ttl_.count())};
  if (free.existing) {
    Status st = exec(deadline,
                     "UPDATE flurry_nodes SET owner = $2, token = $3::bigint, "
                     "expires_at = now() + $4::bigint * interval '1 millisecond' "
                     "WHERE node = $1::bigint",
                     params, what);
    if (!st.ok()) return st;
    return true;
  }
  Result<Rows> inserted = query(deadline,
                                "INSERT INTO flurry_nodes(node, owner, token, expires_at, horizon) "
                                "VALUES($1::bigint, $2, $3::bigint, "
                                "now() + $4::bigint * interval '1 millisecond', NULL) "
                                "ON CONFLICT (node) DO NOTHING RETURNING node",
                                params, what);
  if (!inserted.ok()) return inserted.status();
  return inserted->size() > 0;
}

Result<Claim> PostgresRegistry::claim(std::string_view owner, std::uint64_t node_count) {
  if (node_count == 0) return InvalidArgument("node_count must be at least 1");
  const std::string owner_text(owner);
  const std::int64_t limit =
      static_cast<std::int64_t>(std::min<std::uint64_t>(node_count, kInt64Max));
  return run([&](SteadyTime deadline) -> Result<Claim> {
    if (Status st =
            exec(deadline, "BEGIN ISOLATION LEVEL READ COMMITTED", {}, "cannot begin the claim");
        !st.ok()) {
      return st;
    }
    // Checked again on every claim: the database may have been emptied or replaced since.
    if (Status st = check_layout(deadline, /*record=*/true); !st.ok()) return st;
    for (int race = 0; race < kMaxClaimRaces; ++race) {
      Result<FreeNode> free = find_free_node(deadline, limit, node_count);
      if (!free.ok()) return free.status();
      Result<std::optional<HorizonRecord>> inherited = inherited_horizon(*free);
      if (!inherited.ok()) return inherited.status();
      std::int64_t token = 1;
      if (free->existing) {
        if (free->old_token < 0 || free->old_token == kInt64Max) {
          return Status(Reason::kCorrupt, "node " + std::to_string(free->node) + " in " + where() +
                                              " has an invalid fencing token " +
                                              std::to_string(free->old_token));
        }
        token = free->old_token + 1;
      }
      Result<bool> written = write_claim(deadline, *free, owner_text, token);
      if (!written.ok()) return written.status();
      if (!*written) continue;  // another claimer inserted that row first: look again
      if (Status st = exec(deadline, "COMMIT", {},
                           "cannot commit the claim of node " + std::to_string(free->node));
          !st.ok()) {
        return st;
      }
      const auto node = static_cast<std::uint64_t>(free->node);
      // A new lease: what this object saved under an earlier one is no baseline for it.
      saved_.erase(node);
      Claim claim;
      claim.lease.node = node;
      claim.lease.token = static_cast<std::uint64_t>(token);
      claim.lease.owner = owner_text;
      claim.lease.ttl = ttl_;
      claim.inherited = std::move(inherited).value();
      return claim;
    }
    return Status(StatusCode::kUnavailable,
                  where() + ": other claimers took every node ID this claim tried " +
                      std::to_string(kMaxClaimRaces) + " times in a row (retry)");
  });
}

// ---- Leases ----

Status PostgresRegistry::lease_lost(SteadyTime deadline, const Lease& lease,
                                    std::string_view what) {
  const std::string node = "node " + std::to_string(lease.node);
  const std::string tail = " (" + std::string(what) + " in " + where() + ")";
  const std::string ours = std::to_string(lease.token);
  auto lost = [&](std::string why) { return Status(Reason::kLeaseLost, std::move(why) + tail); };
  auto regressed = [&](std::string why) {
    return Status(Reason::kRegistryRegressed, std::move(why) + tail);
  };
  Result<Rows> row =
      query(deadline, "SELECT owner, token FROM flurry_nodes WHERE node = $1::bigint",
            {std::to_string(lease.node)}, "cannot read the node's row");
  if (!row.ok()) return lost(node + " is no longer leased under token " + ours);
  if (row->size() == 0) {
    return regressed(node + " has no row in the registry, though this process holds its lease " +
                     "under token " + ours +
                     " (was the database replaced, emptied or restored from a backup?)");
  }
  const bool released = row->null(0, 0);
  const std::string owner = row->text(0, 0);
  const std::int64_t token = row->integer(0, 1).value_or(-1);
  if (token >= 0 && static_cast<std::uint64_t>(token) > lease.token) {
    if (released) {
      return lost(node + " was taken from this lease (token " + std::to_string(token) + " > " +
                  ours + "): released by an operator, or claimed and released since");
    }
    return lost(node + " was claimed by another owner " + internal::quote(owner) + " (token " +
                std::to_string(token) + " > " + ours + ")");
  }
  if (token >= 0 && static_cast<std::uint64_t>(token) == lease.token) {
    if (released) return lost(node + " was released (token " + ours + ")");
    return lost(node + " is held by " + internal::quote(owner) + ", not " +
                internal::quote(lease.owner) + " (token " + ours + ")");
  }
  return regressed(node + " has token " + std::to_string(token) + ", below this lease's " + ours +
                   " (was the database replaced or restored from a backup?)");
}

Status PostgresRegistry::renew(const Lease& lease) {
  if (lease.node > static_cast<std::uint64_t>(kInt64Max) ||
      lease.token > static_cast<std::uint64_t>(kInt64Max)) {
    return InvalidArgument("not a lease of this registry: node " + std::to_string(lease.node) +
                           ", token " + std::to_string(lease.token));
  }
  return run([&](SteadyTime deadline) -> Status {
    Result<Rows> renewed = query(deadline,
                                 "UPDATE flurry_nodes "
                                 "SET expires_at = now() + $4::bigint * interval '1 millisecond' "
                                 "WHERE node = $1::bigint AND token = $2::bigint AND owner = $3 "
                                 "RETURNING node",
                                 {std::to_string(lease.node), std::to_string(lease.token),
                                  lease.owner, std::to_string(ttl_.count())},
                                 "cannot renew the lease");
    if (!renewed.ok()) return renewed.status();
    return renewed->size() > 0 ? OkStatus() : lease_lost(deadline, lease, "renew");
  });
}

Status PostgresRegistry::save_horizon(const Lease& lease, const HorizonRecord& record) {
  if (record.node != lease.node) {
    return InvalidArgument("a horizon record for node " + std::to_string(record.node) +
                           " cannot be saved under the lease of node " +
                           std::to_string(lease.node));
  }
  if (lease.node > static_cast<std::uint64_t>(kInt64Max) ||
      lease.token > static_cast<std::uint64_t>(kInt64Max)) {
    return InvalidArgument("not a lease of this registry: node " + std::to_string(lease.node) +
                           ", token " + std::to_string(lease.token));
  }
  const std::string text = format_horizon_record(record);
  return run([&](SteadyTime deadline) -> Status {
    if (Status st = exec(deadline, "BEGIN", {}, "cannot begin the horizon save"); !st.ok()) {
      return st;
    }
    // The fencing compare-and-set: only the holder of the current token moves the horizon. The
    // horizon it replaces comes back, to see whether the registry went backwards.
    Result<Rows> updated = query(
        deadline,
        "UPDATE flurry_nodes AS n SET horizon = $1 "
        "FROM (SELECT node, horizon FROM flurry_nodes "
        "WHERE node = $2::bigint AND token = $3::bigint FOR UPDATE) AS old "
        "WHERE n.node = old.node RETURNING old.horizon",
        {text, std::to_string(lease.node), std::to_string(lease.token)}, "cannot save the horizon");
    if (!updated.ok()) return updated.status();
    if (updated->size() == 0) return lease_lost(deadline, lease, "save the horizon");
    // Only this lease writes the row's horizon: finding it below what this object saved last
    // under the same token means the database went backwards (restored from a backup).
    if (auto it = saved_.find(lease.node); it != saved_.end() && it->second.first == lease.token) {
      const HorizonRecord& ours = it->second.second;
      Result<HorizonRecord> theirs =
          updated->null(0, 0) ? Result<HorizonRecord>(Status(StatusCode::kNotFound, "no horizon"))
                              : parse_horizon_record(updated->text(0, 0));
      bool behind = !theirs.ok() || theirs->horizons.size() != ours.horizons.size();
      for (std::size_t g = 0; !behind && g < ours.horizons.size(); ++g) {
        behind = theirs->horizons[g] < ours.horizons[g];
      }
      if (behind) {
        return Status(Reason::kRegistryRegressed,
                      "the horizon of node " + std::to_string(lease.node) + " in " + where() +
                          " went backwards under this lease (token " + std::to_string(lease.token) +
                          "): it holds " +
                          (theirs.ok() ? format_horizons(*theirs) : std::string("none")) +
                          ", below the " + format_horizons(ours) +
                          " saved last (was the database restored from a backup?)");
      }
    }
    if (Status st = exec(deadline, "COMMIT", {}, "cannot commit the horizon"); !st.ok()) return st;
    saved_[lease.node] = {lease.token, record};
    return OkStatus();
  });
}

Status PostgresRegistry::release(const Lease& lease) {
  if (lease.node > static_cast<std::uint64_t>(kInt64Max) ||
      lease.token > static_cast<std::uint64_t>(kInt64Max)) {
    return InvalidArgument("not a lease of this registry: node " + std::to_string(lease.node) +
                           ", token " + std::to_string(lease.token));
  }
  return run([&](SteadyTime deadline) -> Status {
    Result<Rows> released = query(deadline,
                                  "UPDATE flurry_nodes SET owner = NULL, expires_at = NULL "
                                  "WHERE node = $1::bigint AND token = $2::bigint RETURNING node",
                                  {std::to_string(lease.node), std::to_string(lease.token)},
                                  "cannot release the lease");
    if (!released.ok()) return released.status();
    return released->size() > 0 ? OkStatus() : lease_lost(deadline, lease, "release");
  });
}

// ---- Operators ----

Result<RegistryListing> PostgresRegistry::list() {
  return run([&](SteadyTime deadline) -> Result<RegistryListing> {
    // One snapshot for the layout and the rows.
    if (Status st = exec(deadline, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", {},
                         "cannot begin the listing");
        !st.ok()) {
      return st;
    }
    RegistryListing listing;
    Result<Rows> layout = query(deadline, "SELECT value FROM flurry_meta WHERE key = 'layout'", {},
                                "cannot read the registry's layout");
    if (!layout.ok()) return layout.status();
    if (layout->size() > 0) listing.layout = layout->text(0, 0);
    const std::string sql = "SELECT node, owner, token, " + std::string(kLive) +
                            ", floor(extract(epoch FROM expires_at) * 1000)::bigint, horizon "
                            "FROM flurry_nodes ORDER BY node";
    Result<Rows> rows = query(deadline, sql.c_str(), {}, "cannot read the nodes table");
    if (!rows.ok()) return rows.status();
    if (Status st = exec(deadline, "COMMIT", {}, "cannot end the listing"); !st.ok()) return st;
    for (int i = 0; i < rows->size(); ++i) {
      const std::optional<std::int64_t> node = rows->integer(i, 0);
      const std::optional<std::int64_t> token = rows->integer(i, 2);
      if (!node || *node < 0 || !token || *token < 0) {
        return Status(Reason::kCorrupt, where() + " holds a row with node " +
                                            internal::quote(rows->text(i, 0)) + " and token " +
                                            internal::quote(rows->text(i, 2)) +
                                            ", which no claim writes");
      }
      NodeInfo info;
      info.node = static_cast<std::uint64_t>(*node);
      info.owner = rows->text(i, 1);
      info.token = static_cast<std::uint64_t>(*token);
      info.live = rows->boolean(i, 3);
      if (info.live) info.expires_unix_ms = rows->integer(i, 4);
      if (!rows->null(i, 5)) {
        Result<HorizonRecord> record = parse_horizon_record(rows->text(i, 5));
        if (!record.ok()) {
          info.horizon_error = record.status().message();
        } else if (record->node != info.node) {
          info.horizon_error = "written for node " + std::to_string(record->node);
        } else {
          info.horizon = std::move(record).value();
        }
      }
      listing.nodes.push_back(std::move(info));
    }
    return listing;
  });
}

Status PostgresRegistry::release_node(std::uint64_t node, bool force) {
  const std::string name = "node " + std::to_string(node);
  if (node > static_cast<std::uint64_t>(kInt64Max)) {
    return Status(StatusCode::kNotFound, name + " has no record in " + where());
  }
  const std::string id = std::to_string(node);
  return run([&](SteadyTime deadline) -> Status {
    if (Status st = exec(deadline, "BEGIN", {}, "cannot begin releasing " + name); !st.ok()) {
      return st;
    }
    const std::string sql = "SELECT owner, token, " + std::string(kLive) +
                            ", floor(extract(epoch FROM expires_at) * 1000)::bigint "
                            "FROM flurry_nodes WHERE node = $1::bigint FOR UPDATE";
    Result<Rows> row = query(deadline, sql.c_str(), {id}, "cannot read the row of " + name);
    if (!row.ok()) return row.status();
    if (row->size() == 0)
      return Status(StatusCode::kNotFound, name + " has no record in " + where());
    const std::int64_t token = row->integer(0, 1).value_or(-1);
    if (token < 0 || token == kInt64Max) {
      return Status(Reason::kCorrupt, name + " in " + where() + " has an invalid fencing token " +
                                          internal::quote(row->text(0, 1)));
    }
    if (row->boolean(0, 2) && !force) {
      const std::optional<std::int64_t> expires = row->integer(0, 3);
      return Status(Reason::kLeaseLive,
                    name + " is leased by " + internal::quote(row->text(0, 0)) + " (token " +
                        std::to_string(token) + ") until " +
                        (expires ? unix_ms_text(*expires) : std::string("(unknown)")) +
                        " by the database's clock, in " + where() +
                        "; release it by force to fence the holder out, or wait for its lease "
                        "to run out");
    }
    // A new token fences the holder out: its renewals and horizon writes fail from now on.
    if (Status st = exec(deadline,
                         "UPDATE flurry_nodes SET owner = NULL, expires_at = NULL, "
                         "token = token + 1 WHERE node = $1::bigint",
                         {id}, "cannot release " + name);
        !st.ok()) {
      return st;
    }
    return exec(deadline, "COMMIT", {}, "cannot commit the release of " + name);
  });
}

}  // namespace

Result<std::unique_ptr<NodeRegistry>> open_postgres_registry(const std::string& url,
                                                             std::chrono::milliseconds ttl,
                                                             std::string_view layout) {
  if (Status st = internal::check_postgres_url(url); !st.ok()) return st;
  if (ttl <= milliseconds(0)) {
    return InvalidArgument("the lease ttl must be positive, not " + std::to_string(ttl.count()) +
                           " ms");
  }
  if (layout.empty()) return InvalidArgument("the postgres registry needs a layout");
  auto registry = std::make_unique<PostgresRegistry>(url, ttl, std::string(layout));
  if (Status st = registry->init(); !st.ok()) return st;
  return std::unique_ptr<NodeRegistry>(std::move(registry));
}

}  // namespace flurry

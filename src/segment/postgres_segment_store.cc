// The PostgreSQL segment store: Meituan Leaf's own table, so that a Leaf database can be pointed at
// as it is,
//   leaf_alloc(biz_tag varchar(128) PRIMARY KEY, max_id bigint, step integer,
//              description varchar(256), update_time timestamp)
// and flurry's flurry_segment_residues(biz_tag, delta, remainder) beside it (no row: delta 1,
// remainder 0), and flurry_segment_meta(key, value) with the store's ID (row 'store_id'). All are
// created when missing; a role that may not create flurry_segment_meta runs without a store ID.
// flurry_segment_strict(biz_tag) holds a row per strict tag (SegmentTagSpec::strict); it too is
// created when missing, so a database of an older flurry gains it in place at the first
// connection (its tags are not strict), and a role that may not create it serves the tags there
// are and refuses to create strict ones.
// At every connection the store reads its identity (the store ID, the cluster's system
// identifier, the database and the schema of leaf_alloc) for this host's floors.
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

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/quote.h"
#include "db/postgres_conninfo.h"
#include "db/postgres_session.h"
#include "flurry/mutex.h"
#include "flurry/segment_store.h"
#include "stores.h"

namespace flurry {
namespace {

using internal::PgSession;
using std::chrono::milliseconds;
using Rows = internal::PgRows;

// The tables by name, with their DDL: created when missing. The last one, flurry's own identity
// row (SegmentStoreIdentity::store_id, key 'store_id'), is optional: a role that may not create it
// runs without a store ID.
constexpr const char* kTableNames[] = {"leaf_alloc", "flurry_segment_residues",
                                       "flurry_segment_meta", "flurry_segment_strict"};
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
    "CREATE TABLE IF NOT EXISTS flurry_segment_meta ("
    "key varchar(64) PRIMARY KEY, "
    "value text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS flurry_segment_strict ("
    "biz_tag varchar(128) PRIMARY KEY)",
};

// The columns read_tag() reads, in this order. update_time is a timestamp without time zone
// (Leaf's), written as now() in the session's time zone: read back in that time zone too.
// The last column says whether the tag is strict: read from flurry_segment_strict where that
// table exists (kPostgresSelectTags), false where it does not (kPostgresSelectTagsNoStrict).
constexpr std::string_view kPostgresSelectTags =
    "SELECT a.biz_tag, a.max_id, a.step, a.description, "
    "floor(extract(epoch FROM a.update_time::timestamptz) * 1000)::bigint, "
    "coalesce(r.delta, 1), coalesce(r.remainder, 0), s.biz_tag IS NOT NULL "
    "FROM leaf_alloc a LEFT JOIN flurry_segment_residues r ON r.biz_tag = a.biz_tag "
    "LEFT JOIN flurry_segment_strict s ON s.biz_tag = a.biz_tag";
constexpr std::string_view kPostgresSelectTagsNoStrict =
    "SELECT a.biz_tag, a.max_id, a.step, a.description, "
    "floor(extract(epoch FROM a.update_time::timestamptz) * 1000)::bigint, "
    "coalesce(r.delta, 1), coalesce(r.remainder, 0), false "
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
// kCreateTag with the tag's strict row ($7: whether it is strict; a row left by a deleted tag is
// replaced or removed likewise), where flurry_segment_strict exists.
constexpr const char* kCreateTagStrict =
    "WITH a AS (INSERT INTO leaf_alloc(biz_tag, max_id, step, description, update_time) "
    "VALUES ($1, $2::bigint, $3::integer, NULLIF($4, ''), now()) "
    "ON CONFLICT (biz_tag) DO NOTHING RETURNING biz_tag), "
    "r AS (INSERT INTO flurry_segment_residues(biz_tag, delta, remainder) "
    "SELECT biz_tag, $5::bigint, $6::bigint FROM a WHERE $5::bigint <> 1 OR $6::bigint <> 0 "
    "ON CONFLICT (biz_tag) DO UPDATE SET delta = EXCLUDED.delta, remainder = EXCLUDED.remainder), "
    "d AS (DELETE FROM flurry_segment_residues WHERE biz_tag IN (SELECT biz_tag FROM a) "
    "AND $5::bigint = 1 AND $6::bigint = 0), "
    "s AS (INSERT INTO flurry_segment_strict(biz_tag) SELECT biz_tag FROM a WHERE $7::boolean "
    "ON CONFLICT (biz_tag) DO NOTHING), "
    "t AS (DELETE FROM flurry_segment_strict WHERE biz_tag IN (SELECT biz_tag FROM a) "
    "AND NOT $7::boolean) "
    "SELECT count(*) FROM a";

class PostgresSegmentStore final : public SegmentStore {
 public:
  PostgresSegmentStore(internal::PostgresUrl url, milliseconds timeout, MonotonicClock& clock)
      : redacted_(url.redacted()),
        timeout_(timeout),
        address_(internal::postgres_store_address(url)),
        session_(std::move(url), clock, session_options()) {
    known_.address = address_;
  }

  Status create_tag(const SegmentTagSpec& spec) override;
  using SegmentStore::allocate;
  Result<SegmentAllocation> allocate(const SegmentTag& tag, std::uint64_t step,
                                     std::uint64_t floor) override;
  Result<SegmentTagInfo> tag(const SegmentTag& tag) override;
  Result<std::vector<SegmentTagInfo>> list_tags() override;
  std::string describe() const override { return redacted_; }
  Result<SegmentStoreIdentity> identity(Blocking blocking) override;

  // current_setting(name) on this store's session.
  [[nodiscard]] Result<std::string> setting(std::string_view name);

 private:
  [[nodiscard]] std::string where() const { return "segment store " + redacted_; }

  // Runs `body(deadline)` under mu_ with a connection (made now if there is none, or if the one
  // there was closed by the server while idle) and the call's deadline. A connection the body
  // leaves inside a transaction (it failed half-way) is dropped.
  template <typename Body>
  auto run(Body body) -> decltype(body(MonoTime()));

  // The session's settings (its errors as PgSession::Options says).
  [[nodiscard]] PgSession::Options session_options() const;
  // A new connection (PgSession::connect), with the tables.
  [[nodiscard]] Status connect(MonoTime deadline) FLURRY_REQUIRES(mu_);
  [[nodiscard]] Status ensure_tables(MonoTime deadline) FLURRY_REQUIRES(mu_);
  // Reads the store ID (made when the store has none) and the place of the connection's
  // database into identity_; notes in identity_changed_ a change from the last one read.
  [[nodiscard]] Status read_identity(MonoTime deadline) FLURRY_REQUIRES(mu_);
  // The row of kPostgresSelectTags at `row`.
  [[nodiscard]] Result<SegmentTagInfo> read_tag(const Rows& rows, int row) const;

  const std::string redacted_;
  const milliseconds timeout_;
  const std::string address_;
  Mutex mu_;  // serialises calls; guards everything below
  PgSession session_ FLURRY_GUARDED_BY(mu_);
  // flurry_segment_meta exists (ensure_tables)
  bool meta_table_ FLURRY_GUARDED_BY(mu_) = false;
  // flurry_segment_strict exists (ensure_tables)
  bool strict_table_ FLURRY_GUARDED_BY(mu_) = false;
  // The tags' query for this connection's tables, with `tail` after it.
  [[nodiscard]] std::string select_tags(std::string_view tail) const FLURRY_REQUIRES(mu_) {
    std::string sql(strict_table_ ? kPostgresSelectTags : kPostgresSelectTagsNoStrict);
    sql += tail;
    return sql;
  }
  bool identified_ FLURRY_GUARDED_BY(mu_) = false;  // identity_ was read on some connection
  SegmentStoreIdentity identity_ FLURRY_GUARDED_BY(mu_);
  // The store behind the location changed at the last connection since identity() was last
  // asked ("<old> -> <new>"): allocate() refuses once.
  std::string identity_changed_ FLURRY_GUARDED_BY(mu_);
  // A copy of identity_ (the address alone before the first connection) for identity(kNever).
  // Taken after mu_ when both are held.
  mutable Mutex known_mu_;
  SegmentStoreIdentity known_ FLURRY_GUARDED_BY(known_mu_);
};

// ---- Connection and statements ----

PgSession::Options PostgresSegmentStore::session_options() const {
  return {.where = where(), .timeout = timeout_, .application_name = "flurry-segments"};
}

Status PostgresSegmentStore::connect(MonoTime deadline) {
  // Configured by the session (server-side timeouts, durable commits).
  if (Status st = session_.connect(deadline); !st.ok()) return st;
  if (Status st = ensure_tables(deadline); !st.ok()) return st;
  return read_identity(deadline);
}

Status PostgresSegmentStore::read_identity(MonoTime deadline) {
  SegmentStoreIdentity id;
  id.address = address_;
  if (meta_table_) {
    const auto read = [&]() FLURRY_REQUIRES(mu_) {
      return session_.query(deadline,
                            "SELECT value FROM flurry_segment_meta WHERE key = 'store_id'", {},
                            "cannot read the store ID");
    };
    Result<Rows> got = read();
    if (got.ok() && got->size() == 0) {
      // None yet: made once (whoever comes first; the others keep the first one's). A role that
      // may read the table but not write it goes without.
      Result<std::string> fresh = internal::new_segment_store_id();
      if (!fresh.ok()) return fresh.status();
      Result<Rows> put = session_.query(deadline,
                                        "INSERT INTO flurry_segment_meta(key, value) "
                                        "VALUES ('store_id', $1) ON CONFLICT (key) DO NOTHING",
                                        {*fresh}, "cannot make the store ID");
      if (!put.ok() && session_.last_sqlstate() != "42501") return put.status();
      got = read();
    }
    if (!got.ok() && session_.last_sqlstate() != "42501") return got.status();
    if (got.ok() && got->size() == 1) {
      id.store_id = got->text(0, 0);
      if (!internal::is_segment_store_id(id.store_id)) {
        return Status(Reason::kCorrupt,
                      where() + ": the store ID in flurry_segment_meta is " +
                          internal::quote(id.store_id) +
                          ", not \"store-id:\" and 32 hex digits; this host's floors of the store "
                          "are kept under it, so flurry will not guess (restore the row)");
      }
    }
  }
  // The cluster's system identifier is kept by backups, replicas and fail-overs of the cluster;
  // reading it may be refused to roles without the right (then only the store ID says it).
  Result<Rows> db = session_.query(
      deadline,
      "SELECT current_database(), (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON "
      "n.oid = c.relnamespace WHERE c.oid = to_regclass('leaf_alloc'))",
      {}, "cannot read the database's name");
  if (!db.ok()) return db.status();
  Result<Rows> cluster =
      session_.query(deadline, "SELECT system_identifier::text FROM pg_control_system()", {},
                     "cannot read the cluster's system identifier");
  if (cluster.ok() && cluster->size() == 1 && !cluster->null(0, 0)) {
    id.place = "postgres-cluster:" + cluster->text(0, 0) + "/" + db->text(0, 0) + "/" +
               db->text(0, 1) + ".leaf_alloc";
  } else if (!cluster.ok() && session_.last_sqlstate() != "42501") {
    return cluster.status();
  }
  if (identified_ && (id.store_id != identity_.store_id || id.place != identity_.place)) {
    identity_changed_ = (identity_.store_id.empty() ? identity_.place : identity_.store_id) +
                        " -> " + (id.store_id.empty() ? id.place : id.store_id);
  }
  identity_ = std::move(id);
  identified_ = true;
  MutexLock lock(known_mu_);
  known_ = identity_;
  return OkStatus();
}

Result<SegmentStoreIdentity> PostgresSegmentStore::identity(Blocking blocking) {
  if (blocking == Blocking::kNever) {
    // Not under mu_, which a call waiting on the server holds.
    MutexLock lock(known_mu_);
    return known_;
  }
  return run([&](MonoTime) FLURRY_REQUIRES(mu_) -> Result<SegmentStoreIdentity> {
    identity_changed_.clear();
    return identity_;
  });
}

template <typename Body>
auto PostgresSegmentStore::run(Body body) -> decltype(body(MonoTime())) {
  MutexLock lock(mu_);
  const MonoTime deadline = session_.deadline();
  if (session_.connected() && !session_.idle_alive()) session_.drop();
  if (!session_.connected()) {
    if (Status st = connect(deadline); !st.ok()) {
      session_.drop();
      return st;
    }
  }
  auto result = body(deadline);
  // Every body is one statement outside any transaction; one left open failed half-way.
  if (session_.in_transaction()) session_.drop();
  return result;
}

Status PostgresSegmentStore::ensure_tables(MonoTime deadline) {
  // Existing tables need no DDL (nor the right to create tables).
  Result<Rows> existing = session_.query(deadline,
                                         "SELECT to_regclass('leaf_alloc') IS NOT NULL, "
                                         "to_regclass('flurry_segment_residues') IS NOT NULL, "
                                         "to_regclass('flurry_segment_meta') IS NOT NULL, "
                                         "to_regclass('flurry_segment_strict') IS NOT NULL",
                                         {}, "cannot look for the tables");
  if (!existing.ok()) return existing.status();
  meta_table_ = true;
  strict_table_ = true;
  for (std::size_t t = 0; t < std::size(kCreateTables); ++t) {
    if (existing->text(0, static_cast<int>(t)) == "t") continue;
    const char* ddl = kCreateTables[t];
    const std::string_view table = kTableNames[t];
    const bool optional = table == "flurry_segment_meta" || table == "flurry_segment_strict";
    // Concurrent CREATE TABLE IF NOT EXISTS of one table can fail on the catalog's unique
    // indexes once the other creator commits (23505 unique_violation, 42P07 duplicate_table, or
    // 42710 duplicate_object for the table's row type): the second try sees the table and skips
    // it.
    for (int attempt = 0;; ++attempt) {
      Result<Rows> created = session_.query(deadline, ddl, {}, "cannot create the tables");
      if (created.ok()) break;
      if (optional && session_.last_sqlstate() == "42501") {
        // See kTableNames and kPostgresSelectTagsNoStrict.
        (table == "flurry_segment_meta" ? meta_table_ : strict_table_) = false;
        break;
      }
      if (attempt > 0 ||
          (session_.last_sqlstate() != "23505" && session_.last_sqlstate() != "42P07" &&
           session_.last_sqlstate() != "42710")) {
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
  info.strict = rows.text(row, 7) == "t";
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
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Status {
    if (spec.strict && !strict_table_) {
      return Status(StatusCode::kFailedPrecondition,
                    where() + ": " + what +
                        ": the table flurry_segment_strict is missing and this role may not "
                        "create it; create it (CREATE TABLE flurry_segment_strict (biz_tag "
                        "varchar(128) PRIMARY KEY)) or connect as a role that may");
    }
    std::vector<std::string> params{
        spec.tag,         std::to_string(spec.start), std::to_string(spec.step),
        spec.description, std::to_string(spec.delta), std::to_string(spec.remainder)};
    if (strict_table_) params.emplace_back(spec.strict ? "true" : "false");
    Result<Rows> created =
        session_.query(deadline, strict_table_ ? kCreateTagStrict : kCreateTag, params, what);
    if (!created.ok()) return created.status();
    if (created->size() != 1 || !created->integer(0, 0)) {
      return Status(StatusCode::kInternal, where() + ": " + what + ": unexpected answer");
    }
    if (*created->integer(0, 0) == 0) return internal::segment_tag_exists(redacted_, spec.tag);
    return OkStatus();
  });
}

Result<SegmentAllocation> PostgresSegmentStore::allocate(const SegmentTag& checked,
                                                         std::uint64_t step, std::uint64_t floor) {
  const std::string_view tag = checked.view();
  if (Status st = internal::check_allocation_step(step); !st.ok()) return st;
  const std::string& name = checked.name();
  const std::string what = "cannot allocate for segment tag " + internal::quote(tag);
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Result<SegmentAllocation> {
    if (!identity_changed_.empty()) {
      const std::string change = std::move(identity_changed_);
      identity_changed_.clear();
      return Status(Reason::kIo, where() + ": " + what + ": the location reaches another store " +
                                     "now (" + change + "); nothing was allocated, retry");
    }
    Result<Rows> raised =
        session_.query(deadline, kAllocate,
                       {name, std::to_string(step), std::to_string(kMaxSegmentDelta),
                        std::to_string(std::min<std::uint64_t>(floor, 9223372036854775807ULL))},
                       what);
    if (!raised.ok()) return raised.status();
    if (raised->size() == 0) {
      // Nothing raised: no such tag, or one that cannot take `step`, or an unreadable row.
      const std::string sql = select_tags(" WHERE a.biz_tag = $1");
      Result<Rows> row = session_.query(deadline, sql.c_str(), {name}, what);
      if (!row.ok()) return row.status();
      if (row->size() == 0) return internal::segment_tag_not_found(redacted_, tag);
      Result<SegmentTagInfo> info = read_tag(*row, 0);
      if (!info.ok()) return info.status();
      if (Status why = internal::explain_refused_allocation(redacted_, tag, *info, floor, step);
          !why.ok()) {
        return why;
      }
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

Result<SegmentTagInfo> PostgresSegmentStore::tag(const SegmentTag& checked) {
  const std::string_view tag = checked.view();
  const std::string& name = checked.name();
  const std::string what = "cannot read segment tag " + internal::quote(tag);
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Result<SegmentTagInfo> {
    const std::string sql = select_tags(" WHERE a.biz_tag = $1");
    Result<Rows> row = session_.query(deadline, sql.c_str(), {name}, what);
    if (!row.ok()) return row.status();
    if (row->size() == 0) return internal::segment_tag_not_found(redacted_, tag);
    return read_tag(*row, 0);
  });
}

Result<std::vector<SegmentTagInfo>> PostgresSegmentStore::list_tags() {
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Result<std::vector<SegmentTagInfo>> {
    const std::string sql = select_tags(" ORDER BY a.biz_tag COLLATE \"C\"");
    Result<Rows> rows = session_.query(deadline, sql.c_str(), {}, "cannot list the segment tags");
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
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Result<std::string> {
    Result<Rows> got =
        session_.query(deadline, "SELECT current_setting($1)", {key}, "cannot read a setting");
    if (!got.ok()) return got.status();
    return got->text(0, 0);
  });
}

}  // namespace

Result<std::unique_ptr<SegmentStore>> internal::open_postgres_segment_store(
    PostgresUrl url, const SegmentStoreOptions& options) {
  if (options.timeout.count() <= 0) {
    return InvalidArgument("timeout: a segment store's timeout must be positive");
  }
  if (options.clock == nullptr) {
    return InvalidArgument("clock: a segment store needs a monotonic clock for its deadlines");
  }
  return std::unique_ptr<SegmentStore>(
      std::make_unique<PostgresSegmentStore>(std::move(url), options.timeout, *options.clock));
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

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
#include "postgres_registry.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
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
#include "flurry/registry.h"
#include "flurry/timefmt.h"
#include "stored_horizon.h"

namespace flurry {
namespace {

using internal::PgSession;
using std::chrono::milliseconds;
using Rows = internal::PgRows;

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

std::string unix_ms_text(std::int64_t ms) {
  return format_unix_ms(ms);
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
  PostgresRegistry(internal::PostgresUrl url, milliseconds ttl, std::string layout,
                   MonotonicClock& clock, std::string_view scope)
      : redacted_(url.redacted()),
        layout_(std::move(layout)),
        table_prefix_(scope.empty() ? std::string() : "flurry_" + std::string(scope) + "_"),
        ttl_(ttl),
        op_timeout_(std::max<milliseconds>(std::min<milliseconds>(kMaxOperationTime, ttl / 3),
                                           milliseconds(1))),
        session_(std::move(url), clock, session_options()) {}

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
  auto run(Body body) -> decltype(body(MonoTime()));

  // The session's settings (its errors as PgSession::Options says).
  [[nodiscard]] PgSession::Options session_options() const;
  // A new connection (PgSession::connect).
  [[nodiscard]] Status connect(MonoTime deadline) FLURRY_REQUIRES(mu_);
  void drop_connection() FLURRY_REQUIRES(mu_) { session_.drop(); }
  // One statement with its text parameters; its rows. Errors as registry.h says, naming `what`.
  // Statements name the node-ID tables (flurry_nodes, flurry_meta); a scoped registry's own
  // tables replace them here, the one place every statement passes.
  [[nodiscard]] Result<Rows> query(MonoTime deadline, const char* sql,
                                   const std::vector<std::string>& params, std::string_view what)
      FLURRY_REQUIRES(mu_) {
    if (table_prefix_.empty()) return session_.query(deadline, sql, params, what);
    return session_.query(deadline, scoped(sql).c_str(), params, what);
  }
  [[nodiscard]] Status exec(MonoTime deadline, const char* sql,
                            const std::vector<std::string>& params, std::string_view what)
      FLURRY_REQUIRES(mu_) {
    if (table_prefix_.empty()) return session_.exec(deadline, sql, params, what);
    return session_.exec(deadline, scoped(sql).c_str(), params, what);
  }
  // `sql` with "flurry_" before the tables' names replaced by table_prefix_.
  [[nodiscard]] std::string scoped(std::string_view sql) const {
    std::string out;
    for (;;) {
      const std::size_t at = std::min(sql.find("flurry_nodes"), sql.find("flurry_meta"));
      if (at == std::string_view::npos) break;
      out.append(sql.substr(0, at)).append(table_prefix_);
      sql.remove_prefix(at + 7);  // past "flurry_"
    }
    return out.append(sql);
  }

  // Steps of the operations, inside run().
  [[nodiscard]] Status ensure_schema(MonoTime deadline) FLURRY_REQUIRES(mu_);
  // OK when the registry belongs to layout_, or to none yet; with `record` (in a transaction)
  // a registry of no layout is given layout_.
  [[nodiscard]] Status check_layout(MonoTime deadline, bool record) FLURRY_REQUIRES(mu_);
  [[nodiscard]] Result<FreeNode> find_free_node(MonoTime deadline, std::int64_t limit,
                                                std::uint64_t node_count) FLURRY_REQUIRES(mu_);
  [[nodiscard]] Result<std::optional<HorizonRecord>> inherited_horizon(const FreeNode& free) const;
  // Writes the claim of `free` for `owner`; false when the row was inserted by another claimer
  // first (look again).
  [[nodiscard]] Result<bool> write_claim(MonoTime deadline, const FreeNode& free,
                                         std::string_view owner, std::int64_t token)
      FLURRY_REQUIRES(mu_);
  // The LEASE_LOST (or REGISTRY_REGRESSED) error for `lease`, saying what became of the node.
  [[nodiscard]] Status lease_lost(MonoTime deadline, const Lease& lease, std::string_view what)
      FLURRY_REQUIRES(mu_);

  const std::string redacted_;
  const std::string layout_;
  // "flurry_<scope>_" for a scoped registry's tables; empty: flurry_nodes and flurry_meta.
  const std::string table_prefix_;
  const milliseconds ttl_;
  const milliseconds op_timeout_;
  Mutex mu_;  // serializes operations; guards everything below
  PgSession session_ FLURRY_GUARDED_BY(mu_);
  // The connection was made by an earlier operation (it may have broken since).
  bool reused_ FLURRY_GUARDED_BY(mu_) = false;
  // Per node: the token and record of this object's last successful save_horizon.
  std::map<std::uint64_t, std::pair<std::uint64_t, HorizonRecord>> saved_ FLURRY_GUARDED_BY(mu_);
};

// ---- Connection and statements ----

PgSession::Options PostgresRegistry::session_options() const {
  return {.where = where(), .timeout = op_timeout_, .application_name = "flurry"};
}

Status PostgresRegistry::connect(MonoTime deadline) {
  // Configured by the session (server-side timeouts, durable commits).
  if (Status st = session_.connect(deadline); !st.ok()) return st;
  reused_ = false;
  return OkStatus();
}

template <typename Body>
auto PostgresRegistry::run(Body body) -> decltype(body(MonoTime())) {
  MutexLock lock(mu_);
  const MonoTime deadline = session_.deadline();
  for (int attempt = 0;; ++attempt) {
    if (!session_.connected()) {
      if (Status st = connect(deadline); !st.ok()) return st;
    }
    const bool reused = reused_;
    reused_ = true;
    session_.reset_statements();
    auto result = body(deadline);
    if (!session_.connected()) {
      // The connection broke. If it was an old one that broke on the first statement, nothing
      // was done: try once more on a new one.
      if (!result.ok() && reused && session_.statements() <= 1 && attempt == 0 &&
          !session_.expired(deadline)) {
        continue;
      }
      return result;
    }
    if (session_.in_transaction()) {
      // The body failed inside its transaction; a bounded rollback, or a new connection next time.
      const MonoTime rollback_deadline = session_.deadline();
      if (!exec(rollback_deadline, "ROLLBACK", {}, "cannot roll back").ok() ||
          session_.in_transaction()) {
        drop_connection();
      }
    }
    return result;
  }
}

// ---- Schema and layout ----

Status PostgresRegistry::ensure_schema(MonoTime deadline) {
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

Status PostgresRegistry::check_layout(MonoTime deadline, bool record) {
  for (int pass = 0; pass < 2; ++pass) {
    Result<Rows> got = query(deadline, "SELECT value FROM flurry_meta WHERE key = 'layout'", {},
                             "cannot read the registry's layout");
    if (!got.ok()) return got.status();
    if (got->size() > 0) {
      const std::string recorded = got->text(0, 0);
      if (Layout::same_structure(recorded, layout_)) return OkStatus();  // names are labels
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
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Status {
    if (Status st = ensure_schema(deadline); !st.ok()) return st;
    return check_layout(deadline, /*record=*/false);
  });
}

// ---- Claims ----

Result<FreeNode> PostgresRegistry::find_free_node(MonoTime deadline, std::int64_t limit,
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
  return internal::inherited_horizon(free.horizon_text, static_cast<std::uint64_t>(free.node),
                                     where());
}

Result<bool> PostgresRegistry::write_claim(MonoTime deadline, const FreeNode& free,
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
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Result<Claim> {
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

Status PostgresRegistry::lease_lost(MonoTime deadline, const Lease& lease, std::string_view what) {
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
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Status {
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
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Status {
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
      const Result<HorizonRecord> theirs =
          updated->null(0, 0) ? Result<HorizonRecord>(Status(StatusCode::kNotFound, "no horizon"))
                              : parse_horizon_record(updated->text(0, 0));
      if (Status st = internal::check_not_behind(theirs, it->second.second, lease.token, where());
          !st.ok()) {
        return st;
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
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Status {
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
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Result<RegistryListing> {
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
  return run([&](MonoTime deadline) FLURRY_REQUIRES(mu_) -> Status {
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
                                                             std::string_view layout,
                                                             MonotonicClock& clock) {
  Result<internal::PostgresUrl> parsed = internal::PostgresUrl::parse(url);
  if (!parsed.ok()) return parsed.status();
  return internal::open_postgres_registry(std::move(parsed).value(), ttl, layout, clock);
}

Result<std::unique_ptr<NodeRegistry>> internal::open_postgres_registry(
    PostgresUrl url, std::chrono::milliseconds ttl, std::string_view layout, MonotonicClock& clock,
    std::string_view scope) {
  if (ttl <= milliseconds(0)) {
    return InvalidArgument("the lease ttl must be positive, not " + std::to_string(ttl.count()) +
                           " ms");
  }
  if (layout.empty()) return InvalidArgument("the postgres registry needs a layout");
  auto registry =
      std::make_unique<PostgresRegistry>(std::move(url), ttl, std::string(layout), clock, scope);
  if (Status st = registry->init(); !st.ok()) return st;
  return std::unique_ptr<NodeRegistry>(std::move(registry));
}

}  // namespace flurry

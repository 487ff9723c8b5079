// The SQLite node registry: one row per node ID in a database file that several processes on one
// host may share (docs/design.md, "The registries").
//
// Every operation opens its own connection, does its work and closes it. Operations are rare (a
// claim at start, a renewal every ttl/3, a horizon save about once a second), and a fresh open is
// what makes a database that became unwritable (chmod, a replaced file or directory, a full
// disk) fail the next operation instead of being hidden behind a connection opened earlier.
// Within the process a mutex serializes operations; between processes SQLite's locks do, with a
// short busy timeout so a renewal never waits long.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/durable_file.h"
#include "core/private_files.h"
#include "core/quote.h"
#include "db/sqlite_db.h"
#include "flurry/mutex.h"
#include "flurry/registry.h"
#include "stored_horizon.h"

namespace flurry {
namespace {

using std::chrono::milliseconds;

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

using internal::bind_text;
using internal::column_text;
using internal::SqliteDb;
using Stmt = internal::SqliteStmt;

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS nodes("
    "node INTEGER PRIMARY KEY, "
    "owner TEXT, "  // NULL: released
    "token INTEGER NOT NULL, "
    "expires_ms INTEGER NOT NULL, "
    "horizon TEXT);"
    // key 'layout': the canonical layout text the registry belongs to.
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)";

// The node a claim takes: the lowest node ID that was never claimed or whose lease was released
// or has expired.
struct FreeNode {
  std::int64_t node = 0;
  bool existing = false;       // it has a row (released or expired), which the claim updates
  std::int64_t old_token = 0;  // the row's fencing token, when it exists
  std::optional<std::string> horizon_text;  // the row's horizon, when it has one
};

class SqliteRegistry final : public NodeRegistry {
 public:
  SqliteRegistry(std::string path, milliseconds ttl, Clock& clock, std::string layout)
      : path_(std::move(path)),
        layout_(std::move(layout)),
        ttl_(ttl),
        busy_timeout_(std::max<milliseconds>(std::min<milliseconds>(milliseconds(1000), ttl / 10),
                                             milliseconds(1))),
        clock_(clock) {}

  // Creates the file and the schema and checks the layout, so that a bad path or another
  // layout fails at open rather than at claim. The first claim records the layout.
  [[nodiscard]] Status init() {
    MutexLock lock(mu_);
    Result<SqliteDb> db = connect(/*create=*/true);
    if (!db.ok()) return db.status();
    return check_layout(*db, /*record=*/false);
  }

  Result<Claim> claim(std::string_view owner, std::uint64_t node_count) override;
  Status renew(const Lease& lease) override;
  Status save_horizon(const Lease& lease, const HorizonRecord& record) override;
  Status release(const Lease& lease) override;
  Result<RegistryListing> list() override;
  Status release_node(std::uint64_t node, bool force) override;
  std::string describe() const override { return "sqlite:" + path_; }

 private:
  [[nodiscard]] std::string where() const { return "sqlite registry " + path_; }
  [[nodiscard]] std::int64_t now_ms() const {
    return std::chrono::duration_cast<milliseconds>(clock_.now().time_since_epoch()).count();
  }

  // A fresh connection, configured (WAL, synchronous=FULL, busy timeout) and with the schema.
  // Only open_sqlite_registry creates the file: a database that disappears later is an error,
  // not silently replaced by an empty one (which would hand out node IDs without their horizons).
  [[nodiscard]] Result<SqliteDb> connect(bool create = false) const;
  [[nodiscard]] static Result<Stmt> prepare(const SqliteDb& db, const char* sql) {
    return db.prepare(sql, "cannot prepare a statement");
  }
  // OK when the registry belongs to layout_ or to none yet (a new or emptied registry; one
  // written before layouts were recorded is checked against the layouts of its horizons).
  // With `record` (inside a write transaction) a registry of no layout is given layout_.
  [[nodiscard]] Status check_layout(const SqliteDb& db, bool record) const;
  // Steps of claim(), inside its transaction. The lowest free node below node_count
  // (RESOURCE_EXHAUSTED when there is none).
  [[nodiscard]] Result<FreeNode> find_free_node(const SqliteDb& db, std::uint64_t node_count,
                                                std::int64_t now) const;
  // The horizon the previous owner of `free` left, checked to be readable and its node's.
  [[nodiscard]] Result<std::optional<HorizonRecord>> inherited_horizon(const FreeNode& free) const;
  // The new lease's fencing token: 1 for a new row, one above the row's otherwise.
  [[nodiscard]] Result<std::int64_t> next_token(const FreeNode& free) const;
  // Inserts or updates the row of `free` for `owner`, expiring ttl_ after `now`.
  [[nodiscard]] Status write_claim(const SqliteDb& db, const FreeNode& free, std::string_view owner,
                                   std::int64_t token, std::int64_t now) const;
  // The LEASE_LOST error for `lease`, saying what became of the node if the row tells.
  [[nodiscard]] Status lease_lost(const SqliteDb& db, const Lease& lease,
                                  std::string_view what) const;

  const std::string path_;
  const std::string layout_;
  const milliseconds ttl_;
  const milliseconds busy_timeout_;
  Clock& clock_;
  Mutex mu_;  // serializes operations within the process
  // Per node: the token and record of this object's last successful save_horizon.
  std::map<std::uint64_t, std::pair<std::uint64_t, HorizonRecord>> saved_ FLURRY_GUARDED_BY(mu_);
};

Result<SqliteDb> SqliteRegistry::connect(bool create) const {
  return SqliteDb::open({.path = path_,
                         .where = where(),
                         .create = create,
                         .busy_timeout = busy_timeout_,
                         // Every operation opens and closes a connection.
                         .no_checkpoint_on_close = true,
                         .schema = kSchema,
                         .schema_what = "cannot create the nodes table"});
}

Status SqliteRegistry::lease_lost(const SqliteDb& db, const Lease& lease,
                                  std::string_view what) const {
  const std::string node = "node " + std::to_string(lease.node);
  const std::string tail = " (" + std::string(what) + " in " + where() + ")";
  auto lost = [&](std::string why) { return Status(Reason::kLeaseLost, std::move(why) + tail); };
  Result<Stmt> stmt = prepare(db, "SELECT owner, token FROM nodes WHERE node = ?1");
  if (!stmt.ok())
    return lost(node + " is no longer leased under token " + std::to_string(lease.token));
  sqlite3_bind_int64(stmt->get(), 1, static_cast<std::int64_t>(lease.node));
  const int rc = sqlite3_step(stmt->get());
  const auto regressed = [&](std::string why) {
    return Status(Reason::kRegistryRegressed, std::move(why) + tail);
  };
  if (rc != SQLITE_ROW) {
    return regressed(node + " has no row in the registry, though this process holds its lease " +
                     "under token " + std::to_string(lease.token) +
                     " (was the database replaced, emptied or restored from a backup?)");
  }
  const bool released = sqlite3_column_type(stmt->get(), 0) == SQLITE_NULL;
  const std::string owner = column_text(stmt->get(), 0);
  const std::int64_t token = sqlite3_column_int64(stmt->get(), 1);
  const std::string ours = std::to_string(lease.token);
  if (token >= 0 && static_cast<std::uint64_t>(token) > lease.token) {
    return lost(node + " was claimed by another owner" +
                (released ? std::string() : " " + internal::quote(owner)) + " (token " +
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

Status SqliteRegistry::check_layout(const SqliteDb& db, bool record) const {
  const auto other = [&](const std::string& theirs, std::string_view detail) {
    return Status(Reason::kStateMismatch,
                  where() + " belongs to layout \"" + theirs + "\"" + std::string(detail) +
                      "; this process uses layout \"" + layout_ + "\"" +
                      ". IDs of two layouts over one registry collide even when their node IDs "
                      "differ: give the other layout its own data directory");
  };
  {
    Result<Stmt> get = prepare(db, "SELECT value FROM meta WHERE key = 'layout'");
    if (!get.ok()) return get.status();
    Result<bool> found = db.step(get->get(), "cannot read the registry's layout");
    if (!found.ok()) return found.status();
    if (*found) {
      const std::string recorded = column_text(get->get(), 0);
      // Layouts compare by structure (field names are labels).
      return Layout::same_structure(recorded, layout_) ? OkStatus() : other(recorded, "");
    }
  }
  {
    Result<Stmt> scan =
        prepare(db, "SELECT node, horizon FROM nodes WHERE horizon IS NOT NULL ORDER BY node");
    if (!scan.ok()) return scan.status();
    for (;;) {
      Result<bool> row = db.step(scan->get(), "cannot read the nodes table");
      if (!row.ok()) return row.status();
      if (!*row) break;
      Result<HorizonRecord> record = parse_horizon_record(column_text(scan->get(), 1));
      if (record.ok() && !Layout::same_structure(record->layout, layout_)) {
        return other(record->layout, " (the horizon of node " +
                                         std::to_string(sqlite3_column_int64(scan->get(), 0)) +
                                         " says so)");
      }
    }
  }
  if (!record) return OkStatus();
  Result<Stmt> put = prepare(db, "INSERT INTO meta(key, value) VALUES('layout', ?1)");
  if (!put.ok()) return put.status();
  bind_text(put->get(), 1, layout_);
  return db.run(put->get(), "cannot record the registry's layout").status();
}

Result<FreeNode> SqliteRegistry::find_free_node(const SqliteDb& db, std::uint64_t node_count,
                                                std::int64_t now) const {
  // Row IDs are signed 64-bit; no layout has more node IDs than that anyway.
  const std::int64_t limit =
      static_cast<std::int64_t>(std::min<std::uint64_t>(node_count, kInt64Max));
  // Rows in node order: the first gap, released row or expired row is the lowest free node ID.
  FreeNode free;
  Result<Stmt> scan = prepare(db,
                              "SELECT node, owner, token, expires_ms, horizon FROM nodes "
                              "WHERE node >= 0 AND node < ?1 ORDER BY node");
  if (!scan.ok()) return scan.status();
  sqlite3_stmt* s = scan->get();
  sqlite3_bind_int64(s, 1, limit);
  for (;;) {
    Result<bool> row = db.step(s, "cannot read the nodes table");
    if (!row.ok()) return row.status();
    if (!*row) break;
    if (sqlite3_column_int64(s, 0) != free.node) break;  // a gap: `node` was never claimed
    if (sqlite3_column_type(s, 1) == SQLITE_NULL || sqlite3_column_int64(s, 3) <= now) {
      free.existing = true;
      free.old_token = sqlite3_column_int64(s, 2);
      if (sqlite3_column_type(s, 4) != SQLITE_NULL) free.horizon_text = column_text(s, 4);
      break;
    }
    ++free.node;
  }
  if (!free.existing && free.node >= limit) {
    return Status(Reason::kNoFreeNode,
                  "all " + std::to_string(node_count) + " node IDs are leased in " + where() +
                      "; wait for a lease to expire (ttl " + std::to_string(ttl_.count()) +
                      " ms) or use a layout with more node bits");
  }
  return free;
}

Result<std::optional<HorizonRecord>> SqliteRegistry::inherited_horizon(const FreeNode& free) const {
  return internal::inherited_horizon(free.horizon_text, static_cast<std::uint64_t>(free.node),
                                     where());
}

Result<std::int64_t> SqliteRegistry::next_token(const FreeNode& free) const {
  if (!free.existing) return std::int64_t{1};
  if (free.old_token < 0 || free.old_token == kInt64Max) {
    return Status(Reason::kCorrupt, "node " + std::to_string(free.node) + " in " + where() +
                                        " has an invalid fencing token " +
                                        std::to_string(free.old_token));
  }
  return free.old_token + 1;
}

Status SqliteRegistry::write_claim(const SqliteDb& db, const FreeNode& free, std::string_view owner,
                                   std::int64_t token, std::int64_t now) const {
  const char* sql = free.existing ? "UPDATE nodes SET owner = ?2, token = ?3, expires_ms = ?4 "
                                    "WHERE node = ?1"
                                  : "INSERT INTO nodes(node, owner, token, expires_ms, horizon) "
                                    "VALUES(?1, ?2, ?3, ?4, NULL)";
  Result<Stmt> write = prepare(db, sql);
  if (!write.ok()) return write.status();
  sqlite3_stmt* s = write->get();
  sqlite3_bind_int64(s, 1, free.node);
  bind_text(s, 2, owner);
  sqlite3_bind_int64(s, 3, token);
  sqlite3_bind_int64(s, 4, now + ttl_.count());
  return db.run(s, "cannot claim node " + std::to_string(free.node)).status();
}

Result<Claim> SqliteRegistry::claim(std::string_view owner, std::uint64_t node_count) {
  if (node_count == 0) return InvalidArgument("node_count must be at least 1");
  MutexLock lock(mu_);
  Result<SqliteDb> conn = connect();
  if (!conn.ok()) return conn.status();
  const SqliteDb& db = *conn;

  // Closing the connection rolls back a transaction that was not committed.
  if (Status st = db.exec("BEGIN IMMEDIATE", "cannot begin the claim"); !st.ok()) return st;
  // Checked again on every claim: the file may have been replaced since it was opened.
  if (Status st = check_layout(db, /*record=*/true); !st.ok()) return st;
  const std::int64_t now = now_ms();

  Result<FreeNode> free = find_free_node(db, node_count, now);
  if (!free.ok()) return free.status();
  Result<std::optional<HorizonRecord>> inherited = inherited_horizon(*free);
  if (!inherited.ok()) return inherited.status();
  Result<std::int64_t> token = next_token(*free);
  if (!token.ok()) return token.status();
  if (Status st = write_claim(db, *free, owner, *token, now); !st.ok()) return st;
  if (Status st =
          db.exec("COMMIT", "cannot commit the claim of node " + std::to_string(free->node));
      !st.ok()) {
    return st;
  }

  const auto node = static_cast<std::uint64_t>(free->node);
  // A new lease: what this object saved under an earlier one (perhaps with the same token, if
  // the row was deleted since) is no baseline for it.
  saved_.erase(node);

  Claim claim;
  claim.lease.node = node;
  claim.lease.token = static_cast<std::uint64_t>(*token);
  claim.lease.owner = std::string(owner);
  claim.lease.ttl = ttl_;
  claim.inherited = std::move(inherited).value();
  return claim;
}

Status SqliteRegistry::renew(const Lease& lease) {
  MutexLock lock(mu_);
  Result<SqliteDb> conn = connect();
  if (!conn.ok()) return conn.status();
  const SqliteDb& db = *conn;
  Result<Stmt> stmt =
      prepare(db, "UPDATE nodes SET expires_ms = ?1 WHERE node = ?2 AND token = ?3 AND owner = ?4");
  if (!stmt.ok()) return stmt.status();
  sqlite3_stmt* s = stmt->get();
  sqlite3_bind_int64(s, 1, now_ms() + ttl_.count());
  sqlite3_bind_int64(s, 2, static_cast<std::int64_t>(lease.node));
  sqlite3_bind_int64(s, 3, static_cast<std::int64_t>(lease.token));
  bind_text(s, 4, lease.owner);
  Result<int> changes = db.run(s, "cannot renew the lease");
  if (!changes.ok()) return changes.status();
  return *changes > 0 ? OkStatus() : lease_lost(db, lease, "renew");
}

Status SqliteRegistry::save_horizon(const Lease& lease, const HorizonRecord& record) {
  if (record.node != lease.node) {
    return InvalidArgument("a horizon record for node " + std::to_string(record.node) +
                           " cannot be saved under the lease of node " +
                           std::to_string(lease.node));
  }
  const std::string text = format_horizon_record(record);
  MutexLock lock(mu_);
  Result<SqliteDb> conn = connect();
  if (!conn.ok()) return conn.status();
  const SqliteDb& db = *conn;
  if (Status st = db.exec("BEGIN IMMEDIATE", "cannot begin the horizon save"); !st.ok()) return st;
  // Only this lease writes the row's horizon: finding it below what this object saved last
  // under the same token means the file went backwards (restored from a copy).
  if (auto it = saved_.find(lease.node); it != saved_.end() && it->second.first == lease.token) {
    Result<Stmt> get = prepare(db, "SELECT horizon FROM nodes WHERE node = ?1 AND token = ?2");
    if (!get.ok()) return get.status();
    sqlite3_bind_int64(get->get(), 1, static_cast<std::int64_t>(lease.node));
    sqlite3_bind_int64(get->get(), 2, static_cast<std::int64_t>(lease.token));
    Result<bool> found = db.step(get->get(), "cannot read the horizon");
    if (!found.ok()) return found.status();
    if (*found) {
      if (Status st = internal::check_not_behind(parse_horizon_record(column_text(get->get(), 0)),
                                                 it->second.second, lease.token, where());
          !st.ok()) {
        return st;
      }
    }
  }
  // The fencing compare-and-set: only the holder of the current token may move the horizon.
  Result<Stmt> stmt = prepare(db, "UPDATE nodes SET horizon = ?1 WHERE node = ?2 AND token = ?3");
  if (!stmt.ok()) return stmt.status();
  sqlite3_stmt* s = stmt->get();
  bind_text(s, 1, text);
  sqlite3_bind_int64(s, 2, static_cast<std::int64_t>(lease.node));
  sqlite3_bind_int64(s, 3, static_cast<std::int64_t>(lease.token));
  Result<int> changes = db.run(s, "cannot save the horizon");
  if (!changes.ok()) return changes.status();
  if (*changes == 0) return lease_lost(db, lease, "save the horizon");
  if (Status st = db.exec("COMMIT", "cannot commit the horizon"); !st.ok()) return st;
  saved_[lease.node] = {lease.token, record};
  return OkStatus();
}

Status SqliteRegistry::release(const Lease& lease) {
  MutexLock lock(mu_);
  Result<SqliteDb> conn = connect();
  if (!conn.ok()) return conn.status();
  const SqliteDb& db = *conn;
  Result<Stmt> stmt =
      prepare(db, "UPDATE nodes SET owner = NULL, expires_ms = 0 WHERE node = ?1 AND token = ?2");
  if (!stmt.ok()) return stmt.status();
  sqlite3_stmt* s = stmt->get();
  sqlite3_bind_int64(s, 1, static_cast<std::int64_t>(lease.node));
  sqlite3_bind_int64(s, 2, static_cast<std::int64_t>(lease.token));
  Result<int> changes = db.run(s, "cannot release the lease");
  if (!changes.ok()) return changes.status();
  return *changes > 0 ? OkStatus() : lease_lost(db, lease, "release");
}

Result<RegistryListing> SqliteRegistry::list() {
  MutexLock lock(mu_);
  Result<SqliteDb> conn = connect();
  if (!conn.ok()) return conn.status();
  const SqliteDb& db = *conn;
  RegistryListing listing;
  {
    Result<Stmt> get = prepare(db, "SELECT value FROM meta WHERE key = 'layout'");
    if (!get.ok()) return get.status();
    Result<bool> found = db.step(get->get(), "cannot read the registry's layout");
    if (!found.ok()) return found.status();
    if (*found) listing.layout = column_text(get->get(), 0);
  }
  Result<Stmt> scan =
      prepare(db, "SELECT node, owner, token, expires_ms, horizon FROM nodes ORDER BY node");
  if (!scan.ok()) return scan.status();
  sqlite3_stmt* s = scan->get();
  const std::int64_t now = now_ms();
  for (;;) {
    Result<bool> row = db.step(s, "cannot read the nodes table");
    if (!row.ok()) return row.status();
    if (!*row) break;
    NodeInfo info;
    info.node = static_cast<std::uint64_t>(sqlite3_column_int64(s, 0));
    info.owner = column_text(s, 1);
    info.token = static_cast<std::uint64_t>(sqlite3_column_int64(s, 2));
    const std::int64_t expires = sqlite3_column_int64(s, 3);
    info.live = sqlite3_column_type(s, 1) != SQLITE_NULL && expires > now;
    if (info.live) info.expires_unix_ms = expires;
    if (sqlite3_column_type(s, 4) != SQLITE_NULL) {
      Result<HorizonRecord> record = parse_horizon_record(column_text(s, 4));
      if (record.ok()) {
        info.horizon = std::move(record).value();
      } else {
        info.horizon_error = record.status().message();
      }
    }
    listing.nodes.push_back(std::move(info));
  }
  return listing;
}

Status SqliteRegistry::release_node(std::uint64_t node, bool force) {
  MutexLock lock(mu_);
  Result<SqliteDb> conn = connect();
  if (!conn.ok()) return conn.status();
  const SqliteDb& db = *conn;
  if (Status st = db.exec("BEGIN IMMEDIATE", "cannot begin the release"); !st.ok()) return st;
  const std::string name = "node " + std::to_string(node);
  const auto never_claimed = [&] {
    return Status(StatusCode::kNotFound, name + " was never claimed in " + where());
  };
  if (node > static_cast<std::uint64_t>(kInt64Max)) return never_claimed();
  Result<Stmt> get = prepare(db, "SELECT owner, token, expires_ms FROM nodes WHERE node = ?1");
  if (!get.ok()) return get.status();
  sqlite3_bind_int64(get->get(), 1, static_cast<std::int64_t>(node));
  Result<bool> found = db.step(get->get(), "cannot read " + name);
  if (!found.ok()) return found.status();
  if (!*found) return never_claimed();
  const bool held = sqlite3_column_type(get->get(), 0) != SQLITE_NULL;
  const std::string owner = column_text(get->get(), 0);
  const std::int64_t token = sqlite3_column_int64(get->get(), 1);
  const std::int64_t expires = sqlite3_column_int64(get->get(), 2);
  get->reset();
  if (held && expires > now_ms() && !force) {
    return Status(Reason::kLeaseLive,
                  name + " is held by " + internal::quote(owner) + " (token " +
                      std::to_string(token) + ") for another " +
                      std::to_string(expires - now_ms()) + " ms unless renewed; stop that " +
                      "process, wait for its lease to run out, or release by force");
  }
  if (token < 0 || token == kInt64Max) {
    return Status(Reason::kCorrupt, name + " in " + where() + " has an invalid fencing token " +
                                        std::to_string(token));
  }
  // One above the holder's token: its renewals and horizon writes are refused from now on.
  Result<Stmt> put = prepare(
      db, "UPDATE nodes SET owner = NULL, expires_ms = 0, token = token + 1 WHERE node = ?1");
  if (!put.ok()) return put.status();
  sqlite3_bind_int64(put->get(), 1, static_cast<std::int64_t>(node));
  if (Result<int> done = db.run(put->get(), "cannot release " + name); !done.ok())
    return done.status();
  return db.exec("COMMIT", "cannot commit the release of " + name);
}

}  // namespace

Result<std::unique_ptr<NodeRegistry>> open_sqlite_registry(const std::string& path,
                                                           std::chrono::milliseconds ttl,
                                                           Clock& clock, std::string_view layout) {
  if (path.empty() || path == ":memory:") {
    return InvalidArgument("the sqlite registry needs a database file path, not " +
                           internal::quote(path));
  }
  if (ttl <= milliseconds(0)) {
    return InvalidArgument("the lease ttl must be positive, not " + std::to_string(ttl.count()) +
                           " ms");
  }
  // A directory is either a sqlite registry's or static nodes'. The sqlite registry would not
  // see the horizons of static nodes kept here (horizon-node-N.state), and could repeat their IDs.
  {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    for (std::filesystem::directory_iterator it(parent.empty() ? "." : parent, ec), end;
         !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if ((name.starts_with("horizon-node-") && name.ends_with(".state")) || name == "layout") {
        return Status(Reason::kStateMismatch,
                      "the directory of " + internal::quote(path) + " holds static node state (" +
                          name +
                          "), whose node IDs this sqlite registry could repeat without their "
                          "horizons; use another directory");
      }
    }
  }
  // SQLite reports a file it cannot create as "unable to open database file" and a read-only one
  // by opening it read-only: find the system's own reason (EACCES, EROFS, ENOSPC) first. The
  // directory must take new files too (the -wal and -shm files).
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (Status st = internal::check_writable_dir(dir.empty() ? "." : dir); !st.ok()) {
    return st.with_prefix("the sqlite registry " + path + " cannot be kept there");
  }
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), R_OK | W_OK) != 0) {
    return internal::io_error("the sqlite registry cannot be opened for writing:", path, errno);
  }
  auto registry = std::make_unique<SqliteRegistry>(path, ttl, clock, std::string(layout));
  if (Status st = registry->init(); !st.ok()) return st;
  return std::unique_ptr<NodeRegistry>(std::move(registry));
}

}  // namespace flurry

// The SQLite segment store: Leaf's leaf_alloc table (biz_tag, max_id, step, description,
// update_time in Unix milliseconds) and flurry's flurry_segment_residues beside it (no row: delta
// 1, remainder 0), in one file that several processes on one host may share; and
// flurry_segment_meta with the store's ID (row 'store_id'), made by the first connection that
// finds none and read at every connection (SegmentStoreIdentity); and flurry_segment_strict, a
// row per strict tag (SegmentTagSpec::strict). Every table is created when missing at every open,
// so a file made by an older flurry gains the newer tables in place (its tags are not strict).
//
// One connection per store object, behind a mutex, opened at open() and opened again (never
// creating the file) on the call after an I/O failure. Every write is one IMMEDIATE transaction:
// SQLite's file locks serialise writers across processes, so two allocations never see the same
// max_id, and WAL with synchronous=FULL makes a committed allocation survive a crash or a power
// cut. A writer waits for another's lock at most the store's timeout (busy_timeout).
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/durable_file.h"
#include "core/private_files.h"
#include "core/quote.h"
#include "db/sqlite_db.h"
#include "flurry/clock.h"
#include "flurry/mutex.h"
#include "flurry/segment_store.h"
#include "stores.h"

namespace flurry {
namespace {

using std::chrono::milliseconds;

constexpr std::int64_t kSqliteIntegerMax = std::numeric_limits<std::int64_t>::max();

using internal::bind_text;
using internal::column_text;
using internal::SqliteDb;
using Stmt = internal::SqliteStmt;

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS leaf_alloc("
    "biz_tag TEXT PRIMARY KEY, "
    "max_id INTEGER NOT NULL, "
    "step INTEGER NOT NULL, "
    "description TEXT, "
    "update_time INTEGER NOT NULL);"  // Unix milliseconds
    "CREATE TABLE IF NOT EXISTS flurry_segment_residues("
    "biz_tag TEXT PRIMARY KEY, "
    "delta INTEGER NOT NULL, "
    "remainder INTEGER NOT NULL);"
    // The store's own identity (SegmentStoreIdentity::store_id): key 'store_id'.
    "CREATE TABLE IF NOT EXISTS flurry_segment_meta("
    "key TEXT PRIMARY KEY, "
    "value TEXT NOT NULL);"
    // A row per strict tag (SegmentTagSpec::strict); none: not strict.
    "CREATE TABLE IF NOT EXISTS flurry_segment_strict("
    "biz_tag TEXT PRIMARY KEY)";

// The columns tag() and list_tags() read, in this order.
constexpr const char* kSqliteSelectTags =
    "SELECT a.biz_tag, a.max_id, a.step, a.description, a.update_time, "
    "coalesce(r.delta, 1), coalesce(r.remainder, 0), s.biz_tag IS NOT NULL "
    "FROM leaf_alloc a LEFT JOIN flurry_segment_residues r ON r.biz_tag = a.biz_tag "
    "LEFT JOIN flurry_segment_strict s ON s.biz_tag = a.biz_tag";

class SqliteSegmentStore final : public SegmentStore {
 public:
  SqliteSegmentStore(std::filesystem::path path, milliseconds timeout)
      : path_(std::move(path)), described_("sqlite:" + path_.string()), timeout_(timeout) {}

  // Creates the file and the tables, so that a bad path fails at open.
  [[nodiscard]] Status init() {
    MutexLock lock(mu_);
    Result<SqliteDb> db = connect(/*create=*/true);
    if (!db.ok()) return db.status();
    Result<std::string> id = read_store_id(*db);
    if (!id.ok()) return id.status();
    {
      MutexLock id_lock(id_mu_);
      store_id_ = std::move(id).value();
    }
    // The file exists now: its real path, however the location spelt it.
    std::error_code ec;
    std::filesystem::path real = std::filesystem::weakly_canonical(path_, ec);
    if (ec) real = std::filesystem::absolute(path_, ec).lexically_normal();
    if (ec) return internal::io_error("cannot resolve the path of", path_, ec.value());
    address_ = "sqlite-file:" + real.string();
    db_.emplace(std::move(db).value());
    return OkStatus();
  }

  Status create_tag(const SegmentTagSpec& spec) override;
  using SegmentStore::allocate;
  Result<SegmentAllocation> allocate(const SegmentTag& tag, std::uint64_t step,
                                     std::uint64_t floor) override;
  Result<SegmentTagInfo> tag(const SegmentTag& tag) override;
  Result<std::vector<SegmentTagInfo>> list_tags() override;
  std::string describe() const override { return described_; }
  Result<SegmentStoreIdentity> identity(Blocking blocking) override {
    if (blocking == Blocking::kNever) {
      // Not under mu_, which a call waiting for another writer's lock holds.
      MutexLock lock(id_mu_);
      return SegmentStoreIdentity{.store_id = store_id_, .place = {}, .address = address_};
    }
    MutexLock lock(mu_);
    identity_changed_.clear();
    MutexLock id_lock(id_mu_);
    return SegmentStoreIdentity{.store_id = store_id_, .place = {}, .address = address_};
  }

 private:
  // An IMMEDIATE transaction that rolls back unless committed.
  class Transaction {
   public:
    explicit Transaction(const SqliteDb& db) : db_(db) {}
    ~Transaction() {
      if (open_) sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    [[nodiscard]] Status begin(std::string_view what) {
      Status st = db_.exec("BEGIN IMMEDIATE", what);
      open_ = st.ok();
      return st;
    }
    [[nodiscard]] Status commit(std::string_view what) {
      Status st = db_.exec("COMMIT", what);
      // A failed COMMIT may leave the transaction open (SQLITE_BUSY): the destructor rolls back.
      open_ = !st.ok() && db_.in_transaction();
      return st;
    }

   private:
    const SqliteDb& db_;
    bool open_ = false;
  };

  [[nodiscard]] static std::int64_t now_ms() {
    return std::chrono::duration_cast<milliseconds>(SystemClock::coarse().now().time_since_epoch())
        .count();
  }

  // A new connection, configured (WAL, synchronous=FULL, busy timeout), with the tables.
  [[nodiscard]] Result<SqliteDb> connect(bool create) const;
  // The connection, opened again when a failure of the file (SqliteDb::broken) left it broken.
  [[nodiscard]] Result<const SqliteDb*> connection() FLURRY_REQUIRES(mu_);
  // The store ID kept in the file, made (once, whoever comes first) when it has none.
  [[nodiscard]] Result<std::string> read_store_id(const SqliteDb& db) const;
  // Reads the row `stmt` stands on (the columns of kSqliteSelectTags).
  [[nodiscard]] Result<SegmentTagInfo> read_tag(sqlite3_stmt* stmt);

  const std::filesystem::path path_;
  const std::string described_;
  const milliseconds timeout_;
  Mutex mu_;  // serialises calls; guards db_, identity_changed_
  // Closed at the start of the call after the one it broke in (not at once: the failing call's
  // statements and transaction still use it).
  std::optional<SqliteDb> db_ FLURRY_GUARDED_BY(mu_);
  // Taken after mu_ when both are held; alone by identity(kNever), which must not wait for mu_.
  mutable Mutex id_mu_;
  std::string store_id_ FLURRY_GUARDED_BY(id_mu_);  // read at every connection
  // "sqlite-file:" + the real path: set by init(), before the store is shared; constant after.
  std::string address_;
  // The store ID the last connection found, when it differs from the one identity() last
  // returned (another file at the path): allocate() refuses once.
  std::string identity_changed_ FLURRY_GUARDED_BY(mu_);
};

Result<SqliteDb> SqliteSegmentStore::connect(bool create) const {
  return SqliteDb::open({.path = path_,
                         .where = described_,
                         .create = create,
                         .busy_timeout = timeout_,
                         .schema = kSchema,
                         .schema_what = "cannot create the tables"});
}

Result<std::string> SqliteSegmentStore::read_store_id(const SqliteDb& db) const {
  const std::string what = "cannot read the store ID";
  const auto read = [&]() -> Result<std::string> {
    Result<Stmt> get =
        db.prepare("SELECT value FROM flurry_segment_meta WHERE key = 'store_id'", what);
    if (!get.ok()) return get.status();
    Result<bool> found = db.step(get->get(), what);
    if (!found.ok()) return found.status();
    return *found ? column_text(get->get(), 0) : std::string();
  };
  Result<std::string> id = read();
  if (id.ok() && id->empty()) {
    // None yet: made once (whoever comes first; the others keep the first one's).
    Result<std::string> fresh = internal::new_segment_store_id();
    if (!fresh.ok()) return fresh.status();
    Result<Stmt> put = db.prepare(
        "INSERT INTO flurry_segment_meta(key, value) VALUES('store_id', ?1) "
        "ON CONFLICT(key) DO NOTHING",
        what);
    if (!put.ok()) return put.status();
    bind_text(put->get(), 1, *fresh);
    if (Result<int> done = db.run(put->get(), what); !done.ok()) return done.status();
    id = read();
  }
  if (!id.ok()) return id.status();
  if (!internal::is_segment_store_id(*id)) {
    return Status(Reason::kCorrupt,
                  described_ + ": the store ID in flurry_segment_meta is " + internal::quote(*id) +
                      ", not \"store-id:\" and 32 hex digits; this host's floors of the store are "
                      "kept under it, so flurry will not guess (restore the row from a backup)");
  }
  return id;
}

Result<const SqliteDb*> SqliteSegmentStore::connection() {
  if (db_ && db_->broken()) db_.reset();
  if (!db_) {
    // Never creates the file: one that vanished is an error, not an empty store.
    Result<SqliteDb> db = connect(/*create=*/false);
    if (!db.ok()) return db.status();
    Result<std::string> id = read_store_id(*db);
    if (!id.ok()) return id.status();
    MutexLock id_lock(id_mu_);
    if (*id != store_id_) {
      identity_changed_ = store_id_ + " -> " + *id;
      store_id_ = std::move(id).value();
    }
    db_.emplace(std::move(db).value());
  }
  return &*db_;
}

Result<SegmentTagInfo> SqliteSegmentStore::read_tag(sqlite3_stmt* s) {
  SegmentTagInfo info;
  info.tag = column_text(s, 0);
  for (int col : {1, 2, 4, 5, 6}) {
    if (sqlite3_column_type(s, col) != SQLITE_INTEGER) {
      return Status(Reason::kCorrupt, "segment tag " + internal::quote(info.tag) + " in " +
                                          described_ + ": column " + sqlite3_column_name(s, col) +
                                          " holds " + internal::quote(column_text(s, col)) +
                                          ", not an integer");
    }
  }
  const std::int64_t max_id = sqlite3_column_int64(s, 1);
  const std::int64_t step = sqlite3_column_int64(s, 2);
  const std::int64_t delta = sqlite3_column_int64(s, 5);
  const std::int64_t remainder = sqlite3_column_int64(s, 6);
  if (Status st =
          internal::check_stored_segment_row(described_, info.tag, max_id, step, delta, remainder);
      !st.ok()) {
    return st;
  }
  info.max_id = static_cast<std::uint64_t>(max_id);
  info.step = static_cast<std::uint64_t>(step);
  info.description = column_text(s, 3);
  info.update_time_unix_ms = sqlite3_column_int64(s, 4);
  info.delta = static_cast<std::uint64_t>(delta);
  info.remainder = static_cast<std::uint64_t>(remainder);
  info.strict = sqlite3_column_int64(s, 7) != 0;
  return info;
}

Status SqliteSegmentStore::create_tag(const SegmentTagSpec& spec) {
  if (Status st = check_segment_tag_spec(spec); !st.ok()) return st;
  const std::string what = "cannot create segment tag " + internal::quote(spec.tag);
  MutexLock lock(mu_);
  Result<const SqliteDb*> conn = connection();
  if (!conn.ok()) return conn.status();
  const SqliteDb& db = **conn;
  Transaction txn(db);
  if (Status st = txn.begin(what); !st.ok()) return st;
  {
    Result<Stmt> insert = db.prepare(
        "INSERT INTO leaf_alloc(biz_tag, max_id, step, description, "
        "update_time) VALUES(?1, ?2, ?3, ?4, ?5) "
        "ON CONFLICT(biz_tag) DO NOTHING",
        what);
    if (!insert.ok()) return insert.status();
    sqlite3_stmt* s = insert->get();
    bind_text(s, 1, spec.tag);
    sqlite3_bind_int64(s, 2, static_cast<std::int64_t>(spec.start));
    sqlite3_bind_int64(s, 3, static_cast<std::int64_t>(spec.step));
    // Leaf's column is NULL without a description.
    if (!spec.description.empty()) bind_text(s, 4, spec.description);
    sqlite3_bind_int64(s, 5, now_ms());
    Result<int> inserted = db.run(s, what);
    if (!inserted.ok()) return inserted.status();
    if (*inserted == 0) return internal::segment_tag_exists(described_, spec.tag);
  }
  {
    // No residue row means delta 1, remainder 0; one left behind by a deleted tag goes.
    const bool residue = spec.delta != 1 || spec.remainder != 0;
    Result<Stmt> put =
        db.prepare(residue ? "INSERT OR REPLACE INTO flurry_segment_residues(biz_tag, delta, "
                             "remainder) VALUES(?1, ?2, ?3)"
                           : "DELETE FROM flurry_segment_residues WHERE biz_tag = ?1",
                   what);
    if (!put.ok()) return put.status();
    bind_text(put->get(), 1, spec.tag);
    if (residue) {
      sqlite3_bind_int64(put->get(), 2, static_cast<std::int64_t>(spec.delta));
      sqlite3_bind_int64(put->get(), 3, static_cast<std::int64_t>(spec.remainder));
    }
    if (Result<int> done = db.run(put->get(), what); !done.ok()) return done.status();
  }
  {
    // Likewise a strict row: one per strict tag, none left behind by a deleted tag.
    Result<Stmt> put =
        db.prepare(spec.strict ? "INSERT OR REPLACE INTO flurry_segment_strict(biz_tag) VALUES(?1)"
                               : "DELETE FROM flurry_segment_strict WHERE biz_tag = ?1",
                   what);
    if (!put.ok()) return put.status();
    bind_text(put->get(), 1, spec.tag);
    if (Result<int> done = db.run(put->get(), what); !done.ok()) return done.status();
  }
  return txn.commit(what);
}

Result<SegmentAllocation> SqliteSegmentStore::allocate(const SegmentTag& checked,
                                                       std::uint64_t step, std::uint64_t floor) {
  const std::string_view tag = checked.view();
  if (Status st = internal::check_allocation_step(step); !st.ok()) return st;
  const std::string what = "cannot allocate for segment tag " + internal::quote(tag);
  const auto asked = static_cast<std::int64_t>(step);
  MutexLock lock(mu_);
  Result<const SqliteDb*> conn = connection();
  if (!conn.ok()) return conn.status();
  if (!identity_changed_.empty()) {
    const std::string change = std::move(identity_changed_);
    identity_changed_.clear();
    return Status(Reason::kIo, described_ + ": " + what + ": the file is another store now (" +
                                   change + "); nothing was allocated, retry");
  }
  const SqliteDb& db = **conn;
  Transaction txn(db);
  if (Status st = txn.begin(what); !st.ok()) return st;

  // The residues first: the transaction holds the write lock already, so they cannot change.
  std::int64_t delta = 1;
  std::int64_t remainder = 0;
  {
    Result<Stmt> get =
        db.prepare("SELECT delta, remainder FROM flurry_segment_residues WHERE biz_tag = ?1", what);
    if (!get.ok()) return get.status();
    bind_text(get->get(), 1, tag);
    Result<bool> found = db.step(get->get(), what);
    if (!found.ok()) return found.status();
    if (*found) {
      delta = sqlite3_column_int64(get->get(), 0);
      remainder = sqlite3_column_int64(get->get(), 1);
    }
  }
  // Only a readable row with room for `step` and not below `floor` is raised (no integer
  // overflow, which SQLite would turn into a floating-point max_id).
  Result<Stmt> update = db.prepare(
      "UPDATE leaf_alloc SET max_id = max_id + ?1, update_time = ?2 "
      "WHERE biz_tag = ?3 AND typeof(max_id) = 'integer' "
      "AND typeof(step) = 'integer' AND max_id >= 0 AND max_id <= ?4 "
      "AND step >= 1 AND step <= ?5 AND max_id >= ?6 "
      "RETURNING max_id, step",
      what);
  if (!update.ok()) return update.status();
  sqlite3_stmt* s = update->get();
  sqlite3_bind_int64(s, 1, asked);
  sqlite3_bind_int64(s, 2, now_ms());
  bind_text(s, 3, tag);
  sqlite3_bind_int64(s, 4, kSqliteIntegerMax - asked);
  sqlite3_bind_int64(s, 5, static_cast<std::int64_t>(kMaxSegmentStep));
  sqlite3_bind_int64(
      s, 6,
      static_cast<std::int64_t>(std::min(floor, static_cast<std::uint64_t>(kSqliteIntegerMax))));
  Result<bool> updated = db.step(s, what);
  if (!updated.ok()) return updated.status();
  std::optional<std::pair<std::int64_t, std::int64_t>> raised;  // max_id, step
  if (*updated) {
    raised.emplace(sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1));
    // Runs the statement to its end (one row at most: biz_tag is the key).
    if (Result<bool> more = db.step(s, what); !more.ok()) return more.status();
  }
  update->reset();

  if (!raised) {
    // Nothing raised: no such tag, or one that cannot take `step`, or an unreadable row.
    const std::string sql = std::string(kSqliteSelectTags) + " WHERE a.biz_tag = ?1";
    Result<Stmt> get = db.prepare(sql.c_str(), what);
    if (!get.ok()) return get.status();
    bind_text(get->get(), 1, tag);
    Result<bool> found = db.step(get->get(), what);
    if (!found.ok()) return found.status();
    if (!*found) return internal::segment_tag_not_found(described_, tag);
    Result<SegmentTagInfo> row = read_tag(get->get());
    if (!row.ok()) return row.status();
    if (Status why = internal::explain_refused_allocation(described_, tag, *row, floor, step);
        !why.ok()) {
      return why;
    }
    return Status(StatusCode::kInternal, described_ + ": " + what + ": the row of the tag was " +
                                             "not updated, though it looks valid");
  }
  if (Status st = internal::check_stored_segment_row(described_, tag, raised->first - asked,
                                                     raised->second, delta, remainder);
      !st.ok()) {
    return st;  // rolled back: nothing allocated
  }
  if (Status st = txn.commit(what); !st.ok()) return st;
  SegmentAllocation out;
  out.start = static_cast<std::uint64_t>(raised->first - asked);
  out.end = static_cast<std::uint64_t>(raised->first);
  out.delta = static_cast<std::uint64_t>(delta);
  out.remainder = static_cast<std::uint64_t>(remainder);
  out.base_step = static_cast<std::uint64_t>(raised->second);
  return out;
}

Result<SegmentTagInfo> SqliteSegmentStore::tag(const SegmentTag& checked) {
  const std::string_view tag = checked.view();
  const std::string what = "cannot read segment tag " + internal::quote(tag);
  MutexLock lock(mu_);
  Result<const SqliteDb*> conn = connection();
  if (!conn.ok()) return conn.status();
  const SqliteDb& db = **conn;
  const std::string sql = std::string(kSqliteSelectTags) + " WHERE a.biz_tag = ?1";
  Result<Stmt> get = db.prepare(sql.c_str(), what);
  if (!get.ok()) return get.status();
  bind_text(get->get(), 1, tag);
  Result<bool> found = db.step(get->get(), what);
  if (!found.ok()) return found.status();
  if (!*found) return internal::segment_tag_not_found(described_, tag);
  return read_tag(get->get());
}

Result<std::vector<SegmentTagInfo>> SqliteSegmentStore::list_tags() {
  const std::string what = "cannot list the segment tags";
  MutexLock lock(mu_);
  Result<const SqliteDb*> conn = connection();
  if (!conn.ok()) return conn.status();
  const SqliteDb& db = **conn;
  const std::string sql = std::string(kSqliteSelectTags) + " ORDER BY a.biz_tag";
  Result<Stmt> scan = db.prepare(sql.c_str(), what);
  if (!scan.ok()) return scan.status();
  std::vector<SegmentTagInfo> out;
  for (;;) {
    Result<bool> row = db.step(scan->get(), what);
    if (!row.ok()) return row.status();
    if (!*row) break;
    Result<SegmentTagInfo> info = read_tag(scan->get());
    if (!info.ok()) return info.status();
    out.push_back(std::move(info).value());
  }
  // By name, bytewise (SQLite's BINARY collation already; kept explicit for both backends).
  std::sort(out.begin(), out.end(),
            [](const SegmentTagInfo& a, const SegmentTagInfo& b) { return a.tag < b.tag; });
  return out;
}

}  // namespace

Result<std::unique_ptr<SegmentStore>> internal::open_sqlite_segment_store(
    const std::filesystem::path& path, const SegmentStoreOptions& options) {
  if (path.empty() || path == ":memory:") {
    return InvalidArgument("segment store: an SQLite store needs a file path, not " +
                           internal::quote(path.string()));
  }
  if (options.timeout.count() <= 0) {
    return InvalidArgument("timeout: a segment store's timeout must be positive");
  }
  // SQLite reports a file it cannot create as "unable to open database file": find the system's
  // own reason first (EACCES, EROFS, ENOSPC). The directory must take new files too (the -wal and
  // -shm files).
  const std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  if (Status st = internal::create_private_dirs(dir); !st.ok()) {
    return st.with_prefix("segment store sqlite:" + path.string());
  }
  if (Status st = internal::check_writable_dir(dir); !st.ok()) {
    return st.with_prefix("segment store sqlite:" + path.string() + " cannot be kept there");
  }
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), R_OK | W_OK) != 0) {
    return internal::io_error("segment store: cannot open for writing:", path, errno);
  }
  auto store = std::make_unique<SqliteSegmentStore>(path, options.timeout);
  if (Status st = store->init(); !st.ok()) return st;
  return std::unique_ptr<SegmentStore>(std::move(store));
}

}  // namespace flurry

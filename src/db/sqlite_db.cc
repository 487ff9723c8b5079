#include "db/sqlite_db.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include "core/private_files.h"
#include "core/quote.h"

namespace flurry::internal {

void bind_text(sqlite3_stmt* stmt, int index, std::string_view text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string column_text(sqlite3_stmt* stmt, int col) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, col));
  if (text == nullptr) return {};
  return std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(stmt, col)));
}

Status SqliteDb::error(int rc, std::string_view what) const {
  sqlite3* db = db_.get();
  std::string msg = where_ + ": " + std::string(what) + ": " +
                    (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL:
      return Status(Reason::kIo, msg + " (busy for more than " +
                                     std::to_string(busy_timeout_.count()) + " ms; retry)");
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
      if (db != nullptr && sqlite3_system_errno(db) != 0) {
        msg += std::string(" (") + std::strerror(sqlite3_system_errno(db)) + ")";
      }
      broken_ = true;
      return Status(Reason::kIo, std::move(msg));
    case SQLITE_READONLY:
    case SQLITE_FULL:
    case SQLITE_PERM:
    case SQLITE_NOLFS:
    case SQLITE_AUTH:
    case SQLITE_NOMEM:
      broken_ = true;
      return Status(Reason::kIo, std::move(msg));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      broken_ = true;
      return Status(Reason::kCorrupt, std::move(msg));
    default:
      return Status(StatusCode::kInternal, std::move(msg));
  }
}

Status SqliteDb::exec(const char* sql, std::string_view what) const {
  const int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? OkStatus() : error(rc, what);
}

Result<SqliteStmt> SqliteDb::prepare(const char* sql, std::string_view what) const {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v2(db_.get(), sql, -1, &raw, nullptr);
  SqliteStmt stmt(raw);
  if (rc != SQLITE_OK) return error(rc, what);
  return stmt;
}

Result<bool> SqliteDb::step(sqlite3_stmt* stmt, std::string_view what) const {
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return error(rc, what);
}

Result<int> SqliteDb::run(sqlite3_stmt* stmt, std::string_view what) const {
  const int rc = sqlite3_step(stmt);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return error(rc, what);
  return sqlite3_changes(db_.get());
}

Result<SqliteDb> SqliteDb::open(const Options& options) {
  SqliteDb db(options.where, options.busy_timeout);
  // Never through a symbolic link planted at the database's path (SQLITE_OPEN_NOFOLLOW checks
  // only the last component; refuse_symlink the rest).
  if (Status st = refuse_symlink(options.path); !st.ok()) return st.with_prefix(options.where);
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(
      options.path.c_str(), &raw,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | (options.create ? SQLITE_OPEN_CREATE : 0),
      nullptr);
  db.db_.reset(raw);
  if (rc != SQLITE_OK) return db.error(rc, "cannot open the database");
  if (options.create) {
    // SQLite creates files 0644 minus the umask, and its -wal and -shm files with the database's
    // mode: the database made private first makes them private too.
    for (const char* suffix : {"", "-wal", "-shm"}) {
      if (Status st = restrict_to_owner(options.path.string() + suffix); !st.ok()) return st;
    }
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(
      raw, static_cast<int>(std::min<std::int64_t>(options.busy_timeout.count(), INT_MAX)));
  if (options.no_checkpoint_on_close) {
    // Without this, each close would checkpoint the WAL into the database and delete it (five
    // more syncs per connection). Commits are durable in the WAL already (synchronous=FULL), and
    // SQLite's automatic checkpoint keeps the WAL short.
    sqlite3_db_config(raw, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  }
  // SQLite falls back to read-only when the file is not writable; both owners must write.
  if (sqlite3_db_readonly(raw, "main") == 1) {
    return Status(Reason::kIo,
                  options.where + ": the database file is not writable (opened read-only)");
  }
  {
    const std::string_view what = "cannot set journal_mode=WAL";
    Result<SqliteStmt> wal = db.prepare("PRAGMA journal_mode=WAL", what);
    if (!wal.ok()) return wal.status();
    // Another process opening the same file at this moment can make the journal-mode change
    // answer SQLITE_BUSY at once, without SQLite's busy handler (it may not wait there without
    // risking a deadlock): try again every kWalRetryMs for up to the busy timeout, as the
    // handler would have (a second server on one data directory failed to start without this).
    constexpr int kWalRetryMs = 10;
    int rc = sqlite3_step(wal->get());
    for (std::int64_t waited = 0;
         (rc & 0xff) == SQLITE_BUSY && waited < options.busy_timeout.count();
         waited += kWalRetryMs) {
      sqlite3_reset(wal->get());
      sqlite3_sleep(kWalRetryMs);
      rc = sqlite3_step(wal->get());
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db.error(rc, what);
    const std::string mode = rc == SQLITE_ROW ? column_text(wal->get(), 0) : std::string();
    if (mode != "wal") {
      return Status(Reason::kIo, options.where + ": the database refused journal_mode=WAL (it " +
                                     "stays in " + quote(mode) + " mode)");
    }
  }
  if (Status st = db.exec("PRAGMA synchronous=FULL", "cannot set synchronous=FULL"); !st.ok()) {
    return st;
  }
  if (options.schema != nullptr) {
    if (Status st = db.exec(options.schema, options.schema_what); !st.ok()) return st;
  }
  return db;
}

}  // namespace flurry::internal

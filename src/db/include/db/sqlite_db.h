// Internal: the one SQLite handle of the SQLite registry and the SQLite segment store. A database
// file opened the way both need it (never through a symbolic link, private to its owner when
// created, WAL with synchronous=FULL, a busy timeout, read-only refused, the schema created), its
// statements finalized by RAII, and one mapping of SQLite's result codes onto a Status.
// Not thread-safe: its owner serializes calls.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "flurry/status.h"

namespace flurry::internal {

struct SqliteStmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }
};
// A prepared statement, finalized when it goes.
using SqliteStmt = std::unique_ptr<sqlite3_stmt, SqliteStmtFinalizer>;

// Binds `text` (copied by SQLite) to parameter `index` (1-based).
void bind_text(sqlite3_stmt* stmt, int index, std::string_view text);
// Column `col` of the row `stmt` stands on as text; empty for NULL.
[[nodiscard]] std::string column_text(sqlite3_stmt* stmt, int col);

class SqliteDb {
 public:
  struct Options {
    std::filesystem::path path;
    // Whose database, for messages: "sqlite registry /var/lib/flurry/registry.db".
    std::string where;
    // Create the file (made private to its owner, with its -wal and -shm files) when missing;
    // otherwise a missing file is an error, never silently an empty database.
    bool create = false;
    // How long a statement waits for another connection's lock before it fails (busy).
    std::chrono::milliseconds busy_timeout{1000};
    // Skip the checkpoint SQLite runs when the last connection closes: for an owner that opens a
    // connection per operation (commits are durable in the WAL already).
    bool no_checkpoint_on_close = false;
    // Statements run once the database is open and configured (CREATE TABLE IF NOT EXISTS ...).
    const char* schema = nullptr;
    // The failure of `schema`, for its message: "cannot create the tables".
    std::string_view schema_what = "cannot create the tables";
  };

  // Opens and configures the database as Options says. Errors as error() maps them, and IO when
  // the file is not writable (SQLite opened it read-only) or refuses WAL.
  [[nodiscard]] static Result<SqliteDb> open(const Options& options);

  [[nodiscard]] sqlite3* get() const noexcept { return db_.get(); }
  [[nodiscard]] const std::string& where() const noexcept { return where_; }

  // Maps result code `rc` onto a Status "<where>: <what>: <SQLite's message>":
  //  - busy or locked past the busy timeout: UNAVAILABLE / IO "(busy for more than N ms; retry)";
  //  - cannot open, I/O error (with the system's errno), read-only, full, no permission, no
  //    memory: UNAVAILABLE / IO, and the handle is marked broken();
  //  - a corrupt file or not a database: DATA_LOSS / CORRUPT, and broken();
  //  - anything else (a constraint, a misuse): INTERNAL.
  [[nodiscard]] Status error(int rc, std::string_view what) const;
  // True once error() mapped a failure of the file itself (I/O or corruption): the owner opens
  // the database again rather than going on with this handle.
  [[nodiscard]] bool broken() const noexcept { return broken_; }

  // Runs `sql` (one or more statements, no parameters).
  [[nodiscard]] Status exec(const char* sql, std::string_view what) const;
  [[nodiscard]] Result<SqliteStmt> prepare(const char* sql, std::string_view what) const;
  // One step of `stmt`: true when it stands on a row, false when it is done.
  [[nodiscard]] Result<bool> step(sqlite3_stmt* stmt, std::string_view what) const;
  // Runs a write statement to completion: the number of rows it changed.
  [[nodiscard]] Result<int> run(sqlite3_stmt* stmt, std::string_view what) const;
  // True while a transaction is open on the handle.
  [[nodiscard]] bool in_transaction() const noexcept {
    return sqlite3_get_autocommit(db_.get()) == 0;
  }

 private:
  struct Closer {
    void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
  };

  SqliteDb(std::string where, std::chrono::milliseconds busy_timeout)
      : where_(std::move(where)), busy_timeout_(busy_timeout) {}

  std::unique_ptr<sqlite3, Closer> db_;
  std::string where_;
  std::chrono::milliseconds busy_timeout_;
  mutable bool broken_ = false;
};

}  // namespace flurry::internal

// The one SQLite handle (src/db/sqlite_db.h) that the SQLite registry and the SQLite segment store
// both open: how it opens a file, and the one mapping of SQLite's failures onto a Status. Real
// SQLite files in a temporary directory.
#include "db/sqlite_db.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "test_store.h"

namespace flurry::internal {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSchema = "CREATE TABLE IF NOT EXISTS t(k INTEGER PRIMARY KEY, v TEXT)";

SqliteDb::Options options_for(const std::filesystem::path& path, bool create) {
  return {.path = path,
          .where = "test db " + path.string(),
          .create = create,
          .busy_timeout = 50ms,
          .schema = kSchema,
          .schema_what = "cannot create table t"};
}

TEST(SqliteDbTest, CreatesAPrivateWalDatabaseWithItsSchema) {
  testing::TempDir dir;
  const auto path = dir.path() / "x.db";
  Result<SqliteDb> db = SqliteDb::open(options_for(path, /*create=*/true));
  ASSERT_TRUE(db.ok()) << db.status().to_string();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  Result<SqliteStmt> mode = db->prepare("PRAGMA journal_mode", "mode");
  ASSERT_TRUE(mode.ok());
  ASSERT_TRUE(*db->step(mode->get(), "mode"));
  EXPECT_EQ(column_text(mode->get(), 0), "wal");
  Result<SqliteStmt> put = db->prepare("INSERT INTO t(k, v) VALUES(1, ?1)", "put");
  ASSERT_TRUE(put.ok());
  bind_text(put->get(), 1, "one");
  Result<int> changed = db->run(put->get(), "put");
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_EQ(*changed, 1);
}

TEST(SqliteDbTest, AMissingFileIsNotCreatedUnlessAsked) {
  testing::TempDir dir;
  Result<SqliteDb> db = SqliteDb::open(options_for(dir.path() / "gone.db", /*create=*/false));
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().reason(), Reason::kIo) << db.status().to_string();
  EXPECT_NE(db.status().message().find("test db "), std::string::npos) << db.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "gone.db"));
}

TEST(SqliteDbTest, ASymbolicLinkIsRefused) {
  testing::TempDir dir;
  ASSERT_TRUE(SqliteDb::open(options_for(dir.path() / "real.db", true)).ok());
  std::filesystem::create_symlink(dir.path() / "real.db", dir.path() / "link.db");
  Result<SqliteDb> db = SqliteDb::open(options_for(dir.path() / "link.db", false));
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.status().message().find("link.db"), std::string::npos) << db.status().message();
}

// Another connection's write lock held past the busy timeout: UNAVAILABLE / IO, retryable, and
// the handle is not broken (the file is fine).
TEST(SqliteDbTest, ALockHeldPastTheBusyTimeoutIsUnavailableIo) {
  testing::TempDir dir;
  const auto path = dir.path() / "x.db";
  Result<SqliteDb> holder = SqliteDb::open(options_for(path, true));
  Result<SqliteDb> waiter = SqliteDb::open(options_for(path, false));
  ASSERT_TRUE(holder.ok() && waiter.ok());
  ASSERT_TRUE(holder->exec("BEGIN IMMEDIATE", "begin").ok());
  EXPECT_TRUE(holder->in_transaction());
  const Status st = waiter->exec("BEGIN IMMEDIATE", "cannot begin");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_EQ(st.reason(), Reason::kIo) << st.to_string();
  EXPECT_NE(st.message().find("busy for more than 50 ms; retry"), std::string::npos)
      << st.message();
  EXPECT_FALSE(waiter->broken());
}

// Another process writing the file while it is still in rollback-journal mode (as when two
// servers start on one new data directory): the journal-mode change meets SQLITE_BUSY at once,
// without SQLite's busy handler, and is tried again within the busy timeout instead of failing
// the open (server_two_processes failed now and then with "cannot set journal_mode=WAL").
TEST(SqliteDbTest, TheWalSwitchWaitsOutAWriterWithinTheBusyTimeout) {
  testing::TempDir dir;
  const auto path = dir.path() / "x.db";
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &writer), SQLITE_OK);
  const std::unique_ptr<sqlite3, int (*)(sqlite3*)> close_writer(writer, sqlite3_close);
  ASSERT_EQ(sqlite3_exec(writer, kSchema, nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(writer, "BEGIN IMMEDIATE; INSERT INTO t(v) VALUES('x')", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  std::thread commit([writer] {
    std::this_thread::sleep_for(200ms);  // a real second writer on a real file: real time
    sqlite3_exec(writer, "COMMIT", nullptr, nullptr, nullptr);
  });
  SqliteDb::Options options = options_for(path, false);
  options.busy_timeout = 5000ms;
  Result<SqliteDb> db = SqliteDb::open(options);
  commit.join();
  ASSERT_TRUE(db.ok()) << db.status().to_string();
  Result<SqliteStmt> mode = db->prepare("PRAGMA journal_mode", "journal_mode");
  ASSERT_TRUE(mode.ok());
  Result<bool> row = db->step(mode->get(), "journal_mode");
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(column_text(mode->get(), 0), "wal");
}

// A file that is not a database: DATA_LOSS / CORRUPT, and the handle marked broken.
TEST(SqliteDbTest, AFileThatIsNotADatabaseIsCorruptAndBreaksTheHandle) {
  testing::TempDir dir;
  const auto path = dir.path() / "x.db";
  std::ofstream(path) << std::string(8192, 'x');
  ::chmod(path.c_str(), 0600);
  Result<SqliteDb> db = SqliteDb::open(options_for(path, false));
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().reason(), Reason::kCorrupt) << db.status().to_string();
}

TEST(SqliteDbTest, AnSqlErrorIsInternalAndLeavesTheHandleWhole) {
  testing::TempDir dir;
  Result<SqliteDb> db = SqliteDb::open(options_for(dir.path() / "x.db", true));
  ASSERT_TRUE(db.ok());
  const Status st = db->exec("INSERT INTO nowhere VALUES(1)", "cannot insert");
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.to_string();
  EXPECT_NE(st.message().find("cannot insert: no such table: nowhere"), std::string::npos)
      << st.message();
  EXPECT_FALSE(db->broken());
}

}  // namespace
}  // namespace flurry::internal

// The data directory and its files private to the user flurry runs as (src/core/private_files.h)
// and durable_file.h's writes through them: modes 0700/0600 whatever the umask, no symbolic link
// followed to a state or lock file, temporary files of unique names, and a data directory that
// another user owns or others may write to refused. Real files in a temporary directory.
#include "core/private_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "core/durable_file.h"
#include "test_store.h"

namespace flurry::internal {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

std::string content_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_plain(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// Sets the umask for one scope.
class Umask {
 public:
  explicit Umask(mode_t mask) : old_(::umask(mask)) {}
  ~Umask() { ::umask(old_); }
  Umask(const Umask&) = delete;
  Umask& operator=(const Umask&) = delete;

 private:
  mode_t old_;
};

TEST(PrivateFilesTest, DirectoriesAndFilesArePrivateUnderUmaskZero) {
  TempDir dir;
  const Umask open_umask(0);
  const fs::path data = dir.path() / "a" / "b" / "data";
  ASSERT_TRUE(create_private_dirs(data).ok());
  for (const fs::path& p : {dir.path() / "a", dir.path() / "a" / "b", data}) {
    EXPECT_EQ(mode_of(p), 0700u) << p;
  }
  Result<int> fd = open_private_file(data / "x.lock", O_RDWR | O_CREAT);
  ASSERT_TRUE(fd.ok()) << fd.status().to_string();
  ::close(*fd);
  EXPECT_EQ(mode_of(data / "x.lock"), 0600u);
  ASSERT_TRUE(write_file_durably(data / "x.state", "state\n").ok());
  EXPECT_EQ(mode_of(data / "x.state"), 0600u);
  ASSERT_TRUE(write_file_atomically(data / "sub" / "y.state", "y\n").ok());
  EXPECT_EQ(mode_of(data / "sub"), 0700u);
  EXPECT_EQ(mode_of(data / "sub" / "y.state"), 0600u);
  // An existing directory keeps its mode.
  ASSERT_EQ(::chmod(data.c_str(), 0750), 0);
  ASSERT_TRUE(create_private_dirs(data).ok());
  EXPECT_EQ(mode_of(data), 0750u);
}

TEST(PrivateFilesTest, ASymbolicLinkAtAStateOrLockFileIsRefusedAndItsTargetUntouched) {
  TempDir dir;
  const fs::path target = dir.path() / "precious";
  write_plain(target, "precious\n");
  const fs::path lock = dir.path() / "node.lock";
  fs::create_symlink(target, lock);
  Result<int> fd = open_private_file(lock, O_RDWR | O_CREAT);
  ASSERT_FALSE(fd.ok());
  EXPECT_HAS(fd.status().message(), "symbolic link");
  EXPECT_HAS(fd.status().message(), lock.string());

  const Status db = refuse_symlink(lock);  // SQLite's files are checked the same way
  ASSERT_FALSE(db.ok());
  EXPECT_HAS(db.message(), "symbolic link");
  EXPECT_TRUE(refuse_symlink(target).ok());
  EXPECT_TRUE(refuse_symlink(dir.path() / "missing.db").ok());

  const fs::path state = dir.path() / "node.state";
  fs::create_symlink(target, state);
  Result<std::string> read = read_small_file(state, 100);
  ASSERT_FALSE(read.ok());
  EXPECT_HAS(read.status().message(), "symbolic link");
  // A write replaces the link itself, never what it points to.
  ASSERT_TRUE(write_file_durably(state, "new\n").ok());
  EXPECT_FALSE(fs::is_symlink(state));
  EXPECT_EQ(content_of(state), "new\n");
  EXPECT_EQ(content_of(target), "precious\n");
}

// A directory inside the data directory that is a symbolic link (local-horizons/,
// segment-floors/: both locked through PrivateDirLock) is refused, and nothing is made where it
// points (issue 32).
TEST(PrivateFilesTest, ASymbolicLinkAtALockedDirectoryIsRefusedAndItsTargetUntouched) {
  TempDir dir;
  const fs::path elsewhere = dir.path() / "elsewhere";
  fs::create_directory(elsewhere);
  const fs::path link = dir.path() / "local-horizons";
  fs::create_directory_symlink(elsewhere, link);
  PrivateDirLock lock;
  const Status st = lock.lock(link);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.reason(), Reason::kIo);
  EXPECT_HAS(st.message(), link.string());
  EXPECT_HAS(st.message(), "symbolic link");
  EXPECT_TRUE(fs::is_empty(elsewhere));
  EXPECT_FALSE(refuse_symlinked_dir(link).ok());
  // The real directory, and one not made yet, are fine.
  EXPECT_TRUE(refuse_symlinked_dir(elsewhere).ok());
  PrivateDirLock real;
  EXPECT_TRUE(real.lock(dir.path() / "segment-floors").ok());
  EXPECT_TRUE(fs::exists(dir.path() / "segment-floors" / ".lock"));
}

TEST(PrivateFilesTest, TemporaryFilesHaveNamesOfTheirOwn) {
  TempDir dir;
  const fs::path file = dir.path() / "h.state";
  // A file (or link) at the old predictable temporary name is neither used nor touched.
  const fs::path target = dir.path() / "precious";
  write_plain(target, "precious\n");
  fs::create_symlink(target, file.string() + ".tmp");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(write_file_durably(file, std::to_string(i)).ok());
  EXPECT_EQ(content_of(file), "2");
  EXPECT_EQ(content_of(target), "precious\n");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 3);  // h.state, the planted link and its target: no temporary left
}

TEST(PrivateFilesTest, DataDirectoryOthersMayWriteIsRefused) {
  TempDir dir;
  const fs::path data = dir.path() / "data";
  ASSERT_TRUE(open_data_dir(data).ok());
  EXPECT_EQ(mode_of(data), 0700u);
  ASSERT_EQ(::chmod(data.c_str(), 0755), 0);  // readable by others: fine
  EXPECT_TRUE(open_data_dir(data).ok());
  for (const mode_t mode : {0770, 0777, 0702, 01777}) {
    ASSERT_EQ(::chmod(data.c_str(), mode), 0);
    const Status st = open_data_dir(data);
    ASSERT_FALSE(st.ok()) << std::oct << mode;
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
    EXPECT_HAS(st.message(), std::string("mode ") + text);
    EXPECT_HAS(st.message(), "chmod 700");
    EXPECT_HAS(st.message(), data.string());
  }
  ASSERT_EQ(::chmod(data.c_str(), 0700), 0);
  write_plain(dir.path() / "file", "x");
  EXPECT_FALSE(open_data_dir(dir.path() / "file").ok());  // not a directory
}

// A TLS private key: 0600 and 0640 (a group such as ssl-cert may read it) are accepted, through a
// symbolic link too (certificate managers link to the current key); readable by others or
// writable by anyone but its owner is refused, naming the file, its mode and the fix.
TEST(PrivateFilesTest, PrivateKeyFileOthersMayReadOrAnyoneMayChangeIsRefused) {
  TempDir dir;
  const fs::path key = dir.path() / "server.key";
  write_plain(key, "-----BEGIN PRIVATE KEY-----\n");
  for (const mode_t mode : {0600, 0400, 0640}) {
    ASSERT_EQ(::chmod(key.c_str(), mode), 0);
    EXPECT_TRUE(check_private_key_file(key, "TLS key").ok()) << std::oct << mode;
  }
  const fs::path link = dir.path() / "current.key";
  fs::create_symlink(key, link);
  EXPECT_TRUE(check_private_key_file(link, "TLS key").ok());
  for (const mode_t mode : {0644, 0604, 0660, 0602, 0666}) {
    ASSERT_EQ(::chmod(key.c_str(), mode), 0);
    const Status st = check_private_key_file(key, "TLS key");
    ASSERT_FALSE(st.ok()) << std::oct << mode;
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
    EXPECT_HAS(st.message(), "TLS key \"" + key.string() + "\" has mode " + text);
    EXPECT_HAS(st.message(), "chmod 600");
  }
  const Status missing = check_private_key_file(dir.path() / "missing.key", "TLS client key");
  EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition);
  EXPECT_HAS(missing.message(), "missing.key\" cannot be read: No such file or directory");
  EXPECT_HAS(check_private_key_file(dir.path(), "TLS key").message(), "is not a regular file");
}

// Sets an environment variable for one scope (unset again after, or put back as it was).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name); old != nullptr) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// systemd's credentials (LoadCredential=): a file directly inside $CREDENTIALS_DIRECTORY may be
// readable by its group (0440: the mask of the ACL systemd grants the service's user), as long as
// the directory is closed to others; the same mode anywhere else, write or others bits even there,
// a link out of the directory and a directory others may enter are refused as before.
TEST(PrivateFilesTest, SystemdCredentialMayBeReadableByItsGroupInsideCredentialsDirectoryOnly) {
  TempDir dir;
  const fs::path credentials = dir.path() / "credentials" / "flurry.service";
  fs::create_directories(credentials);
  ASSERT_EQ(::chmod(credentials.c_str(), 0550), 0);
  const fs::path token = credentials / "admin-token";
  write_plain(token, "s3cret-token\n");
  const fs::path elsewhere = dir.path() / "admin-token";
  write_plain(elsewhere, "s3cret-token\n");
  ASSERT_EQ(::chmod(token.c_str(), 0440), 0);
  ASSERT_EQ(::chmod(elsewhere.c_str(), 0440), 0);
  const auto read = [](const fs::path& file) {
    return read_secret_file(file, "admin_token_file", "the admin token");
  };

  // Without the variable, 0440 is refused wherever the file is.
  ::unsetenv("CREDENTIALS_DIRECTORY");
  EXPECT_HAS(read(token).status().message(), "has mode 0440");

  const ScopedEnv env("CREDENTIALS_DIRECTORY", credentials.string());
  Result<std::string> got = read(token);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, "s3cret-token");
  // Named through another path to the same directory: real paths are compared.
  EXPECT_TRUE(read(dir.path() / "credentials" / "." / "flurry.service" / "admin-token").ok());
  // The same mode outside the directory is refused, with the usual message.
  const Status outside = read(elsewhere).status();
  EXPECT_EQ(outside.code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(outside.message(), "has mode 0440");
  EXPECT_HAS(outside.message(), "chmod 600");
  // Deeper than directly inside: refused.
  fs::create_directories(credentials / "sub");
  write_plain(credentials / "sub" / "token", "t");
  ASSERT_EQ(::chmod((credentials / "sub" / "token").c_str(), 0440), 0);
  EXPECT_FALSE(read(credentials / "sub" / "token").ok());
  // A link inside the directory to a file outside it: refused.
  fs::create_symlink(elsewhere, credentials / "linked-token");
  EXPECT_HAS(read(credentials / "linked-token").status().message(), "has mode 0440");
  // Group write or execute bits, or any bit for others, are refused even inside.
  for (const mode_t mode : {0460, 0450, 0444, 0404, 0442, 0401}) {
    ASSERT_EQ(::chmod(token.c_str(), mode), 0);
    const Status st = read(token).status();
    ASSERT_FALSE(st.ok()) << std::oct << mode;
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
    EXPECT_HAS(st.message(), std::string("has mode ") + text);
  }
  // 0400, 0600 and 0640 are fine there.
  for (const mode_t mode : {0400, 0600, 0640}) {
    ASSERT_EQ(::chmod(token.c_str(), mode), 0);
    EXPECT_TRUE(read(token).ok()) << std::oct << mode;
  }
  // A directory others may enter or read: 0440 is refused.
  ASSERT_EQ(::chmod(token.c_str(), 0440), 0);
  for (const mode_t dir_mode : {0551, 0554, 0755}) {
    ASSERT_EQ(::chmod(credentials.c_str(), dir_mode), 0);
    EXPECT_HAS(read(token).status().message(), "has mode 0440");
  }
  // The token file (several lines) follows the same rule.
  ASSERT_EQ(::chmod(credentials.c_str(), 0500), 0);
  EXPECT_TRUE(read_private_file(token, "token_file", 4096, "tokens").ok());
  ASSERT_EQ(::chmod(credentials.c_str(), 0700), 0);  // so that TempDir can remove it
}

TEST(PrivateFilesTest, DataDirectoryOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  TempDir dir;
  const fs::path data = dir.path() / "data";
  ASSERT_TRUE(open_data_dir(data).ok());
  ASSERT_EQ(::chown(data.c_str(), 65534, 65534), 0);
  const Status st = open_data_dir(data);
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "owned by user ID 65534");
  ASSERT_EQ(::chown(data.c_str(), 0, 0), 0);
}

TEST(PrivateFilesTest, RestrictToOwnerSetsSixHundredWithoutFollowingLinks) {
  TempDir dir;
  const fs::path db = dir.path() / "registry.db";
  write_plain(db, "x");
  ASSERT_EQ(::chmod(db.c_str(), 0666), 0);
  ASSERT_TRUE(restrict_to_owner(db).ok());
  EXPECT_EQ(mode_of(db), 0600u);
  EXPECT_TRUE(restrict_to_owner(dir.path() / "missing-wal").ok());
  const fs::path target = dir.path() / "target";
  write_plain(target, "t");
  ASSERT_EQ(::chmod(target.c_str(), 0644), 0);
  fs::create_symlink(target, dir.path() / "link");
  EXPECT_FALSE(restrict_to_owner(dir.path() / "link").ok());
  EXPECT_EQ(mode_of(target), 0644u);
}

}  // namespace
}  // namespace flurry::internal

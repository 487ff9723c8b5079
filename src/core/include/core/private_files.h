// Internal: the files and directories flurry keeps its state in, private to the user it runs as.
// Directories are created 0700 and files 0600 whatever the umask; state and lock files are
// opened without following a symbolic link (a link planted there could make flurry write over
// any file the user can write); a data directory that another user owns or may write to is
// refused, since whoever can write to it can replace flurry's state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "flurry/status.h"

namespace flurry::internal {

// Creates `dir` and every missing parent with mode 0700 (whatever the umask); existing ones are
// left as they are. UNAVAILABLE / IO naming the directory and the system's reason.
[[nodiscard]] Status create_private_dirs(const std::filesystem::path& dir);

// create_private_dirs(dir), then refuses (FAILED_PRECONDITION, naming the directory, what is
// wrong and the command that fixes it) a `dir` that is not a directory, is owned by another
// user than this process's effective user, or is writable by its group or by others.
[[nodiscard]] Status open_data_dir(const std::filesystem::path& dir);

// open(2) of `file` with `flags` | O_NOFOLLOW | O_CLOEXEC, created with mode 0600 when `flags`
// has O_CREAT (whatever the umask). The descriptor, or UNAVAILABLE / IO naming the file; a
// symbolic link at `file` is refused ("is a symbolic link; flurry does not follow links to its
// state files") and whatever it points to is left untouched.
[[nodiscard]] Result<int> open_private_file(const std::filesystem::path& file, int flags);

// An exclusive flock(2) on `dir`/.lock, the directory created as create_private_dirs does and the
// lock file opened as open_private_file does (a link there is refused, and so is a `dir` that is
// itself a symbolic link: refuse_symlinked_dir); blocks until no other
// process holds it. Released when the object is destroyed. For host-local directories that
// several flurry processes share (the horizon copies, the segment store floors).
class PrivateDirLock {
 public:
  PrivateDirLock() = default;
  PrivateDirLock(const PrivateDirLock&) = delete;
  PrivateDirLock& operator=(const PrivateDirLock&) = delete;
  ~PrivateDirLock();

  // UNAVAILABLE / IO naming the directory or the lock file. Call once per object.
  [[nodiscard]] Status lock(const std::filesystem::path& dir);

 private:
  int fd_ = -1;
};

// OK unless `file` is a symbolic link, which is refused as open_private_file refuses one: for
// files another library opens (SQLite's databases, also opened with SQLITE_OPEN_NOFOLLOW).
[[nodiscard]] Status refuse_symlink(const std::filesystem::path& file);

// OK unless `dir` itself (its last component) is a symbolic link: UNAVAILABLE / IO naming it
// ("it is a symbolic link; flurry does not follow links to the directories inside its data
// directory"). For the directories flurry makes inside the data directory (local-horizons/,
// segment-floors/), so that a link planted there cannot take its state elsewhere.
[[nodiscard]] Status refuse_symlinked_dir(const std::filesystem::path& dir);

// The error of an open(2) of `file` with O_NOFOLLOW that failed with `err`: ELOOP says that
// `file` is a symbolic link flurry does not follow; others as io_error("cannot open", ...).
[[nodiscard]] Status open_error(const std::filesystem::path& file, int err);

// Sets mode 0600 on `file` when it exists and is a regular file owned by this user (not
// following a symbolic link): for files another library creates (SQLite's database, -wal and
// -shm files). OK when there is no such file. UNAVAILABLE / IO otherwise.
[[nodiscard]] Status restrict_to_owner(const std::filesystem::path& file);

// A secret an operator keeps in a file (the admin token, the etcd password): the one reader of
// such files, so that every secret follows the same rules. The file's contents without
// surrounding whitespace. INVALID_ARGUMENT starting with "<setting> '<file>': " (never quoting the
// contents) when the file cannot be read, is not a regular file, is readable or writable by its
// group or others (the message gives its mode and says chmod 600), is larger than
// kMaxSecretFileBytes, is empty ("it must hold <what>") or holds a character other than visible
// ASCII (so that it can go into a header or a JSON string as it is). Opened once and checked
// through the descriptor, so that the file checked is the file read. One exception to the mode
// rule, for the credentials systemd hands a service (LoadCredential=): a file directly inside
// $CREDENTIALS_DIRECTORY (real paths compared) may also be readable by its group (0440, the mask
// of the ACL systemd grants the service's user), never writable by it nor open to others, provided
// that the directory itself is closed to others.
inline constexpr std::uintmax_t kMaxSecretFileBytes = 4096;
// The part of read_secret_file every private file shares, for files of several lines (the token
// file): the whole contents of a regular file of at most `max_bytes` that only its owner may read
// or write, opened once and checked through the descriptor; the same messages.
[[nodiscard]] Result<std::string> read_private_file(const std::filesystem::path& file,
                                                    std::string_view setting, std::size_t max_bytes,
                                                    std::string_view what);
[[nodiscard]] Result<std::string> read_secret_file(const std::filesystem::path& file,
                                                   std::string_view setting, std::string_view what);

}  // namespace flurry::internal

namespace flurry::internal {

// OK when `file` (a private key; symbolic links followed, as certificate managers use them) is
// a regular file that neither its group nor others may write and others may not read (0600, or
// 0640 for a group such as ssl-cert). FAILED_PRECONDITION naming `what`, the file and the fix
// otherwise ("TLS key \"/etc/flurry/server.key\" has mode 0644: others may read it; chmod 600
// ..."), or when it cannot be examined (missing, permission denied).
[[nodiscard]] Status check_private_key_file(const std::filesystem::path& file,
                                            std::string_view what);

}  // namespace flurry::internal

#include "core/private_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/durable_file.h"
#include "core/quote.h"

namespace flurry::internal {
namespace {

constexpr mode_t kPrivateDir = 0700;
constexpr mode_t kPrivateFile = 0600;

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Whether `file`, opened as `opened`, is a credential systemd handed to this service: a file
// directly inside $CREDENTIALS_DIRECTORY (real paths compared, so a link out of it does not count)
// in a directory others have no access to. systemd (LoadCredential=, SetCredential=) makes that
// directory private to the unit, writes each file 0400 and, when the service runs as another user,
// grants that user read access with a POSIX ACL; stat() then shows the ACL's mask as group read
// bits (0440) on a file perhaps owned by root. Only the unit's processes can reach the directory,
// so those group bits give nobody else the secret.
bool is_systemd_credential(const std::filesystem::path& file, const struct stat& opened) {
  const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
  if (dir == nullptr || *dir == '\0') return false;
  char* real_dir = ::realpath(dir, nullptr);
  char* real_file = ::realpath(file.c_str(), nullptr);
  bool inside = real_dir != nullptr && real_file != nullptr &&
                std::filesystem::path(real_file).parent_path() == std::filesystem::path(real_dir);
  struct stat at_path {};
  struct stat dir_st {};
  // The file opened is the one found there, and the directory is closed to others.
  inside = inside && ::stat(real_file, &at_path) == 0 && at_path.st_dev == opened.st_dev &&
           at_path.st_ino == opened.st_ino && ::stat(real_dir, &dir_st) == 0 &&
           S_ISDIR(dir_st.st_mode) && (dir_st.st_mode & S_IRWXO) == 0;
  std::free(real_dir);
  std::free(real_file);
  return inside;
}

// Whether a secret file whose fstat() is `st` is private enough: readable and writable by its owner
// only, or, for a systemd credential, also readable (never writable) by its group.
bool private_enough(const std::filesystem::path& file, const struct stat& st) {
  const mode_t shared = st.st_mode & (S_IRWXG | S_IRWXO);
  if (shared == 0) return true;
  return shared == S_IRGRP && is_systemd_credential(file, st);
}

}  // namespace

Status create_private_dirs(const std::filesystem::path& dir) {
  if (dir.empty()) return OkStatus();
  std::filesystem::path prefix;
  for (const std::filesystem::path& part : dir) {
    prefix /= part;
    if (::mkdir(prefix.c_str(), kPrivateDir) == 0) {
      // mkdir applied the umask; a umask of 0 or 077 must make no difference.
      if (::chmod(prefix.c_str(), kPrivateDir) != 0) {
        return io_error("cannot set the mode of directory", prefix, errno);
      }
      continue;
    }
    if (errno == EEXIST) continue;
    return io_error("cannot create directory", prefix, errno);
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return io_error("cannot open directory", dir, errno);
  if (!S_ISDIR(st.st_mode)) return io_error("cannot use as a directory", dir, ENOTDIR);
  return OkStatus();
}

Status open_data_dir(const std::filesystem::path& dir) {
  if (Status st = create_private_dirs(dir); !st.ok()) {
    return Status(st.reason(), "the data directory: " + st.message());
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return io_error("cannot open the data directory", dir, errno);
  const std::string name = "the data directory " + quote(dir.string(), 1024);
  if (st.st_uid != ::geteuid()) {
    return Status(StatusCode::kFailedPrecondition,
                  name + " is owned by user ID " + std::to_string(st.st_uid) +
                      ", not by the user flurry runs as (" + std::to_string(::geteuid()) +
                      "), who could then have their state replaced; use a directory of this user "
                      "(chown " +
                      std::to_string(::geteuid()) + " " + quote(dir.string(), 1024) + ")");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status(StatusCode::kFailedPrecondition,
                  name + " has mode " + octal_mode(st.st_mode) +
                      ": its group or others may write to it and replace flurry's state; make "
                      "it private (chmod 700 " +
                      quote(dir.string(), 1024) + ") or use a subdirectory flurry creates");
  }
  return OkStatus();
}

Result<int> open_private_file(const std::filesystem::path& file, int flags) {
  int fd = -1;
  do {
    fd = ::open(file.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, kPrivateFile);
  } while (fd < 0 && errno == EINTR);
  if (fd >= 0) {
    // A file just created got 0600 minus the umask: never more. An existing one keeps its mode.
    return fd;
  }
  return open_error(file, errno);
}

Status refuse_symlink(const std::filesystem::path& file) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) return open_error(file, ELOOP);
  return OkStatus();
}

Status refuse_symlinked_dir(const std::filesystem::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return Status(Reason::kIo, "cannot use directory " + dir.string() +
                                   ": it is a symbolic link; flurry does not follow links to the "
                                   "directories inside its data directory (remove the link; "
                                   "flurry creates the directory itself)");
  }
  return OkStatus();
}

Status open_error(const std::filesystem::path& file, int err) {
  struct stat st {};
  if (err == ELOOP && ::lstat(file.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return Status(Reason::kIo, "cannot open " + file.string() +
                                   ": it is a symbolic link; flurry does not follow links to its "
                                   "state and lock files (remove the link)");
  }
  return io_error("cannot open", file, err);
}

Status restrict_to_owner(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return OkStatus();
    return io_error("cannot open", file, errno);
  }
  struct stat st {};
  int rc = ::fstat(fd, &st);
  if (rc == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
      (st.st_mode & 07777) != kPrivateFile) {
    rc = ::fchmod(fd, kPrivateFile);
  }
  const int err = errno;
  ::close(fd);
  if (rc != 0) return io_error("cannot set the mode of", file, err);
  return OkStatus();
}

PrivateDirLock::~PrivateDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

Status PrivateDirLock::lock(const std::filesystem::path& dir) {
  if (Status st = create_private_dirs(dir); !st.ok()) return st;
  // These directories live inside the data directory, which open_data_dir checked; a link there
  // would take flurry's state (and its lock) to wherever it points, outside those checks.
  if (Status st = refuse_symlinked_dir(dir); !st.ok()) return st;
  const std::filesystem::path file = dir / ".lock";
  Result<int> opened = open_private_file(file, O_RDWR | O_CREAT);
  if (!opened.ok()) return opened.status();
  fd_ = *opened;
  int rc = 0;
  do {
    rc = ::flock(fd_, LOCK_EX);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return io_error("cannot lock", file, errno);
  return OkStatus();
}

Result<std::string> read_private_file(const std::filesystem::path& file, std::string_view setting,
                                      std::size_t max_bytes, std::string_view what) {
  const std::string name = std::string(setting) + " " + quote(file.string(), 1024);
  const auto cannot_read = [&name](int error) {
    return InvalidArgument(name + ": cannot read it: " + std::strerror(error));
  };
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return cannot_read(errno);
  struct stat st {};
  std::string text;
  int read_error = 0;
  if (::fstat(fd, &st) != 0) {
    read_error = errno;
  } else if (S_ISREG(st.st_mode) && st.st_size <= static_cast<off_t>(max_bytes) &&
             private_enough(file, st)) {
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        read_error = n < 0 ? errno : 0;
        break;
      }
      got += static_cast<std::size_t>(n);
    }
    text.resize(got);
  }
  ::close(fd);
  if (read_error != 0) return cannot_read(read_error);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(name + ": is not a regular file");
  if (st.st_size > static_cast<off_t>(max_bytes)) {
    return InvalidArgument(name + ": is larger than " + std::to_string(max_bytes) +
                           " bytes; it must hold " + std::string(what) + " alone");
  }
  if (!private_enough(file, st)) {
    return InvalidArgument(name + ": has mode " + octal_mode(st.st_mode) +
                           ", so its group or others may read or change " + std::string(what) +
                           "; make it readable by its owner only: chmod 600 " +
                           quote(file.string(), 1024));
  }
  return text;
}

Result<std::string> read_secret_file(const std::filesystem::path& file, std::string_view setting,
                                     std::string_view what) {
  Result<std::string> read = read_private_file(file, setting, kMaxSecretFileBytes, what);
  if (!read.ok()) return read.status();
  const std::string& text = *read;
  const std::string name = std::string(setting) + " " + quote(file.string(), 1024);
  const auto is_space = [](char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
  };
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (begin < end && is_space(text[begin])) ++begin;
  while (end > begin && is_space(text[end - 1])) --end;
  if (begin == end) return InvalidArgument(name + ": is empty; it must hold " + std::string(what));
  for (std::size_t i = begin; i < end; ++i) {
    const auto ch = static_cast<unsigned char>(text[i]);
    if (ch <= 0x20 || ch >= 0x7f) {
      return InvalidArgument(
          name + ": " + std::string(what) + " may hold only visible ASCII characters (byte " +
          std::to_string(i - begin) + " is not one), so that it can be sent in a header as it is");
    }
  }
  return text.substr(begin, end - begin);
}

}  // namespace flurry::internal

namespace flurry::internal {

Status check_private_key_file(const std::filesystem::path& file, std::string_view what) {
  const std::string name = std::string(what) + " " + quote(file.string(), 1024);
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    return Status(StatusCode::kFailedPrecondition,
                  name + " cannot be read: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status(StatusCode::kFailedPrecondition, name + " is not a regular file");
  }
  const char* who = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 ? "its group or others may change it"
                    : (st.st_mode & S_IROTH) != 0           ? "others may read it"
                                                            : nullptr;
  if (who == nullptr) return OkStatus();
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return Status(StatusCode::kFailedPrecondition,
                name + " has mode " + mode + ": " + who +
                    "; make the private key readable by its owner only: chmod 600 " +
                    quote(file.string(), 1024) + " (or 640 with a group such as ssl-cert)");
}

}  // namespace flurry::internal

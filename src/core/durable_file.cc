#include "core/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/private_files.h"

namespace flurry::internal {
namespace {

Status write_all(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write", path, errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return OkStatus();
}

}  // namespace

std::uint64_t fnv1a64(std::string_view data) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Status io_error(std::string_view what, const std::filesystem::path& path, int err) {
  return Status(Reason::kIo, std::string(what) + " " + path.string() + ": " + std::strerror(err));
}

namespace {

Status write_file(const std::filesystem::path& file, std::string_view content, bool sync,
                  bool shared = false) {
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
  if (Status st = create_private_dirs(dir); !st.ok()) return st;

  // A name of its own (O_EXCL, mode 0600): never a file or link planted at a predictable name,
  // never another writer's half-written file. rename() then replaces `file` itself, a symbolic
  // link there included, never what a link points to.
  std::string tmp_name = file.string() + ".tmp-XXXXXX";
  const int fd = ::mkostemp(tmp_name.data(), O_CLOEXEC);
  const std::filesystem::path tmp = tmp_name;
  if (fd < 0) return io_error("cannot create", tmp, errno);
  Status st = write_all(fd, content, tmp);
  if (st.ok() && shared && ::fchmod(fd, 0644) != 0) st = io_error("cannot chmod", tmp, errno);
  if (st.ok() && sync && ::fsync(fd) != 0) st = io_error("cannot fsync", tmp, errno);
  if (::close(fd) != 0 && st.ok()) st = io_error("cannot close", tmp, errno);
  if (st.ok() && ::rename(tmp.c_str(), file.c_str()) != 0) {
    st = io_error("cannot rename over", file, errno);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (!sync) return OkStatus();
  // The rename is durable only once the directory entry is.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_error("cannot open directory", dir, errno);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0) return io_error("cannot fsync directory", dir, err);
  return OkStatus();
}

}  // namespace

Status write_file_durably(const std::filesystem::path& file, std::string_view content) {
  return write_file(file, content, true);
}

Status write_shared_file_durably(const std::filesystem::path& file, std::string_view content) {
  return write_file(file, content, true, true);
}

Status write_file_atomically(const std::filesystem::path& file, std::string_view content) {
  return write_file(file, content, false);
}

Status check_writable_dir(const std::filesystem::path& dir) {
  std::string probe = (dir / ".flurry-write-test-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return io_error("cannot create files in the directory", dir, errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return OkStatus();
}

Result<std::string> read_small_file(const std::filesystem::path& file, std::size_t max_size) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return Status(StatusCode::kNotFound, "no file " + file.string());
    }
    return open_error(file, errno);
  }
  std::string text(max_size + 1, '\0');
  std::size_t used = 0;
  while (used < text.size()) {
    const ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return io_error("cannot read", file, err);
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (used > max_size) {
    return Status(Reason::kCorrupt, file.string() + " is larger than any flurry writes (" +
                                        std::to_string(max_size) + " bytes)");
  }
  text.resize(used);
  return text;
}

}  // namespace flurry::internal

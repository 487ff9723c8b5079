#include "tls/pinned_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "core/durable_file.h"
#include "core/quote.h"

namespace flurry::tls {
namespace {

// More than any certificate chain, key or CA bundle a server uses.
constexpr std::size_t kMaxFileBytes = std::size_t{1} << 20;

std::filesystem::path fd_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

// An owned descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// The bytes of `file` (links followed, as certificate managers use them).
Result<std::string> read_whole(const std::filesystem::path& file, std::string_view what) {
  const auto refuse = [&](const std::string& why) {
    return Status(StatusCode::kFailedPrecondition,
                  std::string(what) + " " + internal::quote(file.string(), 1024) + " " + why);
  };
  const Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return refuse(std::string("cannot be read: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return refuse(std::string("cannot be read: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return refuse("is not a regular file");
  if (st.st_size > static_cast<off_t>(kMaxFileBytes)) {
    return refuse("is larger than " + std::to_string(kMaxFileBytes) + " bytes");
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(std::string("cannot be read: ") + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

// The first PEM private key block of `pem` ("-----BEGIN ... PRIVATE KEY-----" to its END line),
// so that a key file that also holds certificates adds none to the chain; all of `pem` when it has
// none (the check of the copy then refuses it).
std::string_view private_key_block(std::string_view pem) {
  for (std::size_t at = pem.find("-----BEGIN "); at != std::string_view::npos;
       at = pem.find("-----BEGIN ", at + 1)) {
    const std::size_t line_end = pem.find('\n', at);
    const std::string_view line = pem.substr(at, line_end - at);
    if (line.find("PRIVATE KEY-----") == std::string_view::npos) continue;
    const std::size_t end = pem.find("-----END ", at);
    if (end == std::string_view::npos) break;
    const std::size_t end_line = pem.find('\n', end);
    return pem.substr(at, end_line == std::string_view::npos ? pem.npos : end_line + 1 - at);
  }
  return pem;
}

// A new memory file holding `text`, mode 0600.
Result<int> memory_file(const char* name, std::string_view text) {
  Fd fd(::memfd_create(name, MFD_CLOEXEC));
  if (fd.get() < 0) return internal::io_error("cannot create the memory file", name, errno);
  if (::fchmod(fd.get(), 0600) != 0)
    return internal::io_error("cannot set the mode of", name, errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return internal::io_error("cannot write", name, errno);
    done += static_cast<std::size_t>(n);
  }
  return fd.release();
}

}  // namespace

PinnedServerFiles::~PinnedServerFiles() {
  if (pair_fd_ >= 0) ::close(pair_fd_);
  if (ca_fd_ >= 0) ::close(ca_fd_);
}

ServerFiles PinnedServerFiles::paths() const {
  MutexLock lock(mu_);
  ServerFiles out;
  if (pair_fd_ < 0) return out;
  out.cert_file = fd_path(pair_fd_);
  out.key_file = out.cert_file;
  if (ca_fd_ >= 0) out.client_ca_file = fd_path(ca_fd_);
  return out;
}

namespace {

// What stat() says of each file, as text: changes when a file is replaced or written.
std::string signature(const ServerFiles& files) {
  std::string out;
  const auto add = [&out](const std::filesystem::path& file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) {
      out += "missing:" + std::to_string(errno) + ";";
      return;
    }
    out += std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
           std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + ";";
  };
  add(files.cert_file);
  add(files.key_file);
  if (files.client_ca_file) add(*files.client_ca_file);
  return out;
}

}  // namespace

Status PinnedServerFiles::pin(const ServerFiles& files) {
  MutexLock lock(mu_);
  return pin_locked(files);
}

Result<bool> PinnedServerFiles::refresh(const ServerFiles& files) {
  MutexLock lock(mu_);
  if (signature(files) == seen_) return false;
  if (Status st = pin_locked(files); !st.ok()) return st;
  return true;
}

Status PinnedServerFiles::pin_locked(const ServerFiles& files) {
  // Before reading: a file changed while it is read is seen as changed by the next refresh().
  seen_ = signature(files);
  // The files as they are: the checks and messages HTTP's listener gives.
  {
    Result<std::shared_ptr<ServerContext>> checked = make_server_context(files);
    if (!checked.ok()) return checked.status();
  }
  Result<std::string> chain = read_whole(files.cert_file, "TLS certificate");
  if (!chain.ok()) return chain.status();
  Result<std::string> key = read_whole(files.key_file, "TLS key");
  if (!key.ok()) return key.status();
  std::string pair = std::move(chain).value();
  pair += '\n';
  pair += private_key_block(*key);
  ::explicit_bzero(key->data(), key->size());
  Result<int> made = memory_file("flurry-tls-pair", pair);
  ::explicit_bzero(pair.data(), pair.size());
  if (!made.ok()) return made.status();
  const Fd new_pair(*made);
  Fd new_ca;
  if (files.client_ca_file) {
    Result<std::string> ca = read_whole(*files.client_ca_file, "TLS client CA file");
    if (!ca.ok()) return ca.status();
    Result<int> ca_made = memory_file("flurry-tls-client-ca", *ca);
    if (!ca_made.ok()) return ca_made.status();
    new_ca = Fd(*ca_made);
  }
  // The copies, checked again: files replaced between the check above and the reads are refused.
  ServerFiles copies{fd_path(new_pair.get()), fd_path(new_pair.get()), std::nullopt};
  if (files.client_ca_file) copies.client_ca_file = fd_path(new_ca.get());
  if (Result<std::shared_ptr<ServerContext>> checked = make_server_context(copies); !checked.ok()) {
    return Status(StatusCode::kFailedPrecondition,
                  "the TLS files " + internal::quote(files.cert_file.string(), 1024) + " and " +
                      internal::quote(files.key_file.string(), 1024) +
                      " changed while they were read (" + checked.status().message() +
                      "); send SIGHUP again once they are in place");
  }
  // One switch per file: a reader opening the path gets the old file or the new one, whole.
  const auto install = [](int& fixed, int fresh) -> Status {
    if (fixed < 0) {
      fixed = ::fcntl(fresh, F_DUPFD_CLOEXEC, 0);
      if (fixed < 0) return internal::io_error("cannot keep", fd_path(fresh), errno);
      return OkStatus();
    }
    if (::dup3(fresh, fixed, O_CLOEXEC) < 0) {
      return internal::io_error("cannot switch", fd_path(fixed), errno);
    }
    return OkStatus();
  };
  if (Status st = install(pair_fd_, new_pair.get()); !st.ok()) return st;
  if (files.client_ca_file) {
    if (Status st = install(ca_fd_, new_ca.get()); !st.ok()) return st;
  }
  return OkStatus();
}

}  // namespace flurry::tls

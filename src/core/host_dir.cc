#include "flurry/host_dir.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "core/durable_file.h"
#include "core/numbers.h"
#include "core/quote.h"

namespace flurry {
namespace {

std::string mode_text(mode_t mode) {
  char out[8];
  std::snprintf(out, sizeof out, "%04o", static_cast<unsigned>(mode & 07777));
  return out;
}

// The kernel's overflow user ID: how a user namespace shows the IDs it does not map.
unsigned overflow_uid() {
  static const unsigned uid = [] {
    std::ifstream in("/proc/sys/kernel/overflowuid");
    unsigned v = 65534;
    if (!(in >> v)) v = 65534;
    return v;
  }();
  return uid;
}

std::string scope_prefix() {
  const char* scope = std::getenv(kHostGuardScopeVariable);
  if (scope == nullptr || *scope == '\0') return "flurry-host.";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(internal::fnv1a64(scope)));
  return std::string("flurry-host.") + hex + ".";
}

Status precondition(const std::filesystem::path& dir, std::string_view what) {
  return Status(
      StatusCode::kFailedPrecondition,
      "the host directory " + internal::quote(dir.string(), 1024) + " " + std::string(what));
}

// Why the entry `dir` (named for `uid`) does not count, or empty when it does.
std::string entry_fault(const struct stat& st, unsigned uid) {
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (st.st_uid != uid && st.st_uid != overflow_uid()) {
    return "is owned by user ID " + std::to_string(st.st_uid) + ", not by user ID " +
           std::to_string(uid) + " it is named after";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return "has mode " + mode_text(st.st_mode) + ": others may write to it";
  }
  return {};
}

}  // namespace

std::filesystem::path default_host_dir() {
  return "/var/tmp";
}

Result<HostDir> HostDir::open(const std::filesystem::path& root) {
  if (root.empty()) return precondition(root, "is empty: name a directory");
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0 && errno == ENOENT) {
    // A host directory named in the settings that does not exist yet: this user's own (0755);
    // make it sticky and open to all (as /var/tmp) for several users to share it.
    if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) {
      return internal::io_error("cannot create the host directory", root, errno);
    }
  }
  if (::lstat(root.c_str(), &st) != 0) {
    return internal::io_error("cannot open the host directory", root, errno);
  }
  if (S_ISLNK(st.st_mode)) {
    return precondition(root, "is a symbolic link; name the directory itself");
  }
  if (!S_ISDIR(st.st_mode)) return precondition(root, "is not a directory");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return precondition(root, "has mode " + mode_text(st.st_mode) +
                                  ": others may write to it but it is not sticky, so any user "
                                  "could replace another's records; chmod +t it (as /var/tmp "
                                  "is) or close it to others");
  }
  HostDir dir;
  dir.root_ = root;
  dir.prefix_ = scope_prefix();
  const unsigned uid = ::geteuid();
  dir.own_ = root / (dir.prefix_ + std::to_string(uid));
  if (::mkdir(dir.own_.c_str(), 0755) == 0) {
    ::chmod(dir.own_.c_str(), 0755);  // whatever the umask: every user reads the records
  } else if (errno != EEXIST) {
    return internal::io_error("cannot create this user's entry in the host directory", dir.own_,
                              errno);
  }
  if (::lstat(dir.own_.c_str(), &st) != 0) {
    return internal::io_error("cannot open this user's entry in the host directory", dir.own_,
                              errno);
  }
  if (uid == 0 && (S_ISLNK(st.st_mode) || !entry_fault(st, uid).empty())) {
    // Planted by another user in root's name (the root directory is sticky, so only its owner
    // or root can move it): set it aside, named after its owner, and make root's own.
    const std::filesystem::path aside =
        root / (dir.prefix_ + "0.planted-by-" + std::to_string(st.st_uid) + "-" +
                std::to_string(::getpid()));
    if (::rename(dir.own_.c_str(), aside.c_str()) != 0) {
      return internal::io_error("cannot move aside the planted entry", dir.own_, errno);
    }
    if (::mkdir(dir.own_.c_str(), 0755) != 0) {
      return internal::io_error("cannot create this user's entry in the host directory", dir.own_,
                                errno);
    }
    ::chmod(dir.own_.c_str(), 0755);
    if (::lstat(dir.own_.c_str(), &st) != 0) {
      return internal::io_error("cannot open this user's entry in the host directory", dir.own_,
                                errno);
    }
  }
  if (S_ISLNK(st.st_mode)) return precondition(dir.own_, "is a symbolic link: remove it");
  if (std::string fault = entry_fault(st, uid); !fault.empty()) {
    return precondition(dir.own_, fault +
                                      "; another user may have created it in this user's "
                                      "name: remove it (as root; a root process moves such "
                                      "an entry aside itself)");
  }
  return dir;
}

Result<std::vector<HostDir::Entry>> HostDir::entries(std::vector<std::string>* skipped) const {
  std::vector<Entry> out;
  if (own_.empty()) return out;
  out.push_back(Entry{own_, static_cast<unsigned>(::geteuid())});
  DIR* d = ::opendir(root_.c_str());
  if (d == nullptr) return internal::io_error("cannot list the host directory", root_, errno);
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (!name.starts_with(prefix_)) continue;
    const std::string_view rest = name.substr(prefix_.size());
    const internal::ParsedUint parsed = internal::parse_uint(rest, 0xFFFFFFFFu);
    if (!parsed.ok() || parsed.value == ::geteuid()) continue;
    const std::optional<std::uint64_t> uid = parsed.value;
    const std::filesystem::path path = root_ / std::string(name);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;  // removed meanwhile
    if (std::string fault = entry_fault(st, static_cast<unsigned>(*uid)); !fault.empty()) {
      if (skipped != nullptr) {
        skipped->push_back("the host directory's entry " + internal::quote(path.string(), 1024) +
                           " " + fault + "; it is not read");
      }
      continue;
    }
    out.push_back(Entry{path, static_cast<unsigned>(*uid)});
  }
  ::closedir(d);
  return out;
}

Status HostDir::write_shared(std::string_view name, std::string_view content) const {
  if (own_.empty()) return Status(StatusCode::kFailedPrecondition, "no host directory is open");
  return internal::write_shared_file_durably(own_ / std::string(name), content);
}

}  // namespace flurry

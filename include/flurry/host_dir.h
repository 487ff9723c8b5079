// The host directory: what every flurry process of one host shares, whatever user it runs as,
// whatever its data directory or registry. Processes that issue as one node ID on one host must
// see each other, or the second would repeat the first one's IDs: the data directory cannot be the
// meeting place (each user, each `--data-dir`, each registry has its own), so they meet here.
//
// Layout: `<root>/flurry-host.<uid>/` is the entry of one user, created by that user (0755) and
// written only by it; every process reads every user's entry. The root is /var/tmp by default: it
// exists on every Linux host, survives a reboot, is shared by the network namespaces of a host and
// is sticky (no user can remove or rename another's entry). An entry counts only when it is a real
// directory owned by the user it is named after and writable by nobody else, so no user can plant
// files in another's name.
//
// Scope: the processes that share the root's file system. Two containers that share nothing see
// nothing of each other (docs/operations.md says what that leaves to the operator). The environment
// variable FLURRY_HOST_GUARD_SCOPE narrows it further, for test suites that play several hosts on
// one machine: processes with different values use different entries. Never set it in production.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/status.h"

namespace flurry {

// The environment variable that narrows the host directory's scope (see above).
inline constexpr const char* kHostGuardScopeVariable = "FLURRY_HOST_GUARD_SCOPE";

// "/var/tmp".
[[nodiscard]] std::filesystem::path default_host_dir();

// One host directory, opened for this process's user. Immutable after open(); thread-safe.
class HostDir {
 public:
  // Checks `root` and creates this user's entry in it when missing. `root` (created 0755 when it
  // does not exist, its parent not) must be a directory, not a symbolic link, and when its group or
  // others may write to it, sticky (as /tmp and /var/tmp are), since otherwise any user could
  // replace another's entry. This user's entry must be a directory (not a link) owned by this user
  // and writable by nobody else; a missing one is created 0755. FAILED_PRECONDITION naming the
  // directory, what is wrong and how to fix it; UNAVAILABLE / IO when it cannot be read or created.
  [[nodiscard]] static Result<HostDir> open(const std::filesystem::path& root);

  HostDir() = default;  // unopened: root() and own() are empty

  [[nodiscard]] const std::filesystem::path& root() const noexcept { return root_; }
  // This user's entry: where this process writes.
  [[nodiscard]] const std::filesystem::path& own() const noexcept { return own_; }

  struct Entry {
    std::filesystem::path dir;
    unsigned uid = 0;
  };
  // Every user's entry that counts, this user's first. An entry named for a user counts when it is
  // a directory owned by that user (or by the kernel's overflow user, which is how a user
  // namespace, such as systemd's PrivateUsers=, shows the users it does not map) and writable by
  // nobody else; the others are skipped, each with a line in `skipped` (when given) saying why, for
  // a warning. UNAVAILABLE / IO when the root cannot be listed.
  [[nodiscard]] Result<std::vector<Entry>> entries(
      std::vector<std::string>* skipped = nullptr) const;

  // Writes `content` to `name` in this user's entry, readable by every user (0644), durably
  // (write to a temporary file, fsync, rename, fsync the directory). UNAVAILABLE / IO.
  [[nodiscard]] Status write_shared(std::string_view name, std::string_view content) const;

 private:
  std::filesystem::path root_;
  std::filesystem::path own_;
  std::string prefix_;  // "flurry-host." or "flurry-host.<scope hash>."
};

}  // namespace flurry

#include "flurry/host_guard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "core/durable_file.h"
#include "core/numbers.h"
#include "core/quote.h"

namespace flurry {
namespace {

Status lock_error(std::string_view what, const std::filesystem::path& file, int err) {
  return Status(Reason::kIo,
                std::string(what) + " the host guard " + file.string() + ": " + std::strerror(err));
}

// A whole-file write lock, as F_OFD_SETLK takes and F_OFD_GETLK tests it.
struct flock whole_file_lock() {
  struct flock l {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  l.l_start = 0;
  l.l_len = 0;
  return l;
}

// "process 1234 (flurry) of user ID 0": the PID the holder wrote into its lock file and the program
// name the kernel knows for it (/proc/PID/comm: never the command line, which may hold secrets).
std::string describe_holder(int fd, unsigned uid) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string_view text(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const internal::ParsedUint pid = internal::parse_uint(text, 0x7FFFFFFF);
  std::string who = pid.ok() && pid.value > 0 ? "process " + std::to_string(pid.value)
                                              : std::string("another process");
  if (pid.ok() && pid.value == static_cast<std::uint64_t>(::getpid())) {
    who += " (this process)";
  } else if (pid.ok() && pid.value > 0) {
    std::ifstream in("/proc/" + std::to_string(pid.value) + "/comm");
    std::string comm;
    if (std::getline(in, comm) && !comm.empty()) who += " (" + internal::quote(comm, 32) + ")";
  }
  return who + " of user ID " + std::to_string(uid);
}

Status in_use(std::uint64_t node, const std::string& holder) {
  return Status(Reason::kNodeInUse,
                "node " + std::to_string(node) + " is already issuing IDs on this host under " +
                    "the same layout, in " + holder +
                    ": two processes with one node ID would issue the same IDs. Let both use "
                    "one registry (the same registry settings and data directory) so they "
                    "lease distinct node IDs, or give them distinct static nodes");
}

}  // namespace

std::string HostNodeGuard::name_of(const Layout& layout, std::uint64_t node) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(internal::fnv1a64(layout.structure())));
  return "node-" + std::string(hex) + "-" + std::to_string(node) + ".lock";
}

Result<HostNodeGuard> HostNodeGuard::acquire(const HostDir& host, const Layout& layout,
                                             std::uint64_t node) {
  if (host.own().empty()) {
    return Status(StatusCode::kFailedPrecondition,
                  "no host directory is open: the host guard has nowhere to live");
  }
  const std::string name = name_of(layout, node);
  const std::filesystem::path own = host.own() / name;
  // Readable by every user (0644): the others test the lock and read the holder's PID.
  const int fd = ::open(own.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return lock_error("cannot open", own, errno);
  HostNodeGuard guard(fd);
  struct flock l = whole_file_lock();
  if (::fcntl(fd, F_OFD_SETLK, &l) != 0) {
    const int err = errno;
    if (err != EAGAIN && err != EACCES) return lock_error("cannot lock", own, err);
    const std::string holder = describe_holder(fd, static_cast<unsigned>(::geteuid()));
    guard.release();
    return in_use(node, holder);
  }
  // The holder's PID, for the message a refused process prints.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return lock_error("cannot write", own, errno);
  }
  // Then every other user's: taken after ours, so that of two racing processes of two users the
  // later test sees the earlier lock (both may refuse; never both issue).
  Result<std::vector<HostDir::Entry>> entries = host.entries();
  if (!entries.ok()) return entries.status().with_prefix("cannot check the host guards");
  for (const HostDir::Entry& entry : *entries) {
    if (entry.dir == host.own()) continue;
    const std::filesystem::path other = entry.dir / name;
    const int ofd = ::open(other.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (ofd < 0) {
      if (errno == ENOENT) continue;
      return lock_error("cannot open", other, errno);
    }
    struct flock test = whole_file_lock();
    const bool tested = ::fcntl(ofd, F_OFD_GETLK, &test) == 0;
    const int err = errno;
    std::string holder;
    if (tested && test.l_type != F_UNLCK) holder = describe_holder(ofd, entry.uid);
    ::close(ofd);
    if (!tested) return lock_error("cannot test", other, err);
    if (!holder.empty()) {
      guard.release();
      return in_use(node, holder);
    }
  }
  return guard;
}

HostNodeGuard::~HostNodeGuard() {
  release();
}

HostNodeGuard::HostNodeGuard(HostNodeGuard&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

HostNodeGuard& HostNodeGuard::operator=(HostNodeGuard&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void HostNodeGuard::release() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Claim> claim_with_host_guard(NodeRegistry& registry, std::string_view owner,
                                    const HostDir& host, const Layout& layout, HostNodeGuard& guard,
                                    int max_attempts,
                                    const std::function<void(const Status&)>& skipped_hook) {
  std::vector<Lease> skipped;  // leased, but issued as by another process on this host
  Result<Claim> out = Status(StatusCode::kInternal, "no node ID was claimed");
  for (int attempt = 0; attempt < std::max(max_attempts, 1); ++attempt) {
    Result<Claim> claim = registry.claim(owner, layout.node_count());
    if (!claim.ok()) {
      out = claim.status().with_prefix("cannot claim a node ID from " + registry.describe());
      break;
    }
    Result<HostNodeGuard> taken = HostNodeGuard::acquire(host, layout, claim->lease.node);
    if (taken.ok()) {
      guard = std::move(taken).value();
      out = std::move(claim);
      break;
    }
    out = taken.status().with_prefix("cannot issue as node " + std::to_string(claim->lease.node) +
                                     " from " + registry.describe());
    skipped.push_back(claim->lease);
    if (skipped_hook) skipped_hook(out.status());
    if (claim->lease.ttl.count() == 0) break;  // a static node: the registry has no other
  }
  // Failing to release only delays the node ID's reuse until its lease runs out.
  for (const Lease& lease : skipped) (void)registry.release(lease);
  return out;
}

}  // namespace flurry

#include "flurry/host_guard.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "core/durable_file.h"
#include "core/quote.h"

namespace flurry {
namespace {

// Fills `addr` with the abstract name (a leading NUL, no terminator) and returns its length.
socklen_t abstract_address(const std::string& name, sockaddr_un& addr) {
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  const std::size_t n = std::min(name.size(), sizeof addr.sun_path - 1);
  std::memcpy(addr.sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

Status socket_error(std::string_view what, const std::string& name, int err) {
  return Status(Reason::kIo, std::string(what) + " the host guard " + internal::quote(name) + ": " +
                                 std::strerror(err));
}

// "PID 1234 (flurry serve --data-dir /x)", or what can be learnt of the holder.
std::string describe_holder(const sockaddr_un& addr, socklen_t len) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return "another process";
  std::string who = "another process";
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) == 0) {
    ucred cred{};
    socklen_t cred_len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0 && cred.pid > 0) {
      who = "process " + std::to_string(cred.pid);
      if (cred.pid == ::getpid()) {
        who += " (this process)";
      } else {
        std::ifstream in("/proc/" + std::to_string(cred.pid) + "/cmdline", std::ios::binary);
        std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
        for (char& c : cmdline) {
          if (c == '\0') c = ' ';
        }
        if (!cmdline.empty()) who += " (" + internal::quote(cmdline, 200) + ")";
      }
    }
  } else if (errno == EAGAIN) {
    who = "another process (its guard's queue is full, so its PID is unknown)";
  }
  ::close(fd);
  return who;
}

}  // namespace

std::string HostNodeGuard::name_of(std::string_view layout, std::uint64_t node) {
  const auto hex = [](std::string_view text) {
    char out[17];
    std::snprintf(out, sizeof out, "%016llx",
                  static_cast<unsigned long long>(internal::fnv1a64(text)));
    return std::string(out);
  };
  const char* scope = std::getenv(kHostGuardScopeVariable);
  const std::string scoped = scope != nullptr && *scope != '\0' ? hex(scope) + "/" : "";
  return "flurry/node-guard/" + scoped + hex(layout) + "/" + std::to_string(node);
}

Result<HostNodeGuard> HostNodeGuard::acquire(std::string_view layout, std::uint64_t node) {
  const std::string name = name_of(layout, node);
  sockaddr_un addr{};
  const socklen_t len = abstract_address(name, addr);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return socket_error("cannot create", name, errno);
  HostNodeGuard guard(fd);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    if (err != EADDRINUSE) return socket_error("cannot bind", name, err);
    guard.release();
    return Status(Reason::kNodeInUse,
                  "node " + std::to_string(node) + " is already issuing IDs on this host under " +
                      "the same layout, in " + describe_holder(addr, len) +
                      ": two processes with one node ID would issue the same IDs. Let both use "
                      "one registry (the same registry settings and data directory) so they "
                      "lease distinct node IDs, or give them distinct static nodes");
  }
  // Listening lets a second process connect and learn who holds the guard (SO_PEERCRED). Nobody
  // accepts: each refused process leaves one connection queued, so the queue is long.
  if (::listen(fd, SOMAXCONN) != 0) return socket_error("cannot listen on", name, errno);
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
                                    std::string_view layout, std::uint64_t node_count,
                                    HostNodeGuard& guard, int max_attempts,
                                    const std::function<void(const Status&)>& skipped_hook) {
  std::vector<Lease> skipped;  // leased, but issued as by another process on this host
  Result<Claim> out = Status(StatusCode::kInternal, "no node ID was claimed");
  for (int attempt = 0; attempt < std::max(max_attempts, 1); ++attempt) {
    Result<Claim> claim = registry.claim(owner, node_count);
    if (!claim.ok()) {
      out = claim.status().with_prefix("cannot claim a node ID from " + registry.describe());
      break;
    }
    Result<HostNodeGuard> taken = HostNodeGuard::acquire(layout, claim->lease.node);
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

// A host-wide guard: two processes on one host never issue as the same node ID under the same
// layout, whatever registry each of them uses (two data directories, two registries that do not
// know each other, a static node configured twice).
//
// The guard is a Linux abstract Unix socket named from a hash of the layout's canonical text and
// the node ID, bound and listening for as long as the guard lives. The kernel releases it when
// the process ends, however it ends, so a crash never leaves a stale guard behind, and it needs no
// file or directory that could be missing, shared by accident or owned by another user. A second
// process finds the name taken, connects, and learns the first one's PID (SO_PEERCRED) to name it.
//
// Scope: one network namespace (a container with its own network namespace has its own guards),
// narrowed by the environment variable FLURRY_HOST_GUARD_SCOPE when it is set: processes with
// different values do not see each other's guards. Only for test suites that play several hosts
// on one machine at once; never set it in production.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry {

// The environment variable that narrows the guards' scope (see above).
inline constexpr const char* kHostGuardScopeVariable = "FLURRY_HOST_GUARD_SCOPE";

class HostNodeGuard {
 public:
  // Takes the guard of (`layout`, `node`) for this process. `layout` is the layout's canonical
  // text (Layout::to_string()). FAILED_PRECONDITION / NODE_IN_USE naming the holding process
  // (its PID, and its command line when readable) when another guard object holds it, in this
  // process or another one; UNAVAILABLE / IO when the socket cannot be made.
  [[nodiscard]] static Result<HostNodeGuard> acquire(std::string_view layout, std::uint64_t node);

  HostNodeGuard() = default;  // holds nothing
  ~HostNodeGuard();           // release()
  HostNodeGuard(HostNodeGuard&& other) noexcept;
  HostNodeGuard& operator=(HostNodeGuard&& other) noexcept;
  HostNodeGuard(const HostNodeGuard&) = delete;
  HostNodeGuard& operator=(const HostNodeGuard&) = delete;

  // Lets go of the guard (another process may take it at once). Idempotent.
  void release() noexcept;
  [[nodiscard]] bool held() const noexcept { return fd_ >= 0; }

  // The abstract socket's name (without the leading NUL), for messages and tests: hashes of the
  // scope (when set) and the layout, and the node ID.
  [[nodiscard]] static std::string name_of(std::string_view layout, std::uint64_t node);

 private:
  explicit HostNodeGuard(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Claims a node ID from `registry` for `owner` and takes its host guard into `guard`. A leased
// node ID whose guard another process holds (a process beside another registry) is kept while the
// next one is claimed, so that the registry offers another, and released once a free one is found
// or after `max_attempts` tries; a static node (a lease without TTL) is not tried again. Each
// node ID stepped over is reported to `skipped` (when given) with the NODE_IN_USE status naming
// the holder, for the caller to log. Errors: the registry's claim errors; NODE_IN_USE (prefixed
// with the node and registry) when every node ID tried is issued as elsewhere on this host; IO
// from the guard.
[[nodiscard]] Result<Claim> claim_with_host_guard(
    NodeRegistry& registry, std::string_view owner, std::string_view layout,
    std::uint64_t node_count, HostNodeGuard& guard, int max_attempts = 8,
    const std::function<void(const Status&)>& skipped = nullptr);

}  // namespace flurry

// A host-wide guard: two processes on one host never issue as the same node ID under the same
// layout, whatever user each runs as and whatever registry or data directory each uses (two data
// directories, two registries that do not know each other, a static node configured twice).
//
// The guard of (layout structure, node) is an open-file-description write lock (F_OFD_SETLK) on
// the file `node-<hash of the structure>-<node>.lock` in this user's entry of the host directory
// (host_dir.h), held for as long as the guard lives; a process takes its own user's lock first and
// then tests every other user's (F_OFD_GETLK), so of two processes racing at least one sees the
// other. The kernel drops the lock when the process ends, however it ends, so a crash never leaves
// a stale guard. Layouts compare by structure (Layout::structure): `node:10` and `worker:10` share
// their guards. Only a user's own processes can create or lock files in its entry, so nobody can
// hold a guard in another user's name; a refusal names the holder by user ID and PID and its
// program, never its command line (which may hold secrets).
//
// Scope: the processes that share the host directory's file system, whatever their network
// namespace (host_dir.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "flurry/host_dir.h"
#include "flurry/layout.h"
#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry {

class HostNodeGuard {
 public:
  // Takes the guard of (`layout`'s structure, `node`) in `host` for this process.
  // FAILED_PRECONDITION / NODE_IN_USE naming the holding process (user ID, PID and program name
  // when known) when another guard object holds it, in this process or another one;
  // UNAVAILABLE / IO when the lock file cannot be opened or locked.
  [[nodiscard]] static Result<HostNodeGuard> acquire(const HostDir& host, const Layout& layout,
                                                     std::uint64_t node);

  HostNodeGuard() = default;  // holds nothing
  ~HostNodeGuard();           // release()
  HostNodeGuard(HostNodeGuard&& other) noexcept;
  HostNodeGuard& operator=(HostNodeGuard&& other) noexcept;
  HostNodeGuard(const HostNodeGuard&) = delete;
  HostNodeGuard& operator=(const HostNodeGuard&) = delete;

  // Lets go of the guard (another process may take it at once). Idempotent.
  void release() noexcept;
  [[nodiscard]] bool held() const noexcept { return fd_ >= 0; }

  // The lock file's name in each user's entry of the host directory.
  [[nodiscard]] static std::string name_of(const Layout& layout, std::uint64_t node);

 private:
  explicit HostNodeGuard(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Claims a node ID (of layout.node_count()) from `registry` for `owner` and takes its host guard in
// `host` into `guard`. A leased
// node ID whose guard another process holds (a process beside another registry) is kept while the
// next one is claimed, so that the registry offers another, and released once a free one is found
// or after `max_attempts` tries; a static node (a lease without TTL) is not tried again. Each
// node ID stepped over is reported to `skipped` (when given) with the NODE_IN_USE status naming
// the holder, for the caller to log. Errors: the registry's claim errors; NODE_IN_USE (prefixed
// with the node and registry) when every node ID tried is issued as elsewhere on this host; IO
// from the guard.
[[nodiscard]] Result<Claim> claim_with_host_guard(
    NodeRegistry& registry, std::string_view owner, const HostDir& host, const Layout& layout,
    HostNodeGuard& guard, int max_attempts = 8,
    const std::function<void(const Status&)>& skipped = nullptr);

}  // namespace flurry

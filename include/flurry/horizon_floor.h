// This host's own memory of node horizons, beside the registry (defence in depth).
//
// A registry can go backwards: its database file replaced, emptied or restored from a backup, a
// row deleted by hand. The registry would then hand out a node ID with an older horizon (or
// none), and a process trusting it could issue again IDs it had already issued. So a process
// never trusts its registry below what it has itself saved: every horizon record is remembered
// here before it is sent to the registry (in memory, and in a small file per node in a
// host-local directory that the processes of the host share), and every claim starts above
// max(the horizon the registry handed over, the one remembered here).
//
// What it cannot protect (see docs/operations.md): a registry that goes backwards after the node
// ID moved to another host (that host has no copy), or the host-local directory lost together
// with the registry.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "flurry/horizon.h"
#include "flurry/host_dir.h"
#include "flurry/layout.h"
#include "flurry/mutex.h"
#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry {

// What raise() found when the registry was behind this host's memory of a node.
struct HorizonRegression {
  std::uint64_t node = 0;
  std::uint64_t generation = 0;      // the clock generation that was behind
  std::int64_t registry_tick = -1;   // the registry's horizon there (-1: none)
  std::int64_t remembered_tick = 0;  // this host's
  std::string where;                 // "this process" or the local copy's path
};

// Thread-safe.
class HorizonFloor {
 public:
  // `dir` empty: memory only. Otherwise the local copies live in `dir` (created on first use),
  // one file per node, named after `registry_key` (the registry's identity, registry_identity()
  // in open_registry.h, e.g. "etcd:cluster=blue;...": its kind and a hash of it) and `layout`
  // (canonical text): a copy is only ever compared with the registry and layout it came from, so
  // two etcd clusters or two PostgreSQL databases never read each other's copies.
  //
  // `host` (when opened) adds the host-wide record: every record remember() keeps is also written
  // to `host` keyed by the layout's structure and the node only (registry and data directory left
  // out), and raise() starts every claim above the records of every user's entry there. So a
  // process that starts after another stopped or died on this host, under another user, registry
  // or data directory, starts above everything it may have issued (host_dir.h).
  HorizonFloor(std::filesystem::path dir, std::string registry_key, std::string layout,
               HostDir host = {});

  // Raises `claim.inherited` to at least what this host remembers of claim.lease.node, in every
  // clock generation (the remembered record's generation is kept when it is ahead). Returns the
  // regression when the registry was behind, nullopt when it was not. Errors: DATA_LOSS /
  // CORRUPT or FAILED_PRECONDITION / STATE_MISMATCH when the local copy is unreadable or for
  // another layout or node (never read as "nothing remembered"), UNAVAILABLE / IO when it
  // cannot be read.
  [[nodiscard]] Result<std::optional<HorizonRegression>> raise(Claim& claim);

  // Remembers `record` as the newest horizon this process saves for record.node; durable on
  // return. Values this process wrote before may go down (the tight horizon saved at close is
  // still above every ID issued); values another process on the host raised meanwhile are kept.
  // Errors: UNAVAILABLE / IO (the caller must not use the record then),
  // FAILED_PRECONDITION / STATE_MISMATCH.
  [[nodiscard]] Status remember(const HorizonRecord& record);

  // Notes that the registry accepted `record`, which remember() was given first (call after
  // each successful registry write); written at once, but without fsync (a power loss may
  // take the last one back: a false alarm at worst, never a repeated ID). A later registry found
  // below it went backwards. Errors as remember().
  [[nodiscard]] Status accepted(const HorizonRecord& record);

  // The local copy's file for `node`; empty when memory only.
  [[nodiscard]] std::filesystem::path path_for(std::uint64_t node) const;
  // The host-wide record's file name for `node` (in each user's entry of host()).
  [[nodiscard]] std::string host_record_name(std::uint64_t node) const;
  // The host directory given to the constructor (unopened when none).
  [[nodiscard]] const HostDir& host() const noexcept { return host_; }

 private:
  // The newest record handed to the registry, and the newest one it confirmed.
  struct Entry {
    HorizonRecord pending;
    HorizonRecord accepted;
  };
  // Require mu_. The local copy of `node` (NOT_FOUND when there is none), and writing it.
  [[nodiscard]] Result<Entry> load_file(std::uint64_t node) const FLURRY_REQUIRES(mu_);
  [[nodiscard]] Result<Entry> load_path(const std::filesystem::path& path, std::uint64_t node) const
      FLURRY_REQUIRES(mu_);
  [[nodiscard]] Status write_file(std::uint64_t node, const Entry& entry, bool durable) const
      FLURRY_REQUIRES(mu_);
  // Require mu_. Raises `inherited` to the host-wide records of every user (creating it when
  // empty), and writes `record` to this user's host-wide record, keeping values another process
  // raised there above `mine`.
  [[nodiscard]] Status raise_to_host(std::uint64_t node,
                                     std::optional<HorizonRecord>& inherited) const
      FLURRY_REQUIRES(mu_);
  [[nodiscard]] Status write_host(const HorizonRecord& record, const HorizonRecord* mine) const
      FLURRY_REQUIRES(mu_);
  // Requires mu_. Writes `record` as the pending (or accepted) half of its node's local copy,
  // keeping the values another process raised there above `mine` (what this one wrote last).
  [[nodiscard]] Status write_half(const HorizonRecord& record, bool pending,
                                  const HorizonRecord* mine) const FLURRY_REQUIRES(mu_);

  const std::filesystem::path dir_;
  const std::string registry_key_;
  const std::string layout_;
  const std::string structure_;    // the layout's structure (Layout::structure)
  const std::string file_prefix_;  // "<registry key>-<hash of key and structure>-node-"
  // Copies written before files were keyed by the structure (by the layout's text): still read.
  const std::string legacy_prefix_;
  const HostDir host_;

  Mutex mu_;
  // Per node: the last record this process wrote (or found at its claim).
  std::map<std::uint64_t, Entry> written_ FLURRY_GUARDED_BY(mu_);
};

// A one-line description for logs: "node 0 generation 0: the registry holds no horizon, this
// process remembers tick 123 (2026-11-23T10:00:00.000Z)".
[[nodiscard]] std::string describe_regression(const HorizonRegression& r, const Layout& layout);

}  // namespace flurry

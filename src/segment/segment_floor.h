// Internal: this host's own memory of what each segment store handed out (defence in depth, as
// HorizonFloor is for the registries).
//
// A store can go backwards: max_id moved down by hand, the database restored from a backup, a
// fail-over to a replica that lost commits, segments.db deleted and the tag created again. The
// store would then hand out ranges it gave before. So a node never trusts a store below what the
// store gave this host: per (store, tag) the end of the last range is remembered here, in memory
// and in a small file in a host-local directory that the host's processes share, made durable
// before the range is used. SegmentService refuses (STORE_REGRESSED) any allocation that would
// start below it.
//
// The file also keeps the residue (delta, remainder) the store last gave the tag, so the residue
// proof across several stores can count a store that is down at a tag's first use.
//
// Keys: a store is known by what it is, not by how its location is spelt (SegmentStoreIdentity):
// its store ID (kept in the store: a restored copy opened from another path is still found), its
// place (PostgreSQL: the cluster's system identifier, database and schema) and its address (the
// SQLite file's real path, or PostgreSQL's host, port and database: a new, empty store in the
// old one's place is still compared with the old one's floor). Every range is remembered under
// each of them, and a floor is the largest value found under any. Files written by earlier
// versions, keyed by the location's text (describe()), are still read.
//
// Where: one file per tag, holding the tag's floor under every key, in the floor directory (a
// data directory's segment-floors, private to its user: floors-<tag>) and, with a host directory
// (host_dir.h), in this user's entry there (segfloors-<tag>), read in every user's entry: a
// store's floor is known to every flurry process of the host, whatever its data directory or user.
// One file per tag keeps a range to two durable writes, however many keys the store has.
//
// What it cannot protect (docs/segments.md): ranges another host took from the store, and a
// store that goes backwards together with every copy of its floors (a container that shares no
// host directory with the processes before it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/host_dir.h"
#include "flurry/mutex.h"
#include "flurry/segment_store.h"
#include "flurry/status.h"

namespace flurry::internal {

// What this host remembers of one (store, tag).
struct SegmentFloorEntry {
  std::uint64_t floor = 0;  // the end of the last range the store gave; 0: none
  std::uint64_t delta = 0;  // the residue the store last gave the tag; 0: unknown
  std::uint64_t remainder = 0;
};

// The keys one store's floors are kept under.
struct SegmentFloorKeys {
  std::vector<std::string> keys;    // read and written, most telling first
  std::vector<std::string> legacy;  // only read (in the floor directory): earlier versions' keys
};

// The keys of a store with identity `id` and description `described` (SegmentStore::describe(),
// the legacy key): the identity's non-empty fields, in the order store ID, place, address; the
// description alone when the identity has none.
[[nodiscard]] SegmentFloorKeys segment_floor_keys(const SegmentStoreIdentity& id,
                                                  std::string_view described);

// Thread-safe; processes sharing `dir` serialise on an flock of dir/.lock, and processes of one
// user on the host directory on an flock of its entry's .lock.
class SegmentFloors {
 public:
  // `dir` empty: no floor directory. `host` unopened: no host-wide floors. Neither: memory only.
  // The directory is created on first write.
  explicit SegmentFloors(std::filesystem::path dir, HostDir host = {});

  // The largest floor this process or, through the floor directory and every user's entry of
  // the host directory, any process on the host remembers of (store, tag) under any of `keys`,
  // with the residue remembered under the first key that has one. A zero entry when nothing is
  // remembered. Errors: DATA_LOSS / CORRUPT naming the file (one that is not a floor file, or
  // for another key or tag: never read as "nothing remembered"), UNAVAILABLE / IO.
  [[nodiscard]] Result<SegmentFloorEntry> get(const SegmentFloorKeys& keys, std::string_view tag);

  // Raises the floor of (store, tag) to `end` under every key of keys.keys (it never goes down:
  // another process's higher value is kept) and records the residue; durable (fsync) in the
  // floor directory and in this user's entry of the host directory on return. The caller must
  // not use the range when this fails. Errors: UNAVAILABLE / IO, DATA_LOSS / CORRUPT.
  [[nodiscard]] Status raise(const SegmentFloorKeys& keys, std::string_view tag, std::uint64_t end,
                             std::uint64_t delta, std::uint64_t remainder);

  // The file of `tag` in the floor directory (every key's floor of the tag); empty without one.
  [[nodiscard]] std::filesystem::path tag_path(std::string_view tag) const;
  // The name of the file of `tag` in each user's entry of the host directory.
  [[nodiscard]] static std::string host_file_name(std::string_view tag);
  // The file earlier versions kept for (key, tag) in the floor directory, still read; empty
  // without a floor directory.
  [[nodiscard]] std::filesystem::path path_for(std::string_view key, std::string_view tag) const;

 private:
  struct Seen {
    SegmentFloorEntry entry;
    std::size_t key = 0;  // index into keys, then legacy
  };
  // Requires, with a floor directory, its lock too.
  [[nodiscard]] Status collect(const SegmentFloorKeys& keys, std::string_view tag, bool with_host,
                               std::vector<Seen>& out) const FLURRY_REQUIRES(mu_);

  const std::filesystem::path dir_;
  const HostDir host_;
  Mutex mu_;
  std::map<std::pair<std::string, std::string>, SegmentFloorEntry, std::less<>> memory_
      FLURRY_GUARDED_BY(mu_);
};

}  // namespace flurry::internal

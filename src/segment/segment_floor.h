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
// What it cannot protect (docs/segments.md): ranges another host took from the store, and the
// directory lost together with the store.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "flurry/status.h"

namespace flurry::internal {

// What this host remembers of one (store, tag).
struct SegmentFloorEntry {
  std::uint64_t floor = 0;  // the end of the last range the store gave; 0: none
  std::uint64_t delta = 0;  // the residue the store last gave the tag; 0: unknown
  std::uint64_t remainder = 0;
};

// Thread-safe; processes sharing `dir` serialise on an flock of dir/.lock.
class SegmentFloors {
 public:
  // `dir` empty: memory only. Otherwise the directory is created on first write.
  explicit SegmentFloors(std::filesystem::path dir);

  // What this process or, through the directory, any process on the host remembers of (store,
  // tag): the larger of the two. A zero entry when nothing is remembered. Errors: DATA_LOSS /
  // CORRUPT (a file that is not a floor file, or for another store or tag: never read as
  // "nothing remembered"), UNAVAILABLE / IO.
  [[nodiscard]] Result<SegmentFloorEntry> get(std::string_view store, std::string_view tag);

  // Raises the floor of (store, tag) to `end` (it never goes down: another process's higher
  // value is kept) and records the residue; durable (fsync) on return. The caller must not use
  // the range when this fails. Errors: UNAVAILABLE / IO, DATA_LOSS / CORRUPT.
  [[nodiscard]] Status raise(std::string_view store, std::string_view tag, std::uint64_t end,
                             std::uint64_t delta, std::uint64_t remainder);

  // The file of (store, tag); empty when memory only.
  [[nodiscard]] std::filesystem::path path_for(std::string_view store, std::string_view tag) const;

 private:
  [[nodiscard]] Result<SegmentFloorEntry> load_file(std::string_view store, std::string_view tag,
                                                    const std::filesystem::path& path) const;

  const std::filesystem::path dir_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, SegmentFloorEntry, std::less<>> memory_;
};

}  // namespace flurry::internal

// The durable horizon: the highest tick a node may have issued, kept where a restart finds it.
//
// The generator only issues ticks at or below a horizon that a HorizonStore has made durable,
// and a new generator for the same node starts above the stored horizon. So no crash, restart
// or clock step can make a node repeat an ID, and the hot path never waits for I/O: the store
// is written ahead of need (see Generator).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "flurry/status.h"

namespace flurry {

struct HorizonRecord {
  // The canonical layout text the ticks are measured in; a record is only valid for it.
  std::string layout;
  std::uint64_t node = 0;
  // The clock generation in use (always 0 for layouts without a clock field).
  std::uint64_t generation = 0;
  // One entry per clock generation: the highest tick that may have been issued under it, or -1
  // if it was never used. A generation may be used again only above its entry.
  std::vector<std::int64_t> horizons;

  friend bool operator==(const HorizonRecord&, const HorizonRecord&) = default;
};

// Where a node keeps its horizon. Implementations: FileHorizonStore here, and LeasedHorizonStore
// (registry.h), which saves through a node registry under a lease: the registry accepts a record
// only from the lease's current owner.
//
// Thread-compatible: the generator serializes its calls.
class HorizonStore {
 public:
  virtual ~HorizonStore() = default;

  // The last saved record; NOT_FOUND when nothing was ever saved; DATA_LOSS / CORRUPT when
  // what is stored
  // cannot be read back (never treated as "nothing saved": that could repeat IDs).
  [[nodiscard]] virtual Result<HorizonRecord> load() = 0;

  // Makes `record` durable before returning OK. On error the previously saved record stands.
  [[nodiscard]] virtual Status save(const HorizonRecord& record) = 0;

  // Where the record lives, for messages and logs (e.g. a file path).
  [[nodiscard]] virtual std::string describe() const = 0;
};

// A small text file replaced atomically: written to a temporary file in the same directory,
// fsync'ed, renamed over the old one, and the directory fsync'ed. The directory is created on
// the first save if missing.
class FileHorizonStore final : public HorizonStore {
 public:
  explicit FileHorizonStore(std::filesystem::path file);

  // The conventional file for `node` in a state directory: DIR/horizon-node-N.state.
  [[nodiscard]] static std::filesystem::path path_for(const std::filesystem::path& state_dir,
                                                      std::uint64_t node);

  [[nodiscard]] Result<HorizonRecord> load() override;
  [[nodiscard]] Status save(const HorizonRecord& record) override;
  [[nodiscard]] std::string describe() const override { return file_.string(); }

 private:
  std::filesystem::path file_;
};

// The text form used by FileHorizonStore, exposed for tests and tools. parse rejects anything
// that format did not produce (DATA_LOSS / CORRUPT, saying which line is wrong).
[[nodiscard]] std::string format_horizon_record(const HorizonRecord& record);
[[nodiscard]] Result<HorizonRecord> parse_horizon_record(std::string_view text);

}  // namespace flurry

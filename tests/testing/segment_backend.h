// The fixture interface of the SegmentStore conformance suite (tests/unit/segment_store_test.cc):
// what the suite needs from a backend. Each backend owns one fresh database (a temp directory's
// file, a PostgreSQL database) for the lifetime of the test; every open() is another store object
// on that same database, as another process on the same host or cluster would have.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "flurry/segment_store.h"
#include "flurry/status.h"
#include "test_store.h"

namespace flurry::testing {

class SegmentBackend {
 public:
  virtual ~SegmentBackend() = default;

  // For messages: "sqlite", "postgres".
  [[nodiscard]] virtual std::string name() const = 0;
  // The store's location as an operator writes it (parse_segment_store); the data directory it
  // is read with.
  [[nodiscard]] virtual std::string location() const = 0;
  [[nodiscard]] virtual std::filesystem::path data_dir() const = 0;
  // What the store's describe() must say (no password).
  [[nodiscard]] virtual std::string description() const = 0;
  // A password the location carries ("" for none): it must never show.
  [[nodiscard]] virtual std::string password() const { return {}; }
  // The largest base step create_tag takes.
  [[nodiscard]] virtual std::uint64_t max_base_step() const { return kMaxSegmentStep; }

  // A new store object on this backend's database.
  [[nodiscard]] Result<std::unique_ptr<SegmentStore>> open(
      const SegmentStoreOptions& options = {}) {
    Result<SegmentStoreSpec> spec = parse_segment_store(location(), data_dir());
    if (!spec.ok()) return spec.status();
    return open_segment_store(*spec, options);
  }
};

// SQLite: DIR/data/segments.db ("sqlite", with DIR/data as the data directory, which does not
// exist before the first open).
class SqliteSegmentBackend final : public SegmentBackend {
 public:
  std::string name() const override { return "sqlite"; }
  std::string location() const override { return "sqlite"; }
  std::filesystem::path data_dir() const override { return dir_.path() / "data"; }
  std::string description() const override { return "sqlite:" + file().string(); }
  [[nodiscard]] std::filesystem::path file() const { return data_dir() / "segments.db"; }

 private:
  TempDir dir_;
};

}  // namespace flurry::testing

// Segment mode's durable half: where each business tag's counter lives (docs/segments.md).
//
// A SegmentStore keeps, per tag, the end of the last range it handed out (max_id) and hands out
// the next range [max_id, max_id + step) by raising max_id atomically and durably: two callers,
// in one process or on two hosts, never get overlapping ranges, and a range handed out is never
// handed out again, even after a crash (SQLite synchronous=FULL, PostgreSQL synchronous_commit
// on). The buffered, in-memory half that serves single IDs from those ranges is SegmentService
// (segment_service.h).
//
// Residues: a tag may carry delta and remainder (delta >= 1, remainder < delta). Only the numbers
// x of a range with x % delta == remainder are IDs. Several independent stores that serve one tag
// with one delta and different remainders therefore never issue the same ID, whatever their
// counters do (Flickr's odd/even ticket servers).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/clock.h"
#include "flurry/generator.h"  // Blocking
#include "flurry/status.h"

namespace flurry {

// A segment tag's name, checked once where it enters (a transport, the CLI, a test): 1 to 128
// bytes of [A-Za-z0-9._-], not "." nor ".." (Leaf's biz_tag is varchar(128); the character set
// keeps tags safe in URLs, metric labels and file names). Made only by of(), so a SegmentTag is
// the proof that the name is valid: SegmentService and the stores take one and check nothing
// again. Owns its text (a deferred request keeps it). Immutable; safe to share between threads.
class SegmentTag {
 public:
  // INVALID_ARGUMENT saying what is wrong, e.g.
  //   segment tag "a b": byte 2 is ' ', not one of A-Z, a-z, 0-9, '.', '_' and '-'
  [[nodiscard]] static Result<SegmentTag> of(std::string_view name);
  // As of(name), the message prefixed with where the text came from:
  //   <where> is not a valid tag name: <what is wrong>
  // (`where`: "the tag in the path", "parameter \"tag\"", "field \"tag\"", ...).
  [[nodiscard]] static Result<SegmentTag> of(std::string_view name, std::string_view where);

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::string_view view() const noexcept { return name_; }

  friend bool operator==(const SegmentTag&, const SegmentTag&) = default;

 private:
  explicit SegmentTag(std::string name) noexcept : name_(std::move(name)) {}
  std::string name_;
};

// What creating a tag takes. The first range handed out starts at `start`.
struct SegmentTagSpec {
  std::string tag;
  std::uint64_t start = 1;
  // The base step: the length of a range when demand is low. 1 <= step <= kMaxSegmentStep.
  std::uint64_t step = 1000;
  std::string description;  // free text, at most 256 bytes
  std::uint64_t delta = 1;
  std::uint64_t remainder = 0;
  // Strict: the tag's numbers increase across every server, not only per server, because only
  // the timestamp oracle's leader serves it (docs/segments.md, "Strict tags"). Kept in the
  // store's side table flurry_segment_strict (a row per strict tag; Leaf's table is unchanged).
  bool strict = false;
};

// The largest step a tag or an allocation may use (2^38: ranges stay far below the
// SegmentService's 40-bit index).
inline constexpr std::uint64_t kMaxSegmentStep = std::uint64_t{1} << 38;
// The largest delta (so that first + k * delta stays well inside 64 bits for any range).
inline constexpr std::uint64_t kMaxSegmentDelta = std::uint64_t{1} << 20;

// Checks a spec on its own: the tag name, 1 <= step <= kMaxSegmentStep, 1 <= delta <=
// kMaxSegmentDelta, remainder < delta, start + step does not overflow 63 bits (PostgreSQL's
// bigint), the description's length. INVALID_ARGUMENT naming the field otherwise.
[[nodiscard]] Status check_segment_tag_spec(const SegmentTagSpec& spec);

// A tag as the store keeps it.
struct SegmentTagInfo {
  std::string tag;
  std::uint64_t max_id = 0;  // the next range starts here
  std::uint64_t step = 0;    // the base step
  std::string description;
  std::uint64_t delta = 1;
  std::uint64_t remainder = 0;
  // When max_id last changed, by the store's clock (Unix milliseconds).
  std::int64_t update_time_unix_ms = 0;
  bool strict = false;  // as SegmentTagSpec::strict
};

// One range handed out: the IDs are the x in [start, end) with x % delta == remainder.
struct SegmentAllocation {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t delta = 1;
  std::uint64_t remainder = 0;
  std::uint64_t base_step = 0;  // the tag's base step, as stored
};

// What a store is, whatever spelling of its location reached it: the keys this host's floors of
// the store are kept under (docs/segments.md, "Never below what a store handed out: floors").
// Each non-empty field is one key; a floor is the largest value found under any of them.
struct SegmentStoreIdentity {
  // "store-id:" and 32 hex digits (128 random bits) the store keeps in itself (the table
  // flurry_segment_meta), made once when the store is created or first opened by a flurry that
  // knows it: a backup, a restored copy or a replica carries it, wherever it is opened from.
  // Empty when the store keeps none (a PostgreSQL role that may not create the table), or while
  // a PostgreSQL store has not been reached yet.
  std::string store_id;
  // Where the store is, asked of the store: PostgreSQL "postgres-cluster:" + the server's
  // system identifier, the database and the table's schema ("7301.../ids/public.leaf_alloc"), so
  // that a new database in its place is still compared with the old one's floors. Empty when the
  // system identifier cannot be read (pg_control_system() refused) or not yet reached. SQLite:
  // empty (`address` is the file itself).
  std::string place;
  // Where the location points, known without asking the store (so also while it is down):
  // SQLite "sqlite-file:" + the file's real path (symbolic links, "." and ".." resolved);
  // PostgreSQL "postgres-address:" + host, port and database as libpq reads the location.
  std::string address;
};

// Thread-safe: every method may be called from any thread (implementations serialise on their
// connection as they need).
//
// Errors: INVALID_ARGUMENT (a bad spec), NOT_FOUND (no such tag in this store),
// ALREADY_EXISTS (create of a tag that exists), UNAVAILABLE / IO (the database is busy,
// unreachable or failed: retryable; nothing was allocated or, if the outcome is unknown, the
// range may be lost but is never handed out twice), OUT_OF_RANGE (max_id would pass 2^63 - 1),
// DATA_LOSS / CORRUPT (a row the store cannot read).
class SegmentStore {
 public:
  virtual ~SegmentStore() = default;

  // Creates `spec.tag` with max_id = spec.start. Checks the spec (check_segment_tag_spec).
  [[nodiscard]] virtual Status create_tag(const SegmentTagSpec& spec) = 0;

  // Raises the tag's max_id by `step` (1 <= step <= kMaxSegmentStep; the base step when the
  // caller does not adapt it) and returns the range [old max_id, new max_id), durably, but only
  // when max_id is at least `floor` (the end of the last range this store gave the caller's
  // host: a store below it went backwards). Otherwise UNAVAILABLE / STORE_REGRESSED naming
  // max_id and the floor, with nothing written, so a regressed store stays as it was found until
  // an operator repairs it.
  [[nodiscard]] virtual Result<SegmentAllocation> allocate(const SegmentTag& tag,
                                                           std::uint64_t step,
                                                           std::uint64_t floor) = 0;
  // allocate() without a floor.
  [[nodiscard]] Result<SegmentAllocation> allocate(const SegmentTag& tag, std::uint64_t step) {
    return allocate(tag, step, 0);
  }

  // One tag; NOT_FOUND when the store has none by that name.
  [[nodiscard]] virtual Result<SegmentTagInfo> tag(const SegmentTag& tag) = 0;

  // Every tag, by name.
  [[nodiscard]] virtual Result<std::vector<SegmentTagInfo>> list_tags() = 0;

  // "sqlite:/var/lib/flurry/segments.db", "postgresql://flurry@db/ids" (no password): for logs,
  // messages and metrics labels.
  [[nodiscard]] virtual std::string describe() const = 0;

  // The store's identity (SegmentStoreIdentity). With Blocking::kAllowed a PostgreSQL store not
  // reached yet connects first (errors as the other calls: UNAVAILABLE / IO when it cannot);
  // with Blocking::kNever it answers at once with what it knows (the address at least) and never
  // fails. A store reached again after a failure reads its identity again; when it has changed
  // (another database behind the same location) the allocate() that noticed it fails with
  // UNAVAILABLE / IO and allocates nothing, so the caller asks identity() again and compares the
  // new store with its own floors. The base class: the address is describe().
  [[nodiscard]] virtual Result<SegmentStoreIdentity> identity(Blocking blocking);
};

// Where a store lives, as operators write it (`segment_stores`, `flurry segment --store`):
//   "sqlite"                       <data_dir>/segments.db
//   "sqlite:PATH"                  an SQLite file at PATH
//   "postgresql://..." / "postgres://..." / "host=... dbname=..."
//                                  a PostgreSQL database (libpq's connection string); the table
//                                  leaf_alloc, as Meituan Leaf creates it, is used when present
//                                  and created when missing.
namespace internal {
class PostgresUrl;
}

struct SegmentStoreSpec {
  enum class Kind { kSqlite, kPostgres } kind = Kind::kSqlite;
  std::filesystem::path sqlite_path;  // kSqlite: absolute or relative to the working directory
  std::string postgres_url;           // kPostgres
  // kPostgres, set by parse_segment_store: postgres_url parsed and checked, so that nothing
  // below the edge that parsed it parses it again. A spec built by hand leaves it null;
  // open_segment_store then parses postgres_url itself.
  std::shared_ptr<const internal::PostgresUrl> parsed_postgres_url;
  // kSqlite written as "sqlite": the file is <data_dir>/segments.db, so place_segment_stores
  // moves it when the data directory becomes known.
  bool in_data_dir = false;
};

// Parses one store location; "sqlite" becomes <data_dir>/segments.db. INVALID_ARGUMENT saying
// what is wrong (an empty text, an unknown scheme, a PostgreSQL URL libpq cannot parse; the
// message never contains the password).
[[nodiscard]] Result<SegmentStoreSpec> parse_segment_store(std::string_view text,
                                                           const std::filesystem::path& data_dir);

// Parses a comma-separated list of store locations (at least one; no duplicates: the same file
// however its path is written, or the same connection settings as a URL or as key=value pairs).
// A comma starts another location only where one begins ("sqlite", "sqlite:", "SCHEME://",
// "keyword="); other commas belong to the location before them, so libpq's own lists stay whole
// ("postgresql://h1,h2/ids", "host=h1,h2 port=5432,5433 dbname=ids").
[[nodiscard]] Result<std::vector<SegmentStoreSpec>> parse_segment_stores(
    std::string_view text, const std::filesystem::path& data_dir);

// For a list parsed before the data directory was known (the configuration reads its sources in
// turn): every "sqlite" entry (in_data_dir) moved to <data_dir>/segments.db, and the list checked
// again for the same store twice, as parse_segment_stores does and with its messages. Nothing is
// parsed again. INVALID_ARGUMENT naming the two entries.
[[nodiscard]] Status place_segment_stores(std::vector<SegmentStoreSpec>& specs,
                                          const std::filesystem::path& data_dir);

// `text`, a store list as parse_segment_stores takes it, with the secrets of every PostgreSQL
// location masked ("***"): passwords and sslpassword, in URLs and key=value pairs. For printing
// a configuration; the other locations (and a malformed text) come back as written.
[[nodiscard]] std::string redact_segment_stores(std::string_view text);

// The location as parse_segment_store reads it back, with any password masked ("***").
[[nodiscard]] std::string to_string(const SegmentStoreSpec& spec);

struct SegmentStoreOptions {
  // Longest a store operation may take before it fails with UNAVAILABLE (connect, lock waits,
  // statements). Positive. SQLite: how long a write waits for another writer's lock.
  // PostgreSQL: the deadline of each call, connection included, and the session's
  // statement_timeout and lock_timeout.
  std::chrono::milliseconds timeout{2000};
  // What measures those deadlines (PostgreSQL); never null, and it must outlive the store. The
  // system's steady clock unless the caller (a test) hands its own.
  MonotonicClock* clock = &SteadyClock::instance();
};

// Opens a store. SQLite: opens (creating the file, its directory and the table where needed)
// now; UNAVAILABLE / IO when that fails. PostgreSQL: checks the URL and returns at once; the
// connection (and the tables, created when missing) is made on first use and made again after
// any failure, so a node starts while one of its stores is down and survives database restarts.
// PostgreSQL keeps Leaf's leaf_alloc.step, a 32-bit integer: its create_tag refuses a base step
// above 2^31 - 1 (INVALID_ARGUMENT); an allocation's step may still be up to kMaxSegmentStep.
// INVALID_ARGUMENT for a bad spec.
[[nodiscard]] Result<std::unique_ptr<SegmentStore>> open_segment_store(
    const SegmentStoreSpec& spec, const SegmentStoreOptions& options = {});

}  // namespace flurry

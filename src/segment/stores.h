// Internal: the SegmentStore backends behind open_segment_store (segment_store.cc), and what they
// share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "db/postgres_conninfo.h"
#include "flurry/segment_store.h"
#include "flurry/status.h"

namespace flurry::internal {

// The SQLite store at `path` (sqlite_segment_store.cc): creates the directory, the file and the
// tables where missing, now. `path` must not be empty; options.timeout must be positive.
[[nodiscard]] Result<std::unique_ptr<SegmentStore>> open_sqlite_segment_store(
    const std::filesystem::path& path, const SegmentStoreOptions& options);

// The PostgreSQL store for the connection string `url`, parsed already (postgres_segment_store.cc):
// returns at once; connects on first use, its deadlines measured on options.clock.
// options.timeout must be positive.
[[nodiscard]] Result<std::unique_ptr<SegmentStore>> open_postgres_segment_store(
    PostgresUrl url, const SegmentStoreOptions& options);

// For tests: current_setting(`name`) on the PostgreSQL store's own session (connecting first when
// it has no connection). INVALID_ARGUMENT when `store` is not a PostgreSQL store.
[[nodiscard]] Result<std::string> postgres_segment_store_setting(SegmentStore& store,
                                                                 std::string_view name);

// The largest base step a PostgreSQL store keeps: Leaf's leaf_alloc.step is a 32-bit integer.
inline constexpr std::uint64_t kMaxPostgresBaseStep = 2147483647;

// Checks a stored row as read back (the values as the database holds them, signed): 0 <= max_id,
// 1 <= step <= kMaxSegmentStep, 1 <= delta <= kMaxSegmentDelta, 0 <= remainder < delta. DATA_LOSS
// / CORRUPT naming the tag and `where` (the store's description) otherwise.
[[nodiscard]] Status check_stored_segment_row(std::string_view where, std::string_view tag,
                                              std::int64_t max_id, std::int64_t step,
                                              std::int64_t delta, std::int64_t remainder);

// Why an allocation of `asked` found nothing to update although the tag's row `row` exists: its
// max_id is below `floor` (segment_store_regressed), the stored row is corrupt
// (check_stored_segment_row), or max_id + asked would pass 2^63 - 1 (OUT_OF_RANGE, nothing
// changed). OK when none holds (the row changed between the two reads).
[[nodiscard]] Status explain_refused_allocation(std::string_view where, std::string_view tag,
                                                const SegmentTagInfo& row, std::uint64_t floor,
                                                std::uint64_t asked);

// The STORE_REGRESSED error of an allocation refused because the store's max_id is below `floor`.
[[nodiscard]] Status segment_store_regressed(std::string_view where, std::string_view tag,
                                             std::uint64_t max_id, std::uint64_t floor);

// The NOT_FOUND and ALREADY_EXISTS errors, worded alike by both backends.
[[nodiscard]] Status segment_tag_not_found(std::string_view where, std::string_view tag);
[[nodiscard]] Status segment_tag_exists(std::string_view where, std::string_view tag);

// A new store ID (SegmentStoreIdentity::store_id): "store-id:" and 32 lower-case hex digits
// from getrandom(2). UNAVAILABLE / IO when the system gives no random bytes.
[[nodiscard]] Result<std::string> new_segment_store_id();
// True when `text` has the form new_segment_store_id() writes.
[[nodiscard]] bool is_segment_store_id(std::string_view text);

// SegmentStoreIdentity::address of a PostgreSQL location: "postgres-address:host=H;port=P;dbname=D"
// as the location gives them (the host in lower case; empty when not given).
[[nodiscard]] std::string postgres_store_address(const PostgresUrl& url);

// INVALID_ARGUMENT unless 1 <= step <= kMaxSegmentStep (the step of one allocation).
[[nodiscard]] Status check_allocation_step(std::uint64_t step);

}  // namespace flurry::internal

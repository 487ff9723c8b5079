// Internal: small files replaced atomically and durably, read back with a size limit. Used by
// the horizon file store and by the registries' host-local state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "flurry/status.h"

namespace flurry::internal {

// Writes `content` to a temporary file beside `file` (a unique name, created with O_EXCL and mode
// 0600), fsyncs it, renames it over `file` (a symbolic link at `file` is replaced, not followed)
// and fsyncs the directory (created 0700 if missing). On error `file` is unchanged. UNAVAILABLE /
// IO naming the path and the system's reason (e.g. "Read-only file system").
[[nodiscard]] Status write_file_durably(const std::filesystem::path& file,
                                        std::string_view content);

// The same, but the file readable by every user (mode 0644): for the host directory's records,
// which every user's flurry reads (host_dir.h).
[[nodiscard]] Status write_shared_file_durably(const std::filesystem::path& file,
                                               std::string_view content);

// The same without the two fsyncs: atomic (readers see the old or the new content), and kept
// across a process crash, but possibly lost (the old content back) on a power loss. For state
// whose loss costs precision, never safety.
[[nodiscard]] Status write_file_atomically(const std::filesystem::path& file,
                                           std::string_view content);

// The whole of `file`, never through a symbolic link (one at `file` is refused: UNAVAILABLE / IO
// saying so). NOT_FOUND when it does not exist; DATA_LOSS when it is larger than
// `max_size`; UNAVAILABLE / IO when it cannot be read.
[[nodiscard]] Result<std::string> read_small_file(const std::filesystem::path& file,
                                                  std::size_t max_size);

// Proves that files can be created in the existing directory `dir` (creates and removes a
// temporary file). UNAVAILABLE / IO naming the directory and the system's reason ("Permission
// denied", "Read-only file system", "No space left on device").
[[nodiscard]] Status check_writable_dir(const std::filesystem::path& dir);

// FNV-1a, 64 bits: detects torn or edited state files and names files after keys. Not a
// security measure.
[[nodiscard]] std::uint64_t fnv1a64(std::string_view data) noexcept;

// UNAVAILABLE / IO for `what` on `path` with strerror(err).
[[nodiscard]] Status io_error(std::string_view what, const std::filesystem::path& path, int err);

}  // namespace flurry::internal

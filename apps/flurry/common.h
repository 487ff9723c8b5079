// Shared helpers of the flurry command-line tool: argument parsing, error reporting, output.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/codec.h"
#include "flurry/generator.h"
#include "flurry/status.h"
#include "flurry/wide_id.h"

namespace flurry::cli {

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the library refused, or I/O failed
inline constexpr int kExitUsage = 2;    // the command line is wrong

// IDs or order numbers asked of a server per request: well below any max_batch, a small body
// each.
inline constexpr std::uint64_t kServerChunk = 10'000;

// A malformed command line detected after CLI11's parse (a bad number, a bad --format value).
// Caught in main and turned into exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `text` with control characters (newlines included) replaced by spaces, so that every message
// stays on one line.
[[nodiscard]] std::string one_line(std::string_view text);

// Prints "flurry: <message>" on stderr as one line.
void print_error(std::string_view message);

// This host's name (gethostname), "unknown-host" when it cannot be read: for lease owners and
// --node-from-hostname.
[[nodiscard]] std::string host_name();

// Prints a library error as one line ("flurry: <message>") and returns kExitFailure. Bad input
// shows the library's message alone; other errors show code and reason too (e.g.
// "UNAVAILABLE (CLOCK_BEHIND): ..."), which says whether a retry can help.
[[nodiscard]] int fail(const Status& status);

// A decimal integer in [min, max] given to `option`; throws UsageError otherwise.
[[nodiscard]] std::uint64_t parse_uint(std::string_view text, std::string_view option,
                                       std::uint64_t min, std::uint64_t max);
// A non-negative whole number of milliseconds (at most about 31 years).
[[nodiscard]] Nanos parse_millis(std::string_view text, std::string_view option);
// A positive decimal number of seconds, at most `max`.
[[nodiscard]] double parse_seconds(std::string_view text, std::string_view option, double max);
// --format values: every name parse_id_encoding() accepts (the 64-bit encodings, uuidv7, ulid);
// throws UsageError.
[[nodiscard]] IdEncoding parse_format(std::string_view text);
// --rollback values; throws UsageError.
[[nodiscard]] RollbackPolicy parse_rollback(std::string_view text);

// "1ms", "10ms", "1s", "100us", "7ns": the largest unit that divides `d` exactly.
[[nodiscard]] std::string format_duration(Nanos d);
// An integer when `value` is whole, else up to 3 decimals.
[[nodiscard]] std::string format_number(double value);

// Writes to a file descriptor through a large buffer with write(2): no locale, no per-line
// flush. Remembers the first write error (errno) and drops everything after it.
class OutputBuffer {
 public:
  explicit OutputBuffer(int fd, std::size_t capacity = std::size_t{1} << 20);
  OutputBuffer(const OutputBuffer&) = delete;
  OutputBuffer& operator=(const OutputBuffer&) = delete;
  ~OutputBuffer();  // flushes (errors ignored: call flush() to see them)

  void append(std::string_view text);
  // One ID in `encoding` followed by a newline.
  void append_id_line(std::uint64_t id, Encoding encoding);
  // One ID as `codec` writes it followed by a newline.
  void append_id_line(std::uint64_t id, const IdTextCodec& codec);
  // Writes out the buffer; returns false after any write error.
  bool flush();
  [[nodiscard]] int error() const noexcept { return error_; }

 private:
  void reserve(std::size_t n);

  int fd_;
  std::string buf_;
  std::size_t used_ = 0;
  int error_ = 0;
};

// Prints rows of cells to stdout, each column padded to its widest cell (two spaces between).
void print_rows(const std::vector<std::vector<std::string>>& rows);

}  // namespace flurry::cli

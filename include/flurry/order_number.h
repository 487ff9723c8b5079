// Order numbers: a unique ID encrypted with FF1 (flurry/ff1.h) into a fixed number of decimal
// digits or Crockford base32 symbols, with a key version and a check character, optionally
// behind a prefix and grouped for display. Reversible only with the key. The design, what each
// check character catches and what a competitor can learn are in docs/order-numbers.md.
//
//   [prefix] [sep] version payload check      e.g. 182809555899904039837, or grouped for display
//                                             1828095-5589990-4039837,
//                                             261125-1828095-5589990-4039837
//
// - prefix:  none; a literal ("ORD", 1-8 characters of 0-9 and A-Z); or the ID's own date as
//            YYMMDD (UTC, or a fixed offset from UTC), from a function the caller passes that
//            maps an ID to Unix milliseconds (snowflake layouts differ; segment IDs have none).
// - version: one character naming the key (digits: 0-9; base32: a Crockford symbol), so keys
//            can be rotated: new numbers use the active key, old ones still decode.
// - payload: FF1(key, STR_radix^n(id)): n digits or base32 symbols. radix^n must cover every ID
//            of the source (max_id + 1 values) and NIST's minimum domain (10^6).
// - check:   Luhn or Damm (digits), Crockford's mod 37 (base32), or none; it covers the version
//            and the payload. A date prefix is checked against the decoded ID's date, a literal
//            one against the literal.
//
// Decoding ignores the separator, '-' and ' ' anywhere; base32 parses in either case with
// Crockford's aliases (I and L read as 1, O as 0). It rejects, with INVALID_ARGUMENT (reason
// BAD_INPUT) and a message that says which and at which position (1-based, in the text as
// given): a wrong length, a bad character, a wrong prefix, a wrong check character, an unknown
// key version, a payload that decrypts to no ID of the source (above max_id: a mistyped or forged
// number; FF1 permutes radix^n values, and only max_id + 1 of them are IDs), and a date prefix
// that is not the ID's date.
//
// Keys: an OrderKeySet maps version characters to AES keys (16, 24 or 32 bytes). Key bytes are
// never logged, printed by to_string() or put into an error message (errors name the line, the
// entry or the variable, never their content), and are wiped (OPENSSL_cleanse) when the key set
// is destroyed. The format keeps only OpenSSL's cipher contexts, which OpenSSL wipes when freed.
//
// Thread safety: OrderKeySet is a value (no concurrent mutation). An OrderNumberFormat is
// immutable after create(): encode and decode may run on any number of threads at once (the
// IdTimeFunction must then be thread-safe too). encode_to and a successful decode allocate
// nothing once each thread has used the format (see ff1.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "flurry/ff1.h"
#include "flurry/status.h"

namespace flurry {

// The characters of the payload.
enum class OrderAlphabet {
  kDigits,  // 0-9
  kBase32,  // Crockford: 0-9 A-Z without I, L, O, U
};

enum class OrderCheck {
  kNone,
  kLuhn,   // digits: misses 09 <-> 90 transpositions
  kDamm,   // digits: every single error and adjacent transposition
  kMod37,  // base32: Crockford's check symbol, one of 37 (* ~ $ = U beyond the 32 symbols)
};

enum class OrderPrefix { kNone, kLiteral, kDate };

// Maps an ID to the Unix time (milliseconds) it was issued at, for a date prefix; an error for
// an ID that holds no valid time. Called on every encode and decode of a dated format.
using IdTimeFunction = std::function<Result<std::int64_t>(std::uint64_t id)>;

// AES keys by version character. Load one with parse(), load_file() or from_env().
//
// Text form (a file, or an environment variable; entries end at a newline or ';'):
//
//   # comment lines and blank entries are ignored
//   1 = 2b7e151628aed2a6abf7158809cf4f3c            VERSION = KEY
//   2 = 000102030405060708090a0b0c0d0e0f10111213...
//   active = 2                                       optional
//
// VERSION is one character: 0-9 or a Crockford letter (A-Z without I, L, O, U; lower case is
// read as upper case). KEY is 32, 48 or 64 hex digits (AES-128/192/256). `active` names the key
// new numbers are encoded with; without it, the key on the last key entry is active, so rotating
// is appending a line. Errors: no keys, a malformed entry, bad hex, a wrong key length, a
// duplicate version, an unknown active version, each naming the source and line.
class OrderKeySet {
 public:
  static constexpr std::size_t kMaxKeys = 32;

  OrderKeySet();
  OrderKeySet(OrderKeySet&&) noexcept;
  OrderKeySet& operator=(OrderKeySet&&) noexcept;
  OrderKeySet(const OrderKeySet&) = delete;
  OrderKeySet& operator=(const OrderKeySet&) = delete;
  ~OrderKeySet();  // wipes the key bytes

  // Parses the text form. `source` names it in errors ("key file /etc/flurry/keys").
  [[nodiscard]] static Result<OrderKeySet> parse(std::string_view text, std::string_view source);
  // Reads and parses a file (its copy of the content is wiped afterwards). INVALID_ARGUMENT for
  // content errors, UNAVAILABLE (reason IO) when the file cannot be read.
  [[nodiscard]] static Result<OrderKeySet> load_file(const std::filesystem::path& path);
  // Parses the environment variable `name`. INVALID_ARGUMENT when it is unset or malformed.
  [[nodiscard]] static Result<OrderKeySet> from_env(const char* name);

  // Adds a key; it becomes the active one. INVALID_ARGUMENT for a bad version character, a
  // duplicate, a key of another length than 16, 24 or 32 bytes, or more than kMaxKeys keys.
  [[nodiscard]] Status add(char version, std::span<const std::uint8_t> key);
  // INVALID_ARGUMENT when no key has that version.
  [[nodiscard]] Status set_active(char version);

  [[nodiscard]] std::size_t size() const noexcept;
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  // The active version, or '\0' when empty.
  [[nodiscard]] char active() const noexcept;
  // The versions in the order they were added, e.g. "12".
  [[nodiscard]] std::string versions() const;
  // "order keys: versions 1, 2 (active 2)": never any key bytes.
  [[nodiscard]] std::string to_string() const;

 private:
  friend class OrderNumberFormat;
  struct Keys;  // key_set.cc
  std::unique_ptr<Keys> keys_;
};

struct OrderNumberOptions {
  OrderAlphabet alphabet = OrderAlphabet::kDigits;
  OrderCheck check = OrderCheck::kDamm;
  // The largest ID the source can issue; IDs above it are refused and payloads that decrypt
  // above it are rejected. 2^63 - 1 for a 63-bit snowflake layout; a segment tag's own limit.
  std::uint64_t max_id = (std::uint64_t{1} << 63) - 1;
  // Payload numerals; 0 picks the fewest that cover max_id (and NIST's minimum domain): 19
  // digits or 13 base32 symbols for 63-bit IDs. A length that cannot cover max_id is refused.
  std::size_t payload_length = 0;

  OrderPrefix prefix = OrderPrefix::kNone;
  std::string literal;  // kLiteral: 1-8 characters of 0-9 and A-Z (read in either case)
  // kDate: minutes east of UTC for the date (-1080..1080; e.g. 480 for UTC+8). Fixed offsets
  // only: a zone with daylight saving time would give one ID two possible dates.
  int utc_offset_minutes = 0;
  IdTimeFunction unix_ms;  // kDate: required

  // Display grouping: separator after every group_size body characters (0: none), and between
  // a prefix and the body. The separator must be one of "-_ ./".
  std::size_t group_size = 0;
  char separator = '-';

  // FF1 tweak (public, up to 256 bytes): numbers of formats with different tweaks are unrelated
  // even under the same key.
  std::string tweak;

  // Optional: whether a decoded ID (at most max_id) is one the source can have issued, e.g. a
  // snowflake ID whose time is not in the future. decode() refuses an ID it returns an error for
  // (kind kNoSuchId, with its message). A check character is public arithmetic, not
  // authentication: this is what makes a forged number with a valid check character fail.
  std::function<Status(std::uint64_t id)> plausible;
};

// What decode() found wrong, for callers that answer with more than the message (an HTTP error
// body, a form that marks the character).
struct OrderDecodeError {
  enum class Kind {
    kNone,       // decoded
    kLength,     // wrong number of characters (separators not counted)
    kCharacter,  // a character that cannot stand at its position
    kPrefix,     // the literal prefix differs
    kCheck,      // the check character does not match
    kVersion,    // no key has the version character
    kNoSuchId,   // the payload decrypts above max_id or to an ID the source cannot have issued
                 // (OrderNumberOptions::plausible): mistyped, forged, or another key's
    kDate,       // the date prefix is not the decoded ID's date
  };
  Kind kind = Kind::kNone;
  // 1-based position of the offending character in the text as given (separators counted);
  // 0 when the error is not about one character (kLength, kNoSuchId).
  std::size_t position = 0;
};
// "length", "character", "prefix", "check", "version", "no_such_id", "date" ("none" for kNone).
[[nodiscard]] std::string_view to_string(OrderDecodeError::Kind kind) noexcept;

class OrderNumberFormat {
 public:
  // Checks the options against each other and against the keys (each version must be a
  // character of the alphabet) and makes one FF1 instance per key. INVALID_ARGUMENT, saying
  // which option and why, e.g. a payload length that cannot cover max_id.
  [[nodiscard]] static Result<OrderNumberFormat> create(const OrderNumberOptions& options,
                                                        const OrderKeySet& keys);

  OrderNumberFormat(OrderNumberFormat&&) noexcept;
  OrderNumberFormat& operator=(OrderNumberFormat&&) noexcept;
  ~OrderNumberFormat();

  // The order number of `id` under the active key. INVALID_ARGUMENT for an ID above max_id or
  // (dated formats) an ID whose time the IdTimeFunction refuses or that falls outside
  // 2000..2099.
  [[nodiscard]] Result<std::string> encode(std::uint64_t id) const;
  // The same text into `out` (at least length() characters); returns the characters written.
  // No allocation on success.
  [[nodiscard]] Result<std::size_t> encode_to(std::uint64_t id, std::span<char> out) const;
  // The ID back, or one of the errors in the header comment; `error`, when given, is set to what
  // was wrong and where (kNone on success).
  [[nodiscard]] Result<std::uint64_t> decode(std::string_view text,
                                             OrderDecodeError* error = nullptr) const;

  // Characters of every encoded number, separators included.
  [[nodiscard]] std::size_t length() const noexcept;
  [[nodiscard]] std::size_t payload_length() const noexcept;
  [[nodiscard]] char active_version() const noexcept;
  // One line, e.g. "19 digits + Damm check, key versions 1, 2 (active 2), max ID
  // 9223372036854775807"; never key bytes.
  [[nodiscard]] std::string describe() const;

  struct Impl;  // order_number.cc

 private:
  explicit OrderNumberFormat(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flurry

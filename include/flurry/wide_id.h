// Wide (128-bit) text forms of a flurry ID: RFC 9562's UUIDv7 and ULID.
//
// Per-process UUIDv7 and ULID generators fill most of the 128 bits at random: two of them collide
// only with small probability. flurry writes its own 64-bit IDs in these forms instead, so the
// result is unique by construction (the 64-bit ID inside it is) and reversible (decode returns the
// ID exactly):
//
//   unix_ts_ms  48 bits  epoch + time x unit, in whole Unix milliseconds
//   sub-ms       S bits  only for units finer than 1 ms: which tick within that millisecond
//   fields       N bits  the non-time fields (clock, node, seq) in layout order, most significant
//                        first: the low N bits of the ID as they are
//   random       R bits  from a CSPRNG (getrandom(2)), different at every encoding
//
// UUIDv7 puts 4 version bits (0111) after unix_ts_ms and 2 variant bits (10) after the next 12, so
// S + N + R = 74; ULID has no such bits, but uses the same S + N (at most 74, so a layout either
// fits both forms or neither) and R = 80 - S - N. Because the time comes first and the fields keep
// their order, the bytes (and the lower-case UUID text, and the ULID text) sort like the 64-bit
// IDs. The default layout (time:41@1ms,node:10,seq:12) leaves 52 random bits in a UUIDv7.
//
// Refused layouts (WideIdCodec::create, INVALID_ARGUMENT / BAD_INPUT naming the reason): a time
// unit coarser than 1 ms (the millisecond alone would not order two ticks' IDs, and a time field
// of seconds cannot be read back from unix_ts_ms alone), S + N above 74 bits, an epoch before
// 1970, a time field that ends past 48 bits of Unix milliseconds (year 10889).
//
// Everything here is thread-safe. A WideIdCodec is an immutable value made once per layout and
// format: holding one is the proof that the layout fits, so writers never fail.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "flurry/clock.h"
#include "flurry/codec.h"
#include "flurry/layout.h"
#include "flurry/status.h"

namespace flurry {

enum class WideFormat { kUuidv7, kUlid };

struct WideFormatInfo {
  WideFormat format;
  std::string_view name;         // what to_string() returns and parse_id_encoding() accepts
  std::string_view description;  // one line, for help texts
};

// The wide formats, in documentation order. They follow kEncodings (codec.h) wherever every
// encoding is listed.
inline constexpr std::array<WideFormatInfo, 2> kWideFormats = {{
    {WideFormat::kUuidv7, "uuidv7", "RFC 9562 UUIDv7, 36 characters, sorts like the number"},
    {WideFormat::kUlid, "ulid", "ULID, 26 Crockford base32 characters, sorts like the number"},
}};

// "uuidv7" or "ulid".
[[nodiscard]] std::string_view to_string(WideFormat format) noexcept;

// An encoding as a caller names it (a CLI --format, HTTP's `encoding`, gRPC's Encoding): one of
// the 64-bit encodings (codec.h, written the same whatever the layout) or a wide format (which
// needs a WideIdCodec for the layout).
class IdEncoding {
 public:
  constexpr IdEncoding(Encoding encoding) noexcept : encoding_(encoding) {}  // NOLINT: implicit
  constexpr IdEncoding(WideFormat wide) noexcept : wide_(wide) {}            // NOLINT: implicit

  [[nodiscard]] constexpr bool is_wide() const noexcept { return wide_.has_value(); }
  // The 64-bit encoding; meaningful only when !is_wide().
  [[nodiscard]] constexpr Encoding encoding() const noexcept { return encoding_; }
  // The wide format; only when is_wide().
  [[nodiscard]] constexpr WideFormat wide() const noexcept { return *wide_; }
  // The name parse_id_encoding() accepts: "dec", "hex", ..., "uuidv7", "ulid".
  [[nodiscard]] std::string_view name() const noexcept;

  friend constexpr bool operator==(const IdEncoding&, const IdEncoding&) = default;

 private:
  Encoding encoding_ = Encoding::kDecimal;
  std::optional<WideFormat> wide_;
};

// The one parser of encoding names: a name or alias of kEncodings, or a name of kWideFormats
// (case-sensitive). INVALID_ARGUMENT / BAD_INPUT naming every accepted name otherwise.
[[nodiscard]] Result<IdEncoding> parse_id_encoding(std::string_view name);
// Every accepted name for messages and help texts: "dec, hex, base32, base62, uuidv7 or ulid";
// with `aliases`, each alias after its name.
[[nodiscard]] std::string id_encoding_names(bool aliases = false);

// The wide format `text` has the form of, judged by its shape alone: 36 characters with hyphens
// at positions 8, 13, 18 and 23 is a UUID, 26 characters without hyphens a ULID (no 64-bit
// encoding is that long). nullopt otherwise. Does not validate the text: decode() does.
[[nodiscard]] std::optional<WideFormat> detect_wide_format(std::string_view text) noexcept;

class WideIdCodec {
 public:
  static constexpr std::size_t kUuidTextLength = 36;
  static constexpr std::size_t kUlidTextLength = 26;
  static constexpr std::size_t kMaxTextLength = kUuidTextLength;
  // S + N may use at most this many bits (UUIDv7's rand_a and rand_b).
  static constexpr int kMaxPayloadBits = 74;

  // Checks that `layout`'s IDs can be written in `format` and precomputes how. INVALID_ARGUMENT
  // (BAD_INPUT) with a message naming the format, the layout and the reason otherwise (see the
  // refused layouts above).
  [[nodiscard]] static Result<WideIdCodec> create(const Layout& layout, WideFormat format);

  [[nodiscard]] WideFormat format() const noexcept { return format_; }
  // 36 for UUIDv7, 26 for ULID.
  [[nodiscard]] std::size_t text_length() const noexcept;
  // R: the bits filled at random in each encoding (52 for UUIDv7 on the default layout).
  [[nodiscard]] int random_bits() const noexcept { return random_bits_; }
  // S: the bits that hold the tick within its millisecond (0 for a 1 ms unit).
  [[nodiscard]] int sub_ms_bits() const noexcept { return sub_ms_bits_; }

  // Writes `id` (an ID of the layout: no bits set above its width, which are ignored) as
  // text_length() characters to `out`, the random bits from a per-thread buffer filled by
  // getrandom(2); returns the end of what it wrote. UUIDv7 in lower case. No allocation: for
  // response bodies.
  char* write(char* out, std::uint64_t id) const noexcept;
  // The same with the random bits given: the low random_bits() bits of `random` (hi, lo) are
  // used, the rest ignored. For tests and reproducible output.
  char* write(char* out, std::uint64_t id, std::uint64_t random_hi,
              std::uint64_t random_lo) const noexcept;
  [[nodiscard]] std::string encode(std::uint64_t id) const;

  // Parses text in this format and returns the ID inside it exactly; the random bits are
  // ignored. Lenient on case (and, for ULID, Crockford's I/L -> 1, O -> 0); INVALID_ARGUMENT /
  // BAD_INPUT for a wrong length, a misplaced hyphen, a bad character (naming it and its
  // position), UUID version or variant bits other than 7 and 10, a ULID above 128 bits, a
  // time before the layout's epoch or past its time field's end, and a sub-millisecond tick
  // that is out of range.
  [[nodiscard]] Result<std::uint64_t> decode(std::string_view text) const;

 private:
  WideIdCodec() = default;
  // What goes into the wide form besides the random bits: the Unix millisecond, the tick within
  // it (S bits) and the fields (N bits).
  struct Parts {
    std::uint64_t unix_ms = 0;
    std::uint64_t sub_ms = 0;
    std::uint64_t fields = 0;
  };
  [[nodiscard]] Parts split(std::uint64_t id) const noexcept;
  // The inverse of split, checking what outside text may get wrong (the message quotes `text`).
  [[nodiscard]] Result<std::uint64_t> join(std::string_view text, const Parts& parts) const;
  [[nodiscard]] Status bad_text(std::string_view text, std::string_view why) const;

  WideFormat format_ = WideFormat::kUuidv7;
  std::string layout_text_;        // for messages
  std::int64_t epoch_ms_ = 0;      // Unix milliseconds of the layout's epoch
  std::int64_t unit_ns_ = 0;       // the time unit, at most 1 ms
  std::int64_t ticks_per_ms_ = 1;  // ceil(1 ms / unit): ticks that can share one millisecond
  int time_bits_ = 0;
  int field_bits_ = 0;  // N: the bits below the time field
  int sub_ms_bits_ = 0;
  int random_bits_ = 0;
};

// The text form of IDs for one layout and encoding, made where a request's encoding and the
// layout meet (the edge), so nothing below re-checks: a 64-bit encoding, or a WideIdCodec.
class IdTextCodec {
 public:
  // The longest text write() produces.
  static constexpr std::size_t kMaxTextLength = WideIdCodec::kMaxTextLength;

  // A 64-bit encoding always fits; a wide format fails as WideIdCodec::create does.
  [[nodiscard]] static Result<IdTextCodec> create(const Layout& layout, IdEncoding encoding);
  // A 64-bit encoding needs no layout.
  [[nodiscard]] static IdTextCodec of(Encoding encoding) noexcept { return IdTextCodec(encoding); }

  [[nodiscard]] IdEncoding encoding() const noexcept { return encoding_; }
  // The longest text write() produces in this encoding (kMaxEncodedIdLength for the 64-bit
  // ones): what a response body reserves per ID.
  [[nodiscard]] std::size_t max_length() const noexcept {
    return wide_ ? wide_->text_length() : kMaxEncodedIdLength;
  }
  // Writes `id` to `out` (room for max_length() characters); returns the end. No allocation.
  char* write(char* out, std::uint64_t id) const noexcept;
  [[nodiscard]] std::string encode(std::uint64_t id) const;
  // The ID in `text`, as decode_id (codec.h) or WideIdCodec::decode.
  [[nodiscard]] Result<std::uint64_t> decode(std::string_view text) const;

 private:
  explicit IdTextCodec(IdEncoding encoding) noexcept : encoding_(encoding) {}
  IdEncoding encoding_;
  std::optional<WideIdCodec> wide_;
};

// Every encoding for one layout, made once (when a server starts): a request's `encoding` name
// becomes its codec with one lookup, and a wide format the layout cannot carry is refused with
// the message WideIdCodec::create gave, without checking the layout again per request.
class IdTextCodecs {
 public:
  explicit IdTextCodecs(const Layout& layout);

  // The codec of `encoding`, or the layout's refusal (INVALID_ARGUMENT / BAD_INPUT). The
  // pointer lives as long as this object.
  [[nodiscard]] Result<const IdTextCodec*> get(IdEncoding encoding) const;
  // parse_id_encoding(name), then get(). Unknown names and refusals are INVALID_ARGUMENT /
  // BAD_INPUT, the message prefixed with `what` (e.g. `parameter "encoding": `).
  [[nodiscard]] Result<const IdTextCodec*> parse(std::string_view name,
                                                 std::string_view what = {}) const;

 private:
  std::array<IdTextCodec, kEncodings.size()> narrow_;
  std::array<Result<IdTextCodec>, kWideFormats.size()> wide_;
};

}  // namespace flurry

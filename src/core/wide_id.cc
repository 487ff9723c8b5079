#include "flurry/wide_id.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/quote.h"
#include "digits.h"
#include "flurry/timefmt.h"

namespace flurry {
namespace {

__extension__ using U128 = unsigned __int128;  // GCC/Clang; -Wpedantic needs the marker
__extension__ using I128 = __int128;

using internal::kBase32Alphabet;
using internal::kBase32Table;
using internal::kHexDigits;
using internal::kHexTable;
using internal::quote;

constexpr std::int64_t kNanosPerMs = 1'000'000;
constexpr int kUnixMsBits = 48;
constexpr int kUuidRandBBits = 62;  // the payload bits after the variant
constexpr int kUlidPayloadBits = 80;
constexpr std::array<std::size_t, 4> kUuidHyphens = {8, 13, 18, 23};

constexpr U128 mask128(int bits) noexcept {
  return bits >= 128 ? ~U128{0} : (U128{1} << bits) - 1;
}
constexpr std::uint64_t mask64(int bits) noexcept {
  return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

// --- The CSPRNG: getrandom(2) into a per-thread buffer, refilled in blocks. ---

void fill_random(unsigned char* out, std::size_t n) noexcept {
  while (n > 0) {
    const ssize_t got = ::getrandom(out, n, 0);
    if (got > 0) {
      out += got;
      n -= static_cast<std::size_t>(got);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    // Kernels before 3.17 have no getrandom: the same pool through /dev/urandom.
    const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && n > 0) {
      const ssize_t r = ::read(fd, out, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      out += r;
      n -= static_cast<std::size_t>(r);
    }
    if (fd >= 0) ::close(fd);
    // Neither source works: writing predictable bits where callers expect random ones would be
    // silent, and a writer has no error to return.
    if (n > 0) std::abort();
  }
}

struct RandomBuffer {
  std::array<std::uint64_t, 128> words;  // 1 KiB: one getrandom call per 64 encodings
  std::size_t next = words.size();

  std::uint64_t take() noexcept {
    if (next == words.size()) {
      fill_random(reinterpret_cast<unsigned char*>(words.data()), sizeof(words));
      next = 0;
    }
    return words[next++];
  }
};

thread_local RandomBuffer t_random;

// --- Text. ---

char* write_uuid(char* out, U128 v) noexcept {
  std::size_t hyphen = 0;
  for (int nibble = 31; nibble >= 0; --nibble) {
    if (hyphen < kUuidHyphens.size() && (31 - nibble) + hyphen == kUuidHyphens[hyphen]) {
      *out++ = '-';
      ++hyphen;
    }
    *out++ = kHexDigits[static_cast<std::size_t>((v >> (4 * nibble)) & 0xf)];
  }
  return out;
}

char* write_ulid(char* out, U128 v) noexcept {
  // 26 symbols of 5 bits hold 130: the first carries the top 3.
  for (int symbol = 25; symbol >= 0; --symbol) {
    *out++ = kBase32Alphabet[static_cast<std::size_t>((v >> (5 * symbol)) & 0x1f)];
  }
  return out;
}

std::string_view shape_of(WideFormat format) noexcept {
  return format == WideFormat::kUuidv7 ? "36 characters, 8-4-4-4-12 hex digits with hyphens"
                                       : "26 characters of Crockford's base32";
}

}  // namespace

std::string_view to_string(WideFormat format) noexcept {
  for (const WideFormatInfo& f : kWideFormats) {
    if (f.format == format) return f.name;
  }
  return "unknown";
}

std::string_view IdEncoding::name() const noexcept {
  return wide_ ? to_string(*wide_) : to_string(encoding_);
}

Result<IdEncoding> parse_id_encoding(std::string_view name) {
  for (const WideFormatInfo& f : kWideFormats) {
    if (name == f.name) return IdEncoding(f.format);
  }
  Result<Encoding> encoding = parse_encoding(name);
  if (encoding.ok()) return IdEncoding(*encoding);
  return InvalidArgument("unknown ID encoding " + quote(name) + ": expected " +
                         id_encoding_names(true));
}

std::string id_encoding_names(bool aliases) {
  std::vector<std::string_view> names;
  for (const EncodingInfo& e : kEncodings) {
    names.push_back(e.name);
    if (aliases && !e.alias.empty()) names.push_back(e.alias);
  }
  for (const WideFormatInfo& f : kWideFormats) names.push_back(f.name);
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

std::optional<WideFormat> detect_wide_format(std::string_view text) noexcept {
  if (text.size() == WideIdCodec::kUuidTextLength) {
    for (const std::size_t pos : kUuidHyphens) {
      if (text[pos] != '-') return std::nullopt;
    }
    return WideFormat::kUuidv7;
  }
  if (text.size() == WideIdCodec::kUlidTextLength && text.find('-') == std::string_view::npos) {
    return WideFormat::kUlid;
  }
  return std::nullopt;
}

// --- WideIdCodec. ---

Result<WideIdCodec> WideIdCodec::create(const Layout& layout, WideFormat format) {
  const auto refuse = [&](const std::string& why) {
    return InvalidArgument("layout " + quote(layout.to_string(), 200) + " cannot be written as " +
                           std::string(to_string(format)) + ": " + why);
  };
  const std::int64_t unit_ns = layout.unit().count();
  if (unit_ns > kNanosPerMs) {
    return refuse(
        "its time unit is coarser than 1 ms (unix_ts_ms would not order two ticks' IDs nor give "
        "their time back); use a layout with a unit of 1 ms or finer");
  }
  WideIdCodec c;
  c.format_ = format;
  c.layout_text_ = layout.to_string();
  c.unit_ns_ = unit_ns;
  c.ticks_per_ms_ = (kNanosPerMs + unit_ns - 1) / unit_ns;
  c.time_bits_ = layout.time_field().bits;
  c.field_bits_ = layout.total_bits() - c.time_bits_;
  // Bits to tell apart the ticks that share one millisecond: 0..ticks_per_ms-1.
  while ((std::int64_t{1} << c.sub_ms_bits_) < c.ticks_per_ms_) ++c.sub_ms_bits_;
  const int payload = c.sub_ms_bits_ + c.field_bits_;
  if (payload > kMaxPayloadBits) {
    std::string why = "its fields below time need " + std::to_string(c.field_bits_) + " bits";
    if (c.sub_ms_bits_ > 0) {
      why += " and its sub-millisecond ticks " + std::to_string(c.sub_ms_bits_) + " more";
    }
    return refuse(why + ", above the " + std::to_string(kMaxPayloadBits) +
                  " bits a UUIDv7 or ULID has beside its 48-bit millisecond");
  }
  const auto epoch_ns = layout.epoch().time_since_epoch().count();
  if (epoch_ns < 0) return refuse("its epoch lies before 1970 (unix_ts_ms is unsigned)");
  c.epoch_ms_ = epoch_ns / kNanosPerMs;  // a whole millisecond (Layout::parse checks)
  const I128 last_ms = static_cast<I128>(c.epoch_ms_) +
                       (static_cast<I128>(mask64(c.time_bits_)) * unit_ns) / kNanosPerMs;
  if (last_ms > static_cast<I128>(mask64(kUnixMsBits))) {
    return refuse("its time field runs past the 48-bit Unix millisecond (year 10889)");
  }
  c.random_bits_ = (format == WideFormat::kUuidv7 ? kMaxPayloadBits : kUlidPayloadBits) - payload;
  return c;
}

std::size_t WideIdCodec::text_length() const noexcept {
  return format_ == WideFormat::kUuidv7 ? kUuidTextLength : kUlidTextLength;
}

WideIdCodec::Parts WideIdCodec::split(std::uint64_t id) const noexcept {
  const std::uint64_t ticks = (id >> field_bits_) & mask64(time_bits_);
  const I128 since_epoch_ns = static_cast<I128>(ticks) * unit_ns_;
  const I128 ms = since_epoch_ns / kNanosPerMs;
  // The first tick that falls in millisecond `ms`: ceil(ms * 1 ms / unit).
  const I128 first_tick = (ms * kNanosPerMs + unit_ns_ - 1) / unit_ns_;
  Parts p;
  p.unix_ms = static_cast<std::uint64_t>(epoch_ms_ + static_cast<std::int64_t>(ms));
  p.sub_ms = ticks - static_cast<std::uint64_t>(first_tick);
  p.fields = id & mask64(field_bits_);
  return p;
}

Status WideIdCodec::bad_text(std::string_view text, std::string_view why) const {
  return InvalidArgument(std::string(to_string(format_)) + " ID " + quote(text) + ": " +
                         std::string(why));
}

Result<std::uint64_t> WideIdCodec::join(std::string_view text, const Parts& p) const {
  const std::int64_t unix_ms = static_cast<std::int64_t>(p.unix_ms);  // < 2^48
  // A 48-bit millisecond can lie past what a TimePoint holds (the year 2262).
  const auto time_text = [](std::int64_t ms) { return format_unix_ms(ms); };
  if (unix_ms < epoch_ms_) {
    return bad_text(text, "its time " + time_text(unix_ms) + " lies before the layout's epoch " +
                              time_text(epoch_ms_) + " (layout " + quote(layout_text_, 200) + ")");
  }
  const I128 ms = unix_ms - epoch_ms_;
  const I128 first_tick = (ms * kNanosPerMs + unit_ns_ - 1) / unit_ns_;
  const I128 ticks = first_tick + static_cast<I128>(p.sub_ms);
  if (ticks > static_cast<I128>(mask64(time_bits_))) {
    return bad_text(text, "its time " + time_text(unix_ms) +
                              " lies past the end of the layout's time field (layout " +
                              quote(layout_text_, 200) + ")");
  }
  // Each tick belongs to one millisecond: a sub-millisecond index past the last tick of this one
  // would name a tick of the next.
  if (p.sub_ms >= static_cast<std::uint64_t>(ticks_per_ms_) ||
      (ticks * unit_ns_) / kNanosPerMs != ms) {
    return bad_text(text, "its sub-millisecond tick " + std::to_string(p.sub_ms) +
                              " is out of range for that millisecond");
  }
  return (static_cast<std::uint64_t>(ticks) << field_bits_) | p.fields;
}

char* WideIdCodec::write(char* out, std::uint64_t id) const noexcept {
  // Only as many words as there are random bits: the default layout's 52 take one.
  const std::uint64_t lo = t_random.take();
  const std::uint64_t hi = random_bits_ > 64 ? t_random.take() : 0;
  return write(out, id, hi, lo);
}

char* WideIdCodec::write(char* out, std::uint64_t id, std::uint64_t random_hi,
                         std::uint64_t random_lo) const noexcept {
  const Parts p = split(id);
  const U128 random = ((static_cast<U128>(random_hi) << 64) | random_lo) & mask128(random_bits_);
  const U128 payload =
      (((static_cast<U128>(p.sub_ms) << field_bits_) | p.fields) << random_bits_) | random;
  const U128 ms = static_cast<U128>(p.unix_ms) << 80;
  if (format_ == WideFormat::kUlid) return write_ulid(out, ms | payload);
  // unix_ts_ms(48) | ver(4) = 0111 | rand_a(12) | var(2) = 10 | rand_b(62)
  const U128 v = ms | (U128{0x7} << 76) | ((payload >> kUuidRandBBits) << 64) | (U128{0x2} << 62) |
                 (payload & mask128(kUuidRandBBits));
  return write_uuid(out, v);
}

std::string WideIdCodec::encode(std::uint64_t id) const {
  std::array<char, kMaxTextLength> buf;
  return std::string(buf.data(), write(buf.data(), id));
}

Result<std::uint64_t> WideIdCodec::decode(std::string_view text) const {
  const std::size_t want = text_length();
  if (text.size() != want) {
    return bad_text(
        text, (text.empty() ? std::string("empty") : std::to_string(text.size()) + " characters") +
                  ", expected " + std::string(shape_of(format_)));
  }
  const auto bad_char = [&](std::size_t pos) {
    return bad_text(text, "bad character " + internal::quote_char(text[pos]) + " at position " +
                              std::to_string(pos) + " (expected " + std::string(shape_of(format_)) +
                              ")");
  };
  U128 v = 0;
  U128 payload = 0;
  if (format_ == WideFormat::kUuidv7) {
    std::size_t hyphen = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (hyphen < kUuidHyphens.size() && i == kUuidHyphens[hyphen]) {
        if (text[i] != '-') {
          return bad_text(text, "expected a hyphen at position " + std::to_string(i) + ", found " +
                                    internal::quote_char(text[i]));
        }
        ++hyphen;
        continue;
      }
      const int d = kHexTable[static_cast<unsigned char>(text[i])];
      if (d < 0) return bad_char(i);
      v = (v << 4) | static_cast<U128>(d);
    }
    const auto version = static_cast<unsigned>((v >> 76) & 0xf);
    if (version != 7) {
      return bad_text(text, "version " + std::to_string(version) +
                                " (the digit at position 14), not 7: not a UUIDv7");
    }
    const auto variant = static_cast<unsigned>((v >> 62) & 0x3);
    if (variant != 0x2) {
      return bad_text(text, std::string("variant bits ") + (variant & 2 ? "1" : "0") +
                                (variant & 1 ? "1" : "0") +
                                " (the digit at position 19 must be 8, 9, a or b), not RFC "
                                "9562's 10");
    }
    payload = (((v >> 64) & 0xfff) << kUuidRandBBits) | (v & mask128(kUuidRandBBits));
  } else {
    for (std::size_t i = 0; i < text.size(); ++i) {
      const int d = kBase32Table[static_cast<unsigned char>(text[i])];
      if (d < 0) return bad_char(i);
      if (i == 0 && d > 7) {
        return bad_text(text, "overflows 128 bits (the first character must be 0-7, found " +
                                  internal::quote_char(text[0]) + ")");
      }
      v = (v << 5) | static_cast<U128>(d);
    }
    payload = v & mask128(kUlidPayloadBits);
  }
  const U128 kept = payload >> random_bits_;
  Parts p;
  p.unix_ms = static_cast<std::uint64_t>(v >> 80);
  p.fields = static_cast<std::uint64_t>(kept & mask128(field_bits_));
  p.sub_ms = static_cast<std::uint64_t>(kept >> field_bits_);
  return join(text, p);
}

// --- IdTextCodec. ---

Result<IdTextCodec> IdTextCodec::create(const Layout& layout, IdEncoding encoding) {
  IdTextCodec codec(encoding);
  if (encoding.is_wide()) {
    Result<WideIdCodec> wide = WideIdCodec::create(layout, encoding.wide());
    if (!wide.ok()) return wide.status();
    codec.wide_ = std::move(wide).value();
  }
  return codec;
}

char* IdTextCodec::write(char* out, std::uint64_t id) const noexcept {
  return wide_ ? wide_->write(out, id) : write_id(out, id, encoding_.encoding());
}

std::string IdTextCodec::encode(std::uint64_t id) const {
  std::array<char, kMaxTextLength> buf;
  return std::string(buf.data(), write(buf.data(), id));
}

Result<std::uint64_t> IdTextCodec::decode(std::string_view text) const {
  return wide_ ? wide_->decode(text) : decode_id(text, encoding_.encoding());
}

// --- IdTextCodecs. ---

namespace {

template <std::size_t... I>
std::array<IdTextCodec, sizeof...(I)> narrow_codecs(std::index_sequence<I...>) {
  return {IdTextCodec::of(kEncodings[I].encoding)...};
}

template <std::size_t... I>
std::array<Result<IdTextCodec>, sizeof...(I)> wide_codecs(const Layout& layout,
                                                          std::index_sequence<I...>) {
  return {IdTextCodec::create(layout, kWideFormats[I].format)...};
}

}  // namespace

IdTextCodecs::IdTextCodecs(const Layout& layout)
    : narrow_(narrow_codecs(std::make_index_sequence<kEncodings.size()>())),
      wide_(wide_codecs(layout, std::make_index_sequence<kWideFormats.size()>())) {}

Result<const IdTextCodec*> IdTextCodecs::get(IdEncoding encoding) const {
  if (encoding.is_wide()) {
    for (std::size_t i = 0; i < kWideFormats.size(); ++i) {
      if (kWideFormats[i].format != encoding.wide()) continue;
      if (!wide_[i].ok()) return wide_[i].status();
      return &*wide_[i];
    }
  } else {
    for (std::size_t i = 0; i < kEncodings.size(); ++i) {
      if (kEncodings[i].encoding == encoding.encoding()) return &narrow_[i];
    }
  }
  return InvalidArgument("unknown ID encoding " + std::string(encoding.name()));
}

Result<const IdTextCodec*> IdTextCodecs::parse(std::string_view name, std::string_view what) const {
  Result<IdEncoding> encoding = parse_id_encoding(name);
  Result<const IdTextCodec*> codec =
      encoding.ok() ? get(*encoding) : Result<const IdTextCodec*>(encoding.status());
  if (codec.ok() || what.empty()) return codec;
  return InvalidArgument(std::string(what) + codec.status().message());
}

}  // namespace flurry

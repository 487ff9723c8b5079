// OrderNumberFormat: checks of the options, encode, decode (order_number.h).
#include "flurry/order_number.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "check_char.h"
#include "core/quote.h"
#include "date_prefix.h"
#include "key_set_internal.h"

namespace flurry {
namespace {

using internal::quote;
using internal::quote_char;

__extension__ typedef unsigned __int128 u128;  // GCC and clang; __extension__: -Wpedantic

constexpr std::string_view kDigits = "0123456789";
constexpr std::string_view kBase32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
constexpr std::size_t kMaxLiteral = 8;
constexpr std::size_t kDateLength = 6;
constexpr int kMaxOffsetMinutes = 18 * 60;
constexpr std::string_view kSeparators = "-_ ./";
// Characters of a number without separators: the longest prefix, version, payload, check.
constexpr std::size_t kMaxChars = kMaxLiteral + 1 + Ff1::kMaxLength + 1;

// Byte -> value, or -1.
using Table = std::array<std::int8_t, 256>;

constexpr Table make_table(std::string_view alphabet) {
  Table t{};
  for (auto& v : t) v = -1;
  for (std::size_t i = 0; i < alphabet.size(); ++i) {
    const char c = alphabet[i];
    t[static_cast<unsigned char>(c)] = static_cast<std::int8_t>(i);
    if (c >= 'A' && c <= 'Z')
      t[static_cast<unsigned char>(c - 'A' + 'a')] = static_cast<std::int8_t>(i);
  }
  return t;
}

// Crockford: either case; I and L read as 1, O as 0.
constexpr Table make_crockford_table(std::string_view alphabet) {
  Table t = make_table(alphabet);
  for (const char c : {'I', 'i', 'L', 'l'}) t[static_cast<unsigned char>(c)] = 1;
  for (const char c : {'O', 'o'}) t[static_cast<unsigned char>(c)] = 0;
  return t;
}

constexpr Table kDigitTable = make_table(kDigits);
constexpr Table kBase32Table = make_crockford_table(kBase32);
constexpr Table kMod37Table = make_crockford_table(internal::kMod37Symbols);

char upper(char c) noexcept {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}

std::string_view check_name(OrderCheck c) noexcept {
  switch (c) {
    case OrderCheck::kNone:
      return "no";
    case OrderCheck::kLuhn:
      return "Luhn";
    case OrderCheck::kDamm:
      return "Damm";
    case OrderCheck::kMod37:
      return "mod 37";
  }
  return "?";
}

// STR_radix^n(value): n numerals, most significant first (leading zeros when n is larger than
// needed). Constant radixes let the compiler divide by multiplication.
template <unsigned kRadix>
void to_numerals(std::uint64_t value, std::uint8_t* out, std::size_t n) noexcept {
  for (std::size_t i = n; i-- > 0;) {
    out[i] = static_cast<std::uint8_t>(value % kRadix);
    value /= kRadix;
  }
}

// NUM_radix of n numerals, false when the value exceeds 2^64 - 1.
template <unsigned kRadix>
bool from_numerals(const std::uint8_t* in, std::size_t n, std::uint64_t& out) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (__builtin_mul_overflow(v, std::uint64_t{kRadix}, &v) ||
        __builtin_add_overflow(v, std::uint64_t{in[i]}, &v)) {
      return false;
    }
  }
  out = v;
  return true;
}

// The largest value n numerals of `radix` hold, saturated at 2^64 - 1.
std::uint64_t max_value(unsigned radix, std::size_t n) noexcept {
  u128 v = 1;
  for (std::size_t i = 0; i < n && v <= std::numeric_limits<std::uint64_t>::max(); ++i) v *= radix;
  return v > std::numeric_limits<std::uint64_t>::max() ? std::numeric_limits<std::uint64_t>::max()
                                                       : static_cast<std::uint64_t>(v - 1);
}

}  // namespace

struct OrderNumberFormat::Impl {
  OrderNumberOptions options;
  unsigned radix = 10;
  std::string_view alphabet;
  const Table* table = nullptr;
  std::size_t n = 0;           // payload numerals
  std::size_t prefix_len = 0;  // 0, the literal's or 6
  std::size_t body_len = 0;    // version + payload + check
  std::size_t chars = 0;       // prefix_len + body_len
  std::size_t display_len = 0;
  std::vector<Ff1> ff1;                  // by key index
  std::vector<char> versions;            // by key index
  std::array<std::int8_t, 128> index{};  // version character -> key index, or -1
  std::size_t active = 0;                // key index
  std::vector<std::uint8_t> tweak;

  [[nodiscard]] std::uint8_t check_value(const std::uint8_t* body, std::size_t len) const noexcept {
    const std::span<const std::uint8_t> s(body, len);
    switch (options.check) {
      case OrderCheck::kLuhn:
        return internal::luhn_check(s);
      case OrderCheck::kDamm:
        return internal::damm_check(s);
      case OrderCheck::kMod37:
        return internal::mod37_check(s);
      case OrderCheck::kNone:
        break;
    }
    return 0;
  }

  [[nodiscard]] char check_symbol(std::uint8_t v) const noexcept {
    return options.check == OrderCheck::kMod37 ? internal::kMod37Symbols[v] : kDigits[v];
  }

  [[nodiscard]] Result<std::array<char, 6>> date_of(std::uint64_t id) const {
    Result<std::int64_t> ms = options.unix_ms(id);
    if (!ms.ok()) return ms.status().with_prefix("the date of ID " + std::to_string(id));
    return internal::yymmdd(*ms, options.utc_offset_minutes);
  }

  void to_payload(std::uint64_t id, std::uint8_t* out) const noexcept {
    if (radix == 10) {
      to_numerals<10>(id, out, n);
    } else {
      to_numerals<32>(id, out, n);
    }
  }

  [[nodiscard]] bool from_payload(const std::uint8_t* in, std::uint64_t& out) const noexcept {
    return radix == 10 ? from_numerals<10>(in, n, out) : from_numerals<32>(in, n, out);
  }
};

Result<OrderNumberFormat> OrderNumberFormat::create(const OrderNumberOptions& options,
                                                    const OrderKeySet& keys) {
  auto impl = std::make_unique<Impl>();
  Impl& f = *impl;
  f.options = options;
  const bool digits = options.alphabet == OrderAlphabet::kDigits;
  f.radix = digits ? 10 : 32;
  f.alphabet = digits ? kDigits : kBase32;
  f.table = digits ? &kDigitTable : &kBase32Table;
  const std::string_view alphabet_name = digits ? "digits" : "base32";

  // The check character belongs to the alphabet.
  const bool check_ok =
      digits ? options.check != OrderCheck::kMod37
             : options.check == OrderCheck::kNone || options.check == OrderCheck::kMod37;
  if (!check_ok) {
    return InvalidArgument(std::string("order number format: a ") +
                           std::string(check_name(options.check)) +
                           " check character does not fit " + std::string(alphabet_name) +
                           " (digits take Luhn or Damm, base32 takes mod 37)");
  }

  // Keys: at least one, each version a character of the alphabet.
  if (keys.empty()) return InvalidArgument("order number format: the key set is empty");
  f.index.fill(-1);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const OrderKeySet::Keys::Entry& e = keys.keys_->entries[i];
    if ((*f.table)[static_cast<unsigned char>(e.version)] < 0) {
      return InvalidArgument("order number format: key version " + quote_char(e.version) +
                             " is not a character of " + std::string(alphabet_name) +
                             " order numbers (digits: versions 0-9)");
    }
    Result<Ff1> ff1 = Ff1::create(std::span(e.bytes.data(), e.size), f.radix);
    if (!ff1.ok()) {
      return ff1.status().with_prefix(std::string("order number format: key version '") +
                                      e.version + "'");
    }
    f.index[static_cast<unsigned char>(e.version)] = static_cast<std::int8_t>(i);
    f.versions.push_back(e.version);
    f.ff1.push_back(std::move(*ff1));
    if (e.version == keys.active()) f.active = i;
  }

  // The payload covers every ID of the source and NIST's minimum domain.
  const Ff1& any = f.ff1.front();
  if (options.payload_length == 0) {
    std::size_t n = any.min_length();
    while (n < Ff1::kMaxLength && max_value(f.radix, n) < options.max_id) ++n;
    f.n = n;
  } else {
    f.n = options.payload_length;
    if (Status st = any.check_length(f.n); !st.ok()) {
      return st.with_prefix("order number format: payload length");
    }
    if (max_value(f.radix, f.n) < options.max_id) {
      std::size_t need = f.n;
      while (max_value(f.radix, need) < options.max_id) ++need;
      return InvalidArgument("order number format: " + std::to_string(f.n) + " " +
                             std::string(alphabet_name) + " cover IDs up to " +
                             std::to_string(max_value(f.radix, f.n)) +
                             ", but the source's IDs go up to " + std::to_string(options.max_id) +
                             " (needs " + std::to_string(need) + ")");
    }
  }

  // Prefix.
  switch (options.prefix) {
    case OrderPrefix::kNone:
      break;
    case OrderPrefix::kLiteral:
      if (options.literal.empty() || options.literal.size() > kMaxLiteral) {
        return InvalidArgument("order number format: a literal prefix has 1 to " +
                               std::to_string(kMaxLiteral) + " characters, not " +
                               std::to_string(options.literal.size()));
      }
      for (char& c : f.options.literal) {
        c = upper(c);
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'))) {
          return InvalidArgument("order number format: the literal prefix " +
                                 quote(options.literal) + " may hold only 0-9 and A-Z");
        }
      }
      f.prefix_len = options.literal.size();
      break;
    case OrderPrefix::kDate:
      if (!options.unix_ms) {
        return InvalidArgument(
            "order number format: a date prefix needs the function that maps an ID to its Unix "
            "time (IDs without a time, such as segment IDs, cannot have one)");
      }
      if (options.utc_offset_minutes < -kMaxOffsetMinutes ||
          options.utc_offset_minutes > kMaxOffsetMinutes) {
        return InvalidArgument("order number format: a UTC offset of " +
                               std::to_string(options.utc_offset_minutes) +
                               " minutes is outside -1080..1080 (18 hours)");
      }
      f.prefix_len = kDateLength;
      break;
  }

  if (options.group_size > Ff1::kMaxLength) {
    return InvalidArgument("order number format: a group size of " +
                           std::to_string(options.group_size) + " is over " +
                           std::to_string(Ff1::kMaxLength));
  }
  if (kSeparators.find(options.separator) == std::string_view::npos) {
    return InvalidArgument("order number format: the separator " + quote_char(options.separator) +
                           " is not one of \"-_ ./\"");
  }
  if (options.tweak.size() > Ff1::kMaxTweakBytes) {
    return InvalidArgument("order number format: the tweak has " +
                           std::to_string(options.tweak.size()) + " bytes, more than " +
                           std::to_string(Ff1::kMaxTweakBytes));
  }
  f.tweak.assign(options.tweak.begin(), options.tweak.end());

  f.body_len = 1 + f.n + (options.check == OrderCheck::kNone ? 0 : 1);
  f.chars = f.prefix_len + f.body_len;
  f.display_len = f.chars;
  if (options.group_size > 0) {
    f.display_len += (f.body_len - 1) / options.group_size + (f.prefix_len > 0 ? 1 : 0);
  }
  return OrderNumberFormat(std::move(impl));
}

OrderNumberFormat::OrderNumberFormat(std::unique_ptr<Impl> impl) noexcept
    : impl_(std::move(impl)) {}
OrderNumberFormat::OrderNumberFormat(OrderNumberFormat&&) noexcept = default;
OrderNumberFormat& OrderNumberFormat::operator=(OrderNumberFormat&&) noexcept = default;
OrderNumberFormat::~OrderNumberFormat() = default;

std::size_t OrderNumberFormat::length() const noexcept {
  return impl_->display_len;
}
std::size_t OrderNumberFormat::payload_length() const noexcept {
  return impl_->n;
}
char OrderNumberFormat::active_version() const noexcept {
  return impl_->versions[impl_->active];
}

std::string OrderNumberFormat::describe() const {
  const Impl& f = *impl_;
  std::string out;
  if (f.options.prefix == OrderPrefix::kLiteral) out += "prefix " + f.options.literal + ", ";
  if (f.options.prefix == OrderPrefix::kDate) {
    out += "date prefix YYMMDD (UTC";
    if (f.options.utc_offset_minutes != 0) {
      const int m = f.options.utc_offset_minutes;
      out += (m < 0 ? "-" : "+") + std::to_string((m < 0 ? -m : m) / 60) + ":";
      const int mm = (m < 0 ? -m : m) % 60;
      out += (mm < 10 ? "0" : "") + std::to_string(mm);
    }
    out += "), ";
  }
  out += "key version + " + std::to_string(f.n) + (f.radix == 10 ? " digits" : " base32 symbols");
  if (f.options.check != OrderCheck::kNone) {
    out += " + " + std::string(check_name(f.options.check)) + " check";
  }
  out += ", " + std::to_string(f.display_len) + " characters";
  if (f.options.group_size > 0) {
    out += " (groups of " + std::to_string(f.options.group_size) + ")";
  }
  out += ", keys ";
  for (std::size_t i = 0; i < f.versions.size(); ++i) {
    if (i > 0) out += ", ";
    out += f.versions[i];
  }
  out += " (active ";
  out += f.versions[f.active];
  out += "), IDs up to " + std::to_string(f.options.max_id);
  return out;
}

Result<std::string> OrderNumberFormat::encode(std::uint64_t id) const {
  std::string out(impl_->display_len, '\0');
  Result<std::size_t> n = encode_to(id, std::span(out.data(), out.size()));
  if (!n.ok()) return n.status();
  out.resize(*n);
  return out;
}

Result<std::size_t> OrderNumberFormat::encode_to(std::uint64_t id, std::span<char> out) const {
  const Impl& f = *impl_;
  if (out.size() < f.display_len) {
    return InvalidArgument("order number: the buffer holds " + std::to_string(out.size()) +
                           " characters, the number has " + std::to_string(f.display_len));
  }
  if (id > f.options.max_id) {
    return InvalidArgument("order number: ID " + std::to_string(id) +
                           " is above the largest ID of this format's source (" +
                           std::to_string(f.options.max_id) + ")");
  }
  std::array<char, kDateLength> date{};
  if (f.options.prefix == OrderPrefix::kDate) {
    Result<std::array<char, 6>> d = f.date_of(id);
    if (!d.ok()) return d.status().with_prefix("order number");
    date = *d;
  }
  // body = version, payload, check (values).
  std::array<std::uint8_t, 1 + Ff1::kMaxLength + 1> body{};
  const char version = f.versions[f.active];
  body[0] = static_cast<std::uint8_t>((*f.table)[static_cast<unsigned char>(version)]);
  std::uint8_t* payload = body.data() + 1;
  f.to_payload(id, payload);
  if (Status st =
          f.ff1[f.active].encrypt(std::span(payload, f.n), std::span(payload, f.n), f.tweak);
      !st.ok()) {
    return st.with_prefix("order number");
  }

  char* p = out.data();
  if (f.options.prefix == OrderPrefix::kLiteral) {
    std::memcpy(p, f.options.literal.data(), f.prefix_len);
    p += f.prefix_len;
  } else if (f.options.prefix == OrderPrefix::kDate) {
    std::memcpy(p, date.data(), date.size());
    p += date.size();
  }
  const std::size_t group = f.options.group_size;
  if (group > 0 && f.prefix_len > 0) *p++ = f.options.separator;
  const std::size_t symbols = 1 + f.n;
  for (std::size_t i = 0; i < f.body_len; ++i) {
    if (group > 0 && i > 0 && i % group == 0) *p++ = f.options.separator;
    *p++ = i < symbols ? f.alphabet[body[i]] : f.check_symbol(f.check_value(body.data(), symbols));
  }
  return static_cast<std::size_t>(p - out.data());
}

std::string_view to_string(OrderDecodeError::Kind kind) noexcept {
  using Kind = OrderDecodeError::Kind;
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kLength:
      return "length";
    case Kind::kCharacter:
      return "character";
    case Kind::kPrefix:
      return "prefix";
    case Kind::kCheck:
      return "check";
    case Kind::kVersion:
      return "version";
    case Kind::kNoSuchId:
      return "no_such_id";
    case Kind::kDate:
      return "date";
  }
  return "?";
}

Result<std::uint64_t> OrderNumberFormat::decode(std::string_view text,
                                                OrderDecodeError* error) const {
  using Kind = OrderDecodeError::Kind;
  const Impl& f = *impl_;
  OrderDecodeError scratch;
  OrderDecodeError& err = error != nullptr ? *error : scratch;
  err = OrderDecodeError{};
  // `position`: 0-based index into `text`, or npos when the error is not about one character.
  const auto fail = [&](Kind kind, std::size_t position, const std::string& why) -> Status {
    err.kind = kind;
    err.position = position == std::string_view::npos ? 0 : position + 1;
    return InvalidArgument("order number " + quote(text) + ": " + why);
  };
  constexpr std::size_t kNowhere = std::string_view::npos;
  const auto at = [&](std::size_t i) { return std::to_string(i + 1); };

  // The characters without separators, and where each stood in `text`.
  std::array<char, kMaxChars> chars{};
  std::array<std::size_t, kMaxChars> pos{};
  std::size_t count = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '-' || c == ' ' || c == f.options.separator) continue;
    if (count < f.chars) {
      chars[count] = c;
      pos[count] = i;
    }
    ++count;
  }
  if (count != f.chars) {
    return fail(Kind::kLength, kNowhere,
                "has " + std::to_string(count) + " characters without separators; this format's " +
                    "numbers have " + std::to_string(f.chars));
  }

  // Prefix: the literal, or six digits (compared with the ID's date at the end).
  if (f.options.prefix == OrderPrefix::kLiteral) {
    for (std::size_t i = 0; i < f.prefix_len; ++i) {
      if (upper(chars[i]) != f.options.literal[i]) {
        return fail(Kind::kPrefix, pos[i],
                    "does not start with the prefix " + quote(f.options.literal) + " (character " +
                        quote_char(chars[i]) + " at position " + at(pos[i]) + ")");
      }
    }
  } else if (f.options.prefix == OrderPrefix::kDate) {
    for (std::size_t i = 0; i < f.prefix_len; ++i) {
      if (chars[i] < '0' || chars[i] > '9') {
        return fail(Kind::kCharacter, pos[i],
                    "character " + quote_char(chars[i]) + " at position " + at(pos[i]) +
                        " is not a digit of the date prefix (YYMMDD)");
      }
    }
  }

  // Body: every character must be a symbol of its place.
  std::array<std::uint8_t, 1 + Ff1::kMaxLength + 1> body{};
  const std::size_t symbols = 1 + f.n;
  const std::string_view what =
      f.radix == 10 ? "is not a digit" : "is not a Crockford base32 symbol";
  for (std::size_t k = 0; k < f.body_len; ++k) {
    const std::size_t i = f.prefix_len + k;
    const auto c = static_cast<unsigned char>(chars[i]);
    const bool is_check = k == symbols;
    const std::int8_t v =
        is_check && f.options.check == OrderCheck::kMod37 ? kMod37Table[c] : (*f.table)[c];
    if (v < 0) {
      return fail(
          Kind::kCharacter, pos[i],
          "character " + quote_char(chars[i]) + " at position " + at(pos[i]) + " " +
              (is_check && f.options.check == OrderCheck::kMod37
                   ? std::string("is not a check symbol (0-9, A-Z without I L O U, * ~ $ = U)")
                   : std::string(what)));
    }
    body[k] = static_cast<std::uint8_t>(v);
  }
  if (f.options.check != OrderCheck::kNone) {
    const std::uint8_t want = f.check_value(body.data(), symbols);
    if (body[symbols] != want) {
      const std::size_t i = f.prefix_len + symbols;
      return fail(Kind::kCheck, pos[i],
                  "the check character " + quote_char(chars[i]) + " at position " + at(pos[i]) +
                      " does not match (" + std::string(check_name(f.options.check)) +
                      "): a character is mistyped or two are swapped");
    }
  }

  // Key version.
  const char version = f.alphabet[body[0]];
  const std::int8_t key = f.index[static_cast<unsigned char>(version)];
  if (key < 0) {
    std::string known;
    for (const char v : f.versions) {
      if (!known.empty()) known += ", ";
      known += v;
    }
    return fail(Kind::kVersion, pos[f.prefix_len],
                "key version " + quote_char(version) + " at position " + at(pos[f.prefix_len]) +
                    " is unknown (known: " + known + ")");
  }

  // Payload.
  std::uint8_t* payload = body.data() + 1;
  if (Status st = f.ff1[static_cast<std::size_t>(key)].decrypt(std::span(payload, f.n),
                                                               std::span(payload, f.n), f.tweak);
      !st.ok()) {
    return st.with_prefix("order number " + quote(text));
  }
  std::uint64_t id = 0;
  if (!f.from_payload(payload, id) || id > f.options.max_id) {
    return fail(Kind::kNoSuchId, kNowhere,
                "decodes to no ID of this source (above " + std::to_string(f.options.max_id) +
                    "): a mistyped or forged number, or one made with another key");
  }

  if (f.options.prefix == OrderPrefix::kDate) {
    Result<std::array<char, 6>> d = f.date_of(id);
    if (!d.ok()) {
      err.kind = Kind::kDate;  // the ID has no date the prefix could show
      err.position = pos[0] + 1;
      return d.status().with_prefix("order number " + quote(text));
    }
    if (std::memcmp(d->data(), chars.data(), kDateLength) != 0) {
      return fail(Kind::kDate, pos[0],
                  "the date prefix " + std::string(chars.data(), kDateLength) +
                      " is not the date of the number's ID (" +
                      std::string(d->data(), kDateLength) + "): a mistyped date");
    }
  }
  return id;
}

}  // namespace flurry

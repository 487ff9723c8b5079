// OrderNumberFormat: the options checked against each other and the keys, describe(), encode
// (order_number.h). Decoding is in order_decode.cc.
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

#include "core/quote.h"
#include "key_set_internal.h"
#include "order_format.h"

namespace flurry {
namespace {

using internal::quote;
using internal::quote_char;
using namespace order_internal;

__extension__ typedef unsigned __int128 u128;  // GCC and clang; __extension__: -Wpedantic

// The largest value n numerals of `radix` hold, saturated at 2^64 - 1.
std::uint64_t max_value(unsigned radix, std::size_t n) noexcept {
  u128 v = 1;
  for (std::size_t i = 0; i < n && v <= std::numeric_limits<std::uint64_t>::max(); ++i) v *= radix;
  return v > std::numeric_limits<std::uint64_t>::max() ? std::numeric_limits<std::uint64_t>::max()
                                                       : static_cast<std::uint64_t>(v - 1);
}

}  // namespace

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

}  // namespace flurry

// OrderNumberFormat::decode: text back to an ID, or what is wrong with it and where.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/quote.h"
#include "flurry/order_number.h"
#include "order_format.h"

namespace flurry {
namespace {

using internal::quote;
using internal::quote_char;
using namespace order_internal;

}  // namespace

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
  if (f.options.plausible) {
    if (Status st = f.options.plausible(id); !st.ok()) {
      return fail(Kind::kNoSuchId, kNowhere, st.message());
    }
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

#include "order/order_settings.h"

#include <cstdlib>

#include "core/numbers.h"
#include "core/quote.h"

namespace flurry::order {
namespace {

using internal::quote;

constexpr int kMaxOffsetMinutes = 18 * 60;
constexpr std::size_t kMaxLiteral = 8;
constexpr std::size_t kMaxGroup = 32;
constexpr std::size_t kMaxLength = 64;

char upper(char c) noexcept {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

Result<std::size_t> bounded(std::string_view text, std::size_t max, std::string_view what) {
  const internal::ParsedUint n = internal::parse_uint(text, max);
  if (n.error != internal::UintError::kNone) {
    return InvalidArgument(quote(text) + " is not " + std::string(what) + " (0 to " +
                           std::to_string(max) + ")");
  }
  return static_cast<std::size_t>(n.value);
}

}  // namespace

OrderCheck OrderSettings::effective_check() const noexcept {
  if (check) return *check;
  return alphabet == OrderAlphabet::kBase32 ? OrderCheck::kMod37 : OrderCheck::kDamm;
}

std::string_view to_string(OrderAlphabet alphabet) noexcept {
  return alphabet == OrderAlphabet::kBase32 ? "base32" : "digits";
}

std::string_view to_string(OrderCheck check) noexcept {
  switch (check) {
    case OrderCheck::kDamm:
      return "damm";
    case OrderCheck::kLuhn:
      return "luhn";
    case OrderCheck::kMod37:
      return "mod37";
    case OrderCheck::kNone:
      return "none";
  }
  return "none";
}

Result<OrderAlphabet> parse_order_alphabet(std::string_view text) {
  if (text == "digits") return OrderAlphabet::kDigits;
  if (text == "base32") return OrderAlphabet::kBase32;
  return InvalidArgument(quote(text) + " is not digits or base32");
}

Result<OrderCheck> parse_order_check(std::string_view text) {
  for (OrderCheck c :
       {OrderCheck::kDamm, OrderCheck::kLuhn, OrderCheck::kMod37, OrderCheck::kNone}) {
    if (text == to_string(c)) return c;
  }
  return InvalidArgument(quote(text) + " is not damm, luhn, mod37 or none");
}

Result<std::string> parse_order_prefix(std::string_view text) {
  if (text.empty() || text == "date") return std::string(text);
  if (text.size() > kMaxLiteral) {
    return InvalidArgument(quote(text) + " is not \"date\" or a literal of 1 to 8 characters");
  }
  std::string out;
  for (const char c : text) {
    const char u = upper(c);
    if (!is_digit(u) && !(u >= 'A' && u <= 'Z')) {
      return InvalidArgument(quote(text) + " is not \"date\" or a literal of 0-9 and A-Z");
    }
    out += u;
  }
  return out;
}

Result<int> parse_utc_offset(std::string_view text) {
  if (text == "Z" || text == "UTC" || text == "utc") return 0;
  const auto bad = [&] {
    return InvalidArgument(quote(text) +
                           " is not a UTC offset such as +08:00, -05:30 or Z (at most 18 hours)");
  };
  if (text.size() != 6 && text.size() != 5 && text.size() != 3) return bad();
  if (text[0] != '+' && text[0] != '-') return bad();
  std::string digits;
  for (std::size_t i = 1; i < text.size(); ++i) {
    if (i == 3 && text.size() == 6) {
      if (text[i] != ':') return bad();
      continue;
    }
    if (!is_digit(text[i])) return bad();
    digits += text[i];
  }
  if (digits.size() == 2) digits += "00";
  const int hours = (digits[0] - '0') * 10 + (digits[1] - '0');
  const int minutes = (digits[2] - '0') * 10 + (digits[3] - '0');
  const int total = hours * 60 + minutes;
  if (minutes >= 60 || total > kMaxOffsetMinutes) return bad();
  return text[0] == '-' ? -total : total;
}

std::string format_utc_offset(int minutes) {
  const int a = minutes < 0 ? -minutes : minutes;
  std::string out(1, minutes < 0 ? '-' : '+');
  out += static_cast<char>('0' + a / 600);
  out += static_cast<char>('0' + a / 60 % 10);
  out += ':';
  out += static_cast<char>('0' + a % 60 / 10);
  out += static_cast<char>('0' + a % 10);
  return out;
}

Result<char> parse_order_separator(std::string_view text) {
  if (text.size() == 1 && std::string_view("-_ ./").find(text[0]) != std::string_view::npos) {
    return text[0];
  }
  return InvalidArgument(quote(text) + " is not one of - _ . / or a space");
}

Result<std::size_t> parse_order_group(std::string_view text) {
  return bounded(text, kMaxGroup, "a group size");
}

Result<std::size_t> parse_order_length(std::string_view text) {
  return bounded(text, kMaxLength, "a payload length");
}

Result<std::string> OrderSettings::prefix_of_tag(std::string_view tag) const {
  if (tag_prefixes.empty()) return prefix;
  const std::string* other = nullptr;
  for (const auto& [name, literal] : tag_prefixes) {
    if (name == tag) return literal;
    if (name == "*") other = &literal;
  }
  if (other != nullptr) return *other;
  return Status(StatusCode::kNotFound,
                "segment tag " + quote(tag) +
                    " has no order-number prefix: order_segment_prefix names other tags only "
                    "(add " +
                    std::string(tag) + "=LITERAL, or *=LITERAL for every other tag)");
}

Result<std::vector<std::pair<std::string, std::string>>> parse_order_segment_prefix(
    std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  if (text.empty()) return out;
  const auto literal_of = [](std::string_view value) -> Result<std::string> {
    if (value == "date" || value.empty()) {
      return InvalidArgument(quote(value) +
                             " is not a literal of 1 to 8 characters 0-9, A-Z (segment IDs carry "
                             "no date)");
    }
    return parse_order_prefix(value);
  };
  if (text.find('=') == std::string_view::npos && text.find(',') == std::string_view::npos) {
    Result<std::string> literal = literal_of(text);
    if (!literal.ok()) return literal.status();
    out.emplace_back("*", std::move(literal).value());
    return out;
  }
  for (std::size_t begin = 0; begin <= text.size();) {
    std::size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view entry = text.substr(begin, end - begin);
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return InvalidArgument("entry " + quote(entry) +
                             " is not TAG=LITERAL (or *=LITERAL for the tags not listed)");
    }
    const std::string tag(entry.substr(0, eq));
    Result<std::string> literal = literal_of(entry.substr(eq + 1));
    if (!literal.ok()) return literal.status().with_prefix("tag " + quote(tag));
    for (const auto& [name, value] : out) {
      if (name == tag) return InvalidArgument("tag " + quote(tag) + " is given twice");
    }
    out.emplace_back(tag, std::move(literal).value());
    begin = end + 1;
  }
  return out;
}

std::string format_order_segment_prefix(
    const std::vector<std::pair<std::string, std::string>>& tag_prefixes) {
  std::string out;
  for (const auto& [tag, literal] : tag_prefixes) {
    if (!out.empty()) out += ',';
    out += tag + "=" + literal;
  }
  return out;
}

Status check_order_prefixes(const OrderSettings& s, std::string_view prefix_key,
                            std::string_view segment_key) {
  if (s.tag_prefixes.empty()) return OkStatus();
  if (s.prefix.empty()) {
    return InvalidArgument(std::string(segment_key) + " needs " + std::string(prefix_key) +
                           " too (a literal of its own, or date): without one, a snowflake "
                           "order number could equal a segment tag's");
  }
  // Whose prefix each literal is, the snowflake generator's first.
  std::vector<std::pair<std::string, std::string>> owners;
  if (!s.dated()) owners.emplace_back(std::string(prefix_key), s.prefix);
  for (const auto& [tag, literal] : s.tag_prefixes) {
    const std::string owner =
        std::string(segment_key) + (tag == "*" ? " for the other tags" : " for tag " + quote(tag));
    if (s.dated() && is_digit(literal[0])) {
      return InvalidArgument(owner + ": " + quote(literal) + " begins with a digit, as " +
                             std::string(prefix_key) +
                             " date (YYMMDD) does: begin it with a letter so that the numbers "
                             "differ");
    }
    owners.emplace_back(owner, literal);
  }
  for (std::size_t i = 0; i < owners.size(); ++i) {
    for (std::size_t j = i + 1; j < owners.size(); ++j) {
      const std::string& a = owners[i].second;
      const std::string& b = owners[j].second;
      if (a.starts_with(b) || b.starts_with(a)) {
        return InvalidArgument(owners[i].first + " " + quote(a) + " and " + owners[j].first + " " +
                               quote(b) + (a == b ? " are the same" : " begin alike") +
                               ": numbers of the two sources could be equal; give each source a "
                               "prefix of its own that no other begins with");
      }
    }
  }
  return OkStatus();
}

Status check_order_settings(const OrderSettings& s, std::string_view check_key,
                            std::string_view alphabet_key) {
  const OrderCheck check = s.effective_check();
  const bool digits_only = check == OrderCheck::kDamm || check == OrderCheck::kLuhn;
  const bool base32_only = check == OrderCheck::kMod37;
  if ((digits_only && s.alphabet != OrderAlphabet::kDigits) ||
      (base32_only && s.alphabet != OrderAlphabet::kBase32)) {
    return InvalidArgument(std::string(check_key) + " " + std::string(to_string(check)) +
                           " needs " + std::string(alphabet_key) + " " +
                           (digits_only ? "digits" : "base32") + ", but " +
                           std::string(alphabet_key) + " is " + std::string(to_string(s.alphabet)));
  }
  return OkStatus();
}

Result<OrderNumberOptions> order_number_options(const OrderSettings& s, std::uint64_t max_id,
                                                IdTimeFunction unix_ms, std::string tweak) {
  OrderNumberOptions o;
  o.alphabet = s.alphabet;
  o.check = s.effective_check();
  o.max_id = max_id;
  o.payload_length = s.length;
  if (s.dated()) {
    if (!unix_ms) {
      return InvalidArgument(
          "order_prefix \"date\" needs IDs that carry a time; segment IDs carry no date");
    }
    o.prefix = OrderPrefix::kDate;
    o.utc_offset_minutes = s.utc_offset_minutes;
    o.unix_ms = std::move(unix_ms);
  } else if (!s.prefix.empty()) {
    o.prefix = OrderPrefix::kLiteral;
    o.literal = s.prefix;
  }
  o.group_size = s.group;
  o.separator = s.separator;
  o.tweak = std::move(tweak);
  return o;
}

Result<std::optional<OrderKeySet>> load_order_keys(
    const std::optional<std::filesystem::path>& key_file,
    const std::vector<std::pair<std::string, std::string>>& env, bool both_is_error) {
  const std::string* value = nullptr;
  for (const auto& [name, v] : env) {
    if (name == kOrderKeysVariable) value = &v;
  }
  if (key_file && value != nullptr && both_is_error) {
    return InvalidArgument(
        "order keys: both order_key_file and the environment variable FLURRY_ORDER_KEYS are "
        "set; set one of them");
  }
  if (key_file) {
    Result<OrderKeySet> keys = OrderKeySet::load_file(*key_file);
    if (!keys.ok()) return keys.status();
    return std::optional<OrderKeySet>(std::move(keys).value());
  }
  if (value == nullptr) return std::optional<OrderKeySet>();
  Result<OrderKeySet> keys =
      OrderKeySet::parse(*value, "environment variable " + std::string(kOrderKeysVariable));
  if (!keys.ok()) return keys.status();
  return std::optional<OrderKeySet>(std::move(keys).value());
}

char order_key_version(std::string_view text, const OrderSettings& s) {
  const std::size_t prefix = s.dated() ? 6 : s.prefix.size();
  std::size_t seen = 0;
  for (const char c : text) {
    if (c == s.separator || c == '-' || c == ' ') continue;
    if (seen++ < prefix) continue;
    const char u = upper(c);
    if (s.alphabet == OrderAlphabet::kBase32) {
      if (u == 'I' || u == 'L') return '1';
      if (u == 'O') return '0';
    }
    return u;
  }
  return '\0';
}

}  // namespace flurry::order

// Order numbers in the service and the command-line tool (docs/order-numbers.md): the format
// settings as typed values, their parsers (shared by `flurry serve`'s settings and `flurry
// order`'s flags, so both take the same names, values and defaults), where the keys come from,
// and the OrderNumberOptions they make for a source.
//
// Keys come from a key file (order_key_file) or from the environment variable FLURRY_ORDER_KEYS,
// never from a TOML file or a flag: their bytes are never logged, printed by --print-config or
// put into a message (errors name the file or the variable only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/order_number.h"
#include "flurry/status.h"

namespace flurry::order {

// The environment variable holding the keys when no key file is set (OrderKeySet::from_env).
inline constexpr std::string_view kOrderKeysVariable = "FLURRY_ORDER_KEYS";

struct OrderSettings {
  // order_key_file: where the keys are; unset: FLURRY_ORDER_KEYS, else order numbers are off.
  std::optional<std::filesystem::path> key_file;
  OrderAlphabet alphabet = OrderAlphabet::kDigits;  // order_alphabet
  // order_check; unset: the alphabet's default (Damm for digits, mod 37 for base32).
  std::optional<OrderCheck> check;
  std::size_t length = 0;  // order_length: payload numerals, 0 = the fewest that cover the source
  std::string prefix;      // order_prefix: "" none, "date" the ID's YYMMDD, else a literal
  int utc_offset_minutes = 0;  // order_utc_offset: for the date prefix
  std::size_t group = 0;       // order_group: display group size, 0 none
  char separator = '-';        // order_separator
  // order_segment_prefix: the literal prefix of each segment tag's numbers, as (tag, literal)
  // pairs; tag "*" stands for the tags not listed. Empty: every tag uses `prefix`, and a tag's
  // numbers may equal the snowflake generator's or another tag's. Set: each source has its own
  // prefix (check_order_prefixes), so numbers of different sources are never equal.
  std::vector<std::pair<std::string, std::string>> tag_prefixes;

  [[nodiscard]] OrderCheck effective_check() const noexcept;
  [[nodiscard]] bool dated() const noexcept { return prefix == "date"; }
  // The literal prefix of `tag`'s numbers: its own, else "*"'s, else (no tag_prefixes) `prefix`.
  // NOT_FOUND, saying how to give it one, when tag_prefixes is set and names neither.
  [[nodiscard]] Result<std::string> prefix_of_tag(std::string_view tag) const;
};

// "digits", "base32".
[[nodiscard]] std::string_view to_string(OrderAlphabet alphabet) noexcept;
// "damm", "luhn", "mod37", "none".
[[nodiscard]] std::string_view to_string(OrderCheck check) noexcept;

// Each INVALID_ARGUMENT with a message that quotes the value and says what is allowed (without
// key or source: the caller adds them).
[[nodiscard]] Result<OrderAlphabet> parse_order_alphabet(std::string_view text);
[[nodiscard]] Result<OrderCheck> parse_order_check(std::string_view text);
// "" (none), "date", or a literal of 1-8 characters of 0-9 and A-Z (either case).
[[nodiscard]] Result<std::string> parse_order_prefix(std::string_view text);
// "SEG" (every tag) or "TAG=LITERAL" pairs separated by commas, "*=LITERAL" for the tags not
// listed; each literal as parse_order_prefix takes one (not "date": segment IDs have no time),
// each tag at most once. "" (none) gives no pairs.
[[nodiscard]] Result<std::vector<std::pair<std::string, std::string>>> parse_order_segment_prefix(
    std::string_view text);
// The text parse_order_segment_prefix reads back ("" for none).
[[nodiscard]] std::string format_order_segment_prefix(
    const std::vector<std::pair<std::string, std::string>>& tag_prefixes);
// "+08:00", "-05:30", "+0800", "Z" or "UTC": minutes east of UTC, at most 18 hours.
[[nodiscard]] Result<int> parse_utc_offset(std::string_view text);
// "+08:00" (for --print-config and messages).
[[nodiscard]] std::string format_utc_offset(int minutes);
// One of - _ . / or a space.
[[nodiscard]] Result<char> parse_order_separator(std::string_view text);
// 0 (none) to 32.
[[nodiscard]] Result<std::size_t> parse_order_group(std::string_view text);
// 0 (the fewest that cover the source) to 64.
[[nodiscard]] Result<std::size_t> parse_order_length(std::string_view text);

// The check against the alphabet: Damm and Luhn need digits, mod 37 base32. INVALID_ARGUMENT
// naming both settings with `check_key` and `alphabet_key` ("order_check", "--check").
[[nodiscard]] Status check_order_settings(const OrderSettings& settings, std::string_view check_key,
                                          std::string_view alphabet_key);

// With tag_prefixes set, every source must have a prefix of its own that no other source's
// begins with (so that no two sources can issue the same number): order_prefix set (a literal,
// or "date", which tag literals must then begin with a letter to differ from), and no literal a
// prefix of another. INVALID_ARGUMENT naming the two prefixes, with `prefix_key` and
// `segment_key` as the settings' names.
[[nodiscard]] Status check_order_prefixes(const OrderSettings& settings,
                                          std::string_view prefix_key,
                                          std::string_view segment_key);

// The library's options for a source: `max_id` its largest ID, `unix_ms` its time (required
// for a date prefix; a source without one refuses the date prefix), `tweak` its FF1 tweak.
[[nodiscard]] Result<OrderNumberOptions> order_number_options(const OrderSettings& settings,
                                                              std::uint64_t max_id,
                                                              IdTimeFunction unix_ms,
                                                              std::string tweak);

// The keys: the key file when `key_file` is set, else FLURRY_ORDER_KEYS from `env` (name, value
// pairs) when present, else nullopt (order numbers off). With `both_is_error` a key file and the
// variable together are refused (the service: one source of keys, no guessing); otherwise the
// file wins (the command line: --key-file overrides the environment).
[[nodiscard]] Result<std::optional<OrderKeySet>> load_order_keys(
    const std::optional<std::filesystem::path>& key_file,
    const std::vector<std::pair<std::string, std::string>>& env, bool both_is_error);

// The version character of `text`, a number that `format` (made from `settings`) decoded: the
// first character after the prefix, separators skipped, upper case, Crockford's aliases read.
[[nodiscard]] char order_key_version(std::string_view text, const OrderSettings& settings);

}  // namespace flurry::order

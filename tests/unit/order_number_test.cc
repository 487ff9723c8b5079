#include "flurry/order_number.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/layout.h"
#include "order/check_char.h"

namespace flurry {
namespace {

constexpr std::uint64_t kMax63 = (std::uint64_t{1} << 63) - 1;
constexpr std::uint64_t kMax64 = ~std::uint64_t{0};
constexpr std::string_view kKeyA = "2b7e151628aed2a6abf7158809cf4f3c";
constexpr std::string_view kKeyB = "000102030405060708090a0b0c0d0e0f1011121314151617";
constexpr std::string_view kKeyC =
    "f0e1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff";

OrderKeySet keys(std::initializer_list<std::pair<char, std::string_view>> entries) {
  std::string text;
  for (const auto& [version, hex] : entries) {
    text += version;
    text += " = ";
    text += hex;
    text += '\n';
  }
  Result<OrderKeySet> set = OrderKeySet::parse(text, "test keys");
  EXPECT_TRUE(set.ok()) << set.status().to_string();
  return std::move(set).value();
}

OrderNumberFormat make(const OrderNumberOptions& options, const OrderKeySet& ks) {
  Result<OrderNumberFormat> f = OrderNumberFormat::create(options, ks);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return std::move(f).value();
}

OrderNumberOptions digits(OrderCheck check = OrderCheck::kDamm, std::uint64_t max_id = kMax63) {
  OrderNumberOptions o;
  o.alphabet = OrderAlphabet::kDigits;
  o.check = check;
  o.max_id = max_id;
  return o;
}

OrderNumberOptions base32(OrderCheck check = OrderCheck::kMod37, std::uint64_t max_id = kMax63) {
  OrderNumberOptions o;
  o.alphabet = OrderAlphabet::kBase32;
  o.check = check;
  o.max_id = max_id;
  return o;
}

std::string encode_ok(const OrderNumberFormat& f, std::uint64_t id) {
  Result<std::string> r = f.encode(id);
  EXPECT_TRUE(r.ok()) << id << ": " << r.status().to_string();
  return r.ok() ? *r : std::string();
}

// Expects `text` to be rejected with INVALID_ARGUMENT whose message contains `cause`, and, when
// given, the error kind and position decode() reports.
void expect_rejected(const OrderNumberFormat& f, std::string_view text, std::string_view cause,
                     OrderDecodeError::Kind kind = OrderDecodeError::Kind::kNone,
                     std::size_t position = 0) {
  OrderDecodeError error;
  const Result<std::uint64_t> r = f.decode(text, &error);
  ASSERT_FALSE(r.ok()) << "accepted " << text << " as " << *r;
  EXPECT_NE(error.kind, OrderDecodeError::Kind::kNone);
  if (kind != OrderDecodeError::Kind::kNone) {
    EXPECT_EQ(to_string(error.kind), to_string(kind)) << text;
    EXPECT_EQ(error.position, position) << text;
  }
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().reason(), Reason::kBadInput);
  EXPECT_NE(r.status().message().find(cause), std::string::npos)
      << r.status().message() << "\nwanted: " << cause;
}

// --- the check characters on their own ----------------------------------------------------------

std::vector<std::uint8_t> values(std::string_view digits_text) {
  std::vector<std::uint8_t> v;
  for (const char c : digits_text) v.push_back(static_cast<std::uint8_t>(c - '0'));
  return v;
}

TEST(OrderCheckTest, KnownValues) {
  EXPECT_EQ(internal::luhn_check(values("7992739871")), 3);  // ISO/IEC 7812-1's example
  EXPECT_EQ(internal::luhn_check(values("37828224631000")), 5);
  EXPECT_EQ(internal::damm_check(values("572")), 4);  // Damm's worked example: 5724
  EXPECT_EQ(internal::damm_check(values("5724")), 0);
  // Crockford: "16J" is 1234, and 1234 mod 37 = 13, the symbol D.
  const std::array<std::uint8_t, 3> v1234 = {1, 6, 18};
  EXPECT_EQ(internal::mod37_check(v1234), 13);
  EXPECT_EQ(internal::kMod37Symbols[13], 'D');
  EXPECT_EQ(std::string_view(internal::kMod37Symbols).substr(32), "*~$=U");
}

// Every single-character substitution and every adjacent transposition of the whole codeword
// (check character included), over many random codewords. `detects(codeword)` says whether the
// check rejects it; `symbols` is the size of the body alphabet, `checks` of the check alphabet.
struct Misses {
  long substitutions = 0;
  long transpositions = 0;
  long tried = 0;
  std::vector<std::pair<int, int>> missed_pairs;  // the transposed values that went unnoticed
};

template <typename Check, typename Valid>
Misses all_single_errors(std::size_t body_len, unsigned symbols, unsigned checks, Check check,
                         Valid valid) {
  std::mt19937_64 rng(7);
  Misses m;
  for (int round = 0; round < 300; ++round) {
    std::vector<std::uint8_t> word(body_len);
    for (auto& v : word) v = static_cast<std::uint8_t>(rng() % symbols);
    word.push_back(check(std::span(word.data(), body_len)));
    EXPECT_TRUE(valid(word));
    for (std::size_t p = 0; p < word.size(); ++p) {
      const unsigned alphabet = p == body_len ? checks : symbols;
      for (unsigned v = 0; v < alphabet; ++v) {
        if (v == word[p]) continue;
        std::vector<std::uint8_t> w = word;
        w[p] = static_cast<std::uint8_t>(v);
        ++m.tried;
        if (valid(w)) ++m.substitutions;
      }
      if (p + 1 < word.size() && word[p] != word[p + 1]) {
        std::vector<std::uint8_t> w = word;
        std::swap(w[p], w[p + 1]);
        // A check value beyond the body's alphabet cannot stand in the body: a bad character.
        if (p + 1 == body_len && w[p] >= symbols) continue;
        ++m.tried;
        if (valid(w)) {
          ++m.transpositions;
          m.missed_pairs.emplace_back(word[p], word[p + 1]);
        }
      }
    }
  }
  return m;
}

TEST(OrderCheckTest, DammCatchesEverySingleErrorAndAdjacentTransposition) {
  const auto check = [](std::span<const std::uint8_t> b) { return internal::damm_check(b); };
  const auto valid = [](const std::vector<std::uint8_t>& w) {
    return internal::damm_check(w) == 0;
  };
  const Misses m = all_single_errors(20, 10, 10, check, valid);
  EXPECT_GT(m.tried, 60000);
  EXPECT_EQ(m.substitutions, 0);
  EXPECT_EQ(m.transpositions, 0);
}

TEST(OrderCheckTest, Mod37CatchesEverySingleErrorAndAdjacentTransposition) {
  const auto check = [](std::span<const std::uint8_t> b) { return internal::mod37_check(b); };
  const auto valid = [](const std::vector<std::uint8_t>& w) {
    return internal::mod37_check(std::span(w.data(), w.size() - 1)) == w.back();
  };
  const Misses m = all_single_errors(14, 32, 37, check, valid);
  EXPECT_GT(m.tried, 100000);
  EXPECT_EQ(m.substitutions, 0);
  EXPECT_EQ(m.transpositions, 0);
}

// Luhn's known blind spot: it catches every single-digit error, and every adjacent
// transposition except 09 <-> 90 (9 doubled is 18 -> 9, and 0 doubled is 0: the sums agree).
TEST(OrderCheckTest, LuhnMissesExactlyThe09And90Transpositions) {
  const auto check = [](std::span<const std::uint8_t> b) { return internal::luhn_check(b); };
  const auto valid = [](const std::vector<std::uint8_t>& w) {
    return internal::luhn_check(std::span(w.data(), w.size() - 1)) == w.back();
  };
  const Misses m = all_single_errors(20, 10, 10, check, valid);
  EXPECT_EQ(m.substitutions, 0);
  EXPECT_GT(m.transpositions, 0);
  for (const auto& [a, b] : m.missed_pairs) {
    EXPECT_TRUE((a == 0 && b == 9) || (a == 9 && b == 0)) << a << b;
  }
  // And the blind spot itself: 4509... and 4590... share their check digit.
  EXPECT_EQ(internal::luhn_check(values("450912")), internal::luhn_check(values("459012")));
}

// --- lengths, bounds and round trips -----------------------------------------------------------

TEST(OrderNumberTest, DefaultLengthsCoverTheSource) {
  const OrderKeySet ks = keys({{'1', kKeyA}});
  EXPECT_EQ(make(digits(), ks).payload_length(), 19u);  // 10^19 > 2^63
  EXPECT_EQ(make(digits(OrderCheck::kDamm, kMax64), ks).payload_length(), 20u);
  EXPECT_EQ(make(base32(), ks).payload_length(), 13u);  // 32^13 = 2^65
  EXPECT_EQ(make(base32(OrderCheck::kMod37, kMax64), ks).payload_length(), 13u);
  EXPECT_EQ(make(digits(OrderCheck::kDamm, 999'999'999), ks).payload_length(), 9u);
  EXPECT_EQ(make(digits(OrderCheck::kDamm, 1'000'000'000), ks).payload_length(), 10u);
  // A tiny source still gets NIST's minimum domain: 6 digits, 4 base32 symbols.
  EXPECT_EQ(make(digits(OrderCheck::kDamm, 5), ks).payload_length(), 6u);
  EXPECT_EQ(make(base32(OrderCheck::kMod37, 5), ks).payload_length(), 4u);
  const OrderNumberFormat f = make(digits(), ks);
  EXPECT_EQ(f.length(), 21u);  // version, 19 digits, Damm
  EXPECT_EQ(f.active_version(), '1');
}

TEST(OrderNumberTest, RefusesASourceItCannotCover) {
  const OrderKeySet ks = keys({{'1', kKeyA}});
  OrderNumberOptions o = digits();
  o.payload_length = 18;
  const Result<OrderNumberFormat> r = OrderNumberFormat::create(o, ks);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("18 digits cover IDs up to 999999999999999999, but the "
                                      "source's IDs go up to 9223372036854775807 (needs 19)"),
            std::string::npos)
      << r.status().message();
  o.payload_length = 5;
  o.max_id = 99'999;
  const Result<OrderNumberFormat> tiny = OrderNumberFormat::create(o, ks);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("at least 1000000"), std::string::npos)
      << tiny.status().message();
}

TEST(OrderNumberTest, RefusesMismatchedOptions) {
  const OrderKeySet ks = keys({{'1', kKeyA}});
  const OrderKeySet letters = keys({{'K', kKeyA}});
  EXPECT_FALSE(OrderNumberFormat::create(digits(OrderCheck::kMod37), ks).ok());
  EXPECT_FALSE(OrderNumberFormat::create(base32(OrderCheck::kDamm), ks).ok());
  EXPECT_FALSE(OrderNumberFormat::create(base32(OrderCheck::kLuhn), ks).ok());
  const Result<OrderNumberFormat> r = OrderNumberFormat::create(digits(), letters);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("key version 'K' is not a character of digits"),
            std::string::npos)
      << r.status().message();
  EXPECT_TRUE(OrderNumberFormat::create(base32(), letters).ok());
  EXPECT_FALSE(OrderNumberFormat::create(digits(), OrderKeySet()).ok());
  OrderNumberOptions o = digits();
  o.prefix = OrderPrefix::kDate;  // without unix_ms
  EXPECT_FALSE(OrderNumberFormat::create(o, ks).ok());
  o = digits();
  o.prefix = OrderPrefix::kLiteral;
  o.literal = "OR-D";
  EXPECT_FALSE(OrderNumberFormat::create(o, ks).ok());
  o.literal = "";
  EXPECT_FALSE(OrderNumberFormat::create(o, ks).ok());
  o = digits();
  o.separator = '+';
  EXPECT_FALSE(OrderNumberFormat::create(o, ks).ok());
}

std::vector<std::uint64_t> edge_ids(std::uint64_t max) {
  std::vector<std::uint64_t> ids = {0, 1, 2, max, max - 1, max - 2, max / 2, max / 2 + 1};
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t p = std::uint64_t{1} << bit;
    for (const std::uint64_t v : {p - 1, p, p + 1}) {
      if (v <= max) ids.push_back(v);
    }
  }
  for (std::uint64_t p = 10; p <= max / 10 && p < kMax64 / 10; p *= 10) ids.push_back(p - 1);
  return ids;
}

TEST(OrderNumberTest, RoundTripsOverTheWholeDomainAtFixedLength) {
  const OrderKeySet ks = keys({{'1', kKeyA}, {'2', kKeyC}});
  struct Case {
    std::string name;
    OrderNumberOptions options;
  };
  std::vector<Case> cases = {
      {"19 digits + Damm", digits()},
      {"19 digits + Luhn", digits(OrderCheck::kLuhn)},
      {"20 digits, 64-bit IDs", digits(OrderCheck::kDamm, kMax64)},
      {"13 base32 + mod 37", base32()},
      {"13 base32, 64-bit IDs, no check", base32(OrderCheck::kNone, kMax64)},
      {"segment tag below 10^9", digits(OrderCheck::kDamm, 999'999'999)},
      {"tiny source", digits(OrderCheck::kDamm, 1000)},
  };
  OrderNumberOptions wide = digits();
  wide.payload_length = 40;  // FF1 on its big-number path (v = 20 digits > 2^64)
  cases.push_back({"40 digits", wide});
  OrderNumberOptions grouped = base32();
  grouped.group_size = 4;
  grouped.tweak = "orders";
  cases.push_back({"grouped base32 with a tweak", grouped});

  std::mt19937_64 rng(1);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const OrderNumberFormat f = make(c.options, ks);
    std::vector<std::uint64_t> ids = edge_ids(c.options.max_id);
    for (int i = 0; i < 3000; ++i) {
      const std::uint64_t r = rng();
      ids.push_back(c.options.max_id == kMax64 ? r : r % (c.options.max_id + 1));
    }
    for (const std::uint64_t id : ids) {
      const std::string text = encode_ok(f, id);
      ASSERT_EQ(text.size(), f.length()) << id << " -> " << text;
      const Result<std::uint64_t> back = f.decode(text);
      ASSERT_TRUE(back.ok()) << id << " -> " << text << ": " << back.status().to_string();
      ASSERT_EQ(*back, id) << text;
    }
    if (c.options.max_id != kMax64) {
      const Result<std::string> above = f.encode(c.options.max_id + 1);
      ASSERT_FALSE(above.ok());
      EXPECT_NE(above.status().message().find("is above the largest ID"), std::string::npos);
    }
  }
}

TEST(OrderNumberTest, EncodeToWritesTheSameTextWithoutAllocating) {
  const OrderNumberFormat f = make(digits(), keys({{'1', kKeyA}}));
  std::array<char, 32> buf{};
  const Result<std::size_t> n = f.encode_to(123456789, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf.data(), *n), encode_ok(f, 123456789));
  std::array<char, 20> small{};
  EXPECT_FALSE(f.encode_to(1, small).ok());
}

// --- what decoding rejects, and where ------------------------------------------------------

TEST(OrderNumberTest, ErrorsSayWhichAndWhere) {
  OrderNumberOptions o = digits();
  o.group_size = 4;
  const OrderNumberFormat f = make(o, keys({{'1', kKeyA}}));
  const std::string good = encode_ok(f, 42);  // "1ddd-dddd-dddd-dddd-dddd-d"
  ASSERT_EQ(good.size(), 26u);
  ASSERT_EQ(good[0], '1');
  ASSERT_EQ(good[4], '-');

  using Kind = OrderDecodeError::Kind;
  expect_rejected(f, good.substr(0, good.size() - 1),
                  "has 20 characters without separators; this format's numbers have 21",
                  Kind::kLength, 0);
  expect_rejected(f, good + "7", "has 22 characters");
  expect_rejected(f, "", "has 0 characters");

  std::string bad = good;
  bad[6] = 'x';  // position 7 of the text as given (separators count)
  expect_rejected(f, bad, "character 'x' at position 7 is not a digit", Kind::kCharacter, 7);

  bad = good;
  bad.back() = static_cast<char>(bad.back() == '9' ? '0' : bad.back() + 1);
  expect_rejected(f, bad,
                  "the check character '" + std::string(1, bad.back()) +
                      "' at position 26 does not match (Damm)",
                  Kind::kCheck, 26);

  // Version 2 with a valid check digit: unknown key version, at its position.
  std::vector<std::uint8_t> body;
  for (const char c : good) {
    if (c != '-') body.push_back(static_cast<std::uint8_t>(c - '0'));
  }
  body[0] = 2;
  body.pop_back();
  std::string v2;
  for (const std::uint8_t d : body) v2 += static_cast<char>('0' + d);
  v2 += static_cast<char>('0' + internal::damm_check(body));
  expect_rejected(f, v2, "key version '2' at position 1 is unknown (known: 1)", Kind::kVersion, 1);
  OrderDecodeError none;
  ASSERT_TRUE(f.decode(good, &none).ok());
  EXPECT_EQ(none.kind, Kind::kNone);

  // Separators may be anywhere, or missing; a space is a separator too.
  std::string plain;
  for (const char c : good) {
    if (c != '-') plain += c;
  }
  EXPECT_EQ(*f.decode(plain), 42u);
  std::string spaced = plain.substr(0, 5) + " " + plain.substr(5, 5) + " -" + plain.substr(10);
  EXPECT_EQ(*f.decode(spaced), 42u);
}

TEST(OrderNumberTest, Base32ParsesEitherCaseAndCrockfordsAliases) {
  const OrderNumberFormat f = make(base32(), keys({{'1', kKeyA}}));
  int aliased = 0;
  for (std::uint64_t id = 0; id < 200; ++id) {
    const std::string text = encode_ok(f, id);
    std::string lower = text;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ASSERT_EQ(*f.decode(lower), id) << lower;
    // I and L read as 1, O as 0, in the body and in the check symbol.
    std::string alias = text;
    for (std::size_t i = 1; i < alias.size(); ++i) {
      if (alias[i] == '1') alias[i] = i % 2 ? 'I' : 'l';
      if (alias[i] == '0') alias[i] = 'O';
    }
    if (alias != text) {
      ++aliased;
      const Result<std::uint64_t> back = f.decode(alias);
      ASSERT_TRUE(back.ok()) << alias << ": " << back.status().to_string();
      EXPECT_EQ(*back, id);
    }
    std::string u = text;
    u[3] = 'U';  // U is only a check symbol
    expect_rejected(f, u, "character 'U' at position 4 is not a Crockford base32 symbol");
  }
  EXPECT_GT(aliased, 50);
}

TEST(OrderNumberTest, DecodingCatchesEverySingleErrorAndTransposition) {
  const OrderKeySet ks = keys({{'1', kKeyA}, {'2', kKeyB}});
  for (const OrderNumberOptions& o : {digits(OrderCheck::kDamm), base32(OrderCheck::kMod37)}) {
    const OrderNumberFormat f = make(o, ks);
    const std::string_view alphabet = o.alphabet == OrderAlphabet::kDigits
                                          ? "0123456789"
                                          : "0123456789ABCDEFGHJKMNPQRSTVWXYZ*~$=U";
    long tried = 0;
    for (std::uint64_t id = 1'000'000'007; id < 1'000'000'007 + 40; ++id) {
      const std::string good = encode_ok(f, id);
      for (std::size_t p = 0; p < good.size(); ++p) {
        for (const char c : alphabet) {
          if (c == good[p]) continue;
          std::string bad = good;
          bad[p] = c;
          ++tried;
          const Result<std::uint64_t> r = f.decode(bad);
          EXPECT_FALSE(r.ok()) << good << " -> " << bad << " decoded to " << *r;
        }
        if (p + 1 < good.size() && good[p] != good[p + 1]) {
          std::string bad = good;
          std::swap(bad[p], bad[p + 1]);
          ++tried;
          const Result<std::uint64_t> r = f.decode(bad);
          EXPECT_FALSE(r.ok()) << good << " -> " << bad << " decoded to " << *r;
        }
      }
    }
    EXPECT_GT(tried, 1000);
  }
}

// With Luhn, swapping an adjacent 0 and 9 goes unnoticed by the check digit: such a number
// decodes, to another ID (or is refused only because it decrypts above max_id).
TEST(OrderNumberTest, LuhnBlindSpotLetsA09SwapThrough) {
  const OrderNumberFormat f = make(digits(OrderCheck::kLuhn), keys({{'1', kKeyA}}));
  int decoded_to_another_id = 0;
  for (std::uint64_t id = 0; id < 5000 && decoded_to_another_id < 3; ++id) {
    const std::string good = encode_ok(f, id);
    for (std::size_t p = 1; p + 1 < good.size(); ++p) {
      if (!((good[p] == '0' && good[p + 1] == '9') || (good[p] == '9' && good[p + 1] == '0'))) {
        continue;
      }
      std::string bad = good;
      std::swap(bad[p], bad[p + 1]);
      const Result<std::uint64_t> r = f.decode(bad);
      if (r.ok()) {
        EXPECT_NE(*r, id);
        ++decoded_to_another_id;
      } else {
        EXPECT_NE(r.status().message().find("decodes to no ID"), std::string::npos)
            << r.status().message();
      }
    }
  }
  EXPECT_EQ(decoded_to_another_id, 3);
}

// radix^n exceeds the source's bound, and a number whose payload decrypts at or above it is no
// ID: rejected, never mapped to an ID. For 63-bit IDs in 13 base32 symbols (2^65 values) about
// three quarters of the well-formed numbers are such forgeries.
TEST(OrderNumberTest, ForgedNumbersDecryptingAboveTheBoundAreRejected) {
  const OrderNumberFormat f = make(base32(), keys({{'1', kKeyA}}));
  std::mt19937_64 rng(3);
  constexpr std::string_view kSymbols = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  constexpr int kTrials = 20000;
  int rejected = 0;
  for (int i = 0; i < kTrials; ++i) {
    std::vector<std::uint8_t> body = {1};
    std::string text = "1";
    for (int k = 0; k < 13; ++k) {
      const auto v = static_cast<std::uint8_t>(rng() % 32);
      body.push_back(v);
      text += kSymbols[v];
    }
    text += internal::kMod37Symbols[internal::mod37_check(body)];
    OrderDecodeError error;
    const Result<std::uint64_t> r = f.decode(text, &error);
    if (r.ok()) {
      EXPECT_LE(*r, kMax63);
      EXPECT_EQ(encode_ok(f, *r), text);  // a valid number is the encoding of its ID
    } else {
      EXPECT_NE(r.status().message().find("decodes to no ID of this source"), std::string::npos)
          << r.status().message();
      EXPECT_EQ(error.kind, OrderDecodeError::Kind::kNoSuchId);
      EXPECT_EQ(error.position, 0u);
      ++rejected;
    }
  }
  const double share = static_cast<double>(rejected) / kTrials;
  EXPECT_NEAR(share, 0.75, 0.015);

  // A small source in a large domain: almost every forged number is refused.
  const OrderNumberFormat small = make(digits(OrderCheck::kDamm, 999'999), keys({{'1', kKeyA}}));
  OrderNumberOptions o = digits(OrderCheck::kDamm, 999'999);
  o.payload_length = 12;
  const OrderNumberFormat sparse = make(o, keys({{'1', kKeyA}}));
  int accepted = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::uint8_t> body = {1};
    std::string text = "1";
    for (int k = 0; k < 12; ++k) {
      const auto v = static_cast<std::uint8_t>(rng() % 10);
      body.push_back(v);
      text += static_cast<char>('0' + v);
    }
    text += static_cast<char>('0' + internal::damm_check(body));
    if (sparse.decode(text).ok()) ++accepted;
  }
  EXPECT_LE(accepted, 2);  // expected 2000 * 10^-6
  EXPECT_EQ(small.payload_length(), 6u);
}

// --- keys: rotation and wrong keys -----------------------------------------------------------

TEST(OrderNumberTest, RotatedKeysStillDecodeOldNumbers) {
  const OrderNumberFormat v1 = make(digits(), keys({{'1', kKeyA}}));
  OrderKeySet both = keys({{'1', kKeyA}, {'2', kKeyB}});
  const OrderNumberFormat v2 = make(digits(), both);
  EXPECT_EQ(v2.active_version(), '2');
  const std::string old_number = encode_ok(v1, 777);
  const std::string new_number = encode_ok(v2, 777);
  EXPECT_EQ(old_number[0], '1');
  EXPECT_EQ(new_number[0], '2');
  EXPECT_NE(old_number.substr(1), new_number.substr(1));
  EXPECT_EQ(*v2.decode(old_number), 777u);
  EXPECT_EQ(*v2.decode(new_number), 777u);
  // Once key 1 is retired, its numbers name an unknown version.
  const OrderNumberFormat only2 = make(digits(), keys({{'2', kKeyB}}));
  expect_rejected(only2, old_number, "key version '1' at position 1 is unknown (known: 2)");
  // Pinning the active key back.
  ASSERT_TRUE(both.set_active('1').ok());
  EXPECT_EQ(encode_ok(make(digits(), both), 777), old_number);
}

TEST(OrderNumberTest, AWrongKeyGivesAnotherIdOrAnError) {
  for (const OrderNumberOptions& o : {digits(), base32()}) {
    const OrderNumberFormat right = make(o, keys({{'1', kKeyA}}));
    const OrderNumberFormat wrong = make(o, keys({{'1', kKeyC}}));
    int errors = 0;
    int others = 0;
    for (std::uint64_t id = 5'000'000; id < 5'002'000; ++id) {
      const Result<std::uint64_t> r = wrong.decode(encode_ok(right, id));
      if (!r.ok()) {
        EXPECT_NE(r.status().message().find("decodes to no ID"), std::string::npos);
        ++errors;
      } else {
        EXPECT_NE(*r, id);
        ++others;
      }
    }
    EXPECT_EQ(errors + others, 2000);
  }
}

TEST(OrderNumberTest, DescribeNamesTheFormatButNoKeyBytes) {
  OrderNumberOptions o = digits();
  o.prefix = OrderPrefix::kLiteral;
  o.literal = "ord";
  o.group_size = 4;
  const OrderNumberFormat f = make(o, keys({{'1', kKeyA}, {'2', kKeyB}}));
  const std::string d = f.describe();
  EXPECT_EQ(d,
            "prefix ORD, key version + 19 digits + Damm check, 30 characters (groups of 4), "
            "keys 1, 2 (active 2), IDs up to 9223372036854775807");
  EXPECT_EQ(d.find("2b7e"), std::string::npos);
}

// --- prefixes ----------------------------------------------------------------------------------

TEST(OrderNumberTest, LiteralPrefixIsCheckedInEitherCase) {
  OrderNumberOptions o = digits();
  o.prefix = OrderPrefix::kLiteral;
  o.literal = "Ord";
  o.group_size = 5;
  const OrderNumberFormat f = make(o, keys({{'1', kKeyA}}));
  const std::string text = encode_ok(f, 99);
  EXPECT_EQ(text.substr(0, 4), "ORD-");
  EXPECT_EQ(text.size(), f.length());
  std::string lower = text;
  lower[0] = 'o';
  EXPECT_EQ(*f.decode(lower), 99u);
  std::string other = text;
  other[1] = 'X';
  expect_rejected(f, other, "does not start with the prefix \"ORD\" (character 'X' at position 2)",
                  OrderDecodeError::Kind::kPrefix, 2);
}

TEST(OrderNumberTest, DatePrefixIsTheIdsOwnDate) {
  Result<Layout> layout = Layout::parse("flurry");
  ASSERT_TRUE(layout.ok());
  const Layout l = *layout;
  OrderNumberOptions o = digits();
  o.prefix = OrderPrefix::kDate;
  o.group_size = 4;
  o.unix_ms = [l](std::uint64_t id) -> Result<std::int64_t> {
    Result<IdParts> parts = l.decompose(id);
    if (!parts.ok()) return parts.status();
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               l.time_of(parts->ticks).time_since_epoch())
        .count();
  };
  // 2026-11-25T20:30:00Z: UTC's 25 November, UTC+8's 26 November, UTC-10's 25 November.
  const std::int64_t ms = 1'795'638'600'000;
  const std::int64_t epoch_ms = 1'735'689'600'000;  // 2025-01-01Z, the preset's epoch
  IdParts parts;
  parts.ticks = static_cast<std::uint64_t>(ms - epoch_ms);
  parts.node = 5;
  parts.seq = 17;
  const Result<std::uint64_t> id = l.compose(parts);
  ASSERT_TRUE(id.ok()) << id.status().to_string();

  const OrderNumberFormat utc = make(o, keys({{'1', kKeyA}}));
  const std::string text = encode_ok(utc, *id);
  EXPECT_EQ(text.substr(0, 7), "261125-");
  EXPECT_EQ(text.size(), utc.length());
  EXPECT_EQ(*utc.decode(text), *id);
  o.utc_offset_minutes = 8 * 60;
  const OrderNumberFormat east = make(o, keys({{'1', kKeyA}}));
  EXPECT_EQ(encode_ok(east, *id).substr(0, 6), "261126");
  o.utc_offset_minutes = -10 * 60;
  const OrderNumberFormat west = make(o, keys({{'1', kKeyA}}));
  EXPECT_EQ(encode_ok(west, *id).substr(0, 6), "261125");
  // The same body behind another date is refused: the date is checked against the ID.
  std::string moved = text;
  moved[5] = '4';
  expect_rejected(utc, moved, "the date prefix 261124 is not the date of the number's ID (261125)",
                  OrderDecodeError::Kind::kDate, 1);
  std::string letter = text;
  letter[2] = 'A';
  expect_rejected(utc, letter, "character 'A' at position 3 is not a digit of the date prefix");
  // An ID whose time the function refuses (bits above the layout's 63).
  OrderNumberOptions wide = o;
  wide.max_id = kMax64;
  const OrderNumberFormat w = make(wide, keys({{'1', kKeyA}}));
  const Result<std::string> bad = w.encode(kMax64);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("the date of ID 18446744073709551615"), std::string::npos)
      << bad.status().message();
}

// --- consecutive IDs give unrelated numbers --------------------------------------------------

// The upper tail probability of a chi-square statistic with k degrees of freedom
// (Wilson-Hilferty's normal approximation: within a few percent for k >= 9, ample for a
// threshold of 10^-4).
double chi_square_p(double x, int k) {
  const double kk = k;
  const double z = (std::cbrt(x / kk) - (1.0 - 2.0 / (9.0 * kk))) / std::sqrt(2.0 / (9.0 * kk));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

struct Stats {
  std::vector<double> p_by_position;  // each payload position, then the check character
  std::vector<long> shared_prefix;    // pairs whose payloads share at least k leading characters
  long increasing = 0;
};

Stats consecutive_stats(const OrderNumberFormat& f, std::string_view alphabet,
                        std::string_view check_symbols, std::uint64_t first, int count) {
  const std::size_t n = f.payload_length();
  std::vector<std::vector<long>> freq(n + 1, std::vector<long>(check_symbols.size(), 0));
  Stats s;
  s.shared_prefix.assign(n + 1, 0);
  std::string prev;
  for (int i = 0; i < count; ++i) {
    const std::string text = encode_ok(f, first + static_cast<std::uint64_t>(i));
    for (std::size_t k = 0; k < n; ++k) ++freq[k][alphabet.find(text[1 + k])];
    ++freq[n][check_symbols.find(text[1 + n])];
    if (!prev.empty()) {
      std::size_t lcp = 0;
      while (lcp < n && prev[1 + lcp] == text[1 + lcp]) ++lcp;
      for (std::size_t k = 1; k <= lcp; ++k) ++s.shared_prefix[k];
      if (text > prev) ++s.increasing;
    }
    prev = text;
  }
  for (std::size_t k = 0; k <= n; ++k) {
    const std::size_t bins = k < n ? alphabet.size() : check_symbols.size();
    const double expected = static_cast<double>(count) / static_cast<double>(bins);
    double x = 0;
    for (std::size_t b = 0; b < bins; ++b) {
      const double d = static_cast<double>(freq[k][b]) - expected;
      x += d * d / expected;
    }
    s.p_by_position.push_back(chi_square_p(x, static_cast<int>(bins) - 1));
  }
  return s;
}

void expect_unrelated(const Stats& s, double radix, int count) {
  for (std::size_t k = 0; k < s.p_by_position.size(); ++k) {
    EXPECT_GT(s.p_by_position[k], 1e-4) << "position " << k << " is not uniform";
  }
  // Pairs sharing k leading payload characters: binomial(count - 1, radix^-k).
  for (std::size_t k = 1; k < s.shared_prefix.size(); ++k) {
    const double p = std::pow(radix, -static_cast<double>(k));
    const double mean = (count - 1) * p;
    const double sd = std::sqrt(mean * (1 - p));
    EXPECT_LE(std::abs(static_cast<double>(s.shared_prefix[k]) - mean), 5 * sd + 3)
        << "pairs sharing " << k << " leading characters: " << s.shared_prefix[k] << ", expected "
        << mean;
  }
  // Order is not preserved either: about half the consecutive pairs increase.
  EXPECT_NEAR(static_cast<double>(s.increasing) / (count - 1), 0.5, 0.01);
}

TEST(OrderNumberTest, ConsecutiveIdsGiveUniformUnrelatedDigits) {
  constexpr int kCount = 100'000;
  const OrderNumberFormat f = make(digits(), keys({{'1', kKeyA}}));
  // IDs as a snowflake node issues them: consecutive sequence numbers in one millisecond, then on.
  const Stats s = consecutive_stats(f, "0123456789", "0123456789", 251'237'019'451'392'000, kCount);
  expect_unrelated(s, 10, kCount);
  const Stats from_zero = consecutive_stats(f, "0123456789", "0123456789", 0, kCount);
  expect_unrelated(from_zero, 10, kCount);
}

TEST(OrderNumberTest, ConsecutiveIdsGiveUniformUnrelatedBase32) {
  constexpr int kCount = 100'000;
  const OrderNumberFormat f = make(base32(), keys({{'1', kKeyA}}));
  const std::string_view symbols = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  const Stats s = consecutive_stats(f, symbols, internal::kMod37Symbols, 1'000'000'000, kCount);
  expect_unrelated(s, 32, kCount);
}

}  // namespace
}  // namespace flurry

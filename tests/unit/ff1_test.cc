#include "flurry/ff1.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "order/ff1_internal.h"

namespace flurry {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes from_hex(std::string_view hex) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

constexpr std::string_view kAlphabet36 = "0123456789abcdefghijklmnopqrstuvwxyz";

Bytes numerals(std::string_view text) {
  Bytes out;
  for (const char c : text) out.push_back(static_cast<std::uint8_t>(kAlphabet36.find(c)));
  return out;
}

std::string text(const Bytes& x) {
  std::string out;
  for (const std::uint8_t v : x) out += kAlphabet36[v];
  return out;
}

Ff1 make(const Bytes& key, unsigned radix) {
  Result<Ff1> f = Ff1::create(key, radix);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return std::move(f).value();
}

// --- NIST SP 800-38G's published FF1 samples (FF1samples.pdf): all nine ----------------------

struct Sample {
  int number;
  std::string_view key;
  unsigned radix;
  std::string_view tweak;
  std::string_view plaintext;
  std::string_view ciphertext;
};

constexpr std::string_view kKey128 = "2B7E151628AED2A6ABF7158809CF4F3C";
constexpr std::string_view kKey192 = "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F";
constexpr std::string_view kKey256 =
    "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94";
constexpr std::string_view kTweak10 = "39383736353433323130";
constexpr std::string_view kTweak11 = "3737373770717273373737";

constexpr std::array<Sample, 9> kSamples = {{
    {1, kKey128, 10, "", "0123456789", "2433477484"},
    {2, kKey128, 10, kTweak10, "0123456789", "6124200773"},
    {3, kKey128, 36, kTweak11, "0123456789abcdefghi", "a9tv40mll9kdu509eum"},
    {4, kKey192, 10, "", "0123456789", "2830668132"},
    {5, kKey192, 10, kTweak10, "0123456789", "2496655549"},
    {6, kKey192, 36, kTweak11, "0123456789abcdefghi", "xbj3kv35jrawxv32ysr"},
    {7, kKey256, 10, "", "0123456789", "6657667009"},
    {8, kKey256, 10, kTweak10, "0123456789", "1001623463"},
    {9, kKey256, 36, kTweak11, "0123456789abcdefghi", "xs8a0azh2avyalyzuwd"},
}};

TEST(FF1Test, NistSamplesEncryptAndDecrypt) {
  for (const Sample& s : kSamples) {
    SCOPED_TRACE("NIST FF1 sample " + std::to_string(s.number));
    const Ff1 f = make(from_hex(s.key), s.radix);
    EXPECT_EQ(f.key_bits(), static_cast<int>(s.key.size() * 4));
    const Bytes tweak = from_hex(s.tweak);
    const Bytes pt = numerals(s.plaintext);
    Bytes ct(pt.size());
    ASSERT_TRUE(f.encrypt(pt, ct, tweak).ok());
    EXPECT_EQ(text(ct), s.ciphertext);
    Bytes back(ct.size());
    ASSERT_TRUE(f.decrypt(ct, back, tweak).ok());
    EXPECT_EQ(text(back), s.plaintext);
  }
}

TEST(FF1Test, NistSamplesOnTheBigNumberPath) {
  for (const Sample& s : kSamples) {
    SCOPED_TRACE("NIST FF1 sample " + std::to_string(s.number));
    const Ff1 f = make(from_hex(s.key), s.radix);
    const Bytes tweak = from_hex(s.tweak);
    const Bytes pt = numerals(s.plaintext);
    Bytes ct(pt.size());
    ASSERT_TRUE(internal::Ff1Access::crypt_bignum(f, pt, ct, tweak, true).ok());
    EXPECT_EQ(text(ct), s.ciphertext);
    Bytes back(ct.size());
    ASSERT_TRUE(internal::Ff1Access::crypt_bignum(f, ct, back, tweak, false).ok());
    EXPECT_EQ(text(back), s.plaintext);
  }
}

// Long strings, beyond NIST's samples: the rounds need more than 64 bits (the big-number path),
// S spans several AES blocks (d > 16) and tweaks span several blocks. The ciphertexts come from
// tests/unit/ff1_reference.py, a plain transcription of the standard on Python's big integers
// that shares no code with src/order/ff1.cc and reproduces NIST's samples.
struct LongVector {
  int key_bits;
  std::string_view tweak;
  unsigned radix;
  std::string_view plaintext;
  std::string_view ciphertext;
};

constexpr std::string_view kAlphabet62 =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
constexpr std::string_view kTweak40 =
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627";

constexpr std::array<LongVector, 6> kLongVectors = {{
    {128, "", 10, "0123456789012345678901234567890123456789",
     "6970891655327544837034212091980758387592"},
    {192, kTweak10, 10, "0123456789012345678901234567890123456789012345678901234567890123",
     "6152254690632085351322137096258578321068066397147129611966669123"},
    {256, kTweak40, 36, "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcd",
     "j5kc6nu5b7udznbalwajdi2q3152n5psywoduyp8zwgzm4yz77"},
    {128, kTweak11, 62, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01",
     "L1yTdwSwMYqurDFuuvsiqKTrp8jQ2urp44TdHdiPcSFfRTbH6fwB65q08LX1OmuX"},
    {256, "", 2, "0101010101010101010101010101010101010101010101010101010101010101",
     "0011010111110001100010000011111010001100011111110000100011111110"},
    {192, kTweak40, 32, "0123456789abcdefghijklmnopqrstuv0", "6aph8fgj1ss3nlkb7hfhks9kun8tkv4vs"},
}};

TEST(FF1Test, LongStringsAgreeWithAnIndependentTranscription) {
  for (const LongVector& v : kLongVectors) {
    SCOPED_TRACE("radix " + std::to_string(v.radix) + ", " + std::to_string(v.plaintext.size()) +
                 " numerals");
    const std::string_view key = v.key_bits == 128   ? kKey128
                                 : v.key_bits == 192 ? kKey192
                                                     : kKey256;
    const Ff1 f = make(from_hex(key), v.radix);
    const Bytes tweak = from_hex(v.tweak);
    Bytes pt;
    for (const char c : v.plaintext) pt.push_back(static_cast<std::uint8_t>(kAlphabet62.find(c)));
    Bytes ct(pt.size());
    ASSERT_TRUE(f.encrypt(pt, ct, tweak).ok());
    std::string got;
    for (const std::uint8_t d : ct) got += kAlphabet62[d];
    EXPECT_EQ(got, v.ciphertext);
    Bytes back(ct.size());
    ASSERT_TRUE(f.decrypt(ct, back, tweak).ok());
    EXPECT_EQ(back, pt);
  }
}

TEST(FF1Test, EncryptsInPlace) {
  const Ff1 f = make(from_hex(kKey128), 10);
  Bytes x = numerals("0123456789");
  ASSERT_TRUE(f.encrypt(x, x).ok());
  EXPECT_EQ(text(x), "2433477484");
  ASSERT_TRUE(f.decrypt(x, x).ok());
  EXPECT_EQ(text(x), "0123456789");
}

// --- every radix and length: round trips, and both arithmetic paths agree --------------------

TEST(FF1Test, RoundTripsEveryRadixAndLength) {
  std::mt19937_64 rng(42);
  const Bytes key = from_hex(kKey256);
  const Bytes tweak = from_hex(kTweak11);
  for (unsigned radix = Ff1::kMinRadix; radix <= Ff1::kMaxRadix; ++radix) {
    const Ff1 f = make(key, radix);
    for (std::size_t n = f.min_length(); n <= Ff1::kMaxLength; ++n) {
      SCOPED_TRACE("radix " + std::to_string(radix) + ", " + std::to_string(n) + " numerals");
      Bytes pt(n);
      for (auto& v : pt) v = static_cast<std::uint8_t>(rng() % radix);
      Bytes ct(n);
      Bytes big(n);
      Bytes back(n);
      ASSERT_TRUE(f.encrypt(pt, ct, tweak).ok());
      ASSERT_TRUE(internal::Ff1Access::crypt_bignum(f, pt, big, tweak, true).ok());
      EXPECT_EQ(ct, big);
      for (const std::uint8_t v : ct) ASSERT_LT(v, radix);
      ASSERT_TRUE(f.decrypt(ct, back, tweak).ok());
      EXPECT_EQ(back, pt);
      ASSERT_TRUE(internal::Ff1Access::crypt_bignum(f, ct, back, tweak, false).ok());
      EXPECT_EQ(back, pt);
    }
  }
}

TEST(FF1Test, ExtremeNumeralStringsRoundTrip) {
  const Bytes key = from_hex(kKey192);
  for (const unsigned radix : {2u, 10u, 32u, 36u, 62u}) {
    const Ff1 f = make(key, radix);
    for (const std::size_t n :
         {f.min_length(), std::size_t{19}, std::size_t{20}, std::size_t{39}, Ff1::kMaxLength}) {
      if (n < f.min_length()) continue;
      for (const std::uint8_t fill : {std::uint8_t{0}, static_cast<std::uint8_t>(radix - 1)}) {
        SCOPED_TRACE("radix " + std::to_string(radix) + " n " + std::to_string(n) + " fill " +
                     std::to_string(fill));
        const Bytes pt(n, fill);
        Bytes ct(n);
        Bytes back(n);
        ASSERT_TRUE(f.encrypt(pt, ct).ok());
        EXPECT_NE(ct, pt);
        ASSERT_TRUE(f.decrypt(ct, back).ok());
        EXPECT_EQ(back, pt);
      }
    }
  }
}

// The smallest allowed domain, 10^6 six-digit strings: encryption is a permutation of it.
TEST(FF1Test, IsAPermutationOfTheSmallestDomain) {
  const Ff1 f = make(from_hex(kKey128), 10);
  ASSERT_EQ(f.min_length(), 6u);
  std::vector<bool> seen(1'000'000);
  Bytes x(6);
  Bytes y(6);
  for (std::uint32_t v = 0; v < 1'000'000; ++v) {
    std::uint32_t r = v;
    for (std::size_t i = 6; i-- > 0; r /= 10) x[i] = static_cast<std::uint8_t>(r % 10);
    ASSERT_TRUE(f.encrypt(x, y).ok());
    std::uint32_t c = 0;
    for (const std::uint8_t d : y) c = c * 10 + d;
    ASSERT_FALSE(seen[c]) << "two inputs encrypt to " << c;
    seen[c] = true;
  }
}

TEST(FF1Test, TweaksAndKeysGiveUnrelatedPermutations) {
  const Ff1 a = make(from_hex(kKey128), 10);
  const Ff1 b = make(from_hex(kKey256), 10);
  const Bytes pt = numerals("0000000000000000001");
  Bytes c1(pt.size()), c2(pt.size()), c3(pt.size()), c4(pt.size());
  const Bytes t1 = from_hex("01");
  const Bytes t2 = from_hex("02");
  const Bytes long_tweak(Ff1::kMaxTweakBytes, 0xab);
  ASSERT_TRUE(a.encrypt(pt, c1, t1).ok());
  ASSERT_TRUE(a.encrypt(pt, c2, t2).ok());
  ASSERT_TRUE(b.encrypt(pt, c3, t1).ok());
  ASSERT_TRUE(a.encrypt(pt, c4, long_tweak).ok());
  EXPECT_NE(c1, c2);
  EXPECT_NE(c1, c3);
  EXPECT_NE(c1, c4);
  Bytes back(pt.size());
  ASSERT_TRUE(a.decrypt(c4, back, long_tweak).ok());
  EXPECT_EQ(back, pt);
  // Decrypting under the wrong tweak does not give the plaintext back.
  ASSERT_TRUE(a.decrypt(c1, back, t2).ok());
  EXPECT_NE(back, pt);
}

// --- refusals ---------------------------------------------------------------------------------

void expect_invalid(const Status& st, std::string_view cause) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.reason(), Reason::kBadInput);
  EXPECT_NE(st.message().find(cause), std::string::npos) << st.message();
}

TEST(FF1Test, RefusesBadRadixAndKeyLength) {
  const Bytes key = from_hex(kKey128);
  expect_invalid(Ff1::create(key, 1).status(), "radix 1 is outside 2..62");
  expect_invalid(Ff1::create(key, 63).status(), "radix 63 is outside 2..62");
  const Bytes short_key(15, 0x11);
  const Result<Ff1> r = Ff1::create(short_key, 10);
  expect_invalid(r.status(), "16, 24 or 32 bytes, not 15");
  EXPECT_EQ(r.status().message().find("11"), std::string::npos) << "key bytes in the message";
}

TEST(FF1Test, RefusesDomainsBelowNistsMinimum) {
  const Ff1 f10 = make(from_hex(kKey128), 10);
  EXPECT_EQ(f10.min_length(), 6u);
  expect_invalid(f10.check_length(5), "at least 1000000");
  EXPECT_TRUE(f10.check_length(6).ok());
  const Bytes five(5, 1);
  Bytes out(5);
  expect_invalid(f10.encrypt(five, out), "too few");
  const Ff1 f2 = make(from_hex(kKey128), 2);
  EXPECT_EQ(f2.min_length(), 20u);  // 2^20 = 1048576
  const Ff1 f32 = make(from_hex(kKey128), 32);
  EXPECT_EQ(f32.min_length(), 4u);  // 32^4 = 1048576
  const Ff1 f62 = make(from_hex(kKey128), 62);
  EXPECT_EQ(f62.min_length(), 4u);  // 62^3 = 238328 is too few
  expect_invalid(f62.check_length(Ff1::kMaxLength + 1), "more than");
}

TEST(FF1Test, RefusesBadNumeralsSizesAndTweaks) {
  const Ff1 f = make(from_hex(kKey128), 10);
  Bytes x = numerals("0123456789");
  Bytes out(10);
  x[3] = 10;
  expect_invalid(f.encrypt(x, out), "numeral 3 is 10");
  x[3] = 3;
  Bytes small(9);
  expect_invalid(f.decrypt(x, small), "the output has 9 numerals, the input 10");
  const Bytes tweak(Ff1::kMaxTweakBytes + 1, 0);
  expect_invalid(f.encrypt(x, out, tweak), "longer than 256");
}

// --- concurrency: one instance, several threads ----------------------------------------------

TEST(FF1Test, ConcurrentCallsAgreeWithSequentialOnes) {
  const Ff1 f = make(from_hex(kKey128), 32);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5000;
  std::vector<Bytes> want(kPerThread);
  for (int i = 0; i < kPerThread; ++i) {
    Bytes pt(13);
    for (std::size_t j = 0; j < pt.size(); ++j) {
      pt[j] = static_cast<std::uint8_t>((i * 7 + static_cast<int>(j)) % 32);
    }
    want[static_cast<std::size_t>(i)].resize(13);
    ASSERT_TRUE(f.encrypt(pt, want[static_cast<std::size_t>(i)]).ok());
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Bytes pt(13);
        for (std::size_t j = 0; j < pt.size(); ++j) {
          pt[j] = static_cast<std::uint8_t>((i * 7 + static_cast<int>(j)) % 32);
        }
        Bytes ct(13);
        Bytes back(13);
        if (!f.encrypt(pt, ct).ok() || ct != want[static_cast<std::size_t>(i)] ||
            !f.decrypt(ct, back).ok() || back != pt) {
          ++mismatches[static_cast<std::size_t>(t)];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace flurry

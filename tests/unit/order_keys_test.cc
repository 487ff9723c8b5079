#include <gtest/gtest.h>
#include <stdlib.h>  // setenv, unsetenv
#include <unistd.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "flurry/order_number.h"

namespace flurry {
namespace {

constexpr std::string_view kHex1 = "2b7e151628aed2a6abf7158809cf4f3c";
constexpr std::string_view kHex2 = "000102030405060708090a0b0c0d0e0f1011121314151617";
constexpr std::string_view kHex3 =
    "f0e1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff";

// A key-file error: INVALID_ARGUMENT naming the source and `cause`, and no piece of any key.
void expect_error(std::string_view text, std::string_view cause) {
  const Result<OrderKeySet> r = OrderKeySet::parse(text, "key file k.txt");
  ASSERT_FALSE(r.ok()) << "accepted: " << text;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("key file k.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find(cause), std::string::npos) << msg << "\nwanted: " << cause;
  for (const std::string_view key : {kHex1, kHex2, kHex3}) {
    for (std::size_t i = 0; i + 8 <= key.size(); i += 4) {
      EXPECT_EQ(msg.find(key.substr(i, 8)), std::string::npos) << "key bytes in: " << msg;
    }
  }
}

TEST(OrderKeysTest, ParsesVersionsCommentsAndActive) {
  const std::string text = "# order-number keys\n\n1 = " + std::string(kHex1) +
                           "\r\n  a=" + std::string(kHex2) + "  # not a comment: rejected?\n";
  // A trailing comment after the key is not allowed: the key must be hex only.
  expect_error(text, "line 4");

  const std::string ok = "# order-number keys\n\n1 = " + std::string(kHex1) +
                         "\r\n  a=" + std::string(kHex2) +
                         "\n\t# rotated\n2 = " + std::string(kHex3) + "\n";
  Result<OrderKeySet> keys = OrderKeySet::parse(ok, "key file k.txt");
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  EXPECT_EQ(keys->size(), 3u);
  EXPECT_EQ(keys->versions(), "1A2");
  EXPECT_EQ(keys->active(), '2');  // the last key
  EXPECT_EQ(keys->to_string(), "order keys: versions 1, A, 2 (active 2)");

  Result<OrderKeySet> pinned =
      OrderKeySet::parse(ok + "active = 1\n", "environment variable FLURRY_ORDER_KEYS");
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
  EXPECT_EQ(pinned->active(), '1');
}

TEST(OrderKeysTest, SemicolonsSeparateEntriesForEnvironmentVariables) {
  const std::string text = "1=" + std::string(kHex1) + ";2=" + std::string(kHex1) + ";active=1";
  Result<OrderKeySet> keys = OrderKeySet::parse(text, "environment variable X");
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  EXPECT_EQ(keys->versions(), "12");
  EXPECT_EQ(keys->active(), '1');
}

TEST(OrderKeysTest, RejectsMalformedFilesWithoutShowingKeys) {
  expect_error("", "holds no keys");
  expect_error("# only a comment\n\n", "holds no keys");
  expect_error(std::string(kHex1), "line 1: expected `VERSION = HEX KEY`");
  expect_error("1 = " + std::string(kHex1).substr(0, 31) + "x",
               "line 1: the key for version "
               "'1' is not hexadecimal");
  expect_error("1 = " + std::string(kHex1).substr(0, 30),
               "has 30 characters; AES keys are 32, "
               "48 or 64 hex digits");
  expect_error("1 = " + std::string(kHex1) + "00", "has 34 characters");
  expect_error(
      "1 = " + std::string(kHex1) + "\n2 = " + std::string(kHex2) + "\n1 = " + std::string(kHex3),
      "line 3: key version '1' appears twice");
  expect_error("12 = " + std::string(kHex1), "line 1: a key version is one character");
  expect_error("I = " + std::string(kHex1), "without I, L, O and U");
  expect_error("# x\n" + std::string(kHex2) + " = " + std::string(kHex1), "line 2");
  expect_error("1 = " + std::string(kHex1) + "\nactive = 2", "line 2: active names version '2'");
  expect_error("1 = " + std::string(kHex1) + "\nactive = 22", "line 2: active names a key");
  expect_error("1 = ", "has 0 characters");
}

TEST(OrderKeysTest, LowerCaseVersionsReadAsUpperCase) {
  Result<OrderKeySet> keys = OrderKeySet::parse("b = " + std::string(kHex1), "k");
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  EXPECT_EQ(keys->versions(), "B");
}

TEST(OrderKeysTest, AddChecksVersionsLengthsAndDuplicates) {
  OrderKeySet keys;
  EXPECT_TRUE(keys.empty());
  EXPECT_EQ(keys.active(), '\0');
  EXPECT_EQ(keys.to_string(), "order keys: none");
  const std::array<std::uint8_t, 16> k16{};
  const std::array<std::uint8_t, 20> k20{};
  EXPECT_TRUE(keys.add('1', k16).ok());
  EXPECT_FALSE(keys.add('1', k16).ok());
  EXPECT_FALSE(keys.add('U', k16).ok());
  EXPECT_FALSE(keys.add('-', k16).ok());
  const Status bad = keys.add('2', k20);
  EXPECT_NE(bad.message().find("has 20 bytes"), std::string::npos) << bad.message();
  EXPECT_TRUE(keys.add('z', k16).ok());
  EXPECT_EQ(keys.active(), 'Z');
  EXPECT_TRUE(keys.set_active('1').ok());
  EXPECT_EQ(keys.active(), '1');
  EXPECT_FALSE(keys.set_active('3').ok());
  // Moving keeps the keys.
  OrderKeySet moved = std::move(keys);
  EXPECT_EQ(moved.versions(), "1Z");
}

TEST(OrderKeysTest, LoadsFilesAndEnvironmentVariables) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("flurry-keys-" + std::to_string(::getpid()));
  {
    std::ofstream out(path);
    out << "# test\n7 = " << kHex3 << "\n";
  }
  Result<OrderKeySet> keys = OrderKeySet::load_file(path);
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  EXPECT_EQ(keys->versions(), "7");
  {
    std::ofstream out(path);
    out << "7 = " << kHex3.substr(0, 10) << "\n";
  }
  const Result<OrderKeySet> bad = OrderKeySet::load_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("key file \"" + path.string() + "\" line 1"),
            std::string::npos)
      << bad.status().message();
  EXPECT_EQ(bad.status().message().find(kHex3.substr(0, 10)), std::string::npos);
  std::filesystem::remove(path);
  const Result<OrderKeySet> missing = OrderKeySet::load_file(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().reason(), Reason::kIo);

  ::setenv("FLURRY_TEST_ORDER_KEYS", ("3=" + std::string(kHex2)).c_str(), 1);
  Result<OrderKeySet> env = OrderKeySet::from_env("FLURRY_TEST_ORDER_KEYS");
  ASSERT_TRUE(env.ok()) << env.status().to_string();
  EXPECT_EQ(env->versions(), "3");
  ::setenv("FLURRY_TEST_ORDER_KEYS", ("3=" + std::string(kHex2) + "zz").c_str(), 1);
  const Result<OrderKeySet> env_bad = OrderKeySet::from_env("FLURRY_TEST_ORDER_KEYS");
  ASSERT_FALSE(env_bad.ok());
  EXPECT_NE(env_bad.status().message().find("environment variable FLURRY_TEST_ORDER_KEYS line 1"),
            std::string::npos)
      << env_bad.status().message();
  ::unsetenv("FLURRY_TEST_ORDER_KEYS");
  const Result<OrderKeySet> unset = OrderKeySet::from_env("FLURRY_TEST_ORDER_KEYS");
  ASSERT_FALSE(unset.ok());
  EXPECT_NE(unset.status().message().find("is not set"), std::string::npos);
}

}  // namespace
}  // namespace flurry

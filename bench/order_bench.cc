// Order numbers per second (flurry::OrderNumberFormat, docs/order-numbers.md) beside the AES
// single-block rate of the same OpenSSL in the same run:
//
//   Ref_Aes128Block       one AES-128 block through EVP_Cipher on a thread's own AES-ECB
//                         EVP_CIPHER_CTX: the call FF1 makes for each of its blocks.
//   Ref_Aes128BlockUpdate the same block through EVP_EncryptUpdate, the usual EVP call.
//   FF1_Encrypt/<shape>   Ff1::encrypt alone on numeral strings (19 digits; 13 base32 symbols).
//   Order_Encode/<fmt>    OrderNumberFormat::encode_to of consecutive IDs (no allocation).
//   Order_Decode/<fmt>    OrderNumberFormat::decode of 4096 distinct numbers in turn.
//
// Formats: digits19_damm (version + 19 digits + Damm, 63-bit IDs) and base32_13_mod37 (version
// + 13 base32 symbols + Crockford mod 37). An FF1 call costs 11 AES blocks here (10 rounds and
// the PRF's first block), so Ref_Aes128Block / 11 is the ceiling of FF1 on this machine.
//
// Every benchmark runs on 1 and 2 threads, timed in real time, and reports items_per_second and
// wall_items_per_second (items over the wall time of the whole run: the one to read on 2
// threads). The two threads share one format (one key, its context pool).
#include <benchmark/benchmark.h>
#include <openssl/evp.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flurry/ff1.h"
#include "flurry/order_number.h"
#include "wall_rate.h"

namespace {

using flurry::bench::WallRate;

constexpr std::array<std::uint8_t, 16> kKey = {0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
                                               0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c};
// A snowflake ID of late 2026 (preset `flurry`), so the numbers look like real ones.
constexpr std::uint64_t kFirstId = 251'237'019'451'392'000;

// --- the reference: AES-128 single blocks through EVP ----------------------------------------

struct Ctx {
  Ctx() : ctx(EVP_CIPHER_CTX_new()) {
    ok = ctx != nullptr &&
         EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nullptr, kKey.data(), nullptr) == 1 &&
         EVP_CIPHER_CTX_set_padding(ctx, 0) == 1;
  }
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;
  ~Ctx() { EVP_CIPHER_CTX_free(ctx); }
  EVP_CIPHER_CTX* ctx;
  bool ok = false;
};

void BM_Ref_Aes128Block(benchmark::State& state) {
  const Ctx c;  // each thread its own context, as FF1's pool gives each thread one
  if (!c.ok) {
    state.SkipWithError("OpenSSL AES-128-ECB initialisation failed");
    return;
  }
  std::array<std::uint8_t, 16> block{};
  const WallRate wall(state);
  for (auto _ : state) {
    // Chained like FF1's CBC-MAC: each block is the previous output.
    if (EVP_Cipher(c.ctx, block.data(), block.data(), 16) <= 0) {
      state.SkipWithError("EVP_Cipher failed");
      break;
    }
    benchmark::DoNotOptimize(block);
  }
  wall.report(state);
}

void BM_Ref_Aes128BlockUpdate(benchmark::State& state) {
  const Ctx c;
  if (!c.ok) {
    state.SkipWithError("OpenSSL AES-128-ECB initialisation failed");
    return;
  }
  std::array<std::uint8_t, 16> block{};
  const WallRate wall(state);
  for (auto _ : state) {
    int len = 0;
    if (EVP_EncryptUpdate(c.ctx, block.data(), &len, block.data(), 16) != 1 || len != 16) {
      state.SkipWithError("EVP_EncryptUpdate failed");
      break;
    }
    benchmark::DoNotOptimize(block);
  }
  wall.report(state);
}

// --- FF1 alone ----------------------------------------------------------------------------------

const flurry::Ff1& ff1(unsigned radix) {
  static const auto make = [](unsigned r) {
    flurry::Result<flurry::Ff1> f = flurry::Ff1::create(kKey, r);
    return f.ok() ? std::make_unique<flurry::Ff1>(std::move(f).value()) : nullptr;
  };
  static const std::unique_ptr<flurry::Ff1> f10 = make(10);
  static const std::unique_ptr<flurry::Ff1> f32 = make(32);
  return radix == 10 ? *f10 : *f32;
}

template <unsigned kRadix, std::size_t kLength>
void BM_FF1_Encrypt(benchmark::State& state) {
  const flurry::Ff1& f = ff1(kRadix);
  std::array<std::uint8_t, kLength> x{};
  const WallRate wall(state);
  for (auto _ : state) {
    if (!f.encrypt(x, x).ok()) {
      state.SkipWithError("FF1 failed");
      break;
    }
    benchmark::DoNotOptimize(x);
  }
  wall.report(state);
}

// --- order numbers ------------------------------------------------------------------------------

const flurry::OrderNumberFormat* format(bool digits) {
  static const auto make = [](bool d) -> std::unique_ptr<flurry::OrderNumberFormat> {
    flurry::OrderKeySet keys;
    if (!keys.add('1', kKey).ok()) return nullptr;
    flurry::OrderNumberOptions o;
    o.alphabet = d ? flurry::OrderAlphabet::kDigits : flurry::OrderAlphabet::kBase32;
    o.check = d ? flurry::OrderCheck::kDamm : flurry::OrderCheck::kMod37;
    flurry::Result<flurry::OrderNumberFormat> f = flurry::OrderNumberFormat::create(o, keys);
    if (!f.ok()) return nullptr;
    return std::make_unique<flurry::OrderNumberFormat>(std::move(f).value());
  };
  static const std::unique_ptr<flurry::OrderNumberFormat> digits_format = make(true);
  static const std::unique_ptr<flurry::OrderNumberFormat> base32_format = make(false);
  return digits ? digits_format.get() : base32_format.get();
}

template <bool kDigits>
void BM_Order_Encode(benchmark::State& state) {
  const flurry::OrderNumberFormat* f = format(kDigits);
  if (f == nullptr) {
    state.SkipWithError("format creation failed");
    return;
  }
  std::array<char, 64> out{};
  std::uint64_t id = kFirstId + static_cast<std::uint64_t>(state.thread_index()) * (1u << 30);
  const WallRate wall(state);
  for (auto _ : state) {
    const flurry::Result<std::size_t> n = f->encode_to(id++, out);
    if (!n.ok()) {
      state.SkipWithError(n.status().to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(out);
  }
  wall.report(state);
}

template <bool kDigits>
void BM_Order_Decode(benchmark::State& state) {
  const flurry::OrderNumberFormat* f = format(kDigits);
  if (f == nullptr) {
    state.SkipWithError("format creation failed");
    return;
  }
  std::vector<std::string> numbers;
  for (std::uint64_t i = 0; i < 4096; ++i) {
    flurry::Result<std::string> s = f->encode(kFirstId + i);
    if (!s.ok()) {
      state.SkipWithError(s.status().to_string().c_str());
      return;
    }
    numbers.push_back(*s);
  }
  std::size_t i = 0;
  const WallRate wall(state);
  for (auto _ : state) {
    const flurry::Result<std::uint64_t> id = f->decode(numbers[i++ & 4095]);
    if (!id.ok()) {
      state.SkipWithError(id.status().to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(id);
  }
  wall.report(state);
}

void BM_FF1_Encrypt_Radix10N19(benchmark::State& state) {
  BM_FF1_Encrypt<10, 19>(state);
}
void BM_FF1_Encrypt_Radix32N13(benchmark::State& state) {
  BM_FF1_Encrypt<32, 13>(state);
}
void BM_Order_Encode_Digits(benchmark::State& state) {
  BM_Order_Encode<true>(state);
}
void BM_Order_Decode_Digits(benchmark::State& state) {
  BM_Order_Decode<true>(state);
}
void BM_Order_Encode_Base32(benchmark::State& state) {
  BM_Order_Encode<false>(state);
}
void BM_Order_Decode_Base32(benchmark::State& state) {
  BM_Order_Decode<false>(state);
}

BENCHMARK(BM_Ref_Aes128Block)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Ref_Aes128BlockUpdate)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_FF1_Encrypt_Radix10N19)
    ->Name("BM_FF1_Encrypt/radix10_n19")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_FF1_Encrypt_Radix32N13)
    ->Name("BM_FF1_Encrypt/radix32_n13")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Order_Encode_Digits)
    ->Name("BM_Order_Encode/digits19_damm")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Order_Decode_Digits)
    ->Name("BM_Order_Decode/digits19_damm")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Order_Encode_Base32)
    ->Name("BM_Order_Encode/base32_13_mod37")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Order_Decode_Base32)
    ->Name("BM_Order_Decode/base32_13_mod37")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

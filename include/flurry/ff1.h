// FF1 format-preserving encryption (NIST SP 800-38G, section 5.1) over AES-128, AES-192 or
// AES-256 from OpenSSL's libcrypto.
//
// FF1 is a keyed permutation of the numeral strings of one length over one radix: a string of n
// numerals, each in [0, radix), encrypts to another string of n numerals in [0, radix), and
// decrypts back with the same key and tweak. Different tweaks (public bytes, e.g. a domain
// name) give unrelated permutations under the same key.
//
// Limits (everything else is refused with INVALID_ARGUMENT, reason BAD_INPUT, saying why):
//   - radix 2 to 62;
//   - length n from 2 to kMaxLength (64) numerals, and radix^n at least 1,000,000: NIST's minimum
//     domain (SP 800-38G Rev. 1); smaller domains are open to known attacks on Feistel ciphers;
//   - tweaks up to kMaxTweakBytes (256) bytes;
//   - keys of 16, 24 or 32 bytes.
//
// Speed: when radix^ceil(n/2) fits in 64 bits (up to 19 decimal digits, 25 base32 numerals) the
// rounds run on 64/128-bit integers; longer strings use a small fixed-size big number. Either
// way a call makes no heap allocation once the calling thread has a cipher context (below); it
// costs 10 AES block encryptions for the rounds, one more for the PRF's first block and about one
// per 16 bytes of tweak, and more per round only when ceil(n/2) numerals need over 12 bytes.
//
// Thread safety: an Ff1 is immutable after create(), and encrypt/decrypt may be called from any
// number of threads at once. Each call borrows an OpenSSL cipher context (EVP_CIPHER_CTX, AES in
// ECB mode, the key schedule computed once) from a small per-key pool and gives it back; a
// thread that finds the pool empty copies the key's master context (an allocation) and keeps
// the copy in the pool afterwards, so steady state allocates nothing. The key bytes themselves
// are not kept: only OpenSSL's contexts hold the key schedule, and OpenSSL cleanses them when
// the Ff1 is destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "flurry/status.h"

namespace flurry {
namespace internal {
struct Ff1Access;
}

class Ff1 {
 public:
  static constexpr unsigned kMinRadix = 2;
  static constexpr unsigned kMaxRadix = 62;
  static constexpr std::size_t kMaxLength = 64;
  static constexpr std::size_t kMaxTweakBytes = 256;
  // NIST's minimum domain size: radix^n must be at least this.
  static constexpr std::uint64_t kMinDomain = 1'000'000;

  // An FF1 instance for `radix` under an AES key of 16, 24 or 32 bytes (AES-128/192/256). The
  // key bytes are copied into OpenSSL's context only; the caller may wipe its copy afterwards.
  // INVALID_ARGUMENT for a bad radix or key length (the message names the length, never the
  // bytes); INTERNAL when OpenSSL fails.
  [[nodiscard]] static Result<Ff1> create(std::span<const std::uint8_t> key, unsigned radix);

  Ff1(Ff1&&) noexcept;
  Ff1& operator=(Ff1&&) noexcept;
  Ff1(const Ff1&) = delete;
  Ff1& operator=(const Ff1&) = delete;
  ~Ff1();

  [[nodiscard]] unsigned radix() const noexcept;
  // 128, 192 or 256.
  [[nodiscard]] int key_bits() const noexcept;
  // The shortest length this radix allows: the least n >= 2 with radix^n >= kMinDomain.
  [[nodiscard]] std::size_t min_length() const noexcept;

  // Checks a length against this instance's limits (see above): OK or INVALID_ARGUMENT saying
  // which limit and why.
  [[nodiscard]] Status check_length(std::size_t n) const;

  // Encrypts the numerals `in` (each < radix) into `out` (same size; may be the same buffer).
  // INVALID_ARGUMENT for a length outside the limits, sizes that differ, a numeral >= radix
  // (naming its index) or a tweak too long; INTERNAL if OpenSSL fails (out is then unspecified).
  [[nodiscard]] Status encrypt(std::span<const std::uint8_t> in, std::span<std::uint8_t> out,
                               std::span<const std::uint8_t> tweak = {}) const;
  // The inverse of encrypt() under the same key and tweak. Same errors.
  [[nodiscard]] Status decrypt(std::span<const std::uint8_t> in, std::span<std::uint8_t> out,
                               std::span<const std::uint8_t> tweak = {}) const;

  class Impl;  // src/order/ff1.cc

  friend struct internal::Ff1Access;  // tests: src/order/ff1_internal.h

 private:
  explicit Ff1(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flurry

// FF1 (NIST SP 800-38G, Algorithms 7 and 8). The notation follows the standard: n numerals split
// into A (u = floor(n/2) numerals) and B (v = n - u), b bytes hold NUM_radix of v numerals,
// d = 4 * ceil(b / 4) + 4 bytes of PRF output per round, ten rounds.
#include "flurry/ff1.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "aes_ecb.h"
#include "bignum.h"
#include "ff1_internal.h"

namespace flurry {

using internal::AesEcb;
using internal::BigNum;
using internal::Block;

class Ff1::Impl {
 public:
  unsigned radix = 0;
  std::size_t min_length = 0;
  AesEcb aes;
};

namespace {

__extension__ typedef unsigned __int128 u128;  // GCC and clang; __extension__: -Wpedantic

constexpr int kRounds = 10;
// S needs d <= 4 * ceil(b / 4) + 4 bytes; b <= 24 for 32 numerals of radix 62.
constexpr std::size_t kMaxS = 64;

// radix^e when it fits in 64 bits.
bool pow_u64(std::uint64_t radix, std::size_t e, std::uint64_t& out) noexcept {
  std::uint64_t r = 1;
  for (std::size_t i = 0; i < e; ++i) {
    if (__builtin_mul_overflow(r, radix, &r)) return false;
  }
  out = r;
  return true;
}

// The 8 bytes of x in big-endian order when stored to memory.
std::uint64_t to_big_endian(std::uint64_t x) noexcept {
  if constexpr (std::endian::native == std::endian::little) return __builtin_bswap64(x);
  return x;
}

// The sizes of one call.
struct Shape {
  std::size_t n = 0, u = 0, v = 0, b = 0, d = 0;
  bool fast = false;        // radix^v < 2^64: the rounds run on integers
  std::uint64_t mod_u = 0;  // radix^u and radix^v (fast path only)
  std::uint64_t mod_v = 0;
};

Shape shape_of(unsigned radix, std::size_t n, bool force_big) noexcept {
  Shape s;
  s.n = n;
  s.u = n / 2;
  s.v = n - s.u;
  std::size_t bits = 0;  // ceil(v * log2(radix)) = bit length of radix^v - 1
  if (pow_u64(radix, s.v, s.mod_v)) {
    (void)pow_u64(radix, s.u, s.mod_u);
    bits = static_cast<std::size_t>(std::bit_width(s.mod_v - 1));
    s.fast = !force_big;
  } else {
    BigNum r;
    r.mul_add(1, 1);
    for (std::size_t i = 0; i < s.v; ++i) r.mul_add(radix, 0);
    bits = r.bit_length() - (r.is_power_of_two() ? 1 : 0);
  }
  s.b = (bits + 7) / 8;
  s.d = 4 * ((s.b + 3) / 4) + 4;
  return s;
}

// FF1's PRF (a CBC-MAC with a zero IV over P || Q) for one call: the state after P and the part
// of Q that does not change between rounds (the tweak and its zero padding) is computed once;
// each round then adds [i] || [NUM(B)]^b and expands R into S.
class RoundFunction {
 public:
  RoundFunction(const AesEcb::Lease& aes, const Shape& shape) noexcept : aes_(aes), shape_(shape) {}

  // Runs P and the tweak through the MAC. False when OpenSSL fails.
  [[nodiscard]] bool start(unsigned radix, std::span<const std::uint8_t> tweak) noexcept {
    const auto n = static_cast<std::uint32_t>(shape_.n);
    const auto t = static_cast<std::uint32_t>(tweak.size());
    const Block p = {1,
                     2,
                     1,
                     static_cast<std::uint8_t>(radix >> 16),
                     static_cast<std::uint8_t>(radix >> 8),
                     static_cast<std::uint8_t>(radix),
                     10,
                     static_cast<std::uint8_t>(shape_.u % 256),
                     static_cast<std::uint8_t>(n >> 24),
                     static_cast<std::uint8_t>(n >> 16),
                     static_cast<std::uint8_t>(n >> 8),
                     static_cast<std::uint8_t>(n),
                     static_cast<std::uint8_t>(t >> 24),
                     static_cast<std::uint8_t>(t >> 16),
                     static_cast<std::uint8_t>(t >> 8),
                     static_cast<std::uint8_t>(t)};
    if (!aes_.encrypt(p.data(), state_.data())) return false;
    // Q = T || [0]^((-t-b-1) mod 16) || [i]^1 || [NUM(B)]^b: all but the last b + 1 bytes are
    // the same in every round.
    const std::size_t pad = (16 - (tweak.size() + shape_.b + 1) % 16) % 16;
    for (const std::uint8_t byte : tweak) {
      if (!absorb(byte)) return false;
    }
    for (std::size_t i = 0; i < pad; ++i) {
      if (!absorb(0)) return false;
    }
    for (std::size_t i = fill_; i < 16; ++i) buf_[i] = 0;
    // For s_short: the block of every round before [i] and NUM(B) go in, as words XORed with the
    // MAC state, and the word value of a 1 at the position of [i].
    const std::size_t shift =
        8 * (std::endian::native == std::endian::little ? fill_ % 8 : 7 - fill_ % 8);
    unit_[fill_ / 8] = std::uint64_t{1} << shift;
    std::memcpy(base_, buf_.data(), 16);
    std::uint64_t st[2];
    std::memcpy(st, state_.data(), 16);
    base_[0] ^= st[0];
    base_[1] ^= st[1];
    return true;
  }

  // True when a round's [i] || [NUM(B)]^b completes exactly the block the constant prefix began
  // and NUM(B) fits in 64 bits: then s_short() applies.
  [[nodiscard]] bool short_rounds() const noexcept {
    return shape_.b <= 8 && fill_ + 1 + shape_.b == 16 && shape_.d <= 16;
  }

  // s() for short_rounds(), with NUM(B) as an integer: R = CIPH(state ^ block) with the block
  // built from words, no byte stores.
  [[nodiscard]] bool s_short(std::uint8_t round, std::uint64_t num_b, Block& out) noexcept {
    // NUM(B) < 2^(8b): its big-endian bytes land in [16 - b, 16), after [i] at fill_ = 15 - b.
    const std::uint64_t w[2] = {base_[0] ^ unit_[0] * round,
                                base_[1] ^ unit_[1] * round ^ to_big_endian(num_b)};
    Block block;
    std::memcpy(block.data(), w, 16);
    return aes_.encrypt(block.data(), out.data());
  }

  // S for round i with NUM_radix(B) given as b big-endian bytes: the first d bytes of
  // R || CIPH(R ^ [1]^16) || CIPH(R ^ [2]^16) || ...
  [[nodiscard]] bool s(std::uint8_t round, const std::uint8_t* num_b, std::uint8_t* out) noexcept {
    RoundFunction r = *this;  // continue from the state after the constant prefix
    if (!r.absorb(round)) return false;
    for (std::size_t i = 0; i < shape_.b; ++i) {
      if (!r.absorb(num_b[i])) return false;
    }
    // The length of P || Q is a multiple of 16: nothing is left in the buffer; R = state.
    std::memcpy(out, r.state_.data(), std::min<std::size_t>(16, shape_.d));
    for (std::size_t j = 1; j * 16 < shape_.d; ++j) {
      Block x = r.state_;
      x[15] ^= static_cast<std::uint8_t>(j);
      x[14] ^= static_cast<std::uint8_t>(j >> 8);
      Block y;
      if (!aes_.encrypt(x.data(), y.data())) return false;
      std::memcpy(out + 16 * j, y.data(), std::min<std::size_t>(16, shape_.d - 16 * j));
    }
    return true;
  }

 private:
  bool absorb(std::uint8_t byte) noexcept {
    buf_[fill_++] = byte;
    if (fill_ < 16) return true;
    fill_ = 0;
    for (std::size_t i = 0; i < 16; ++i) state_[i] ^= buf_[i];
    return aes_.encrypt(state_.data(), state_.data());
  }

  const AesEcb::Lease& aes_;
  const Shape& shape_;
  Block state_{};
  Block buf_{};
  std::size_t fill_ = 0;
  std::uint64_t base_[2] = {0, 0};  // state ^ the constant bytes of the round block
  std::uint64_t unit_[2] = {0, 0};  // 1 at the byte of [i]
};

Status openssl_failed() {
  return Status(StatusCode::kInternal, "FF1: an OpenSSL AES operation failed");
}

std::uint64_t num_u64(const std::uint8_t* x, std::size_t len, std::uint64_t radix) noexcept {
  std::uint64_t r = 0;
  for (std::size_t i = 0; i < len; ++i) r = r * radix + x[i];
  return r;
}

template <std::uint64_t kRadix>
void str_const(std::uint64_t value, std::uint8_t* out, std::size_t len) noexcept {
  for (std::size_t i = len; i-- > 0;) {
    out[i] = static_cast<std::uint8_t>(value % kRadix);
    value /= kRadix;
  }
}

// STR_radix^len(value). The radixes of order numbers divide by a constant (a multiplication or a
// shift); others by a division instruction per numeral.
void str_u64(std::uint64_t value, std::uint8_t* out, std::size_t len,
             std::uint64_t radix) noexcept {
  switch (radix) {
    case 10:
      return str_const<10>(value, out, len);
    case 32:
      return str_const<32>(value, out, len);
    default:
      break;
  }
  for (std::size_t i = len; i-- > 0;) {
    out[i] = static_cast<std::uint8_t>(value % radix);
    value /= radix;
  }
}

// The rounds on integers: A and B as NUM_radix values, y in 128 bits (d <= 12 here).
Status crypt_fast(const Shape& s, unsigned radix, RoundFunction& f,
                  std::span<const std::uint8_t> in, std::span<std::uint8_t> out, bool encrypt) {
  std::uint64_t a = num_u64(in.data(), s.u, radix);
  std::uint64_t b = num_u64(in.data() + s.u, s.v, radix);
  const bool short_rounds = f.short_rounds();
  std::array<std::uint8_t, 8> num{};
  std::array<std::uint8_t, kMaxS> sbuf{};
  Block r{};
  for (int k = 0; k < kRounds; ++k) {
    const int i = encrypt ? k : kRounds - 1 - k;
    std::uint64_t x = encrypt ? b : a;  // the half that goes through the PRF
    const std::uint8_t* sp = sbuf.data();
    if (short_rounds) {
      if (!f.s_short(static_cast<std::uint8_t>(i), x, r)) return openssl_failed();
      sp = r.data();
    } else {
      for (std::size_t j = s.b; j-- > 0; x >>= 8) num[j] = static_cast<std::uint8_t>(x);
      if (!f.s(static_cast<std::uint8_t>(i), num.data(), sbuf.data())) return openssl_failed();
    }
    // y = NUM(S), d = 8 or 12 bytes here. Two aligned 8-byte loads of the block AES just wrote
    // (loads inside the store, so the CPU forwards them), then shifts.
    std::uint64_t w0 = 0;
    std::uint64_t w1 = 0;
    std::memcpy(&w0, sp, 8);
    std::memcpy(&w1, sp + 8, 8);
    w0 = to_big_endian(w0);
    w1 = to_big_endian(w1);
    const std::uint64_t hi = s.d == 12 ? w0 >> 32 : 0;
    const std::uint64_t lo = s.d == 12 ? (w0 << 32 | w1 >> 32) : w0;
    const std::uint64_t m = i % 2 == 0 ? s.mod_u : s.mod_v;
    std::uint64_t ym = 0;
    if ((m & (m - 1)) == 0) {
      ym = lo & (m - 1);  // a power-of-two radix
    } else if (hi == 0) {
      ym = lo % m;
    } else {
      ym = static_cast<std::uint64_t>(((u128{hi} << 64) | lo) % m);
    }
    if (encrypt) {
      // (a + ym) mod m with a, ym < m: a sum that wraps past 2^64 is above m too, and the
      // subtraction wraps back.
      std::uint64_t c = a + ym;
      if (c < a || c >= m) c -= m;
      a = b;
      b = c;
    } else {
      const std::uint64_t c = b >= ym ? b - ym : b + (m - ym);
      b = a;
      a = c;
    }
  }
  str_u64(a, out.data(), s.u, radix);
  str_u64(b, out.data() + s.u, s.v, radix);
  return OkStatus();
}

// The rounds on numeral strings, with y reduced digit by digit: y mod radix^m is the last m
// numerals of STR_radix(y), so (NUM(A) +/- y) mod radix^m is a numeral-wise addition or
// subtraction with carry over m numerals.
Status crypt_big(const Shape& s, unsigned radix, RoundFunction& f, std::span<const std::uint8_t> in,
                 std::span<std::uint8_t> out, bool encrypt) {
  constexpr std::size_t kHalf = Ff1::kMaxLength / 2;
  std::array<std::array<std::uint8_t, kHalf>, 3> bufs{};
  std::uint8_t* a = bufs[0].data();
  std::uint8_t* b = bufs[1].data();
  std::uint8_t* c = bufs[2].data();
  std::size_t la = s.u;
  std::size_t lb = s.v;
  std::memcpy(a, in.data(), s.u);
  std::memcpy(b, in.data() + s.u, s.v);
  std::array<std::uint8_t, BigNum::kMaxBytes> num{};
  std::array<std::uint8_t, kMaxS> sbuf{};
  for (int k = 0; k < kRounds; ++k) {
    const int i = encrypt ? k : kRounds - 1 - k;
    const std::uint8_t* x = encrypt ? b : a;  // the half that goes through the PRF
    const std::size_t lx = encrypt ? lb : la;
    BigNum nx;
    for (std::size_t j = 0; j < lx; ++j) nx.mul_add(radix, x[j]);
    nx.get_bytes(std::span(num.data(), s.b));
    if (!f.s(static_cast<std::uint8_t>(i), num.data(), sbuf.data())) return openssl_failed();
    BigNum y;
    y.set_bytes(std::span(sbuf.data(), s.d));
    if (encrypt) {
      const std::size_t m = la;  // u in even rounds, v in odd ones
      unsigned carry = 0;
      for (std::size_t j = m; j-- > 0;) {
        const unsigned sum = a[j] + y.div_small(radix) + carry;
        c[j] = static_cast<std::uint8_t>(sum % radix);
        carry = sum / radix;
      }
      std::swap(a, b);  // A = B
      std::swap(b, c);  // B = C
      la = lb;
      lb = m;
    } else {
      const std::size_t m = lb;
      unsigned borrow = 0;
      for (std::size_t j = m; j-- > 0;) {
        const unsigned sub = y.div_small(radix) + borrow;
        if (b[j] >= sub) {
          c[j] = static_cast<std::uint8_t>(b[j] - sub);
          borrow = 0;
        } else {
          c[j] = static_cast<std::uint8_t>(b[j] + radix - sub);
          borrow = 1;
        }
      }
      std::swap(b, a);  // B = A
      std::swap(a, c);  // A = C
      lb = la;
      la = m;
    }
  }
  std::memcpy(out.data(), a, la);
  std::memcpy(out.data() + la, b, lb);
  return OkStatus();
}

}  // namespace

namespace internal {

Status length_status(const Ff1::Impl& impl, std::size_t n) {
  if (n >= impl.min_length && n <= Ff1::kMaxLength) return OkStatus();
  if (n > Ff1::kMaxLength) {
    return InvalidArgument("FF1: " + std::to_string(n) + " numerals are more than this " +
                           "implementation's " + std::to_string(Ff1::kMaxLength));
  }
  return InvalidArgument("FF1: " + std::to_string(n) + " numerals of radix " +
                         std::to_string(impl.radix) +
                         " are too few: NIST SP 800-38G requires a domain radix^n of at least "
                         "1000000 (here at least " +
                         std::to_string(impl.min_length) + " numerals)");
}

Status ff1_crypt(const Ff1::Impl& impl, std::span<const std::uint8_t> in,
                 std::span<std::uint8_t> out, std::span<const std::uint8_t> tweak, bool encrypt,
                 bool force_big);

Status ff1_crypt(const Ff1::Impl& impl, std::span<const std::uint8_t> in,
                 std::span<std::uint8_t> out, std::span<const std::uint8_t> tweak, bool encrypt,
                 bool force_big) {
  const std::size_t n = in.size();
  if (out.size() != n) {
    return InvalidArgument("FF1: the output has " + std::to_string(out.size()) +
                           " numerals, the input " + std::to_string(n));
  }
  if (Status st = length_status(impl, n); !st.ok()) return st;
  if (tweak.size() > Ff1::kMaxTweakBytes) {
    return InvalidArgument("FF1: a tweak of " + std::to_string(tweak.size()) +
                           " bytes is longer than " + std::to_string(Ff1::kMaxTweakBytes));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (in[i] >= impl.radix) {
      return InvalidArgument("FF1: numeral " + std::to_string(i) + " is " + std::to_string(in[i]) +
                             ", not below the radix " + std::to_string(impl.radix));
    }
  }
  const Shape shape = shape_of(impl.radix, n, force_big);
  const AesEcb::Lease aes = impl.aes.lease();
  if (!aes.ok()) return Status(StatusCode::kInternal, "FF1: no OpenSSL cipher context");
  RoundFunction f(aes, shape);
  if (!f.start(impl.radix, tweak)) return openssl_failed();
  return shape.fast ? crypt_fast(shape, impl.radix, f, in, out, encrypt)
                    : crypt_big(shape, impl.radix, f, in, out, encrypt);
}

Status Ff1Access::crypt_bignum(const Ff1& ff1, std::span<const std::uint8_t> in,
                               std::span<std::uint8_t> out, std::span<const std::uint8_t> tweak,
                               bool encrypt) {
  return ff1_crypt(*ff1.impl_, in, out, tweak, encrypt, true);
}

}  // namespace internal

Result<Ff1> Ff1::create(std::span<const std::uint8_t> key, unsigned radix) {
  if (radix < kMinRadix || radix > kMaxRadix) {
    return InvalidArgument("FF1: radix " + std::to_string(radix) + " is outside " +
                           std::to_string(kMinRadix) + ".." + std::to_string(kMaxRadix));
  }
  auto impl = std::make_unique<Impl>();
  impl->radix = radix;
  std::uint64_t domain = radix;
  std::size_t len = 1;
  while (len < 2 || domain < kMinDomain) {
    domain *= radix;
    ++len;
  }
  impl->min_length = len;
  if (Status st = AesEcb::init(impl->aes, key); !st.ok()) return st.with_prefix("FF1");
  return Ff1(std::move(impl));
}

Ff1::Ff1(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
Ff1::Ff1(Ff1&&) noexcept = default;
Ff1& Ff1::operator=(Ff1&&) noexcept = default;
Ff1::~Ff1() = default;

unsigned Ff1::radix() const noexcept {
  return impl_->radix;
}
int Ff1::key_bits() const noexcept {
  return impl_->aes.key_bits();
}
std::size_t Ff1::min_length() const noexcept {
  return impl_->min_length;
}

Status Ff1::check_length(std::size_t n) const {
  return internal::length_status(*impl_, n);
}

Status Ff1::encrypt(std::span<const std::uint8_t> in, std::span<std::uint8_t> out,
                    std::span<const std::uint8_t> tweak) const {
  return internal::ff1_crypt(*impl_, in, out, tweak, true, false);
}

Status Ff1::decrypt(std::span<const std::uint8_t> in, std::span<std::uint8_t> out,
                    std::span<const std::uint8_t> tweak) const {
  return internal::ff1_crypt(*impl_, in, out, tweak, false, false);
}

}  // namespace flurry

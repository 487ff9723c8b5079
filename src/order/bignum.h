// Internal: a fixed-capacity unsigned big number in base 2^32, enough for FF1's NUM and STR
// conversions of up to Ff1::kMaxLength numerals. Only the operations FF1 needs: multiply-add and
// divide by a small number, and big-endian byte conversions. No allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace flurry::internal {

class BigNum {
 public:
  // 320 bits: NUM_radix of 32 numerals of radix 62 needs 191 bits, FF1's S at most 224.
  static constexpr std::size_t kLimbs = 10;
  static constexpr std::size_t kMaxBytes = kLimbs * 4;

  // x = x * mul + add. Precondition: the result fits (callers stay far below kLimbs).
  void mul_add(std::uint32_t mul, std::uint32_t add) noexcept {
    std::uint64_t carry = add;
    for (std::size_t i = 0; i < size_; ++i) {
      const std::uint64_t t = std::uint64_t{limb_[i]} * mul + carry;
      limb_[i] = static_cast<std::uint32_t>(t);
      carry = t >> 32;
    }
    if (carry != 0 && size_ < kLimbs) limb_[size_++] = static_cast<std::uint32_t>(carry);
  }

  // x = floor(x / div); returns x mod div. Precondition: div > 0.
  std::uint32_t div_small(std::uint32_t div) noexcept {
    std::uint64_t rem = 0;
    for (std::size_t i = size_; i-- > 0;) {
      const std::uint64_t cur = (rem << 32) | limb_[i];
      limb_[i] = static_cast<std::uint32_t>(cur / div);
      rem = cur % div;
    }
    while (size_ > 0 && limb_[size_ - 1] == 0) --size_;
    return static_cast<std::uint32_t>(rem);
  }

  // x = the big-endian number in `bytes` (at most kMaxBytes).
  void set_bytes(std::span<const std::uint8_t> bytes) noexcept {
    limb_.fill(0);
    std::size_t bit = 0;
    for (std::size_t i = bytes.size(); i-- > 0; bit += 8) {
      limb_[bit / 32] |= std::uint32_t{bytes[i]} << (bit % 32);
    }
    size_ = (bytes.size() + 3) / 4;
    while (size_ > 0 && limb_[size_ - 1] == 0) --size_;
  }

  // Writes x big-endian into exactly `out.size()` bytes (at most kMaxBytes); the caller makes sure
  // x fits.
  void get_bytes(std::span<std::uint8_t> out) const noexcept {
    std::size_t bit = 0;
    for (std::size_t i = out.size(); i-- > 0; bit += 8) {
      out[i] = static_cast<std::uint8_t>(limb_[bit / 32] >> (bit % 32));
    }
  }

  [[nodiscard]] std::size_t bit_length() const noexcept {
    if (size_ == 0) return 0;
    std::uint32_t top = limb_[size_ - 1];
    std::size_t bits = (size_ - 1) * 32;
    while (top != 0) {
      ++bits;
      top >>= 1;
    }
    return bits;
  }

  [[nodiscard]] bool is_power_of_two() const noexcept {
    if (size_ == 0) return false;
    for (std::size_t i = 0; i + 1 < size_; ++i) {
      if (limb_[i] != 0) return false;
    }
    const std::uint32_t top = limb_[size_ - 1];
    return (top & (top - 1)) == 0;
  }

  [[nodiscard]] bool is_zero() const noexcept { return size_ == 0; }

 private:
  std::array<std::uint32_t, kLimbs> limb_{};  // least significant first
  std::size_t size_ = 0;                      // limbs in use: limb_[size_ - 1] != 0
};

}  // namespace flurry::internal

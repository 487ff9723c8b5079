#include "ids_parser.h"

#include <bit>
#include <cstring>

namespace flurry::client_internal {
namespace {

// 8 bytes as a little-endian word: the first byte lowest.
std::uint64_t load_le64(const char* p) noexcept {
  std::uint64_t w = 0;
  std::memcpy(&w, p, 8);
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
  return w;
}

// True when all 8 bytes of `w` are ASCII digits.
bool eight_digits(std::uint64_t w) noexcept {
  return ((w & 0xF0F0F0F0F0F0F0F0) | (((w + 0x0606060606060606) & 0xF0F0F0F0F0F0F0F0) >> 4)) ==
         0x3333333333333333;
}

// The value of 8 ASCII digits, the first in the lowest byte (three multiplications, no loop).
std::uint64_t eight_digits_value(std::uint64_t w) noexcept {
  w -= 0x3030303030303030;
  w = w * 10 + (w >> 8);
  return ((w & 0x000000FF000000FF) * (100 + (1000000ULL << 32)) +
          ((w >> 16) & 0x000000FF000000FF) * (1 + (10000ULL << 32))) >>
         32;
}

}  // namespace

bool parse_text_ids(std::string_view body, std::vector<std::uint64_t>& out) {
  out.clear();
  out.reserve(body.size() / 16 + 1);
  const char* p = body.data();
  const char* const end = p + body.size();
  while (p < end) {
    if (*p == '\n' || *p == '\r') {  // an empty line, or the LF of a CRLF
      ++p;
      continue;
    }
    // A refill's IDs have 16 to 19 digits: the first 16 two words at a time, the rest one by one.
    std::uint64_t v = 0;
    const char* const start = p;
    if (end - p >= 16 && eight_digits(load_le64(p)) && eight_digits(load_le64(p + 8))) {
      v = eight_digits_value(load_le64(p)) * 100000000 + eight_digits_value(load_le64(p + 8));
      p += 16;
    }
    for (; p < end && *p >= '0' && *p <= '9'; ++p) {
      if (__builtin_mul_overflow(v, 10, &v) ||
          __builtin_add_overflow(v, static_cast<std::uint64_t>(*p - '0'), &v)) {
        return false;  // 2^64 or more
      }
    }
    if (p == start || (p < end && *p != '\n' && *p != '\r')) return false;
    out.push_back(v);
  }
  return true;
}

}  // namespace flurry::client_internal

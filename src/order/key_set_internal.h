// Internal: the storage of an OrderKeySet, shared with the order-number format that reads it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "flurry/order_number.h"

namespace flurry {

struct OrderKeySet::Keys {
  struct Entry {
    char version = '\0';
    std::uint8_t size = 0;  // 16, 24 or 32
    std::array<std::uint8_t, 32> bytes{};
  };
  std::array<Entry, kMaxKeys> entries{};
  std::size_t count = 0;
  char active = '\0';

  Keys() = default;
  Keys(const Keys&) = delete;
  Keys& operator=(const Keys&) = delete;
  ~Keys();  // OPENSSL_cleanse over the entries
};

namespace internal {
// True for the characters a key version may be: 0-9 and A-Z without I, L, O, U (upper case).
[[nodiscard]] bool valid_key_version(char c) noexcept;
}  // namespace internal

}  // namespace flurry

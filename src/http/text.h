// Internal: text helpers of the server. A growable output buffer that never zero-fills and JSON
// writing by hand; quoting and number parsing come from the core (core/quote.h, core/numbers.h).
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "core/numbers.h"
#include "core/quote.h"
#include "flurry/status.h"

namespace flurry::http {

// The project's one quoting helper (src/core/quote.h), for outside input inside messages.
using internal::quote;

// A byte buffer that grows geometrically and keeps its capacity across clear(): one per
// connection, reused for every response.
class OutBuf {
 public:
  OutBuf() = default;
  OutBuf(const OutBuf&) = delete;
  OutBuf& operator=(const OutBuf&) = delete;
  // Moves the memory; the source is left empty.
  OutBuf(OutBuf&& other) noexcept
      : data_(std::move(other.data_)),
        size_(std::exchange(other.size_, 0)),
        cap_(std::exchange(other.cap_, 0)) {}
  OutBuf& operator=(OutBuf&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
    cap_ = std::exchange(other.cap_, 0);
    return *this;
  }

  [[nodiscard]] char* data() noexcept { return data_.get(); }
  [[nodiscard]] const char* data() const noexcept { return data_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return cap_; }
  [[nodiscard]] std::string_view view() const noexcept { return {data_.get(), size_}; }
  void clear() noexcept { size_ = 0; }
  void resize(std::size_t n) {
    reserve(n);
    size_ = n;
  }

  // Room for at least `n` more bytes; returns where they go. Call commit() with what was used.
  char* tail(std::size_t n) {
    if (cap_ - size_ < n) grow(size_ + n);
    return data_.get() + size_;
  }
  void commit(std::size_t n) noexcept { size_ += n; }
  void reserve(std::size_t n) {
    if (n > cap_) grow(n);
  }

  void append(std::string_view s) {
    std::memcpy(tail(s.size()), s.data(), s.size());
    size_ += s.size();
  }
  void push(char c) {
    *tail(1) = c;
    ++size_;
  }
  void append_uint(std::uint64_t v) {
    char* p = tail(20);
    size_ += static_cast<std::size_t>(std::to_chars(p, p + 20, v).ptr - p);
  }
  void append_int(std::int64_t v) {
    char* p = tail(20);
    size_ += static_cast<std::size_t>(std::to_chars(p, p + 20, v).ptr - p);
  }
  // Shortest round-trip form; JSON has no NaN or infinity (written as null).
  void append_double(double v);

  // A JSON string literal: quotes, backslashes and control characters (and DEL) escaped, valid
  // UTF-8 written as it is, and each byte that starts no valid UTF-8 sequence written as \ufffd
  // (U+FFFD), so the output is always valid UTF-8 JSON whatever the input held.
  void append_json_string(std::string_view s);

  // Frees the memory when more than `limit` bytes are held, so one large response does not pin
  // memory for the connection's life.
  void trim(std::size_t limit) noexcept {
    if (cap_ > limit) {
      data_.reset();
      cap_ = 0;
      size_ = 0;
    }
  }

 private:
  void grow(std::size_t need);

  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
  std::size_t cap_ = 0;
};

}  // namespace flurry::http

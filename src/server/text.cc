#include "text.h"

#include <cmath>

namespace flurry::server {

std::string describe(const Status& st) {
  return "code=" + std::string(to_string(st.code())) +
         " reason=" + std::string(to_string(st.reason())) + " message=" + quote(st.message(), 1024);
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

void OutBuf::grow(std::size_t need) {
  std::size_t cap = cap_ < 256 ? 256 : cap_;
  while (cap < need) cap *= 2;
  std::unique_ptr<char[]> fresh(new char[cap]);
  if (size_ > 0) std::memcpy(fresh.get(), data_.get(), size_);
  data_ = std::move(fresh);
  cap_ = cap;
}

void OutBuf::append_double(double v) {
  if (!std::isfinite(v)) {
    append("null");
    return;
  }
  char* p = tail(32);
  size_ += static_cast<std::size_t>(std::to_chars(p, p + 32, v).ptr - p);
}

void OutBuf::append_json_string(std::string_view s) {
  constexpr std::string_view kHex = "0123456789abcdef";
  // Worst case: every byte becomes \u00XX.
  char* const start = tail(s.size() * 6 + 2);
  char* p = start;
  *p++ = '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      *p++ = '\\';
      *p++ = c;
    } else if (u >= 0x20 && u < 0x7f) {
      *p++ = c;
    } else if (c == '\n') {
      *p++ = '\\';
      *p++ = 'n';
    } else {
      *p++ = '\\';
      *p++ = 'u';
      *p++ = '0';
      *p++ = '0';
      *p++ = kHex[u >> 4];
      *p++ = kHex[u & 0xf];
    }
  }
  *p++ = '"';
  size_ += static_cast<std::size_t>(p - start);
}

}  // namespace flurry::server

#include "text.h"

#include <algorithm>
#include <cmath>

#include "core/utf8.h"

namespace flurry::http {

void OutBuf::grow(std::size_t need) {
  // Geometric, but exactly `need` when one reservation asks for more than double: a large batch
  // reserves its whole size at once, and doubling up to it would hold up to twice that.
  const std::size_t cap = std::max({need, 2 * cap_, std::size_t{256}});
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
  constexpr std::string_view kReplacement = "\\ufffd";
  // Worst case: every byte becomes a six-character escape.
  char* const start = tail(s.size() * 6 + 2);
  char* p = start;
  *p++ = '"';
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      // Valid UTF-8 is written as it is (JSON text is UTF-8, RFC 8259 section 8.1); a byte that
      // starts no valid sequence becomes U+FFFD, so the output stays valid whatever came in.
      const std::size_t len = internal::utf8_sequence_length(s.substr(i));
      if (len == 0) {
        std::memcpy(p, kReplacement.data(), kReplacement.size());
        p += kReplacement.size();
        ++i;
      } else {
        std::memcpy(p, s.data() + i, len);
        p += len;
        i += len;
      }
      continue;
    }
    ++i;
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

}  // namespace flurry::http

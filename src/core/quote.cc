#include "quote.h"

namespace flurry::internal {
namespace {

// Appends `c`, escaping `delimiter`, the backslash, and bytes outside printable ASCII.
void append_escaped_char(std::string& out, char c, char delimiter) {
  const auto u = static_cast<unsigned char>(c);
  if (c == delimiter || c == '\\') {
    out += '\\';
    out += c;
  } else if (u < 0x20 || u >= 0x7f) {
    constexpr std::string_view kHex = "0123456789abcdef";
    out += "\\x";
    out += kHex[u >> 4];
    out += kHex[u & 0xf];
  } else {
    out += c;
  }
}

}  // namespace

std::string quote(std::string_view text, std::size_t max) {
  const std::size_t n = text.size() > max ? max : text.size();
  std::string out;
  out.reserve(n + 5);
  out += '"';
  for (std::size_t i = 0; i < n; ++i) append_escaped_char(out, text[i], '"');
  if (n < text.size()) out += "...";
  out += '"';
  return out;
}

std::string quote_char(char c) {
  std::string out = "'";
  append_escaped_char(out, c, '\'');
  out += '\'';
  return out;
}

}  // namespace flurry::internal

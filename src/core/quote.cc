#include "quote.h"

namespace flurry::internal {
namespace {

constexpr std::size_t kMaxQuoted = 64;

void append_escaped_char(std::string& out, char c) {
  const auto u = static_cast<unsigned char>(c);
  if (c == '"' || c == '\\' || c == '\'') {
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

std::string quote(std::string_view text) {
  std::string out = "\"";
  const std::size_t n = text.size() > kMaxQuoted ? kMaxQuoted : text.size();
  for (std::size_t i = 0; i < n; ++i) append_escaped_char(out, text[i]);
  if (n < text.size()) out += "...";
  out += '"';
  return out;
}

std::string quote_char(char c) {
  std::string out = "'";
  append_escaped_char(out, c);
  out += '\'';
  return out;
}

}  // namespace flurry::internal

#include "core/quote.h"

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

std::string quote_redacted(std::string_view text, std::size_t max) {
  std::string out;
  out.reserve(text.size());
  const auto is_end = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n'; };
  const auto secret_name = [](std::string_view name) {
    std::string lower(name);
    for (char& c : lower) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    return lower.find("pass") != std::string::npos || lower.find("secret") != std::string::npos ||
           lower.find("token") != std::string::npos;
  };
  std::size_t i = 0;
  while (i < text.size()) {
    if (is_end(text[i])) {
      out += text[i++];
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && !is_end(text[end])) ++end;
    std::string_view piece = text.substr(i, end - i);
    i = end;
    const std::size_t scheme = piece.find("://");
    const std::size_t authority = scheme == std::string_view::npos ? 0 : scheme + 3;
    if (const std::size_t at = piece.rfind('@'); at != std::string_view::npos && at >= authority) {
      out += piece.substr(0, authority);
      out += "***";
      piece.remove_prefix(at);
    }
    const std::size_t query = piece.find('?');
    out += piece.substr(0, query);
    if (query == std::string_view::npos) continue;
    // Each name=value of the query, values of secret-looking names replaced.
    std::string_view rest = piece.substr(query);
    while (!rest.empty()) {
      out += rest.front();  // '?' or '&'
      rest.remove_prefix(1);
      const std::size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp);
      const std::size_t eq = pair.find('=');
      if (eq != std::string_view::npos && secret_name(pair.substr(0, eq))) {
        out += pair.substr(0, eq + 1);
        out += "***";
      } else {
        out += pair;
      }
    }
  }
  return quote(out, max);
}

}  // namespace flurry::internal

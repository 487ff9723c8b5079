#include "core/percent.h"

#include "core/quote.h"

namespace flurry::internal {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Status percent_decode(std::string_view in, std::string& out, PlusSign plus) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      const int hi = i + 1 < in.size() ? hex_value(in[i + 1]) : -1;
      const int lo = i + 2 < in.size() ? hex_value(in[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return InvalidArgument("bad percent-encoding at byte " + std::to_string(i) + ": " +
                               quote(in.substr(i, 3)) + " is not '%' and two hex digits");
      }
      out += static_cast<char>(hi << 4 | lo);
      i += 2;
    } else if (c == '+' && plus == PlusSign::kSpace) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return OkStatus();
}

}  // namespace flurry::internal

#include "http/http_options.h"

#include <arpa/inet.h>

#include <algorithm>
#include <thread>

#include "core/quote.h"

namespace flurry::http {

Result<ListenAddress> parse_listen(std::string_view text) {
  return parse_host_port(text, HostPortUse::kListen);
}

namespace {

constexpr std::size_t kMaxHostName = 253;

char lower(char ch) noexcept {
  return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch;
}

bool name_char(char ch) noexcept {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '.' || ch == '-' || ch == '_';
}

std::string_view trim_blanks(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// `name` in lower case without a trailing dot.
std::string canonical_name(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  std::string out(name);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

// Whether canonical `a` equals `b` (any case, trailing dot ignored), without allocating.
bool same_name(std::string_view canonical, std::string_view b) noexcept {
  if (!b.empty() && b.back() == '.') b.remove_suffix(1);
  if (canonical.size() != b.size()) return false;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (canonical[i] != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

Result<std::vector<std::string>> parse_allowed_hosts(std::string_view text) {
  std::vector<std::string> hosts;
  text = trim_blanks(text);
  if (text.empty()) return hosts;
  for (;;) {
    const std::size_t comma = text.find(',');
    const std::string_view entry = trim_blanks(text.substr(0, comma));
    const bool wildcard = entry == "*";
    const bool name = !entry.empty() && entry.size() <= kMaxHostName + 1 && entry != "." &&
                      std::all_of(entry.begin(), entry.end(), name_char);
    if (!wildcard && !name) {
      return InvalidArgument(
          internal::quote(entry) +
          " is not a host name: give names of 1 to 253 of A-Z a-z 0-9 . - _ separated by "
          "commas, or * to allow any Host");
    }
    hosts.push_back(canonical_name(entry));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (hosts.size() > 1 && std::find(hosts.begin(), hosts.end(), "*") != hosts.end()) {
    return InvalidArgument("* allows any Host and goes alone, without names beside it");
  }
  return hosts;
}

std::string allowed_hosts_text(const std::vector<std::string>& hosts) {
  std::string out;
  for (const std::string& host : hosts) {
    if (!out.empty()) out += ',';
    out += host;
  }
  return out;
}

bool host_allowed(std::string_view host, const HttpOptions& options) {
  if (options.allowed_hosts.size() == 1 && options.allowed_hosts.front() == "*") return true;
  // An empty Host (RFC 9112 section 3.2: a target without an authority) names no other server,
  // and no browser sends one.
  if (host.empty()) return true;
  if (host.front() == '[') {
    // An IPv6 literal: "[v6]" or "[v6]:port". Checked to be one, so that "[evil.example]" is
    // not taken for an address.
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos || close > 64) return false;
    std::string literal(host.substr(1, close - 1));
    if (const std::size_t zone = literal.find('%'); zone != std::string::npos) {
      literal.resize(zone);
    }
    in6_addr v6{};
    return inet_pton(AF_INET6, literal.c_str(), &v6) == 1;
  }
  const std::string_view name = host.substr(0, host.find(':'));
  if (name.empty() || name.size() > kMaxHostName + 1) return false;
  in_addr v4{};
  if (inet_pton(AF_INET, std::string(name).c_str(), &v4) == 1) return true;
  if (same_name("localhost", name)) return true;
  if (same_name(canonical_name(options.listen.host), name)) return true;
  return std::any_of(options.allowed_hosts.begin(), options.allowed_hosts.end(),
                     [name](const std::string& allowed) { return same_name(allowed, name); });
}

std::uint32_t default_io_threads() noexcept {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 1 ? cores - 1 : 1;
}

}  // namespace flurry::http

#include "ops/tokens.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/private_files.h"
#include "core/quote.h"

namespace flurry::ops {

using internal::quote;
namespace {

// A token file: a few hundred tokens with their scopes and comments.
constexpr std::size_t kMaxTokenFileBytes = 64 << 10;

constexpr std::array<Scope, 4> kScopes = {Scope::kIds, Scope::kRead, Scope::kAdmin,
                                          Scope::kOrdersDecode};
constexpr std::string_view kScopeNames = "ids, read, admin, orders:decode";

bool is_space(char ch) noexcept {
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The token rules every reader applies: "" when `token` is fine, else why not (never quoting it).
std::string token_fault(std::string_view token) {
  for (std::size_t i = 0; i < token.size(); ++i) {
    const auto ch = static_cast<unsigned char>(token[i]);
    if (ch <= 0x20 || ch >= 0x7f) {
      return "the token may hold only visible ASCII characters (byte " + std::to_string(i) +
             " is not one), so that it can be sent in an Authorization header";
    }
  }
  if (token.size() < kMinTokenLength) {
    return "the token has " + std::to_string(token.size()) + " characters; at least " +
           std::to_string(kMinTokenLength) +
           " are needed so that it cannot be guessed (e.g. openssl rand -hex 32)";
  }
  return token_variety_fault(token);
}

}  // namespace

std::string token_variety_fault(std::string_view token) {
  constexpr std::string_view kAdvice = "; use a random one (e.g. openssl rand -hex 32)";
  if (token.empty()) return "the token is empty";
  std::array<std::size_t, 256> counts{};
  for (const char ch : token) ++counts[static_cast<unsigned char>(ch)];
  std::size_t distinct = 0;
  double bits_per_char = 0;
  const auto length = static_cast<double>(token.size());
  for (const std::size_t n : counts) {
    if (n == 0) continue;
    ++distinct;
    const double p = static_cast<double>(n) / length;
    bits_per_char -= p * std::log2(p);
  }
  if (distinct < kMinTokenDistinct) {
    return "the token has only " + std::to_string(distinct) + " different character" +
           (distinct == 1 ? "" : "s") + " (at least " + std::to_string(kMinTokenDistinct) +
           " are needed)" + std::string(kAdvice);
  }
  for (std::size_t period = 1; period <= kMaxTokenPeriod && period <= token.size() / 2; ++period) {
    if (token.substr(period) == token.substr(0, token.size() - period)) {
      return "the token repeats a sequence of " + std::to_string(period) + " characters" +
             std::string(kAdvice);
    }
  }
  const double bits = bits_per_char * length;
  if (bits < kMinTokenBits) {
    return "the token's characters carry an estimated " + std::to_string(static_cast<int>(bits)) +
           " bits (at least " + std::to_string(static_cast<int>(kMinTokenBits)) +
           " are needed: fewer repeats)" + std::string(kAdvice);
  }
  return {};
}

std::string_view to_string(Scope scope) noexcept {
  switch (scope) {
    case Scope::kNone:
      return "";
    case Scope::kIds:
      return "ids";
    case Scope::kRead:
      return "read";
    case Scope::kAdmin:
      return "admin";
    case Scope::kOrdersDecode:
      return "orders:decode";
  }
  return "";
}

std::optional<Scope> parse_scope(std::string_view name) noexcept {
  for (Scope s : kScopes) {
    if (name == to_string(s)) return s;
  }
  return std::nullopt;
}

std::string to_string(ScopeSet scopes) {
  std::string out;
  for (Scope s : kScopes) {
    if (!scopes.has(s)) continue;
    if (!out.empty()) out += ',';
    out += to_string(s);
  }
  return out.empty() ? std::string("none") : out;
}

Result<ScopeSet> parse_open_scopes(std::string_view text) {
  text = trim(text);
  if (text == "none") return ScopeSet{};
  ScopeSet out;
  for (;;) {
    const std::size_t comma = text.find(',');
    const std::string_view name = trim(text.substr(0, comma));
    const std::optional<Scope> scope = parse_scope(name);
    if (!scope || (*scope != Scope::kIds && *scope != Scope::kRead)) {
      return InvalidArgument(
          quote(name) +
          " is not a scope that can be open; give \"none\" or a comma-separated list of ids and "
          "read (admin and orders:decode always need a token)");
    }
    out.add(*scope);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

Result<std::string> read_admin_token(const std::filesystem::path& file) {
  const std::string name = "admin_token_file " + quote(file.string(), 1024);
  Result<std::string> text =
      internal::read_secret_file(file, "admin_token_file", "the admin token");
  if (!text.ok()) return text.status();
  const std::string_view token = *text;
  if (std::string fault = token_fault(token); !fault.empty()) {
    return InvalidArgument(name + ": " + fault);
  }
  return std::string(token);
}

Result<TokenList> read_token_file(const std::filesystem::path& file, std::string_view setting) {
  const std::string name = std::string(setting) + " " + quote(file.string(), 1024);
  Result<std::string> text =
      internal::read_private_file(file, setting, kMaxTokenFileBytes, "tokens and their scopes");
  if (!text.ok()) return text.status();
  TokenList tokens;
  std::vector<std::size_t> lines;  // the line of each token, for "the same token as line N"
  std::string_view rest = *text;
  for (std::size_t number = 1; !rest.empty(); ++number) {
    const std::size_t newline = rest.find('\n');
    const std::string_view line = trim(rest.substr(0, newline));
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    if (line.empty() || line.front() == '#') continue;
    const std::string at = name + ": line " + std::to_string(number) + ": ";
    std::size_t blank = 0;
    while (blank < line.size() && !is_space(line[blank])) ++blank;
    const std::string_view token = line.substr(0, blank);
    const std::string_view scopes_text = trim(line.substr(blank));
    if (std::string fault = token_fault(token); !fault.empty()) return InvalidArgument(at + fault);
    if (scopes_text.empty()) {
      return InvalidArgument(at +
                             "the token has no scopes; write them after it, separated by "
                             "commas (" +
                             std::string(kScopeNames) + ")");
    }
    ScopeSet scopes;
    std::string_view list = scopes_text;
    for (std::size_t index = 1;; ++index) {
      const std::size_t comma = list.find(',');
      const std::string_view scope_name = trim(list.substr(0, comma));
      // The name is not quoted: a line with the token and a scope swapped would print the token.
      const std::optional<Scope> scope = parse_scope(scope_name);
      if (!scope) {
        return InvalidArgument(at + "scope " + std::to_string(index) + " is not one of " +
                               std::string(kScopeNames) + " (lower case, separated by commas)");
      }
      if (scopes.has(*scope)) {
        return InvalidArgument(at + "scope " + std::string(to_string(*scope)) + " is given twice");
      }
      scopes.add(*scope);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i].token == token) {
        return InvalidArgument(at + "the token is the same as line " + std::to_string(lines[i]) +
                               "'s; each token appears once, with all its scopes");
      }
    }
    tokens.push_back(TokenEntry{std::string(token), scopes});
    lines.push_back(number);
  }
  if (tokens.empty()) {
    return InvalidArgument(name + ": holds no token; write one per line: <token> <scope>[,...]");
  }
  return tokens;
}

Result<TokenList> read_tokens(const std::optional<std::filesystem::path>& token_file,
                              const std::optional<std::filesystem::path>& admin_file,
                              std::string_view token_setting) {
  TokenList tokens;
  if (token_file) {
    Result<TokenList> listed = read_token_file(*token_file, token_setting);
    if (!listed.ok()) return listed.status();
    tokens = std::move(listed).value();
  }
  if (admin_file) {
    Result<std::string> admin = read_admin_token(*admin_file);
    if (!admin.ok()) return admin.status();
    for (const TokenEntry& entry : tokens) {
      if (entry.token == *admin) {
        return InvalidArgument("admin_token_file " + quote(admin_file->string(), 1024) +
                               ": its token is also in " + std::string(token_setting) + " " +
                               quote(token_file->string(), 1024) +
                               "; give the token its scopes in one place");
      }
    }
    tokens.push_back(TokenEntry{std::move(admin).value(), kAdminTokenScopes});
  }
  return tokens;
}

ScopeSet granted_but_open(const TokenList& tokens, ScopeSet open) noexcept {
  std::uint8_t granted = 0;
  for (const TokenEntry& entry : tokens) granted |= entry.scopes.bits();
  return ScopeSet::of_bits(static_cast<std::uint8_t>(granted & open.bits()));
}

std::string open_scope_warning(const TokenList& tokens, ScopeSet open) {
  const ScopeSet both = granted_but_open(tokens, open);
  if (both.bits() == 0) return "";
  const std::string names = to_string(both);
  const std::string closed =
      to_string(ScopeSet::of_bits(static_cast<std::uint8_t>(open.bits() & ~both.bits())));
  return "scopes=" + names + " open_scopes=" + to_string(open) + " message=\"token_file grants " +
         names +
         ", which open_scopes serves without any token, so the grant changes nothing; to require "
         "a token for it, set open_scopes to " +
         closed + " (--open-scopes " + closed + ", FLURRY_OPEN_SCOPES=" + closed + ")\"";
}

const TokenEntry* token_with(const TokenList& tokens, Scope scope) noexcept {
  for (const TokenEntry& entry : tokens) {
    if (entry.scopes.has(scope)) return &entry;
  }
  return nullptr;
}

}  // namespace flurry::ops

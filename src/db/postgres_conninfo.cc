#include "db/postgres_conninfo.h"

#include <libpq-fe.h>

#include <cctype>
#include <charconv>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/percent.h"
#include "core/quote.h"
#include "libpq_loader.h"

namespace flurry::internal {
namespace {

constexpr std::string_view kMask = "***";

// The connection parameters that hold a secret: the server password and the passphrase of the
// client's SSL key.
bool is_secret_key(std::string_view key) {
  return key == "password" || key == "sslpassword";
}

bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

bool is_url(std::string_view text) {
  return text.starts_with("postgresql://") || text.starts_with("postgres://");
}

// A URL's user information or parameter as libpq decodes it: RFC 3986's %XX, '+' staying a '+'.
// Empty for a malformed escape: libpq refuses the whole string then ("invalid percent-encoded
// token: \"<the text as written>\""), so there is no decoded value to find in its message, only
// the text as written, which the callers mask anyway.
std::string url_decoded(std::string_view text) {
  std::string out;
  if (!percent_decode(text, out, PlusSign::kPlus).ok()) out.clear();
  return out;
}

// Where a password is written in a connection string: the byte range of its text, and the value
// libpq reads from it (percent-decoded, or with key=value escapes removed).
struct Secret {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::string value;
};

// A URL, the way libpq reads one: "scheme://[user[:password]@]hosts[/dbname][?key=value&...]".
// The credentials end at the first '@' before any '/'; the password is after the first ':' there.
std::vector<Secret> url_secrets(std::string_view url) {
  std::vector<Secret> out;
  const std::size_t start = url.find("://") + 3;
  std::size_t p = start;
  while (p < url.size() && url[p] != '@' && url[p] != '/') ++p;
  if (p < url.size() && url[p] == '@') {
    const std::size_t at = p;
    const std::size_t colon = url.substr(start, at - start).find(':');
    if (colon != std::string_view::npos) {
      const std::size_t begin = start + colon + 1;
      out.push_back({begin, at, url_decoded(url.substr(begin, at - begin))});
    }
  }
  const std::size_t query = url.find('?', p);
  if (query == std::string_view::npos) return out;
  std::size_t pos = query + 1;
  while (pos <= url.size()) {
    std::size_t amp = url.find('&', pos);
    if (amp == std::string_view::npos) amp = url.size();
    const std::string_view param = url.substr(pos, amp - pos);
    const std::size_t eq = param.find('=');
    if (eq != std::string_view::npos && is_secret_key(url_decoded(param.substr(0, eq)))) {
      const std::size_t begin = pos + eq + 1;
      out.push_back({begin, amp, url_decoded(url.substr(begin, amp - begin))});
    }
    pos = amp + 1;
  }
  return out;
}

// key=value pairs, the way libpq reads them: whitespace between pairs and around '=', a value
// either bare (up to whitespace) or in single quotes, '\' escaping the next character in both.
std::vector<Secret> keyword_secrets(std::string_view text) {
  std::vector<Secret> out;
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    while (i < n && is_space(text[i])) ++i;
    if (i == n) break;
    const std::size_t key_begin = i;
    while (i < n && text[i] != '=' && !is_space(text[i])) ++i;
    const std::string_view key = text.substr(key_begin, i - key_begin);
    while (i < n && is_space(text[i])) ++i;
    if (i == n || text[i] != '=') break;  // malformed: libpq refuses it
    ++i;
    while (i < n && is_space(text[i])) ++i;
    Secret value;
    const bool quoted = i < n && text[i] == '\'';
    if (quoted) ++i;
    value.begin = i;
    while (i < n) {
      if (quoted ? text[i] == '\'' : is_space(text[i])) break;
      if (text[i] == '\\' && i + 1 < n) ++i;
      value.value += text[i];
      ++i;
    }
    value.end = i;
    if (quoted && i < n) ++i;  // the closing quote
    if (is_secret_key(key)) out.push_back(std::move(value));
  }
  return out;
}

std::vector<Secret> secrets(std::string_view text) {
  return is_url(text) ? url_secrets(text) : keyword_secrets(text);
}

void replace_all(std::string& text, std::string_view what, std::string_view with) {
  if (what.empty()) return;
  for (std::size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + with.size())) {
    text.replace(at, what.size(), with);
  }
}

}  // namespace

Result<PostgresUrl> PostgresUrl::parse(std::string_view url) {
  if (url.empty()) {
    return InvalidArgument(
        "the PostgreSQL connection string is empty; expected a URL "
        "(postgresql://user@host:5432/dbname) or key=value pairs (host=... dbname=...)");
  }
  if (url.find('\0') != std::string_view::npos) {
    return InvalidArgument("the PostgreSQL connection string contains a NUL byte");
  }
  if (!is_url(url) && url.find('=') == std::string_view::npos) {
    return InvalidArgument(
        "the PostgreSQL connection string is neither a URL starting with postgresql:// or "
        "postgres:// nor key=value pairs (host=... dbname=...)");
  }
  if (Status st = load_libpq(); !st.ok()) return st;
  const std::string text(url);
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(text.c_str(), &error);
  if (options == nullptr) {
    std::string why = error != nullptr ? error : "out of memory";
    if (error != nullptr) PQfreemem(error);
    while (!why.empty() && is_space(why.back())) why.pop_back();
    return InvalidArgument("bad PostgreSQL connection string: " +
                           scrub_postgres_password(std::move(why), url));
  }
  PostgresUrl parsed;
  parsed.text_ = text;
  parsed.redacted_ = redact_postgres_url(url);
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) parsed.settings_.emplace_back(o->keyword, o->val);
  }
  PQconninfoFree(options);
  if (Status st = parsed.read_tls(); !st.ok()) return st;
  // libpq checks the port only when connecting, where a typo would look like a network failure.
  const std::string ports = parsed.setting("port");
  const std::string_view all(ports);
  for (std::size_t begin = 0; begin <= all.size();) {
    std::size_t end = all.find(',', begin);
    if (end == std::string_view::npos) end = all.size();
    const std::string_view port = all.substr(begin, end - begin);
    unsigned value = 0;
    const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (!port.empty() &&
        (ec != std::errc() || ptr != port.data() + port.size() || value == 0 || value > 65535)) {
      return InvalidArgument("bad PostgreSQL connection string: " + quote(port) +
                             " is not a port number (1-65535)");
    }
    begin = end + 1;
  }
  return parsed;
}

std::string_view to_string(PgSslMode mode) {
  switch (mode) {
    case PgSslMode::kDisable:
      return "disable";
    case PgSslMode::kAllow:
      return "allow";
    case PgSslMode::kPrefer:
      return "prefer";
    case PgSslMode::kRequire:
      return "require";
    case PgSslMode::kVerifyCa:
      return "verify-ca";
    case PgSslMode::kVerifyFull:
      return "verify-full";
  }
  return "?";
}

Status PostgresUrl::read_tls() {
  for (const auto& [key, value] : settings_) {
    if (key == "sslmode") {
      for (const PgSslMode mode :
           {PgSslMode::kDisable, PgSslMode::kAllow, PgSslMode::kPrefer, PgSslMode::kRequire,
            PgSslMode::kVerifyCa, PgSslMode::kVerifyFull}) {
        if (value == to_string(mode)) tls_.mode = mode;
      }
      if (!tls_.mode) {
        return InvalidArgument("bad PostgreSQL connection string: sslmode " + quote(value) +
                               " is not one of disable, allow, prefer, require, verify-ca, "
                               "verify-full");
      }
    } else if (key == "sslrootcert") {
      tls_.root_cert = value;
    } else if (key == "sslcert") {
      tls_.cert = value;
    } else if (key == "sslkey") {
      tls_.key = value;
    } else if (key == "sslpassword") {
      tls_.key_password_set = true;
    } else if (key == "passfile") {
      tls_.passfile = value;
    }
  }
  return OkStatus();
}

std::optional<std::string> postgres_downgrade_warning(const PostgresUrl& url,
                                                      std::string_view whose,
                                                      const char* env_sslmode,
                                                      const char* env_host) {
  if (url.tls().mode || (env_sslmode != nullptr && *env_sslmode != '\0')) return std::nullopt;
  // Where libpq may connect: hostaddr when given (an IP address), else host, else PGHOST, else
  // the default Unix socket. Lists are comma-separated (one entry a host).
  std::string hosts = url.setting("hostaddr");
  if (hosts.empty()) hosts = url.setting("host");
  if (hosts.empty() && env_host != nullptr) hosts = env_host;
  const auto local = [](std::string_view host) {
    return host.empty() || host.starts_with('/') || host.starts_with('@') || host == "localhost" ||
           host == "::1" || host.starts_with("127.");
  };
  std::string_view all(hosts);
  bool remote = false;
  for (std::size_t begin = 0; begin <= all.size();) {
    std::size_t end = all.find(',', begin);
    if (end == std::string_view::npos) end = all.size();
    remote |= !local(all.substr(begin, end - begin));
    begin = end + 1;
  }
  if (!remote) return std::nullopt;
  return std::string(whose) + " " + url.redacted() +
         ": no sslmode is set (neither in the connection string nor PGSSLMODE), so libpq uses "
         "sslmode=prefer, which a man in the middle can downgrade to plain text (password and "
         "leases readable and writable on the way); set sslmode=verify-full with sslrootcert "
         "(docs/operations.md, \"PostgreSQL over TLS\")";
}

std::string PostgresUrl::setting(std::string_view keyword) const {
  for (const auto& [key, value] : settings_) {
    if (key == keyword) return value;
  }
  return {};
}

Status check_postgres_url(std::string_view url) {
  return PostgresUrl::parse(url).status();
}

std::string redact_postgres_url(std::string_view url) {
  std::string out(url);
  const std::vector<Secret> found = secrets(url);
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    out.replace(it->begin, it->end - it->begin, kMask);
  }
  return out;
}

std::string scrub_postgres_password(std::string message, std::string_view url) {
  // libpq quotes what it cannot parse ("invalid percent-encoded token: \"...\""): a quoted
  // password goes whatever its length. Unquoted, only passwords of 4 bytes or more are masked, so
  // that a one-letter password does not turn every such letter of the message into "***".
  constexpr std::size_t kMinUnquoted = 4;
  for (const Secret& s : secrets(url)) {
    for (const std::string_view secret :
         {url.substr(s.begin, s.end - s.begin), std::string_view(s.value)}) {
      if (secret.empty()) continue;
      std::string quoted(1, '"');
      quoted.append(secret).push_back('"');
      replace_all(message, quoted, "\"***\"");
      if (secret.size() >= kMinUnquoted) replace_all(message, secret, kMask);
    }
  }
  return message;
}

}  // namespace flurry::internal

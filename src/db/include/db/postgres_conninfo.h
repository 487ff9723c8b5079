// Internal: PostgreSQL connection strings as the registry takes them, checked and shown without
// their password. Two forms, as libpq reads them: a URL ("postgresql://user:secret@host:5432/db?
// sslmode=require", scheme postgresql:// or postgres://) or key=value pairs ("host=db port=5432
// dbname=flurry password='a b'").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/status.h"

namespace flurry::internal {

// libpq's sslmode values, weakest first. Only verify-full checks both the server's certificate
// (against sslrootcert) and that it is the certificate of the host connected to.
enum class PgSslMode { kDisable, kAllow, kPrefer, kRequire, kVerifyCa, kVerifyFull };

// libpq's name of `mode` ("verify-full").
[[nodiscard]] std::string_view to_string(PgSslMode mode);

// The TLS and credential-file settings a connection string gives, typed. Paths as written (libpq
// reads the files when it connects, and names the file and the cause when one is bad).
struct PostgresTls {
  // sslmode; nullopt when the string does not say (PGSSLMODE, then libpq's default "prefer").
  std::optional<PgSslMode> mode;
  std::string root_cert;          // sslrootcert: the CA that signs the server's certificate
  std::string cert;               // sslcert: the client's certificate (cert authentication)
  std::string key;                // sslkey: its private key
  bool key_password_set = false;  // sslpassword was given (its value is kept only in text())
  std::string passfile;           // passfile: where the password is read from
};

// A PostgreSQL connection string parsed and checked once, at the edge: the text as written, the
// text with its secrets masked, and the settings libpq reads from it. Whatever holds one needs
// neither to check nor to parse the text again. Immutable; copies are cheap enough for
// configuration (a handful of short strings).
class PostgresUrl {
 public:
  // The settings written in `text` (keyword, value), as libpq reads them, in libpq's order of
  // keywords. INVALID_ARGUMENT as check_postgres_url says, and for an sslmode that is not one of
  // libpq's (which libpq itself finds only when connecting).
  [[nodiscard]] static Result<PostgresUrl> parse(std::string_view text);

  // As written, secrets included: only for handing to libpq.
  [[nodiscard]] const std::string& text() const noexcept { return text_; }
  // For logs and messages (redact_postgres_url).
  [[nodiscard]] const std::string& redacted() const noexcept { return redacted_; }
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& settings() const noexcept {
    return settings_;
  }
  // The value of setting `keyword`; empty when the string does not give it.
  [[nodiscard]] std::string setting(std::string_view keyword) const;
  [[nodiscard]] const PostgresTls& tls() const noexcept { return tls_; }

 private:
  PostgresUrl() = default;
  // tls_ from settings_; INVALID_ARGUMENT for an sslmode libpq does not know.
  [[nodiscard]] Status read_tls();
  std::string text_;
  std::string redacted_;
  std::vector<std::pair<std::string, std::string>> settings_;
  PostgresTls tls_;
};

// The warning a server logs at start (event=config_warning) for a connection whose TLS a man in
// the middle can strip: neither the string nor PGSSLMODE (`env_sslmode`, null when unset) names
// an sslmode, so libpq uses "prefer" (TLS when the server offers it, plain text when anyone in
// between says it does not), and a host it may connect to is neither loopback nor a Unix socket
// (`env_host`: PGHOST, for a string that names no host). nullopt when there is nothing to warn of.
// The message names `whose` and the URL redacted, and recommends verify-full.
[[nodiscard]] std::optional<std::string> postgres_downgrade_warning(const PostgresUrl& url,
                                                                    std::string_view whose,
                                                                    const char* env_sslmode,
                                                                    const char* env_host);

// OK when `url` is a PostgreSQL URL or a key=value connection string that libpq can parse.
// INVALID_ARGUMENT otherwise, with libpq's reason (the password never appears in the message).
// Thread-safe. PostgresUrl::parse(url).status().
[[nodiscard]] Status check_postgres_url(std::string_view url);

// `url` with every secret in it (the URL's user:password@ part, a password= or sslpassword= query
// parameter or key=value pair, percent-encoded or not) replaced by "***", for logs and messages;
// the rest unchanged. Text that is neither form is returned as it is. Thread-safe.
[[nodiscard]] std::string redact_postgres_url(std::string_view url);

// `message` with the passwords written in `url` (as written and as libpq reads them) replaced by
// "***": libpq quotes parts of a malformed connection string in its errors. Quoted ("...")
// occurrences are masked whatever the password's length, bare ones when it has 4 bytes or more
// (so that a one-letter password does not mangle the message). Thread-safe.
[[nodiscard]] std::string scrub_postgres_password(std::string message, std::string_view url);

}  // namespace flurry::internal

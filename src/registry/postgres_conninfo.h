// Internal: PostgreSQL connection strings as the registry takes them, checked and shown without
// their password. Two forms, as libpq reads them: a URL ("postgresql://user:secret@host:5432/db?
// sslmode=require", scheme postgresql:// or postgres://) or key=value pairs ("host=db port=5432
// dbname=flurry password='a b'").
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/status.h"

namespace flurry::internal {

// A PostgreSQL connection string parsed and checked once, at the edge: the text as written, the
// text with its secrets masked, and the settings libpq reads from it. Whatever holds one needs
// neither to check nor to parse the text again. Immutable; copies are cheap enough for
// configuration (a handful of short strings).
class PostgresUrl {
 public:
  // The settings written in `text` (keyword, value), as libpq reads them, in libpq's order of
  // keywords. INVALID_ARGUMENT as check_postgres_url says.
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

 private:
  PostgresUrl() = default;
  std::string text_;
  std::string redacted_;
  std::vector<std::pair<std::string, std::string>> settings_;
};

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

// Internal: PostgreSQL connection strings as the registry takes them, checked and shown without
// their password. Two forms, as libpq reads them: a URL ("postgresql://user:secret@host:5432/db?
// sslmode=require", scheme postgresql:// or postgres://) or key=value pairs ("host=db port=5432
// dbname=flurry password='a b'").
#pragma once

#include <string>
#include <string_view>

#include "flurry/status.h"

namespace flurry::internal {

// OK when `url` is a PostgreSQL URL or a key=value connection string that libpq can parse.
// INVALID_ARGUMENT otherwise, with libpq's reason (the password never appears in the message).
// Thread-safe.
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

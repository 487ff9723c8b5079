// libpq, loaded when PostgreSQL is first used instead of when the process starts.
//
// libpq brings OpenSSL, GSSAPI/Kerberos, LDAP and GnuTLS with it: about 3.5 MB of a server's
// resident memory at idle, for a feature most servers (SQLite registry and segment store) never
// use. So flurry does not link it: libpq_loader.cc defines the libpq functions flurry calls, each
// forwarding to libpq.so.5 opened with dlopen() at the first call of load_libpq(). Every way into
// libpq (parsing a connection string, opening a session) calls load_libpq() first and fails with
// its Status when the library is missing.
#pragma once

#include "flurry/status.h"

namespace flurry::internal {

// OK once libpq.so.5 is loaded (the first call loads it; thread-safe). FAILED_PRECONDITION naming
// the library, the loader's error and the package to install when it cannot be loaded.
[[nodiscard]] Status load_libpq();

}  // namespace flurry::internal

// The libpq functions flurry calls, forwarding to libpq.so.5 loaded on first use (libpq_loader.h).
// A function added to flurry's use of libpq must be added to FLURRY_LIBPQ_FUNCTIONS, or the link
// of any binary using flurry::registry fails on it (libpq itself is not linked).
#include "libpq_loader.h"

#include <dlfcn.h>
#include <libpq-fe.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

// X(name, return type, parameters, arguments)
#define FLURRY_LIBPQ_FUNCTIONS(X)                                                                  \
  X(PQconninfoParse, PQconninfoOption*, (const char* conninfo, char** errmsg), (conninfo, errmsg)) \
  X(PQconninfoFree, void, (PQconninfoOption * options), (options))                                 \
  X(PQfreemem, void, (void* ptr), (ptr))                                                           \
  X(PQconnectStartParams, PGconn*,                                                                 \
    (const char* const* keywords, const char* const* values, int expand_dbname),                   \
    (keywords, values, expand_dbname))                                                             \
  X(PQconnectPoll, PostgresPollingStatusType, (PGconn * conn), (conn))                             \
  X(PQstatus, ConnStatusType, (const PGconn* conn), (conn))                                        \
  X(PQtransactionStatus, PGTransactionStatusType, (const PGconn* conn), (conn))                    \
  X(PQerrorMessage, char*, (const PGconn* conn), (conn))                                           \
  X(PQsocket, int, (const PGconn* conn), (conn))                                                   \
  X(PQsetNoticeProcessor, PQnoticeProcessor, (PGconn * conn, PQnoticeProcessor proc, void* arg),   \
    (conn, proc, arg))                                                                             \
  X(PQsetnonblocking, int, (PGconn * conn, int arg), (conn, arg))                                  \
  X(PQsendQueryParams, int,                                                                        \
    (PGconn * conn, const char* command, int nParams, const Oid* paramTypes,                       \
     const char* const* paramValues, const int* paramLengths, const int* paramFormats,             \
     int resultFormat),                                                                            \
    (conn, command, nParams, paramTypes, paramValues, paramLengths, paramFormats, resultFormat))   \
  X(PQflush, int, (PGconn * conn), (conn))                                                         \
  X(PQconsumeInput, int, (PGconn * conn), (conn))                                                  \
  X(PQisBusy, int, (PGconn * conn), (conn))                                                        \
  X(PQgetResult, PGresult*, (PGconn * conn), (conn))                                               \
  X(PQresultStatus, ExecStatusType, (const PGresult* res), (res))                                  \
  X(PQresultErrorMessage, char*, (const PGresult* res), (res))                                     \
  X(PQresultErrorField, char*, (const PGresult* res, int fieldcode), (res, fieldcode))             \
  X(PQntuples, int, (const PGresult* res), (res))                                                  \
  X(PQgetvalue, char*, (const PGresult* res, int tup_num, int field_num),                          \
    (res, tup_num, field_num))                                                                     \
  X(PQgetlength, int, (const PGresult* res, int tup_num, int field_num),                           \
    (res, tup_num, field_num))                                                                     \
  X(PQgetisnull, int, (const PGresult* res, int tup_num, int field_num),                           \
    (res, tup_num, field_num))                                                                     \
  X(PQfinish, void, (PGconn * conn), (conn))                                                       \
  X(PQclear, void, (PGresult * res), (res))

namespace flurry::internal {
namespace {

constexpr const char* kLibpq = "libpq.so.5";

struct Libpq {
#define FLURRY_LIBPQ_POINTER(name, ret, params, args) decltype(&::name) name = nullptr;
  FLURRY_LIBPQ_FUNCTIONS(FLURRY_LIBPQ_POINTER)
#undef FLURRY_LIBPQ_POINTER
  Status status;
};

Libpq& libpq() {
  static Libpq lib;
  static std::once_flag once;
  std::call_once(once, [] {
    const auto missing = [](const std::string& why) {
      return Status(
          StatusCode::kFailedPrecondition,
          std::string("PostgreSQL needs libpq (") + kLibpq + ", Debian's package libpq5), " + why);
    };
    // RTLD_LOCAL: its symbols stay out of the global scope, where this file's have the names.
    void* handle = ::dlopen(kLibpq, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = ::dlerror();
      lib.status = missing(std::string("which cannot be loaded: ") +
                           (error != nullptr ? error : "unknown error"));
      return;
    }
#define FLURRY_LIBPQ_RESOLVE(name, ret, params, args)                                 \
  lib.name = reinterpret_cast<decltype(&::name)>(::dlsym(handle, #name));             \
  if (lib.name == nullptr) {                                                          \
    lib.status = missing(std::string("whose ") + kLibpq + " has no function " #name); \
    return;                                                                           \
  }
    FLURRY_LIBPQ_FUNCTIONS(FLURRY_LIBPQ_RESOLVE)
#undef FLURRY_LIBPQ_RESOLVE
  });
  return lib;
}

// The functions below are reached only after load_libpq() succeeded (every way in checks it).
const Libpq& loaded() {
  const Libpq& lib = libpq();
  if (!lib.status.ok()) {
    std::fprintf(stderr, "flurry: libpq called without load_libpq(): %s\n",
                 lib.status.to_string().c_str());
    std::abort();
  }
  return lib;
}

}  // namespace

Status load_libpq() {
  return libpq().status;
}

}  // namespace flurry::internal

extern "C" {
#define FLURRY_LIBPQ_FORWARD(name, ret, params, args) \
  ret name params {                                   \
    return flurry::internal::loaded().name args;      \
  }
FLURRY_LIBPQ_FUNCTIONS(FLURRY_LIBPQ_FORWARD)
#undef FLURRY_LIBPQ_FORWARD
}

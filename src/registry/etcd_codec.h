// Internal: etcd's v3 JSON gateway as text, without any connection: the JSON bodies the etcd
// client sends (/v3/kv/range, /v3/kv/txn, /v3/lease/*, /v3/auth/authenticate) and the parsers of
// the answers it gets, base64 of keys and values, and the Date header of an answer. The client
// (etcd_client.h) does the requests; this file only says what goes on the wire. Not public API.
//
// Keys and values travel base64-encoded; int64 fields come back as JSON strings (or numbers), and
// fields at their default value are left out (a failed txn has no "succeeded", an empty range no
// "kvs"), so every parser here reads an absent field as its default.
//
// Errors: every parser refuses an answer that is not what the gateway sends (not JSON, not an
// object, a field of the wrong type, bad base64, an int64 out of range, a missing lease ID...)
// with INVALID_ARGUMENT / BAD_INPUT saying which field is wrong, the offending text quoted and
// cut short (core/quote.h); the client turns that into INTERNAL naming the endpoint and the path.
// Nothing here throws. Thread safety: pure functions and plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/status.h"

namespace flurry::internal {

// Standard base64 (RFC 4648, alphabet A-Z a-z 0-9 + /) with '=' padding.
[[nodiscard]] std::string base64_encode(std::string_view bytes);
// The inverse of base64_encode: strict (length a multiple of 4, padding only at the end, no
// other characters, no stray bits in the last group). INVALID_ARGUMENT otherwise.
[[nodiscard]] Result<std::string> base64_decode(std::string_view text);

// etcd's range_end for "every key that starts with `prefix`": the prefix with its last byte
// below 0xff incremented and the rest dropped. `prefix` must not be empty or all 0xff bytes.
[[nodiscard]] std::string etcd_prefix_end(std::string_view prefix);

// An HTTP date (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT") as Unix milliseconds; none when
// the text is not one.
[[nodiscard]] std::optional<std::int64_t> parse_http_date(std::string_view text);

// ---- Requests ----

struct EtcdCompare {
  enum class Target { kCreateRevision, kModRevision, kVersion, kValue, kLease };
  enum class Result { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kCreateRevision;
  Result result = Result::kEqual;
  std::int64_t number = 0;  // the revision, version or lease ID compared with
  std::string value;        // kValue

  // create_revision(key) == revision: 0 means "the key does not exist".
  [[nodiscard]] static EtcdCompare create_revision(std::string key, std::int64_t revision);
  [[nodiscard]] static EtcdCompare mod_revision(std::string key, std::int64_t revision);
  [[nodiscard]] static EtcdCompare lease(std::string key, std::int64_t lease_id);
  // value(key) == value; false when the key does not exist.
  [[nodiscard]] static EtcdCompare value_equals(std::string key, std::string value);
};

struct EtcdOp {
  enum class Kind { kRange, kPut, kDelete };
  Kind kind = Kind::kRange;
  std::string key;
  std::string range_end;   // kRange, kDelete: empty for the one key
  std::string value;       // kPut
  std::int64_t lease = 0;  // kPut: 0 for none

  [[nodiscard]] static EtcdOp range(std::string key, std::string range_end = {});
  [[nodiscard]] static EtcdOp put(std::string key, std::string value, std::int64_t lease = 0);
  [[nodiscard]] static EtcdOp remove(std::string key, std::string range_end = {});
};

struct EtcdTxn {
  std::vector<EtcdCompare> compare;
  std::vector<EtcdOp> success;
  std::vector<EtcdOp> failure;
};

// The JSON bodies the gateway takes.
[[nodiscard]] std::string etcd_range_body(std::string_view key, std::string_view range_end,
                                          bool keys_only);
[[nodiscard]] std::string etcd_txn_body(const EtcdTxn& txn);
[[nodiscard]] std::string etcd_lease_body(std::int64_t id);
// /v3/lease/grant: a lease of `ttl_seconds`.
[[nodiscard]] std::string etcd_grant_body(std::int64_t ttl_seconds);
// /v3/auth/authenticate.
[[nodiscard]] std::string etcd_authenticate_body(std::string_view user, std::string_view password);

// ---- Answers ----

struct EtcdKeyValue {
  std::string key;
  std::string value;  // empty for keys_only ranges
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  std::int64_t lease = 0;  // 0: none
};

struct EtcdRange {
  std::int64_t revision = 0;  // the store's revision when read
  std::vector<EtcdKeyValue> kvs;
  std::int64_t count = 0;
  bool more = false;
};

struct EtcdOpResult {
  EtcdOp::Kind kind = EtcdOp::Kind::kRange;
  EtcdRange range;           // kRange
  std::int64_t deleted = 0;  // kDelete
};

struct EtcdTxnResult {
  bool succeeded = false;
  // The store's revision after the txn: the create_revision of a key the txn created.
  std::int64_t revision = 0;
  // One per operation of the branch that ran, in order.
  std::vector<EtcdOpResult> responses;
};

struct EtcdLeaseGrant {
  std::int64_t id = 0;
  std::int64_t ttl_seconds = 0;  // what etcd granted (at least its minimum TTL)
};

struct EtcdLeaseTtl {
  // Seconds left, by the leader's clock; -1 when the lease has expired or never existed.
  std::int64_t ttl_seconds = -1;
  std::int64_t granted_ttl_seconds = 0;
};

// Parsers of the gateway's 200 answers. INVALID_ARGUMENT saying what is malformed (the client
// turns that into INTERNAL naming the endpoint).
[[nodiscard]] Result<EtcdRange> parse_etcd_range(std::string_view body);
[[nodiscard]] Result<EtcdTxnResult> parse_etcd_txn(std::string_view body);
[[nodiscard]] Result<EtcdLeaseGrant> parse_etcd_grant(std::string_view body);
// A keep-alive answer (the first message of the stream): the TTL etcd renewed the lease to, or
// none when the lease has expired or was revoked (etcd leaves TTL out then).
[[nodiscard]] Result<std::optional<std::int64_t>> parse_etcd_keepalive(std::string_view body);
[[nodiscard]] Result<EtcdLeaseTtl> parse_etcd_time_to_live(std::string_view body);

// An error answer: {"error": "...", "code": N, "message": "..."} for unary calls, or
// {"error": {"grpc_code": N, "message": "..."}} on a stream (keep-alive). None when `body` is
// neither.
struct EtcdError {
  int code = 0;  // the gRPC code
  std::string message;
};
[[nodiscard]] std::optional<EtcdError> parse_etcd_error(std::string_view body);

// The token of a /v3/auth/authenticate answer. INVALID_ARGUMENT when it has none (the message
// never quotes the answer: it may hold a token).
[[nodiscard]] Result<std::string> parse_etcd_token(std::string_view body);

// Whether the first message of `body` (the text up to its first newline: a keep-alive answer is
// a stream of them) is JSON: what a 200 answer of the gateway always is.
[[nodiscard]] bool etcd_answer_is_json(std::string_view body);

}  // namespace flurry::internal

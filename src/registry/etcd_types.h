// Internal: the plain values of etcd's KV and lease calls as the etcd client (etcd_client.h) takes
// and gives them: comparisons, operations and transactions, key-values, ranges, leases. The etcd
// module (etcd_module/, which speaks etcd's gRPC API) turns them into etcd's protocol messages and
// back; it may include this header because everything here is header-defined (the module calls
// none of flurry's out-of-line code). Thread safety: plain values. Not public API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flurry::internal {

// etcd's range_end for "every key that starts with `prefix`": the prefix with its last byte
// below 0xff incremented and the rest dropped; "\0" (every key) when `prefix` is empty or all
// 0xff bytes.
[[nodiscard]] inline std::string etcd_prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

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
  [[nodiscard]] static EtcdCompare create_revision(std::string key, std::int64_t revision) {
    return {std::move(key), Target::kCreateRevision, Result::kEqual, revision, {}};
  }
  [[nodiscard]] static EtcdCompare mod_revision(std::string key, std::int64_t revision) {
    return {std::move(key), Target::kModRevision, Result::kEqual, revision, {}};
  }
  [[nodiscard]] static EtcdCompare lease(std::string key, std::int64_t lease_id) {
    return {std::move(key), Target::kLease, Result::kEqual, lease_id, {}};
  }
  // value(key) == value; false when the key does not exist.
  [[nodiscard]] static EtcdCompare value_equals(std::string key, std::string value) {
    return {std::move(key), Target::kValue, Result::kEqual, 0, std::move(value)};
  }
};

struct EtcdOp {
  enum class Kind { kRange, kPut, kDelete };
  Kind kind = Kind::kRange;
  std::string key;
  std::string range_end;   // kRange, kDelete: empty for the one key
  std::string value;       // kPut
  std::int64_t lease = 0;  // kPut: 0 for none

  [[nodiscard]] static EtcdOp range(std::string key, std::string range_end = {}) {
    return {Kind::kRange, std::move(key), std::move(range_end), {}, 0};
  }
  [[nodiscard]] static EtcdOp put(std::string key, std::string value, std::int64_t lease = 0) {
    return {Kind::kPut, std::move(key), {}, std::move(value), lease};
  }
  [[nodiscard]] static EtcdOp remove(std::string key, std::string range_end = {}) {
    return {Kind::kDelete, std::move(key), std::move(range_end), {}, 0};
  }
};

struct EtcdTxn {
  std::vector<EtcdCompare> compare;
  std::vector<EtcdOp> success;
  std::vector<EtcdOp> failure;
};

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

}  // namespace flurry::internal

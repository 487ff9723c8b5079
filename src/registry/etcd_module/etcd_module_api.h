// Internal: the interface between the etcd client (etcd_client.cc, in flurry::registry) and the
// module flurry_etcd.so (etcd_module.cc), which speaks etcd's gRPC API through gRPC's library.
// The module is loaded with dlopen() only when a process uses the etcd registry, so that a server
// on SQLite, PostgreSQL or a static node ID maps neither gRPC nor protobuf.
//
// As the TLS module's interface (src/tls/module_api.h): the module links none of flurry's
// libraries and calls none of flurry's out-of-line code. Only header-defined types cross
// (std::string, std::vector, etcd_types.h's plain values) and errors cross as the gRPC status code
// and etcd's message (RawStatus); the client turns them into Status. The module does one call on
// one endpoint; failover, authentication and the streams' threads are the client's.
//
// Thread safety: a RawChannel may be used from any thread at once. A stream's write methods may
// run on one thread while read() runs on another (the client serializes writes); cancel() may be
// called from any thread at any time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "etcd_types.h"

namespace flurry::internal::etcd_module_api {

// The symbol dlsym() looks up: a `const EtcdModule`. Versioned: a change of EtcdModule's layout
// or of a signature below makes a new name, so an old module is refused as "has no entry point".
inline constexpr const char* kEtcdModuleEntry = "flurry_etcd_module_v1";

// A gRPC status: `code` is grpc::StatusCode's number (0: OK), `message` etcd's or gRPC's text.
struct RawStatus {
  int code = 0;
  std::string message;
  [[nodiscard]] bool ok() const noexcept { return code == 0; }
};

// One endpoint's channel.
struct ChannelSettings {
  std::string target;  // "host:port" ("[v6]:port")
  bool tls = false;
  std::string ca_pem;    // tls: the CA that signs etcd's certificate (empty: the system's)
  std::string cert_pem;  // tls: a client certificate (empty: none) ...
  std::string key_pem;   // ... and its key
  // HTTP/2 keepalive pings while a call is open: one after `ping_interval` without traffic, the
  // connection given up when its answer takes longer than `ping_timeout`.
  std::chrono::milliseconds ping_interval{5000};
  std::chrono::milliseconds ping_timeout{5000};
};

// One answer of a Watch stream.
struct RawWatchEvent {
  bool put = true;  // false: a delete
  EtcdKeyValue kv;
};
struct RawWatchResponse {
  std::int64_t revision = 0;  // the header's revision
  std::int64_t watch_id = 0;
  bool created = false;
  bool canceled = false;
  std::int64_t compact_revision = 0;
  std::string cancel_reason;
  std::vector<RawWatchEvent> events;
};

class RawKeepAliveStream {
 public:
  virtual ~RawKeepAliveStream() = default;
  // Sends a LeaseKeepAliveRequest for lease `id`; false when the stream is broken.
  [[nodiscard]] virtual bool write(std::int64_t id) = 0;
  // The next answer (blocking): lease `id` renewed to `ttl_seconds` (<= 0: the lease is gone);
  // false when the stream ended (then finish() says why).
  [[nodiscard]] virtual bool read(std::int64_t& id, std::int64_t& ttl_seconds) = 0;
  // Once read() gave false: the stream's status.
  [[nodiscard]] virtual RawStatus finish() = 0;
  // Ends the stream: a blocked read() or write() returns false.
  virtual void cancel() = 0;
};

class RawWatchStream {
 public:
  virtual ~RawWatchStream() = default;
  // A WatchCreateRequest for [key, range_end) from `start_revision` (0: now).
  [[nodiscard]] virtual bool create(const std::string& key, const std::string& range_end,
                                    std::int64_t start_revision) = 0;
  // A WatchProgressRequest.
  [[nodiscard]] virtual bool request_progress() = 0;
  [[nodiscard]] virtual bool read(RawWatchResponse& response) = 0;
  [[nodiscard]] virtual RawStatus finish() = 0;
  virtual void cancel() = 0;
};

class RawChannel {
 public:
  virtual ~RawChannel() = default;
  // 1 when the channel is connected or gets connected within `timeout`, 0 when it is still
  // connecting then, -1 when its connection failed (refused, reset, a failed handshake: gRPC's
  // TRANSIENT_FAILURE). A stream is opened only on a connected channel, so that opening it never
  // waits on a member that does not answer.
  [[nodiscard]] virtual int wait_connected(std::chrono::milliseconds timeout) = 0;
  // Unary calls, each with deadline `timeout`; `token` (empty: none) as the metadata "token".
  [[nodiscard]] virtual RawStatus range(const std::string& key, const std::string& range_end,
                                        bool keys_only, std::int64_t revision,
                                        const std::string& token, std::chrono::milliseconds timeout,
                                        EtcdRange& out) = 0;
  [[nodiscard]] virtual RawStatus txn(const EtcdTxn& txn, const std::string& token,
                                      std::chrono::milliseconds timeout, EtcdTxnResult& out) = 0;
  [[nodiscard]] virtual RawStatus grant(std::int64_t ttl_seconds, const std::string& token,
                                        std::chrono::milliseconds timeout, EtcdLeaseGrant& out) = 0;
  [[nodiscard]] virtual RawStatus revoke(std::int64_t id, const std::string& token,
                                         std::chrono::milliseconds timeout) = 0;
  [[nodiscard]] virtual RawStatus time_to_live(std::int64_t id, const std::string& token,
                                               std::chrono::milliseconds timeout,
                                               EtcdLeaseTtl& out) = 0;
  [[nodiscard]] virtual RawStatus authenticate(const std::string& user, const std::string& password,
                                               std::chrono::milliseconds timeout,
                                               std::string& token) = 0;
  // Streams (no deadline: they live until cancelled or broken). A watch stream carries the
  // metadata "hasleader: true", so that etcd cuts it when its member loses the leader.
  [[nodiscard]] virtual std::unique_ptr<RawKeepAliveStream> keep_alive(
      const std::string& token) = 0;
  [[nodiscard]] virtual std::unique_ptr<RawWatchStream> watch(const std::string& token) = 0;
};

struct EtcdModule {
  const char* version;  // FLURRY_VERSION of the build; another one is refused
  // A channel (connecting to nothing yet); null with `error` set when the TLS material is bad.
  std::unique_ptr<RawChannel> (*make_channel)(const ChannelSettings& settings, std::string& error);
  // The Common Name of the first certificate in `cert_pem` ("" when it has none); false with
  // `error` set when `cert_pem` holds no certificate.
  bool (*common_name)(const std::string& cert_pem, std::string& name, std::string& error);
};

}  // namespace flurry::internal::etcd_module_api

// The bytes of StreamRange chunks and Stream answers issued and not yet taken by the transport
// (flow control lets a message go once the client has room for it), per connection (by the
// call's peer address, which names one connection) and for the whole server. A StreamRange
// takes what is left, at least one first chunk; a Stream reads its next request only while some
// is left, or when it has no answer waiting. So a connection holds at most its budget plus a
// first chunk or one answer per stream, and a reader that stops holds that, not more.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "flurry/mutex.h"

namespace flurry::grpc_api {

constexpr std::uint64_t kConnectionStreamBytes = std::uint64_t{2} << 20;
constexpr std::uint64_t kServerStreamBytes = std::uint64_t{32} << 20;

// Thread-safe.
class StreamBudget {
 public:
  // One connection's share; a stream holds it from its start to its end (enter / leave).
  struct Connection {
    std::atomic<std::uint64_t> bytes{0};
  };

  // A stream of the connection `peer` starts: its share, valid until the last stream of that
  // peer leaves.
  Connection* enter(const std::string& peer) FLURRY_EXCLUDES(mu_);
  void leave(const std::string& peer) FLURRY_EXCLUDES(mu_);

  // Takes up to `want` bytes (a multiple of 8) on `c` and on the server: what both have left,
  // but at least `least` whatever they have left (so a stream always moves on). Returns what it
  // took; give it back with give().
  std::uint64_t take(Connection& c, std::uint64_t want, std::uint64_t least)
      FLURRY_EXCLUDES(take_mu_);

  // Whether both the connection and the server have bytes left.
  [[nodiscard]] bool has_room(const Connection& c) const {
    return used_.load(std::memory_order_relaxed) < kServerStreamBytes &&
           c.bytes.load(std::memory_order_relaxed) < kConnectionStreamBytes;
  }

  void give(Connection& c, std::uint64_t bytes) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    c.bytes.fetch_sub(bytes, std::memory_order_relaxed);
  }

  // Bytes held on the whole server, and the streams running.
  [[nodiscard]] std::uint64_t bytes() const { return used_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::size_t streams() const FLURRY_EXCLUDES(mu_);

 private:
  struct Entry {
    Connection connection;
    std::size_t streams = 0;
  };

  mutable Mutex mu_;
  // Orders take()s, so that two streams cannot both take what is left (give() needs none: less
  // held never passes a bound). It guards no member: the counters are atomics.
  Mutex take_mu_;
  // Nodes stay put: pointers to their Connection are handed out.
  std::unordered_map<std::string, Entry> connections_ FLURRY_GUARDED_BY(mu_);
  std::size_t streams_ FLURRY_GUARDED_BY(mu_) = 0;
  std::atomic<std::uint64_t> used_{0};
};

}  // namespace flurry::grpc_api

// The settings of the gRPC front end (src/grpc, flurry/grpc/grpc_server.h), typed. Plain values:
// nothing of gRPC is included here, so the configuration builds without it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "flurry/host_port.h"
#include "tls/tls_options.h"

namespace flurry::grpc_api {

// The most IDs one StreamRange may ask for (grpc_max_range at most): 2^40, eight TiB of IDs.
inline constexpr std::uint64_t kMaxStreamRangeLimit = std::uint64_t{1} << 40;

// How often gRPC re-reads the TLS files (GrpcOptions::tls) with its own file watcher, which
// serves whatever they hold: `flurry serve` names copies that loaded (tls/pinned_files.h).
inline constexpr std::chrono::seconds kGrpcTlsRefresh{10};

struct GrpcOptions {
  // Where the gRPC server listens; unset (grpc_listen = ""): no gRPC server.
  std::optional<HostPort> listen = HostPort{"127.0.0.1", 7610};
  // Concurrent RPCs (HTTP/2 streams) on one connection at most.
  std::uint32_t max_concurrent_streams = 100;
  // Largest message the server sends; a Next or Segments.Next whose response could be larger is
  // refused before anything is issued (RESOURCE_EXHAUSTED: ask for fewer, or use StreamRange).
  // Requests are small: at most 64 KiB is received.
  std::uint64_t max_message_bytes = std::uint64_t{32} << 20;
  // The server pings a connection without traffic this often (HTTP/2 keepalive) and closes it
  // when the ping is not answered within 20 s.
  std::chrono::milliseconds keepalive{60000};
  // A connection without any RPC for this long is closed (GOAWAY).
  std::chrono::milliseconds idle_timeout{300000};
  // The most IDs one StreamRange may ask for.
  std::uint64_t max_range = 1'000'000'000;
  // TLS on the listener when enabled(): the files HTTP's listener uses too (Config::tls, copied
  // here by the composition root). Not enabled: plain HTTP/2.
  tls::TlsOptions tls;
  // A connection whose descriptor number is this or above is closed at once (0: no ceiling). Set
  // by the composition root from RLIMIT_NOFILE less the descriptors kept for the registry, the
  // lease keeper and files (HTTP's listener has the same ceiling) and less a few more left to
  // HTTP's connections, so that /readyz still answers: the kernel hands out the lowest free
  // number, so a descriptor that high means the table is nearly full. Not a setting.
  std::uint64_t descriptor_ceiling = 0;
};

}  // namespace flurry::grpc_api

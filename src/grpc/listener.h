// The gRPC listening socket, opened and accepted on here rather than by gRPC, so that the server
// decides which connections gRPC gets: a connection whose descriptor is at or above the
// descriptor ceiling (GrpcOptions::descriptor_ceiling) is closed at once, keeping the top of the
// descriptor table for the registry, the lease keeper and files, as HTTP's listener does. The
// socket has SO_REUSEADDR and not SO_REUSEPORT: a port another process listens on is refused.
// Accepted connections go to gRPC through its external connection acceptor.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "flurry/status.h"
#include "grpc_api/grpc_options.h"

namespace flurry::grpc_api {

// open() and start() / stop() from one thread (the server's life cycle); rejected() from any.
class Listener {
 public:
  Listener() = default;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener() { stop(); }

  // Binds and listens on `address` (its first address when the host names several). IO naming
  // the address and the system's reason when it cannot.
  [[nodiscard]] Status open(const HostPort& address);

  // The port listened on (the chosen one for port 0), once open.
  [[nodiscard]] int port() const { return port_; }

  // Accepts on a thread of its own until stop(), handing each connection below `ceiling` (0:
  // none) to `acceptor`, which must outlive that thread.
  void start(grpc::experimental::ExternalConnectionAcceptor& acceptor, std::uint64_t ceiling);

  // Stops accepting and closes the socket. Idempotent.
  void stop();

  // Connections closed at once because of the ceiling.
  [[nodiscard]] std::uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }

 private:
  Status io_error(const std::string& where);
  void run(grpc::experimental::ExternalConnectionAcceptor& acceptor, std::uint64_t ceiling);

  int fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<std::uint64_t> rejected_{0};
};

}  // namespace flurry::grpc_api

// The gRPC listener with a descriptor ceiling (listener.h).
#include "listener.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

namespace flurry::grpc_api {

Status Listener::open(const HostPort& address) {
  const std::string where = "grpc_listen " + address.to_string();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (const int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Status(Reason::kIo,
                  where + ": cannot listen there (" + std::string(::gai_strerror(rc)) + ")");
  }
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold(found, &::freeaddrinfo);
  fd_ = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) return io_error(where);
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd_, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd_, SOMAXCONN) != 0) {
    return io_error(where);
  }
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len) != 0) return io_error(where);
  port_ = ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) return io_error(where);
  return OkStatus();
}

void Listener::start(grpc::experimental::ExternalConnectionAcceptor& acceptor,
                     std::uint64_t ceiling) {
  thread_ = std::thread([this, &acceptor, ceiling] { run(acceptor, ceiling); });
}

void Listener::stop() {
  if (thread_.joinable()) {
    const char byte = 0;
    [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
    thread_.join();
  }
  for (int* fd : {&fd_, &wake_[0], &wake_[1]}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

Status Listener::io_error(const std::string& where) {
  const int err = errno;
  return Status(Reason::kIo, where + ": cannot listen there (" + std::strerror(err) + ")");
}

void Listener::run(grpc::experimental::ExternalConnectionAcceptor& acceptor,
                   std::uint64_t ceiling) {
  std::array<pollfd, 2> fds{pollfd{fd_, POLLIN, 0}, pollfd{wake_[0], POLLIN, 0}};
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      spdlog::error("event=grpc_accept_stopped message=\"{}\"", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    for (;;) {
      const int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (conn < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors or memory: pause instead of spinning.
          spdlog::warn("event=grpc_accept_failed message=\"{}\" retry_ms=100",
                       std::strerror(errno));
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        break;  // EAGAIN: back to poll
      }
      if (ceiling != 0 && static_cast<std::uint64_t>(conn) >= ceiling) {
        rejected_.fetch_add(1, std::memory_order_relaxed);
        ::close(conn);
        continue;
      }
      grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters params;
      params.listener_fd = fd_;
      params.fd = conn;
      acceptor.HandleNewConnection(&params);
    }
  }
}

}  // namespace flurry::grpc_api

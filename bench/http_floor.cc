// http_floor: an HTTP/1.1 server that does no work, the reference serve_bench.sh measures beside
// flurry's /v1/ids?count=1. One thread, epoll (level-triggered), non-blocking sockets with
// TCP_NODELAY like flurry's; every request (any method and target, its header ending in a blank
// line; bodies are not supported) is answered with the bytes flurry sends for count=1: the same
// status line, the same headers (the Date formatted once at start) and a body of the same length.
// Pipelined requests read together are answered with one send. What wrk reaches against it is the
// ceiling of the load tool and the kernel's loopback TCP on the machine, whatever the server does.
//
// Usage: http_floor PORT (127.0.0.1; 0 picks a free port). Prints "listening PORT", then serves
// until killed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <unordered_map>

namespace {

std::string response_text() {
  const std::string body = "{\"ids\":[\"123456789012345678\"]}\n";  // a count=1 body's length
  std::array<char, 64> date{};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  const std::size_t date_len =
      std::strftime(date.data(), date.size(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return "HTTP/1.1 200 OK\r\nServer: flurry\r\nDate: " + std::string(date.data(), date_len) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\r\n" + body;
}

int fail(const char* what) {
  std::fprintf(stderr, "http_floor: %s: %s\n", what, std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: http_floor PORT\n");
    return 2;
  }
  const std::string response = response_text();
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0) return fail("socket");
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[1])));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return fail("bind");
  }
  if (::listen(listener, SOMAXCONN) != 0) return fail("listen");
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  std::printf("listening %d\n", ntohs(address.sin_port));
  std::fflush(stdout);

  const int poller = ::epoll_create1(EPOLL_CLOEXEC);
  if (poller < 0) return fail("epoll_create1");
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = listener;
  ::epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event);

  // Per connection: the tail of its input that does not yet end a request header.
  std::unordered_map<int, std::string> pending;
  std::array<epoll_event, 256> events{};
  std::array<char, 16384> input{};
  std::string output;
  for (;;) {
    const int ready = ::epoll_wait(poller, events.data(), static_cast<int>(events.size()), -1);
    if (ready < 0 && errno != EINTR) return fail("epoll_wait");
    for (int i = 0; i < ready; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (fd == listener) {
        for (;;) {
          const int client = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (client < 0) break;
          ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event client_event{};
          client_event.events = EPOLLIN;
          client_event.data.fd = client;
          ::epoll_ctl(poller, EPOLL_CTL_ADD, client, &client_event);
          pending[client];
        }
        continue;
      }
      const ssize_t n = ::recv(fd, input.data(), input.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        ::close(fd);  // also leaves the epoll set
        pending.erase(fd);
        continue;
      }
      std::string& text = pending[fd];
      text.append(input.data(), static_cast<std::size_t>(n));
      output.clear();
      std::size_t consumed = 0;
      for (std::size_t end; (end = text.find("\r\n\r\n", consumed)) != std::string::npos;) {
        output += response;
        consumed = end + 4;
      }
      text.erase(0, consumed);
      // A slow reader is not waited for: a short send drops the rest (the client then stalls),
      // which wrk with one request in flight per connection never causes.
      if (!output.empty()) ::send(fd, output.data(), output.size(), MSG_NOSIGNAL);
    }
  }
}

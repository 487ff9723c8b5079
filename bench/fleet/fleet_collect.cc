// fleet_collect: the ID collector of bench/fleet/fleet.py. It asks a few `flurry serve`
// processes for IDs in turn, as fast as they answer (`GET /v1/ids?count=C&format=text`, one
// keep-alive connection per process), checks each batch (every ID strictly above the one before,
// every ID of the batch on one node) and writes one line per answer to stdout:
//
//   <CLOCK_MONOTONIC ms> <target index> <HTTP status, 0: no connection> <node> <first> <last>
//   <count>
//
// node/first/last/count are 0 for an answer without IDs. A batch that fails its own check is
// written with status 1 (fleet.py counts it as a failure). fleet.py merges the lines of every
// collector and checks that the [first, last] intervals of one node never overlap: IDs of one
// node only grow, and its next owner starts above everything the last one issued.
//
// Usage: fleet_collect SECONDS COUNT INTERVAL_MS NODE_SHIFT NODE_BITS HOST:PORT...
// Asks each process at most once every INTERVAL_MS (0: as fast as it answers), so that the
// collection loads the machine by a chosen amount. Runs until SIGTERM/SIGINT or for SECONDS at
// most. Single-threaded; plain IPv4 addresses only
// (the harness's own namespaces); no dependency beyond libc and the C++ standard library, so it
// runs inside any network namespace through `ip netns exec`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace {

volatile std::sig_atomic_t g_stop = 0;

void on_signal(int) {
  g_stop = 1;
}

std::int64_t mono_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

struct Target {
  std::string host;
  std::uint16_t port = 0;
  sockaddr_in addr{};
  int fd = -1;
  std::int64_t retry_at = 0;  // monotonic ms before which a failed target is not asked again
  int last_status = -1;
};

bool parse_target(std::string_view text, Target& t) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return false;
  t.host = std::string(text.substr(0, colon));
  unsigned port = 0;
  const std::string_view p = text.substr(colon + 1);
  if (std::from_chars(p.data(), p.data() + p.size(), port).ec != std::errc{} || port == 0 ||
      port > 65535) {
    return false;
  }
  t.port = static_cast<std::uint16_t>(port);
  t.addr.sin_family = AF_INET;
  t.addr.sin_port = htons(t.port);
  return inet_pton(AF_INET, t.host.c_str(), &t.addr.sin_addr) == 1;
}

void close_target(Target& t) {
  if (t.fd >= 0) close(t.fd);
  t.fd = -1;
}

// Waits for fd to be ready for `events` until the monotonic deadline; false on timeout or stop.
bool wait_fd(int fd, short events, std::int64_t deadline) {
  while (g_stop == 0) {
    const std::int64_t left = deadline - mono_ms();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(left < 200 ? left : 200));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
  return false;
}

bool connect_target(Target& t, std::int64_t deadline) {
  t.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (t.fd < 0) return false;
  const int one = 1;
  setsockopt(t.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(t.fd, reinterpret_cast<const sockaddr*>(&t.addr), sizeof t.addr) != 0 &&
      errno != EINPROGRESS) {
    close_target(t);
    return false;
  }
  if (!wait_fd(t.fd, POLLOUT, deadline)) {
    close_target(t);
    return false;
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(t.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    close_target(t);
    return false;
  }
  return true;
}

bool send_all(int fd, std::string_view data, std::int64_t deadline) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd, POLLOUT, deadline)) return false;
    } else {
      return false;
    }
  }
  return true;
}

// Reads one response with a Content-Length body into `body`; returns the status, or 0 on a
// broken connection or timeout.
int read_response(int fd, std::string& buf, std::string& body, std::int64_t deadline) {
  buf.clear();
  std::size_t head_end = std::string::npos;
  std::size_t need = 0;
  char chunk[1 << 16];
  for (;;) {
    if (head_end == std::string::npos) {
      head_end = buf.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::string_view head(buf.data(), head_end);
        std::size_t length = 0;
        bool have_length = false;
        std::size_t pos = 0;
        while ((pos = head.find("\r\n", pos)) != std::string_view::npos) {
          pos += 2;
          std::string_view line = head.substr(pos, head.find("\r\n", pos) - pos);
          if (line.size() > 15 && strncasecmp(line.data(), "content-length:", 15) == 0) {
            std::string_view v = line.substr(15);
            while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
            have_length = std::from_chars(v.data(), v.data() + v.size(), length).ec == std::errc{};
          }
        }
        if (!have_length) return 0;
        need = head_end + 4 + length;
      }
    }
    if (head_end != std::string::npos && buf.size() >= need) break;
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      buf.append(chunk, static_cast<std::size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd, POLLIN, deadline)) return 0;
    } else {
      return 0;
    }
  }
  int status = 0;
  if (buf.size() < 12 || buf.compare(0, 5, "HTTP/") != 0) return 0;
  std::from_chars(buf.data() + 9, buf.data() + 12, status);
  body.assign(buf, head_end + 4, need - head_end - 4);
  buf.erase(0, need);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(
        stderr,
        "usage: fleet_collect SECONDS COUNT INTERVAL_MS NODE_SHIFT NODE_BITS HOST:PORT...\n");
    return 2;
  }
  const std::int64_t seconds = std::atoll(argv[1]);
  const long count = std::atol(argv[2]);
  const std::int64_t interval_ms = std::atoll(argv[3]);
  const int node_shift = std::atoi(argv[4]);
  const int node_bits = std::atoi(argv[5]);
  if (seconds <= 0 || count <= 0 || interval_ms < 0 || node_shift < 0 || node_bits <= 0 ||
      node_shift + node_bits > 64) {
    std::fprintf(stderr,
                 "fleet_collect: bad SECONDS, COUNT, INTERVAL_MS, NODE_SHIFT or NODE_BITS\n");
    return 2;
  }
  std::vector<Target> targets;
  for (int i = 6; i < argc; ++i) {
    Target t;
    if (!parse_target(argv[i], t)) {
      std::fprintf(stderr, "fleet_collect: \"%s\" is not IPV4:PORT\n", argv[i]);
      return 2;
    }
    targets.push_back(std::move(t));
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  const std::uint64_t node_mask = (node_bits == 64 ? ~0ULL : ((1ULL << node_bits) - 1));
  const std::int64_t end = mono_ms() + seconds * 1000;
  std::string buf;
  std::string body;
  std::size_t next = 0;
  while (g_stop == 0 && mono_ms() < end) {
    Target& t = targets[next];
    const std::size_t index = next;
    next = (next + 1) % targets.size();
    std::int64_t now = mono_ms();
    if (now < t.retry_at) {
      bool any_ready = false;
      for (const Target& o : targets) any_ready = any_ready || o.retry_at <= now;
      if (!any_ready) usleep(5000);
      continue;
    }
    const std::int64_t deadline = now + 5000;
    t.retry_at = now + interval_ms;
    int status = 0;
    if (t.fd >= 0 || connect_target(t, now + 1000)) {
      const std::string request = "GET /v1/ids?count=" + std::to_string(count) +
                                  "&format=text HTTP/1.1\r\nHost: " + t.host + ":" +
                                  std::to_string(t.port) + "\r\n\r\n";
      if (send_all(t.fd, request, deadline)) status = read_response(t.fd, buf, body, deadline);
    }
    now = mono_ms();
    if (status == 0) {
      close_target(t);
      t.retry_at = now + 50;
    } else if (status != 200) {
      t.retry_at = now + 20;
    }
    if (status != 200) {
      if (status != t.last_status) {
        std::printf("%lld %zu %d 0 0 0 0\n", static_cast<long long>(now), index, status);
        std::fflush(stdout);
      }
      t.last_status = status;
      continue;
    }
    t.last_status = status;
    std::uint64_t first = 0;
    std::uint64_t prev = 0;
    std::uint64_t node = 0;
    long n = 0;
    bool ok = true;
    const char* p = body.data();
    const char* e = p + body.size();
    while (p < e) {
      std::uint64_t id = 0;
      const auto r = std::from_chars(p, e, id);
      if (r.ec != std::errc{} || r.ptr >= e || *r.ptr != '\n') {
        ok = false;
        break;
      }
      p = r.ptr + 1;
      const std::uint64_t id_node = (id >> node_shift) & node_mask;
      if (n == 0) {
        first = id;
        node = id_node;
      } else if (id <= prev || id_node != node) {
        ok = false;
      }
      prev = id;
      ++n;
    }
    if (n == 0) ok = false;
    std::printf("%lld %zu %d %llu %llu %llu %ld\n", static_cast<long long>(now), index,
                ok ? 200 : 1, static_cast<unsigned long long>(node),
                static_cast<unsigned long long>(first), static_cast<unsigned long long>(prev), n);
    std::fflush(stdout);
  }
  std::fflush(stdout);
  return 0;
}

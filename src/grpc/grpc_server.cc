// The gRPC adapter (flurry/grpc/grpc_server.h): flurry.v1's three services on gRPC's callback
// API, over ops::Operations. Each RPC parses its message into the typed values of the operations
// layer once, calls one operation, and writes the result back; nothing here issues, checks or
// decides anything the operations layer owns.
#include "flurry/grpc/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <fcntl.h>
#include <grpcpp/alarm.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>  // std::once_flag
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flurry/codec.h"
#include "flurry/mutex.h"
#include "flurry/ops/retry.h"
#include "flurry/ops/values.h"
#include "flurry/server/metrics.h"
#include "flurry/timefmt.h"
#include "flurry/v1/flurry.grpc.pb.h"
#include "flurry/wide_id.h"

namespace flurry::grpc_api {
namespace {

namespace v1 = ::flurry::v1;
using flurry::Blocking;
using ops::Deferral;
using ops::IdCount;

// Requests are small (the largest, a Segments.Create, carries a 256-byte description).
constexpr int kMaxReceiveBytes = 64 << 10;
// How often health follows readiness: NOT_SERVING within a second of /readyz turning 503.
constexpr std::chrono::milliseconds kHealthPoll{200};
// The services whose health mirrors readiness ("" is the server as a whole).
constexpr std::array<const char*, 2> kHealthServices = {"", "flurry.v1.Ids"};
// IDs per StreamRange message at most: 512 KiB, few enough messages for tens of millions of IDs a
// second. A stream starts at kRangeFirstChunkIds and doubles its chunk after each message the
// transport took, so a reader that stops early pins little.
constexpr std::uint64_t kRangeChunkIds = 65536;
// What an IdChunk adds to its 8 bytes an ID: the field's tag and length (at most 1 + 10 bytes).
constexpr std::uint64_t kChunkFramingBytes = 16;
constexpr std::uint64_t kRangeFirstChunkIds = 512;
// Bytes of StreamRange chunks and Stream answers issued and not yet taken by the transport (flow
// control lets a message go once the client has room for it), on one connection and on the whole
// server. A StreamRange takes what is left, at least one kRangeFirstChunkIds chunk; a Stream reads
// its next request only while some is left, or when it has no answer waiting. So a connection
// holds at most its budget plus a first chunk or one answer per stream, and a reader that stops
// holds that, not more.
constexpr std::uint64_t kConnectionStreamBytes = std::uint64_t{2} << 20;
constexpr std::uint64_t kServerStreamBytes = std::uint64_t{32} << 20;
// A chunk that would wait for the generator (throttled at the layout's rate, a clock wait) is not
// queued on the generator's thread ahead of unary calls: the stream tries again after this delay,
// doubled on each miss up to kRangeRetryMax.
constexpr std::chrono::milliseconds kRangeRetryMin{2};
constexpr std::chrono::milliseconds kRangeRetryMax{100};
// An order number with its prefix, check character and separators is far below this.
constexpr std::uint64_t kMaxOrderNumberBytes = 128;
// Between health turning NOT_SERVING at a graceful stop and the port closing: long enough for
// Watch streams and probes to hear it first.
constexpr std::chrono::milliseconds kHealthGrace{250};
// Memory gRPC may hold for all connections together (buffers, flow-control windows that let a
// StreamRange run ahead of a slow reader): beyond it gRPC shrinks windows and refuses new
// allocations rather than grow.
constexpr std::size_t kMemoryQuotaBytes = std::size_t{256} << 20;
// A keepalive ping not answered within this closes the connection.
constexpr int kKeepaliveTimeoutMs = 20000;

// The gRPC listening socket, opened and accepted on here rather than by gRPC, so that the server
// decides which connections gRPC gets: a connection whose descriptor is at or above the
// descriptor ceiling (GrpcOptions::descriptor_ceiling) is closed at once, keeping the top of the
// descriptor table for the registry, the lease keeper and files, as HTTP's listener does. The
// socket has SO_REUSEADDR and not SO_REUSEPORT: a port another process listens on is refused.
// Accepted connections go to gRPC through its external connection acceptor.
class Listener {
 public:
  Listener() = default;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener() { stop(); }

  // Binds and listens on `address` (its first address when the host names several). IO naming
  // the address and the system's reason when it cannot.
  Status open(const server::ListenAddress& address) {
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

  [[nodiscard]] int port() const { return port_; }

  // Accepts on a thread of its own until stop(), handing each connection below `ceiling` (0:
  // none) to `acceptor`.
  void start(grpc::experimental::ExternalConnectionAcceptor& acceptor, std::uint64_t ceiling) {
    thread_ = std::thread([this, &acceptor, ceiling] { run(acceptor, ceiling); });
  }

  // Stops accepting and closes the socket. Idempotent.
  void stop() {
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

  [[nodiscard]] std::uint64_t rejected() const { return rejected_.load(std::memory_order_relaxed); }

 private:
  Status io_error(const std::string& where) {
    const int err = errno;
    return Status(Reason::kIo, where + ": cannot listen there (" + std::strerror(err) + ")");
  }

  void run(grpc::experimental::ExternalConnectionAcceptor& acceptor, std::uint64_t ceiling) {
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

  int fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<std::uint64_t> rejected_{0};
};

}  // namespace

// Types GrpcServerImpl holds (so not in the anonymous namespace: GrpcServerImpl is not in it
// either).
namespace internal {

// ---- Metrics ----

enum class Method : std::size_t {
  kIdsNext,
  kIdsStream,
  kIdsStreamRange,
  kIdsDecode,
  kIdsLayout,
  kSegmentsNext,
  kSegmentsRange,
  kSegmentsList,
  kSegmentsGet,
  kSegmentsCreate,
  kOrderNumbersNew,
  kOrderNumbersDecode,
};
constexpr std::array<std::string_view, 12> kMethodNames = {
    "/flurry.v1.Ids/Next",        "/flurry.v1.Ids/Stream",       "/flurry.v1.Ids/StreamRange",
    "/flurry.v1.Ids/Decode",      "/flurry.v1.Ids/Layout",       "/flurry.v1.Segments/Next",
    "/flurry.v1.Segments/Range",  "/flurry.v1.Segments/List",    "/flurry.v1.Segments/Get",
    "/flurry.v1.Segments/Create", "/flurry.v1.OrderNumbers/New", "/flurry.v1.OrderNumbers/Decode"};
// The scope each method needs (flurry/server/tokens.h), in kMethodNames' order: the one table of
// who may call what over gRPC, as HTTP's route table is for HTTP. Health and reflection need none.
using server::Scope;
constexpr std::array<Scope, 12> kMethodScopes = {
    Scope::kIds,           // Ids/Next
    Scope::kIds,           // Ids/Stream
    Scope::kIds,           // Ids/StreamRange
    Scope::kRead,          // Ids/Decode
    Scope::kRead,          // Ids/Layout
    Scope::kIds,           // Segments/Next
    Scope::kIds,           // Segments/Range
    Scope::kRead,          // Segments/List
    Scope::kRead,          // Segments/Get
    Scope::kAdmin,         // Segments/Create
    Scope::kIds,           // OrderNumbers/New
    Scope::kOrdersDecode,  // OrderNumbers/Decode
};
static_assert(kMethodScopes.size() == kMethodNames.size());
constexpr std::size_t kCodeCount = 17;  // OK .. UNAUTHENTICATED
using server::RequestMetrics;
constexpr std::size_t kBucketSlots = RequestMetrics::kBucketsNs.size() + 1;
constexpr auto& kBucketLabels = RequestMetrics::kBucketLabels;

struct alignas(64) MethodMetrics {
  std::array<std::atomic<std::uint64_t>, kCodeCount> codes{};
  std::array<std::atomic<std::uint64_t>, kReasonCount> reasons{};
  std::array<std::atomic<std::uint64_t>, kBucketSlots> buckets{};
  std::atomic<std::uint64_t> duration_ns{0};
  std::atomic<std::uint64_t> messages{0};
  std::atomic<std::uint64_t> ids{0};
};

// The bytes of StreamRange chunks and Stream answers issued and not yet taken by the transport,
// per connection (by the call's peer address, which names one connection) and for the whole
// server. Thread-safe.
class StreamBudget {
 public:
  // One connection's share; a stream holds it from its start to its end (enter / leave).
  struct Connection {
    std::atomic<std::uint64_t> bytes{0};
    std::size_t streams = 0;  // under StreamBudget::mu_
  };

  Connection* enter(const std::string& peer) {
    MutexLock lock(mu_);
    Connection& c = connections_[peer];
    ++c.streams;
    ++streams_;
    return &c;
  }

  void leave(const std::string& peer) {
    MutexLock lock(mu_);
    const auto it = connections_.find(peer);
    if (it != connections_.end() && --it->second.streams == 0) connections_.erase(it);
    --streams_;
  }

  // Takes up to `want` bytes (a multiple of 8) on `c` and on the server: what both have left,
  // but at least `least` whatever they have left (so a stream always moves on). Returns what it
  // took; give it back with give().
  std::uint64_t take(Connection& c, std::uint64_t want, std::uint64_t least) {
    // Under the lock, so that two streams cannot both take what is left (give() needs none: less
    // held never passes a bound).
    MutexLock lock(take_mu_);
    const std::uint64_t server_used = used_.load(std::memory_order_relaxed);
    const std::uint64_t conn_used = c.bytes.load(std::memory_order_relaxed);
    const std::uint64_t room =
        std::min(server_used < kServerStreamBytes ? kServerStreamBytes - server_used : 0,
                 conn_used < kConnectionStreamBytes ? kConnectionStreamBytes - conn_used : 0);
    std::uint64_t got = std::min(want, room);
    got -= got % 8;
    got = std::max(least, got);
    used_.fetch_add(got, std::memory_order_relaxed);
    c.bytes.fetch_add(got, std::memory_order_relaxed);
    return got;
  }

  // Whether both the connection and the server have bytes left.
  [[nodiscard]] bool has_room(const Connection& c) const {
    return used_.load(std::memory_order_relaxed) < kServerStreamBytes &&
           c.bytes.load(std::memory_order_relaxed) < kConnectionStreamBytes;
  }

  void give(Connection& c, std::uint64_t bytes) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    c.bytes.fetch_sub(bytes, std::memory_order_relaxed);
  }

  [[nodiscard]] std::uint64_t bytes() const { return used_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::size_t streams() const {
    MutexLock lock(mu_);
    return streams_;
  }

 private:
  mutable Mutex mu_;
  Mutex take_mu_;  // serializes take() (the counters are atomics)
  // Nodes stay put: pointers are kept.
  std::unordered_map<std::string, Connection> connections_ FLURRY_GUARDED_BY(mu_);
  std::size_t streams_ FLURRY_GUARDED_BY(mu_) = 0;
  std::atomic<std::uint64_t> used_{0};
};

}  // namespace internal

namespace {

using internal::kBucketLabels;
using internal::kBucketSlots;
using internal::kCodeCount;
using internal::kMethodNames;
using internal::kMethodScopes;
using internal::Method;
using internal::MethodMetrics;
using server::RequestMetrics;

// ---- Messages to typed values and back ----

// The codec of a flurry.v1.Encoding, through the names HTTP's `encoding` parameter takes
// (ENCODING_BASE32 is "base32", ENCODING_UUIDV7 "uuidv7") and the one edge parser HTTP uses, so
// that an encoding the library gains is served here without a change, and uuidv7 or ulid on a
// layout that cannot carry them is refused with the codec's reason.
Result<const IdTextCodec*> codec_of(const ops::Operations& ops, int value) {
  constexpr std::string_view kWhere = "field \"encoding\": ";
  if (value == v1::ENCODING_UNSPECIFIED) return ops.id_codecs().get(Encoding::kDecimal);
  const std::string& name = v1::Encoding_Name(static_cast<v1::Encoding>(value));
  constexpr std::string_view kPrefix = "ENCODING_";
  if (name.size() <= kPrefix.size()) {
    return InvalidArgument(std::string(kWhere) + std::to_string(value) +
                           " is not a value of flurry.v1.Encoding");
  }
  std::string lower = name.substr(kPrefix.size());
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return ops.id_codecs().parse(lower, kWhere);
}

// Appends the text of every ID in `ids` to `texts`, written in place by `codec`.
void add_texts(const IdTextCodec& codec, std::span<const std::uint64_t> ids,
               google::protobuf::RepeatedPtrField<std::string>& texts) {
  texts.Reserve(static_cast<int>(ids.size()));
  for (const std::uint64_t id : ids) {
    std::string* text = texts.Add();
    text->resize(codec.max_length());
    text->resize(static_cast<std::size_t>(codec.write(text->data(), id) - text->data()));
  }
}

std::string iso_time_of_unix_ms(std::int64_t unix_ms) {
  return format_unix_ms(unix_ms);
}

void fill_tag(const SegmentTagInfo& info, v1::SegmentTag& out) {
  out.set_tag(info.tag);
  out.set_max_id(info.max_id);
  out.set_step(info.step);
  out.set_delta(info.delta);
  out.set_remainder(info.remainder);
  out.set_description(info.description);
  out.set_update_time(iso_time_of_unix_ms(info.update_time_unix_ms));
}

// The credential of a call: its `authorization` metadata ("Bearer <token>"), empty when
// absent. Never logged.
std::string_view credential_of(const grpc::CallbackServerContext& ctx) {
  const auto& metadata = ctx.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return {};
  return std::string_view(it->second.data(), it->second.size());
}

// The client's address without the port, for the token brake (ops::GuessBrake): gRPC names
// the peer "ipv4:127.0.0.1:5000" or "ipv6:[::1]:5000" (the brackets percent-encoded by some
// versions); an IPv4-mapped IPv6 address is given as IPv4. Another form (a Unix socket) is kept
// whole.
std::string client_of(const grpc::CallbackServerContext& ctx) {
  std::string peer = ctx.peer();
  std::string_view text = peer;
  const bool v4 = text.starts_with("ipv4:");
  if (!v4 && !text.starts_with("ipv6:")) return peer;
  text.remove_prefix(5);
  const std::size_t colon = text.rfind(':');
  if (colon != std::string_view::npos) text = text.substr(0, colon);
  for (std::string_view open : {"[", "%5B", "%5b"}) {
    if (text.starts_with(open)) text.remove_prefix(open.size());
  }
  for (std::string_view close : {"]", "%5D", "%5d"}) {
    if (text.ends_with(close)) text.remove_suffix(close.size());
  }
  if (text.starts_with("::ffff:") && text.find('.') != std::string_view::npos) {
    text.remove_prefix(7);
  }
  return std::string(text);
}

// ---- google.rpc.Status in grpc-status-details-bin ----
// Protocol-buffer wire format by hand for the few messages of googleapis' google/rpc/status.proto
// and error_details.proto sent here (Debian ships no code for them); field numbers as googleapis
// defines them. Checked by parsing them with those protos in tests/integration/grpc_api.py.

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_uint(std::string& out, std::uint32_t field, std::uint64_t v) {
  put_varint(out, std::uint64_t{field} << 3);  // wire type 0: varint
  put_varint(out, v);
}

void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_varint(out, (std::uint64_t{field} << 3) | 2);  // wire type 2: length-delimited
  put_varint(out, bytes.size());
  out.append(bytes);
}

// google.protobuf.Any{type_url, value} as a google.rpc.Status detail (field 3).
void put_detail(std::string& status, std::string_view type, const std::string& value) {
  std::string any;
  put_bytes(any, 1, "type.googleapis.com/" + std::string(type));
  put_bytes(any, 2, value);
  put_bytes(status, 3, any);
}

// google.rpc.Status{code, message, details}: ErrorInfo{reason, domain "flurry"} when the error
// has a reason, RetryInfo{retry_delay} when the caller should retry.
std::string status_details(const Status& status, const ops::RetryAdvice& retry) {
  std::string out;
  put_uint(out, 1, static_cast<std::uint64_t>(status.code()));
  put_bytes(out, 2, status.message());
  if (status.reason() != Reason::kNone) {
    std::string info;
    put_bytes(info, 1, to_string(status.reason()));
    put_bytes(info, 2, "flurry");
    put_detail(out, "google.rpc.ErrorInfo", info);
  }
  if (retry.retry) {
    std::string delay;  // google.protobuf.Duration{seconds}
    put_uint(delay, 1, static_cast<std::uint64_t>(retry.after.count()));
    std::string info;
    put_bytes(info, 1, delay);
    put_detail(out, "google.rpc.RetryInfo", info);
  }
  return out;
}

// A response of `count` IDs as Next writes it (packed fixed64, and the texts unless decimal)
// fits in `max_bytes`: checked before anything is issued.
Status check_response_size(std::uint64_t count, const IdTextCodec& codec, std::uint64_t max_bytes) {
  std::uint64_t per_id = 8;
  if (codec.encoding() != Encoding::kDecimal) {
    // The longest text of the encoding, with its field tag and length byte.
    per_id += codec.max_length() + 2;
  }
  const std::uint64_t bound = count * per_id + 16;
  if (bound <= max_bytes) return OkStatus();
  return InvalidArgument("field \"count\": " + std::to_string(count) + " IDs in encoding " +
                         std::string(codec.encoding().name()) + " may need " +
                         std::to_string(bound) + " bytes, more than grpc_max_message_bytes (" +
                         std::to_string(max_bytes) + "); ask for fewer, or use StreamRange");
}

}  // namespace

// The one implementation of GrpcServer (the module hands it out through kGrpcModuleEntry).
class GrpcServerImpl final : public GrpcServer {
 public:
  GrpcServerImpl(ops::Operations& operations, ops::Pools& pools, const server::GrpcOptions& options,
                 MonotonicClock& clock)
      : ops_(operations),
        pools_(pools),
        options_(options),
        clock_(clock),
        ids_(*this),
        segments_(*this),
        orders_(*this) {
    // Asked once: an open method (Ids.Next by default) costs one test of a bool per call.
    for (std::size_t m = 0; m < kMethodScopes.size(); ++m) {
      needs_token_[m] = ops_.authorizer().needs_token(kMethodScopes[m]);
    }
  }

  ~GrpcServerImpl() override { stop(std::chrono::milliseconds(0)); }

  Status start() {
    // Debian builds Abseil with its debug-mode deadlock detector on: every absl::Mutex that gRPC
    // locks or destroys (several per call) updated a global lock graph, a few percent of the
    // server's CPU per call in a profile. flurry has no absl::Mutex of its own to check.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    const std::string address = options_.listen->to_string();
    if (Status st = listener_.open(*options_.listen); !st.ok()) return st;
    std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor =
        builder.experimental().AddExternalConnectionAcceptor(
            grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
            listener_credentials());
    builder.RegisterService(&ids_);
    builder.RegisterService(&segments_);
    builder.RegisterService(&orders_);
    grpc::ResourceQuota quota("flurry");
    quota.Resize(kMemoryQuotaBytes);
    builder.SetResourceQuota(quota);
    builder.SetMaxReceiveMessageSize(kMaxReceiveBytes);
    builder.SetMaxSendMessageSize(static_cast<int>(options_.max_message_bytes));
    // Channelz (gRPC's introspection service, not served here) would count every call.
    builder.AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                               static_cast<int>(options_.max_concurrent_streams));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                               static_cast<int>(options_.keepalive.count()));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(options_.idle_timeout.count()));
    server_ = builder.BuildAndStart();
    if (!server_) {
      listener_.stop();
      return Status(Reason::kIo,
                    "grpc_listen " + address + ": gRPC did not start" +
                        (options_.tls.enabled() ? " (it may have refused the TLS files)" : ""));
    }
    acceptor_ = std::move(acceptor);
    listener_.start(*acceptor_, options_.descriptor_ceiling);
    local_ = *options_.listen;
    local_.port = static_cast<std::uint16_t>(listener_.port());
    follow_readiness();
    watcher_ = std::thread([this] { watch_readiness(); });
    return OkStatus();
  }

  std::string local_address() const override { return local_.to_string(); }

  void begin_shutdown() override {
    {
      MutexLock lock(mu_);
      if (shutting_down_) return;
      shutting_down_ = true;
    }
    cv_.notify_all();
    if (watcher_.joinable()) watcher_.join();
    // Every service NOT_SERVING, for good: Watch streams are told now, before the drain.
    if (server_) server_->GetHealthCheckService()->Shutdown();
  }

  void stop(std::chrono::milliseconds drain) override {
    begin_shutdown();
    std::call_once(stopped_, [&] {
      if (!server_) return;
      if (drain > kHealthGrace) std::this_thread::sleep_for(kHealthGrace);
      listener_.stop();  // the port closes: no new connections
      // The deadline on gRPC's monotonic clock (a wall-clock step must not cut the drain short
      // or stretch it): the drain runs on the transport's real time, as HTTP's timers do.
      server_->Shutdown(gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                     gpr_time_from_millis(drain.count(), GPR_TIMESPAN)));
      server_->Wait();
    });
  }

  void write_metrics(server::PrometheusWriter& out) const override;

  // ---- Running one call ----

  // The end of an RPC: the status with `flurry-reason` and `retry-after-ms` as trailing
  // metadata, and the metrics. Called exactly once per RPC, before its reactor finishes.
  grpc::Status answer(Method method, grpc::CallbackServerContext& ctx, const Status& status,
                      MonoTime started) {
    MethodMetrics& m = metrics_[static_cast<std::size_t>(method)];
    const auto code = static_cast<std::size_t>(status.code());
    m.codes[code < kCodeCount ? code : static_cast<std::size_t>(StatusCode::kUnknown)].fetch_add(
        1, std::memory_order_relaxed);
    const std::int64_t ns = std::max<std::int64_t>(0, (clock_.now() - started).count());
    std::size_t bucket = RequestMetrics::kBucketsNs.size();
    for (std::size_t i = 0; i < RequestMetrics::kBucketsNs.size(); ++i) {
      if (ns <= RequestMetrics::kBucketsNs[i]) {
        bucket = i;
        break;
      }
    }
    m.buckets[bucket].fetch_add(1, std::memory_order_relaxed);
    m.duration_ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
    if (status.ok()) return grpc::Status::OK;
    if (status.reason() != Reason::kNone) {
      m.reasons[static_cast<std::size_t>(status.reason())].fetch_add(1, std::memory_order_relaxed);
      ctx.AddTrailingMetadata("flurry-reason", std::string(to_string(status.reason())));
    }
    const ops::RetryAdvice retry = ops::retry_advice(status);
    if (retry.retry) {
      ctx.AddTrailingMetadata(
          "retry-after-ms",
          std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(retry.after).count()));
    }
    return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message(),
                        status_details(status, retry));
  }

  void count_sent(Method method, std::uint64_t ids) {
    MethodMetrics& m = metrics_[static_cast<std::size_t>(method)];
    m.messages.fetch_add(1, std::memory_order_relaxed);
    m.ids.fetch_add(ids, std::memory_order_relaxed);
  }

  // Admits a call to `method` by the scope kMethodScopes gives it (ops::Authorizer::admit with
  // its `authorization` metadata): every RPC passes here before its operation runs (unary()
  // and refuse() call it; the streams at their start).
  Status admit(Method method, const grpc::CallbackServerContext& ctx, Blocking blocking,
               Deferral& deferral) {
    const auto m = static_cast<std::size_t>(method);
    if (!needs_token_[m]) return OkStatus();
    return ops_.authorizer().admit(credential_of(ctx), kMethodScopes[m], blocking, deferral,
                                   client_of(ctx));
  }

  // Runs `op(Blocking, Deferral&) -> Status` for a unary RPC, admitted first (admit()): with
  // Blocking::kNever here; when it would block, again with Blocking::kAllowed on the pool its
  // Deferral names (skipped when the client gave up meanwhile, so nothing is issued for
  // nobody). `op` fills the response itself on success.
  template <typename Op>
  grpc::ServerUnaryReactor* unary(Method method, grpc::CallbackServerContext* ctx, Op run) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    const MonoTime started = clock_.now();
    Deferral deferral;
    auto op = [this, method, ctx, run = std::move(run)](Blocking blocking,
                                                        Deferral& d) mutable -> Status {
      if (Status st = admit(method, *ctx, blocking, d); !st.ok()) return st;
      return run(blocking, d);
    };
    Status status = op(Blocking::kNever, deferral);
    if (status.reason() != Reason::kWouldBlock) {
      reactor->Finish(answer(method, *ctx, status, started));
      return reactor;
    }
    pools_.post(deferral.pool, [this, method, ctx, reactor, started, deferral,
                                op = std::move(op)]() mutable {
      Status late = ctx->IsCancelled()
                        ? Status(StatusCode::kCancelled, "the client cancelled the call")
                        : op(Blocking::kAllowed, deferral);
      reactor->Finish(answer(method, *ctx, late, started));
    });
    return reactor;
  }

  // A unary RPC that failed while its message was read: the credential's refusal if it has
  // one (a caller without the scope learns nothing about its message), else `status`.
  grpc::ServerUnaryReactor* refuse(Method method, grpc::CallbackServerContext* ctx, Status status) {
    return unary(method, ctx, [status = std::move(status)](Blocking, Deferral&) { return status; });
  }

  ops::Operations& ops_;
  ops::Pools& pools_;
  const server::GrpcOptions options_;
  MonotonicClock& clock_;
  internal::StreamBudget stream_budget_;

 private:
  // Plain HTTP/2 without TLS files. With them, gRPC's own TLS (TLS 1.2 at least, gRPC's default
  // and only choice of ciphers): the key and certificate, and with a client CA a client
  // certificate every connection must present (mTLS). gRPC re-reads the files every
  // kGrpcTlsRefresh and serves whatever they hold, so `flurry serve` gives it copies it checked
  // (tls/pinned_files.h: replaced at a SIGHUP only when the new files load).
  std::shared_ptr<grpc::ServerCredentials> listener_credentials() const {
    const server::TlsOptions& tls = options_.tls;
    if (!tls.enabled() || !tls.key_file) return grpc::InsecureServerCredentials();
    const std::string key = tls.key_file->string();
    const std::string cert = tls.cert_file->string();
    const auto refresh = static_cast<unsigned>(server::kGrpcTlsRefresh.count());
    auto provider = tls.client_ca_file
                        ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                              key, cert, tls.client_ca_file->string(), refresh)
                        : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                              key, cert, refresh);
    grpc::experimental::TlsServerCredentialsOptions options(provider);
    options.watch_identity_key_cert_pairs();
    if (tls.client_ca_file) {
      options.watch_root_certs();
      options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    } else {
      options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    }
    return grpc::experimental::TlsServerCredentials(options);
  }

  // Sets every mirrored health service from readiness; logs a change.
  void follow_readiness() {
    const Status ready = ops_.readiness();
    if (serving_ && *serving_ == ready.ok()) return;
    serving_ = ready.ok();
    for (const char* service : kHealthServices) {
      server_->GetHealthCheckService()->SetServingStatus(service, ready.ok());
    }
    if (ready.ok()) {
      spdlog::info("event=grpc_health status=SERVING");
    } else {
      spdlog::warn("event=grpc_health status=NOT_SERVING reason={}", to_string(ready.reason()));
    }
  }

  void watch_readiness() FLURRY_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    bool streams_seen = false;
    while (!shutting_down_) {
      lock.wait_for(cv_, kHealthPoll, [this]() FLURRY_REQUIRES(mu_) { return shutting_down_; });
      if (shutting_down_) break;
      lock.unlock();
      follow_readiness();
      // Once the last StreamRange has ended, what its chunks and gRPC's buffers held goes back
      // to the system rather than staying in malloc's free lists (a client that opened many
      // streams and went away leaves the server as it found it).
      const bool streams = stream_budget_.streams() != 0;
      if (streams_seen && !streams) ::malloc_trim(0);
      streams_seen = streams;
      lock.lock();
    }
  }

  // The three services; defined below (they need GrpcServerImpl complete).
  class IdsHolder : public v1::Ids::CallbackService {
   public:
    explicit IdsHolder(GrpcServerImpl& impl) : impl_(impl) {}
    grpc::ServerUnaryReactor* Next(grpc::CallbackServerContext* ctx, const v1::NextRequest* req,
                                   v1::NextResponse* resp) override;
    grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse>* Stream(
        grpc::CallbackServerContext* ctx) override;
    grpc::ServerWriteReactor<v1::IdChunk>* StreamRange(grpc::CallbackServerContext* ctx,
                                                       const v1::RangeRequest* req) override;
    grpc::ServerUnaryReactor* Decode(grpc::CallbackServerContext* ctx, const v1::DecodeRequest* req,
                                     v1::DecodeResponse* resp) override;
    grpc::ServerUnaryReactor* Layout(grpc::CallbackServerContext* ctx, const v1::LayoutRequest* req,
                                     v1::LayoutResponse* resp) override;

   private:
    GrpcServerImpl& impl_;
  };

  class SegmentsHolder : public v1::Segments::CallbackService {
   public:
    explicit SegmentsHolder(GrpcServerImpl& impl) : impl_(impl) {}
    grpc::ServerUnaryReactor* Next(grpc::CallbackServerContext* ctx,
                                   const v1::SegmentNextRequest* req,
                                   v1::SegmentNextResponse* resp) override;
    grpc::ServerUnaryReactor* Range(grpc::CallbackServerContext* ctx,
                                    const v1::SegmentRangeRequest* req,
                                    v1::SegmentRangeResponse* resp) override;
    grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* ctx,
                                   const v1::SegmentListRequest* req,
                                   v1::SegmentListResponse* resp) override;
    grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx,
                                  const v1::SegmentGetRequest* req,
                                  v1::SegmentGetResponse* resp) override;
    grpc::ServerUnaryReactor* Create(grpc::CallbackServerContext* ctx,
                                     const v1::SegmentCreateRequest* req,
                                     v1::SegmentTag* resp) override;

   private:
    GrpcServerImpl& impl_;
  };

  class OrdersHolder : public v1::OrderNumbers::CallbackService {
   public:
    explicit OrdersHolder(GrpcServerImpl& impl) : impl_(impl) {}
    grpc::ServerUnaryReactor* New(grpc::CallbackServerContext* ctx, const v1::OrderNewRequest* req,
                                  v1::OrderNewResponse* resp) override;
    grpc::ServerUnaryReactor* Decode(grpc::CallbackServerContext* ctx,
                                     const v1::OrderDecodeRequest* req,
                                     v1::OrderDecodeResponse* resp) override;

   private:
    GrpcServerImpl& impl_;
  };

  IdsHolder ids_;
  SegmentsHolder segments_;
  OrdersHolder orders_;
  Listener listener_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::unique_ptr<grpc::Server> server_;
  server::ListenAddress local_;
  std::array<MethodMetrics, kMethodNames.size()> metrics_{};
  std::array<bool, kMethodNames.size()> needs_token_{};

  Mutex mu_;
  std::condition_variable cv_;
  bool shutting_down_ FLURRY_GUARDED_BY(mu_) = false;
  std::optional<bool> serving_;  // what health says now (touched by one thread at a time)
  std::thread watcher_;
  std::once_flag stopped_;
};

void GrpcServerImpl::write_metrics(server::PrometheusWriter& out) const {
  using Type = server::PrometheusWriter::Type;
  out.family("flurry_grpc_requests_total", Type::kCounter, "gRPC calls by method and status code.");
  for (std::size_t m = 0; m < kMethodNames.size(); ++m) {
    for (std::size_t c = 0; c < kCodeCount; ++c) {
      const std::uint64_t n = metrics_[m].codes[c].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out.sample("flurry_grpc_requests_total", n,
                 {{"method", kMethodNames[m]}, {"code", to_string(static_cast<StatusCode>(c))}});
    }
  }
  out.family("flurry_grpc_errors_total", Type::kCounter,
             "gRPC calls that failed, by method and flurry reason.");
  for (std::size_t m = 0; m < kMethodNames.size(); ++m) {
    for (std::size_t r = 1; r < static_cast<std::size_t>(kReasonCount); ++r) {
      const std::uint64_t n = metrics_[m].reasons[r].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out.sample("flurry_grpc_errors_total", n,
                 {{"method", kMethodNames[m]}, {"reason", to_string(static_cast<Reason>(r))}});
    }
  }
  out.family("flurry_grpc_request_duration_seconds", Type::kHistogram,
             "Time from a call's start to its status (a stream's whole life).");
  for (std::size_t m = 0; m < kMethodNames.size(); ++m) {
    std::array<std::uint64_t, kBucketSlots> buckets{};
    std::uint64_t total = 0;
    for (std::size_t b = 0; b < kBucketSlots; ++b) {
      buckets[b] = metrics_[m].buckets[b].load(std::memory_order_relaxed);
      total += buckets[b];
    }
    if (total == 0) continue;
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < kBucketSlots; ++b) {
      cumulative += buckets[b];
      out.sample("flurry_grpc_request_duration_seconds_bucket", cumulative,
                 {{"method", kMethodNames[m]},
                  {"le", b < kBucketLabels.size() ? kBucketLabels[b] : "+Inf"}});
    }
    out.sample("flurry_grpc_request_duration_seconds_sum",
               static_cast<double>(metrics_[m].duration_ns.load(std::memory_order_relaxed)) / 1e9,
               {{"method", kMethodNames[m]}});
    out.sample("flurry_grpc_request_duration_seconds_count", total, {{"method", kMethodNames[m]}});
  }
  out.family("flurry_grpc_connections_rejected_total", Type::kCounter,
             "gRPC connections closed at once because the descriptor ceiling was reached.");
  out.sample("flurry_grpc_connections_rejected_total", listener_.rejected());
  out.family("flurry_grpc_streams", Type::kGauge, "Stream and StreamRange calls running.");
  out.sample("flurry_grpc_streams", static_cast<std::uint64_t>(stream_budget_.streams()));
  out.family("flurry_grpc_stream_buffered_bytes", Type::kGauge,
             "Bytes of Stream answers and StreamRange chunks issued and not yet taken by the "
             "transport.");
  out.sample("flurry_grpc_stream_buffered_bytes", stream_budget_.bytes());
  out.family("flurry_grpc_stream_messages_total", Type::kCounter,
             "Messages of IDs sent on gRPC streams (and unary responses), by method.");
  out.family("flurry_grpc_ids_sent_total", Type::kCounter,
             "IDs written to gRPC responses, by method.");
  for (std::size_t m = 0; m < kMethodNames.size(); ++m) {
    const std::uint64_t messages = metrics_[m].messages.load(std::memory_order_relaxed);
    if (messages == 0) continue;
    out.sample("flurry_grpc_stream_messages_total", messages, {{"method", kMethodNames[m]}});
    out.sample("flurry_grpc_ids_sent_total", metrics_[m].ids.load(std::memory_order_relaxed),
               {{"method", kMethodNames[m]}});
  }
}

// ---- flurry.v1.Ids ----

grpc::ServerUnaryReactor* GrpcServerImpl::IdsHolder::Next(grpc::CallbackServerContext* ctx,
                                                          const v1::NextRequest* req,
                                                          v1::NextResponse* resp) {
  Result<IdCount> count = IdCount::of(req->count(), impl_.ops_.max_batch());
  if (!count.ok()) return impl_.refuse(Method::kIdsNext, ctx, count.status());
  Result<const IdTextCodec*> codec = codec_of(impl_.ops_, req->encoding());
  if (!codec.ok()) return impl_.refuse(Method::kIdsNext, ctx, codec.status());
  if (Status st = check_response_size(count->value(), **codec, impl_.options_.max_message_bytes);
      !st.ok()) {
    return impl_.refuse(Method::kIdsNext, ctx, st);
  }
  resp->mutable_ids()->Resize(static_cast<int>(count->value()), 0);
  return impl_.unary(
      Method::kIdsNext, ctx,
      [this, resp, n = *count, codec = *codec](Blocking blocking, Deferral& deferral) {
        std::span<std::uint64_t> out(resp->mutable_ids()->mutable_data(), n.value());
        Status st = impl_.ops_.next_ids(n, out, blocking, deferral);
        if (!st.ok()) return st;
        if (codec->encoding() != Encoding::kDecimal) add_texts(*codec, out, *resp->mutable_texts());
        impl_.count_sent(Method::kIdsNext, n.value());
        return st;
      });
}

// One long-lived stream of Next requests, answered in order. Reading the next request overlaps
// with writing earlier answers, but only while the answers issued and not yet taken by the
// transport stay small (kStreamAheadIds IDs, kStreamAheadResponses responses, and room left on the
// connection's and the server's StreamBudget, on which they are drawn): a client that stops
// reading stops the issuing, and a cancelled stream issues nothing more.
class IdStream final : public grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse> {
 public:
  IdStream(GrpcServerImpl& impl, grpc::CallbackServerContext* ctx)
      : impl_(impl),
        ctx_(ctx),
        started_(impl.clock_.now()),
        peer_(ctx->peer()),
        connection_(impl.stream_budget_.enter(peer_)) {
    MutexLock lock(mu_);
    reading_ = true;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    MutexLock lock(mu_);
    reading_ = false;
    if (!ok) {  // the client closed its side (or went away): end once the answers are out
      read_closed_ = true;
      const std::optional<Status> finish = settle();
      lock.unlock();
      if (finish) end(*finish);
      return;
    }
    Result<IdCount> count = IdCount::of(request_.count(), impl_.ops_.max_batch());
    Status invalid = count.status();
    Result<const IdTextCodec*> codec = nullptr;
    if (invalid.ok()) {
      codec = codec_of(impl_.ops_, request_.encoding());
      invalid = codec.status();
    }
    if (invalid.ok()) {
      invalid = check_response_size(count->value(), **codec, impl_.options_.max_message_bytes);
    }
    if (!invalid.ok()) {  // the answers before it stand: sent first, then the error
      read_closed_ = true;
      error_ = std::move(invalid);
      const std::optional<Status> finish = settle();
      lock.unlock();
      if (finish) end(*finish);
      return;
    }
    count_ = *count;
    codec_ = *codec;
    issuing_ = true;
    lock.unlock();
    v1::NextResponse response;
    Deferral deferral;
    Status st = issue(response, Blocking::kNever, deferral);
    if (st.reason() == Reason::kWouldBlock) {
      impl_.pools_.post(deferral.pool, [this, deferral]() mutable {
        v1::NextResponse late;
        Status done = ctx_->IsCancelled() ? Status(StatusCode::kCancelled, "cancelled")
                                          : issue(late, Blocking::kAllowed, deferral);
        after_issue(std::move(late), done);
      });
      return;
    }
    after_issue(std::move(response), st);
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(mu_);
    writing_ = false;
    ahead_ids_ -= static_cast<std::uint64_t>(queue_.front().ids_size());
    queue_.pop_front();
    impl_.stream_budget_.give(*connection_, drawn_.front());
    drawn_.pop_front();
    if (!ok) {
      read_closed_ = true;
      if (error_.ok())
        error_ = Status(StatusCode::kCancelled, "the stream broke while IDs were sent");
      queue_.clear();
      ahead_ids_ = 0;
      for (const std::uint64_t bytes : drawn_) impl_.stream_budget_.give(*connection_, bytes);
      drawn_.clear();
    }
    const std::optional<Status> finish = settle();
    lock.unlock();
    if (finish) end(*finish);
  }

  // gRPC calls OnDone last, once every other reaction has returned and none can start: nothing
  // else touches the stream any more, so drawn_ is read without mu_ (the analysis cannot know).
  void OnDone() override FLURRY_NO_THREAD_SAFETY_ANALYSIS {
    for (const std::uint64_t bytes : drawn_) impl_.stream_budget_.give(*connection_, bytes);
    impl_.stream_budget_.leave(peer_);
    delete this;
  }

 private:
  static constexpr std::uint64_t kStreamAheadIds = 65536;
  static constexpr std::size_t kStreamAheadResponses = 64;

  Status issue(v1::NextResponse& response, Blocking blocking, Deferral& deferral) {
    response.mutable_ids()->Resize(static_cast<int>(count_.value()), 0);
    std::span<std::uint64_t> out(response.mutable_ids()->mutable_data(), count_.value());
    Status st = impl_.ops_.next_ids(count_, out, blocking, deferral);
    if (st.ok() && codec_->encoding() != Encoding::kDecimal) {
      add_texts(*codec_, out, *response.mutable_texts());
    }
    return st;
  }

  void after_issue(v1::NextResponse response, const Status& st) {
    MutexLock lock(mu_);
    issuing_ = false;
    if (!st.ok()) {
      read_closed_ = true;
      error_ = st;
    } else {
      impl_.count_sent(Method::kIdsStream, count_.value());
      ahead_ids_ += count_.value();
      const std::uint64_t bytes = response.ByteSizeLong();
      drawn_.push_back(impl_.stream_budget_.take(*connection_, bytes, bytes));
      queue_.push_back(std::move(response));
    }
    const std::optional<Status> finish = settle();
    lock.unlock();
    if (finish) end(*finish);
  }

  // With mu_ held: writes the next answer, reads the next request while little is ahead, and
  // once nothing is being read, issued or written any more, returns the status to end with
  // (the caller releases mu_, then calls end() with it).
  [[nodiscard]] std::optional<Status> settle() FLURRY_REQUIRES(mu_) {
    if (finished_) return std::nullopt;
    if (!writing_ && !queue_.empty()) {
      writing_ = true;
      StartWrite(&queue_.front());  // a deque keeps its elements in place as it grows
    }
    // With answers waiting, the next request is read only while the budget has room; the write
    // of the front one calls this again when it completes.
    if (!reading_ && !issuing_ && !read_closed_ && ahead_ids_ < kStreamAheadIds &&
        queue_.size() < kStreamAheadResponses &&
        (queue_.empty() || impl_.stream_budget_.has_room(*connection_))) {
      reading_ = true;
      StartRead(&request_);
    }
    if (read_closed_ && !reading_ && !issuing_ && !writing_ && queue_.empty()) {
      finished_ = true;
      return error_;
    }
    return std::nullopt;
  }

  // Finishes the stream with `status` (after which OnDone may delete it). Without mu_.
  void end(const Status& status) FLURRY_EXCLUDES(mu_) {
    Finish(impl_.answer(Method::kIdsStream, *ctx_, status, started_));
  }

  GrpcServerImpl& impl_;
  grpc::CallbackServerContext* ctx_;
  const MonoTime started_;
  Mutex mu_;
  v1::NextRequest request_;  // the request being read
  const std::string peer_;
  internal::StreamBudget::Connection* const connection_;
  // Answers issued, the front one being written.
  std::deque<v1::NextResponse> queue_ FLURRY_GUARDED_BY(mu_);
  // Bytes each answer in queue_ drew on the budget.
  std::deque<std::uint64_t> drawn_ FLURRY_GUARDED_BY(mu_);
  std::uint64_t ahead_ids_ FLURRY_GUARDED_BY(mu_) = 0;  // IDs in queue_
  // Of the request being issued: set under mu_ before issuing_ is, read by issue() while it is.
  IdCount count_ = IdCount::one();
  const IdTextCodec* codec_ = nullptr;  // one of id_codecs()
  bool reading_ FLURRY_GUARDED_BY(mu_) = false;
  bool issuing_ FLURRY_GUARDED_BY(mu_) = false;
  bool writing_ FLURRY_GUARDED_BY(mu_) = false;
  // No more requests: the client closed, broke, or sent a bad one.
  bool read_closed_ FLURRY_GUARDED_BY(mu_) = false;
  bool finished_ FLURRY_GUARDED_BY(mu_) = false;
  // What the stream ends with once the answers before it are out.
  Status error_ FLURRY_GUARDED_BY(mu_);
};

// A stream refused before anything was issued: by its credential (an unknown token's refusal
// answered after its delay, from the store pool) or by its request.
template <typename Reactor>
class RefusedStream final : public Reactor {
 public:
  RefusedStream(GrpcServerImpl& impl, Method method, grpc::CallbackServerContext* ctx, Status st,
                Deferral deferral = {}) {
    const MonoTime started = impl.clock_.now();
    if (st.reason() != Reason::kWouldBlock) {
      this->Finish(impl.answer(method, *ctx, st, started));
      return;
    }
    impl.pools_.post(deferral.pool, [this, &impl, method, ctx, started, deferral]() mutable {
      const Status late = impl.admit(method, *ctx, Blocking::kAllowed, deferral);
      this->Finish(impl.answer(method, *ctx, late, started));
    });
  }
  void OnDone() override { delete this; }
};

// A stream's credential, at its start (GrpcServerImpl::admit): nullptr when it is admitted,
// else the reactor that refuses it.
template <typename Reactor>
Reactor* refused_stream(GrpcServerImpl& impl, Method method, grpc::CallbackServerContext* ctx) {
  Deferral deferral;
  Status st = impl.admit(method, *ctx, Blocking::kNever, deferral);
  if (st.ok()) return nullptr;
  return new RefusedStream<Reactor>(impl, method, ctx, std::move(st), std::move(deferral));
}

grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse>* GrpcServerImpl::IdsHolder::Stream(
    grpc::CallbackServerContext* ctx) {
  using Reactor = grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse>;
  if (Reactor* refused = refused_stream<Reactor>(impl_, Method::kIdsStream, ctx)) return refused;
  return new IdStream(impl_, ctx);
}

// StreamRange: IDs issued a chunk at a time, the next chunk only once the transport took the one
// before (HTTP/2 flow control lets it go only when the client has room), so a slow reader holds
// back issuing and a cancelled stream issues nothing more. Chunks start small and double while the
// client keeps taking them; what is issued and not yet taken is drawn on the connection's and the
// server's StreamBudget. A chunk the generator cannot issue at once (throttled, a clock wait) is
// tried again after a delay instead of waiting on the generator's thread, so streams take only
// the rate unary calls leave.
class RangeStream final : public grpc::ServerWriteReactor<v1::IdChunk> {
 public:
  RangeStream(GrpcServerImpl& impl, grpc::CallbackServerContext* ctx, std::uint64_t count)
      : impl_(impl),
        ctx_(ctx),
        started_(impl.clock_.now()),
        remaining_(count),
        peer_(ctx->peer()),
        connection_(impl.stream_budget_.enter(peer_)) {
    // A chunk also fits grpc_max_message_bytes (at least 64 KiB): a message gRPC would refuse
    // to send after its IDs were issued would lose them.
    chunk_max_ = std::min({kRangeChunkIds, impl.ops_.max_batch(),
                           (impl.options_.max_message_bytes - kChunkFramingBytes) / 8});
    chunk_ids_ = std::min(kRangeFirstChunkIds, chunk_max_);
    next_chunk();
  }

  void OnWriteDone(bool ok) override {
    give_back();
    if (!ok) return end(Status(StatusCode::kCancelled, "the stream broke while IDs were sent"));
    chunk_ids_ = std::min(chunk_ids_ * 2, chunk_max_);
    next_chunk();
  }

  void OnDone() override {
    give_back();
    impl_.stream_budget_.leave(peer_);
    delete this;
  }

 private:
  void give_back() {
    if (held_ == 0) return;
    impl_.stream_budget_.give(*connection_, held_);
    held_ = 0;
  }

  void next_chunk() {
    if (remaining_ == 0) return end(OkStatus());
    if (ctx_->IsCancelled()) return end(Status(StatusCode::kCancelled, "cancelled"));
    const std::uint64_t least = std::min(kRangeFirstChunkIds, chunk_max_);
    held_ = impl_.stream_budget_.take(*connection_, std::min(remaining_, chunk_ids_) * 8,
                                      std::min(remaining_, least) * 8);
    // Less than asked when the budget is short: the chunk grows again from there.
    chunk_ids_ = std::max(least, held_ / 8);
    // held_ / 8 <= chunk_max_ <= max_batch: always a valid count.
    Result<IdCount> n = IdCount::of(held_ / 8, impl_.ops_.max_batch());
    if (!n.ok()) return end(n.status());
    count_ = *n;
    ids_.resize(count_.value());
    Deferral deferral;
    Status st = impl_.ops_.next_ids(count_, ids_, Blocking::kNever, deferral);
    if (st.reason() != Reason::kWouldBlock) {
      retry_ = std::chrono::milliseconds(0);
      return after_issue(st);
    }
    // Nothing was issued: give the bytes back and try again later, with a first-size chunk.
    give_back();
    // A stream that waits for the generator keeps no large buffer meanwhile (while it flows, the
    // two are reused from chunk to chunk: freeing and faulting them in again for every chunk cost
    // two thirds of a single stream's rate).
    if (ids_.capacity() > kRangeFirstChunkIds) std::vector<std::uint64_t>().swap(ids_);
    if (chunk_.ids().capacity() > kRangeFirstChunkIds * 8) {
      std::string().swap(*chunk_.mutable_ids());
    }
    chunk_ids_ = least;
    retry_ = std::clamp(retry_ * 2, kRangeRetryMin, kRangeRetryMax);
    // Two alarms taken in turn: the next retry is set from inside the previous one's callback,
    // which must not replace the function it is running.
    alarm_ ^= 1;
    alarms_[alarm_].Set(std::chrono::system_clock::now() + retry_, [this](bool) { next_chunk(); });
  }

  void after_issue(const Status& st) {
    if (!st.ok()) {
      give_back();
      return end(st);
    }
    std::string& packed = *chunk_.mutable_ids();
    packed.resize(ids_.size() * 8);
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(packed.data(), ids_.data(), packed.size());
    } else {
      for (std::size_t i = 0; i < ids_.size(); ++i) {
        for (int b = 0; b < 8; ++b) {
          packed[i * 8 + b] = static_cast<char>((ids_[i] >> (8 * b)) & 0xff);
        }
      }
    }
    remaining_ -= count_.value();
    impl_.count_sent(Method::kIdsStreamRange, count_.value());
    StartWrite(&chunk_);
  }

  void end(const Status& st) { Finish(impl_.answer(Method::kIdsStreamRange, *ctx_, st, started_)); }

  GrpcServerImpl& impl_;
  grpc::CallbackServerContext* ctx_;
  const MonoTime started_;
  std::uint64_t remaining_;
  const std::string peer_;
  internal::StreamBudget::Connection* const connection_;
  std::uint64_t chunk_max_ = 1;
  std::uint64_t chunk_ids_ = 1;  // the size of the next chunk, before the budget's say
  std::uint64_t held_ = 0;       // bytes drawn on the budget for the chunk being issued or sent
  std::chrono::milliseconds retry_{0};
  std::array<grpc::Alarm, 2> alarms_;
  std::size_t alarm_ = 0;
  IdCount count_ = IdCount::one();
  std::vector<std::uint64_t> ids_;
  v1::IdChunk chunk_;
};

grpc::ServerWriteReactor<v1::IdChunk>* GrpcServerImpl::IdsHolder::StreamRange(
    grpc::CallbackServerContext* ctx, const v1::RangeRequest* req) {
  using Reactor = grpc::ServerWriteReactor<v1::IdChunk>;
  if (Reactor* refused = refused_stream<Reactor>(impl_, Method::kIdsStreamRange, ctx)) {
    return refused;
  }
  const std::uint64_t count = req->count();
  if (count == 0 || count > impl_.options_.max_range) {
    return new RefusedStream<Reactor>(
        impl_, Method::kIdsStreamRange, ctx,
        InvalidArgument("field \"count\": " + std::to_string(count) +
                        (count == 0 ? " is too small (at least 1)"
                                    : " is more than grpc_max_range (" +
                                          std::to_string(impl_.options_.max_range) +
                                          "); ask for fewer in each StreamRange")));
  }
  return new RangeStream(impl_, ctx, count);
}

grpc::ServerUnaryReactor* GrpcServerImpl::IdsHolder::Decode(grpc::CallbackServerContext* ctx,
                                                            const v1::DecodeRequest* req,
                                                            v1::DecodeResponse* resp) {
  Result<const IdTextCodec*> codec = codec_of(impl_.ops_, req->encoding());
  if (!codec.ok()) return impl_.refuse(Method::kIdsDecode, ctx, codec.status());
  return impl_.unary(Method::kIdsDecode, ctx,
                     [this, req, resp, codec = *codec](Blocking, Deferral&) {
                       Result<DecodedId> d = impl_.ops_.decode_id(req->id(), *codec);
                       if (!d.ok()) return d.status();
                       resp->set_id(d->id);
                       resp->set_time(format_time(d->time));
                       resp->set_unix_ms(d->unix_ms);
                       resp->set_ticks(d->parts.ticks);
                       resp->set_node(d->parts.node);
                       resp->set_seq(d->parts.seq);
                       for (const DecodedField& f : d->fields) {
                         v1::Field* field = resp->add_fields();
                         field->set_name(f.name);
                         field->set_value(f.value);
                         field->set_bits(static_cast<std::uint32_t>(f.bits));
                       }
                       resp->set_layout(impl_.ops_.layout().to_string());
                       return OkStatus();
                     });
}

grpc::ServerUnaryReactor* GrpcServerImpl::IdsHolder::Layout(grpc::CallbackServerContext* ctx,
                                                            const v1::LayoutRequest*,
                                                            v1::LayoutResponse* resp) {
  return impl_.unary(Method::kIdsLayout, ctx, [this, resp](Blocking, Deferral&) {
    const flurry::Layout& layout = impl_.ops_.layout();
    resp->set_layout(layout.to_string());
    for (const Field& f : layout.fields()) {
      v1::Field* field = resp->add_fields();
      field->set_name(f.name);
      field->set_bits(static_cast<std::uint32_t>(f.bits));
    }
    resp->set_epoch(format_time(layout.epoch()));
    resp->set_node(impl_.ops_.node());
    resp->set_max_batch(impl_.ops_.max_batch());
    return OkStatus();
  });
}

// ---- flurry.v1.Segments ----

// The count of a segment call: against the segment service's max_batch; one when segment mode
// is off, so that the operation answers why (NOT_FOUND, segment mode is not served here).
Result<IdCount> segment_count(const ops::Operations& ops, std::uint64_t n, std::string_view field) {
  if (!ops.segments_served()) return IdCount::one();
  return IdCount::of(n, ops.segment_max_batch(), field);
}

grpc::ServerUnaryReactor* GrpcServerImpl::SegmentsHolder::Next(grpc::CallbackServerContext* ctx,
                                                               const v1::SegmentNextRequest* req,
                                                               v1::SegmentNextResponse* resp) {
  Result<ops::SegmentTag> tag = ops::SegmentTag::of(req->tag(), "field \"tag\"");
  if (!tag.ok()) return impl_.refuse(Method::kSegmentsNext, ctx, tag.status());
  Result<IdCount> count = segment_count(impl_.ops_, req->count(), "count");
  if (!count.ok()) return impl_.refuse(Method::kSegmentsNext, ctx, count.status());
  if (Status st = check_response_size(count->value(), IdTextCodec::of(Encoding::kDecimal),
                                      impl_.options_.max_message_bytes);
      !st.ok()) {
    return impl_.refuse(Method::kSegmentsNext, ctx, st);
  }
  resp->mutable_ids()->Resize(static_cast<int>(count->value()), 0);
  return impl_.unary(
      Method::kSegmentsNext, ctx,
      [this, resp, t = std::move(tag).value(), n = *count](Blocking blocking, Deferral& deferral) {
        std::span<std::uint64_t> out(resp->mutable_ids()->mutable_data(), n.value());
        Status st = impl_.ops_.segment_ids(t, n, out, blocking, deferral);
        if (st.ok()) impl_.count_sent(Method::kSegmentsNext, n.value());
        return st;
      });
}

grpc::ServerUnaryReactor* GrpcServerImpl::SegmentsHolder::Range(grpc::CallbackServerContext* ctx,
                                                                const v1::SegmentRangeRequest* req,
                                                                v1::SegmentRangeResponse* resp) {
  Result<ops::SegmentTag> tag = ops::SegmentTag::of(req->tag(), "field \"tag\"");
  if (!tag.ok()) return impl_.refuse(Method::kSegmentsRange, ctx, tag.status());
  Result<IdCount> size = segment_count(impl_.ops_, req->size(), "size");
  if (!size.ok()) return impl_.refuse(Method::kSegmentsRange, ctx, size.status());
  return impl_.unary(
      Method::kSegmentsRange, ctx,
      [this, resp, t = std::move(tag).value(), n = *size](Blocking blocking, Deferral& deferral) {
        Result<SegmentRange> r = impl_.ops_.segment_range(t, n, blocking, deferral);
        if (!r.ok()) return r.status();
        resp->set_start(r->start);
        resp->set_end(r->end);
        resp->set_delta(r->delta);
        impl_.count_sent(Method::kSegmentsRange, r->size());
        return OkStatus();
      });
}

grpc::ServerUnaryReactor* GrpcServerImpl::SegmentsHolder::List(grpc::CallbackServerContext* ctx,
                                                               const v1::SegmentListRequest*,
                                                               v1::SegmentListResponse* resp) {
  return impl_.unary(
      Method::kSegmentsList, ctx, [this, resp](Blocking blocking, Deferral& deferral) {
        Result<std::vector<SegmentTagInfo>> tags = impl_.ops_.segment_tags(blocking, deferral);
        if (!tags.ok()) return tags.status();
        for (const SegmentTagInfo& info : *tags) fill_tag(info, *resp->add_tags());
        return OkStatus();
      });
}

grpc::ServerUnaryReactor* GrpcServerImpl::SegmentsHolder::Get(grpc::CallbackServerContext* ctx,
                                                              const v1::SegmentGetRequest* req,
                                                              v1::SegmentGetResponse* resp) {
  Result<ops::SegmentTag> tag = ops::SegmentTag::of(req->tag(), "field \"tag\"");
  if (!tag.ok()) return impl_.refuse(Method::kSegmentsGet, ctx, tag.status());
  return impl_.unary(
      Method::kSegmentsGet, ctx,
      [this, resp, t = std::move(tag).value()](Blocking blocking, Deferral& deferral) {
        Result<ops::SegmentTagReport> report = impl_.ops_.segment_tag(t, blocking, deferral);
        if (!report.ok()) return report.status();
        resp->set_tag(t.name());
        resp->set_served(report->served);
        resp->set_remaining(report->state.remaining);
        resp->set_ids_issued(report->state.ids_issued);
        if (report->stored) fill_tag(*report->stored, *resp->mutable_stored());
        return OkStatus();
      });
}

grpc::ServerUnaryReactor* GrpcServerImpl::SegmentsHolder::Create(
    grpc::CallbackServerContext* ctx, const v1::SegmentCreateRequest* req, v1::SegmentTag* resp) {
  SegmentTagSpec spec;
  spec.tag = req->tag();
  if (req->has_start()) spec.start = req->start();
  if (req->has_step()) spec.step = req->step();
  if (req->has_delta()) spec.delta = req->delta();
  if (req->has_remainder()) spec.remainder = req->remainder();
  spec.description = req->description();
  return impl_.unary(Method::kSegmentsCreate, ctx,
                     [this, resp, spec = std::move(spec)](Blocking blocking, Deferral& deferral) {
                       Result<SegmentTagInfo> created =
                           impl_.ops_.create_segment_tag(spec, blocking, deferral);
                       if (!created.ok()) return created.status();
                       fill_tag(*created, *resp);
                       return OkStatus();
                     });
}

// ---- flurry.v1.OrderNumbers ----

grpc::ServerUnaryReactor* GrpcServerImpl::OrdersHolder::New(grpc::CallbackServerContext* ctx,
                                                            const v1::OrderNewRequest* req,
                                                            v1::OrderNewResponse* resp) {
  std::optional<ops::SegmentTag> tag;
  if (!req->tag().empty()) {
    Result<ops::SegmentTag> t = ops::SegmentTag::of(req->tag(), "field \"tag\"");
    if (!t.ok()) return impl_.refuse(Method::kOrderNumbersNew, ctx, t.status());
    tag = std::move(t).value();
  }
  Result<IdCount> count = tag ? segment_count(impl_.ops_, req->count(), "count")
                              : IdCount::of(req->count(), impl_.ops_.max_batch());
  if (!count.ok()) return impl_.refuse(Method::kOrderNumbersNew, ctx, count.status());
  if (count->value() * kMaxOrderNumberBytes > impl_.options_.max_message_bytes) {
    return impl_.refuse(
        Method::kOrderNumbersNew, ctx,
        InvalidArgument("field \"count\": " + std::to_string(count->value()) +
                        " order numbers may need more than grpc_max_message_bytes (" +
                        std::to_string(impl_.options_.max_message_bytes) + "); ask for fewer"));
  }
  struct Scratch {
    std::vector<std::uint64_t> ids;
    ops::OrderNumbers numbers;
  };
  auto scratch = std::make_shared<Scratch>();
  scratch->ids.resize(count->value());
  return impl_.unary(Method::kOrderNumbersNew, ctx,
                     [this, resp, scratch, tag = std::move(tag), n = *count](Blocking blocking,
                                                                             Deferral& deferral) {
                       Status st = impl_.ops_.new_order_numbers(
                           n, tag, scratch->ids, scratch->numbers, blocking, deferral);
                       if (!st.ok()) return st;
                       for (std::size_t i = 0; i < scratch->numbers.size(); ++i) {
                         resp->add_order_numbers(std::string(scratch->numbers[i]));
                       }
                       impl_.count_sent(Method::kOrderNumbersNew, n.value());
                       return st;
                     });
}

grpc::ServerUnaryReactor* GrpcServerImpl::OrdersHolder::Decode(grpc::CallbackServerContext* ctx,
                                                               const v1::OrderDecodeRequest* req,
                                                               v1::OrderDecodeResponse* resp) {
  std::optional<ops::SegmentTag> tag;
  if (!req->tag().empty()) {
    Result<ops::SegmentTag> t = ops::SegmentTag::of(req->tag(), "field \"tag\"");
    if (!t.ok()) return impl_.refuse(Method::kOrderNumbersDecode, ctx, t.status());
    tag = std::move(t).value();
  }
  return impl_.unary(
      Method::kOrderNumbersDecode, ctx,
      [this, ctx, req, resp, tag = std::move(tag)](Blocking blocking, Deferral& deferral) {
        ops::OrderNumberFault fault;
        Result<ops::DecodedOrderNumber> d =
            impl_.ops_.decode_order_number(req->order_number(), tag, fault, blocking, deferral);
        if (!d.ok()) {
          if (fault.kind != OrderDecodeError::Kind::kNone) {
            ctx->AddTrailingMetadata("flurry-order-fault", std::string(to_string(fault.kind)));
            if (fault.position > 0) {
              ctx->AddTrailingMetadata("flurry-order-fault-position",
                                       std::to_string(fault.position));
            }
          }
          return d.status();
        }
        resp->set_order_number(req->order_number());
        resp->set_key_version(static_cast<std::uint64_t>(d->key_version - '0'));
        resp->set_source(d->segment ? "segment" : "snowflake");
        resp->set_tag(d->tag);
        resp->set_id(d->id);
        return OkStatus();
      });
}

// ---- GrpcServer ----

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(ops::Operations& operations,
                                                      ops::Pools& pools,
                                                      const server::GrpcOptions& options,
                                                      MonotonicClock& clock) {
  if (!options.listen) {
    return Status(StatusCode::kFailedPrecondition, "grpc_listen is empty: gRPC is turned off");
  }
  auto impl = std::make_unique<GrpcServerImpl>(operations, pools, options, clock);
  if (Status st = impl->start(); !st.ok()) return st;
  return std::unique_ptr<GrpcServer>(std::move(impl));
}

}  // namespace flurry::grpc_api

// The module's entry point, found by name with dlsym() (flurry/grpc/grpc_server.h).
extern "C" {
[[gnu::visibility("default")]] extern const flurry::grpc_api::GrpcModule flurry_grpc_module_v1;
const flurry::grpc_api::GrpcModule flurry_grpc_module_v1{FLURRY_VERSION,
                                                         &flurry::grpc_api::GrpcServer::start};
}

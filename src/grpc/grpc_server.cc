// The gRPC adapter (flurry/grpc/grpc_server.h): the module's entry point and the server's life
// cycle (the listener with its descriptor ceiling, TLS files gRPC re-reads, health, the drain at
// a stop). The parts, each in a file of its own beside this one:
//   services.h, ids_service.cc, segments_service.cc, orders_service.cc, tso_service.cc:
//   flurry.v1's methods;
//   id_stream.cc, range_stream.cc, refused_stream.h, stream_budget.h: the streams and their
//   budget;
//   calls.h: running one call (admission, the unary pattern, its end);
//   messages.h: messages to the operations layer's typed values and back;
//   status_mapping.h: Status to gRPC codes, `flurry-reason`, `retry-after-ms` and details;
//   call_metrics.h: flurry_grpc_*; methods.h: the method table with its scopes;
//   health.h: grpc.health.v1 and reflection; listener.h: the listening socket.
// Nothing here issues, checks or decides anything the operations layer owns.
#include "grpc_api/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "calls.h"
#include "health.h"
#include "listener.h"
#include "services.h"

namespace flurry::grpc_api {
namespace {

// Requests are small (the largest, a Segments.Create, carries a 256-byte description).
constexpr int kMaxReceiveBytes = 64 << 10;
// Between health turning NOT_SERVING at a graceful stop and the port closing: long enough for
// Watch streams and probes to hear it first.
constexpr std::chrono::milliseconds kHealthGrace{250};
// Memory gRPC may hold for all connections together (buffers, flow-control windows that let a
// StreamRange run ahead of a slow reader): beyond it gRPC shrinks windows and refuses new
// allocations rather than grow.
constexpr std::size_t kMemoryQuotaBytes = std::size_t{256} << 20;
// A keepalive ping not answered within this closes the connection.
constexpr int kKeepaliveTimeoutMs = 20000;

// Plain HTTP/2 without TLS files. With them, gRPC's own TLS (TLS 1.2 at least, gRPC's default
// and only choice of ciphers): the key and certificate, and with a client CA a client
// certificate every connection must present (mTLS). gRPC re-reads the files every
// kGrpcTlsRefresh and serves whatever they hold, so `flurry serve` gives it copies it checked
// (tls/pinned_files.h: replaced at a SIGHUP only when the new files load).
std::shared_ptr<grpc::ServerCredentials> listener_credentials(const tls::TlsOptions& tls) {
  if (!tls.enabled() || !tls.key_file) return grpc::InsecureServerCredentials();
  const std::string key = tls.key_file->string();
  const std::string cert = tls.cert_file->string();
  const auto refresh = static_cast<unsigned>(grpc_api::kGrpcTlsRefresh.count());
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

// The one implementation of GrpcServer (the module hands it out through kGrpcModuleEntry).
class GrpcServerImpl final : public GrpcServer {
 public:
  GrpcServerImpl(ops::Operations& operations, ops::Pools& pools,
                 const grpc_api::GrpcOptions& options, MonotonicClock& clock)
      : calls_(operations, pools, options, clock),
        ids_(calls_),
        segments_(calls_),
        orders_(calls_),
        tso_(calls_),
        health_(operations, calls_.stream_budget_) {}

  ~GrpcServerImpl() override { stop(std::chrono::milliseconds(0)); }

  Status start() {
    const grpc_api::GrpcOptions& options = calls_.options_;
    // Debian builds Abseil with its debug-mode deadlock detector on: every absl::Mutex that gRPC
    // locks or destroys (several per call) updated a global lock graph, a few percent of the
    // server's CPU per call in a profile. flurry has no absl::Mutex of its own to check.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    enable_health_and_reflection();
    grpc::ServerBuilder builder;
    const std::string address = options.listen->to_string();
    if (Status st = listener_.open(*options.listen); !st.ok()) return st;
    std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor =
        builder.experimental().AddExternalConnectionAcceptor(
            grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
            listener_credentials(options.tls));
    builder.RegisterService(&ids_);
    builder.RegisterService(&segments_);
    builder.RegisterService(&orders_);
    builder.RegisterService(&tso_);
    grpc::ResourceQuota quota("flurry");
    quota.Resize(kMemoryQuotaBytes);
    builder.SetResourceQuota(quota);
    builder.SetMaxReceiveMessageSize(kMaxReceiveBytes);
    builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
    // Channelz (gRPC's introspection service, not served here) would count every call.
    builder.AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                               static_cast<int>(options.max_concurrent_streams));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                               static_cast<int>(options.keepalive.count()));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(options.idle_timeout.count()));
    server_ = builder.BuildAndStart();
    if (!server_) {
      listener_.stop();
      return Status(Reason::kIo,
                    "grpc_listen " + address + ": gRPC did not start" +
                        (options.tls.enabled() ? " (it may have refused the TLS files)" : ""));
    }
    acceptor_ = std::move(acceptor);
    listener_.start(*acceptor_, options.descriptor_ceiling);
    local_ = *options.listen;
    local_.port = static_cast<std::uint16_t>(listener_.port());
    health_.start(*server_);
    return OkStatus();
  }

  std::string local_address() const override { return local_.to_string(); }

  void begin_shutdown() override { health_.shutdown(); }

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

  void write_metrics(service::PrometheusWriter& out) const override {
    calls_.write_metrics(out, listener_.rejected());
  }

 private:
  Calls calls_;
  IdsService ids_;
  SegmentsService segments_;
  OrdersService orders_;
  TsoService tso_;
  Listener listener_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::unique_ptr<grpc::Server> server_;
  Health health_;  // after server_: destroyed before it
  HostPort local_;
  std::once_flag stopped_;
};

}  // namespace

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(ops::Operations& operations,
                                                      ops::Pools& pools,
                                                      const grpc_api::GrpcOptions& options,
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

// flurry_etcd.so: one etcd endpoint's gRPC channel and calls, with the code protoc generated from
// etcd's own protocol definitions (etcd_protos.cmake). What crosses to the client is
// etcd_module_api.h's; failover, authentication and the streams' threads are the client's
// (etcd_client.cc). This file calls none of flurry's out-of-line code (--no-undefined).
#include <grpcpp/grpcpp.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcd_module_api.h"

namespace flurry::internal::etcd_module {
namespace {

namespace api = etcd_module_api;
namespace pb = etcdserverpb;
using api::RawStatus;
using std::chrono::milliseconds;

RawStatus from(const grpc::Status& status) {
  return {static_cast<int>(status.error_code()), status.error_message()};
}

void set_deadline(grpc::ClientContext& context, milliseconds timeout) {
  context.set_deadline(std::chrono::system_clock::now() + timeout);
}

void set_token(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata("token", token);
}

EtcdKeyValue to_kv(const mvccpb::KeyValue& kv) {
  EtcdKeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

EtcdRange to_range(const pb::RangeResponse& r) {
  EtcdRange out;
  out.revision = r.header().revision();
  out.kvs.reserve(static_cast<std::size_t>(r.kvs_size()));
  for (const mvccpb::KeyValue& kv : r.kvs()) out.kvs.push_back(to_kv(kv));
  out.count = r.count();
  out.more = r.more();
  return out;
}

void to_compare(const EtcdCompare& c, pb::Compare& out) {
  out.set_key(c.key);
  switch (c.result) {
    case EtcdCompare::Result::kEqual:
      out.set_result(pb::Compare_CompareResult_EQUAL);
      break;
    case EtcdCompare::Result::kNotEqual:
      out.set_result(pb::Compare_CompareResult_NOT_EQUAL);
      break;
    case EtcdCompare::Result::kGreater:
      out.set_result(pb::Compare_CompareResult_GREATER);
      break;
    case EtcdCompare::Result::kLess:
      out.set_result(pb::Compare_CompareResult_LESS);
      break;
  }
  switch (c.target) {
    case EtcdCompare::Target::kCreateRevision:
      out.set_target(pb::Compare_CompareTarget_CREATE);
      out.set_create_revision(c.number);
      break;
    case EtcdCompare::Target::kModRevision:
      out.set_target(pb::Compare_CompareTarget_MOD);
      out.set_mod_revision(c.number);
      break;
    case EtcdCompare::Target::kVersion:
      out.set_target(pb::Compare_CompareTarget_VERSION);
      out.set_version(c.number);
      break;
    case EtcdCompare::Target::kValue:
      out.set_target(pb::Compare_CompareTarget_VALUE);
      out.set_value(c.value);
      break;
    case EtcdCompare::Target::kLease:
      out.set_target(pb::Compare_CompareTarget_LEASE);
      out.set_lease(c.number);
      break;
  }
}

void to_op(const EtcdOp& op, pb::RequestOp& out) {
  switch (op.kind) {
    case EtcdOp::Kind::kRange: {
      pb::RangeRequest* r = out.mutable_request_range();
      r->set_key(op.key);
      r->set_range_end(op.range_end);
      break;
    }
    case EtcdOp::Kind::kPut: {
      pb::PutRequest* p = out.mutable_request_put();
      p->set_key(op.key);
      p->set_value(op.value);
      p->set_lease(op.lease);
      break;
    }
    case EtcdOp::Kind::kDelete: {
      pb::DeleteRangeRequest* d = out.mutable_request_delete_range();
      d->set_key(op.key);
      d->set_range_end(op.range_end);
      break;
    }
  }
}

class KeepAliveStream final : public api::RawKeepAliveStream {
 public:
  KeepAliveStream(pb::Lease::Stub& stub, const std::string& token) {
    set_token(context_, token);
    stream_ = stub.LeaseKeepAlive(&context_);
  }
  ~KeepAliveStream() override {
    if (!finished_) {
      context_.TryCancel();
      (void)stream_->Finish();
    }
  }
  bool write(std::int64_t id) override {
    pb::LeaseKeepAliveRequest request;
    request.set_id(id);
    return stream_->Write(request);
  }
  bool read(std::int64_t& id, std::int64_t& ttl_seconds) override {
    pb::LeaseKeepAliveResponse response;
    if (!stream_->Read(&response)) return false;
    id = response.id();
    ttl_seconds = response.ttl();
    return true;
  }
  RawStatus finish() override {
    finished_ = true;
    return from(stream_->Finish());
  }
  void cancel() override { context_.TryCancel(); }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>>
      stream_;
  bool finished_ = false;
};

class WatchStream final : public api::RawWatchStream {
 public:
  WatchStream(pb::Watch::Stub& stub, const std::string& token) {
    set_token(context_, token);
    // etcd cuts the stream of a member that has no leader (rather than let it look idle).
    context_.AddMetadata("hasleader", "true");
    stream_ = stub.Watch(&context_);
  }
  ~WatchStream() override {
    if (!finished_) {
      context_.TryCancel();
      (void)stream_->Finish();
    }
  }
  bool create(const std::string& key, const std::string& range_end,
              std::int64_t start_revision) override {
    pb::WatchRequest request;
    pb::WatchCreateRequest* create = request.mutable_create_request();
    create->set_key(key);
    create->set_range_end(range_end);
    create->set_start_revision(start_revision);
    return stream_->Write(request);
  }
  bool request_progress() override {
    pb::WatchRequest request;
    (void)request.mutable_progress_request();
    return stream_->Write(request);
  }
  bool read(api::RawWatchResponse& out) override {
    pb::WatchResponse response;
    if (!stream_->Read(&response)) return false;
    out.revision = response.header().revision();
    out.watch_id = response.watch_id();
    out.created = response.created();
    out.canceled = response.canceled();
    out.compact_revision = response.compact_revision();
    out.cancel_reason = response.cancel_reason();
    out.events.clear();
    out.events.reserve(static_cast<std::size_t>(response.events_size()));
    for (const mvccpb::Event& e : response.events()) {
      out.events.push_back({e.type() == mvccpb::Event_EventType_PUT, to_kv(e.kv())});
    }
    return true;
  }
  RawStatus finish() override {
    finished_ = true;
    return from(stream_->Finish());
  }
  void cancel() override { context_.TryCancel(); }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream_;
  bool finished_ = false;
};

class Channel final : public api::RawChannel {
 public:
  explicit Channel(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)),
        kv_(pb::KV::NewStub(channel_)),
        lease_(pb::Lease::NewStub(channel_)),
        watch_(pb::Watch::NewStub(channel_)),
        auth_(pb::Auth::NewStub(channel_)) {}

  int wait_connected(milliseconds timeout) override {
    const auto deadline = std::chrono::system_clock::now() + timeout;
    grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
    while (state != GRPC_CHANNEL_READY) {
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) return -1;
      if (!channel_->WaitForStateChange(state, deadline)) return 0;
      state = channel_->GetState(/*try_to_connect=*/true);
    }
    return 1;
  }

  RawStatus range(const std::string& key, const std::string& range_end, bool keys_only,
                  std::int64_t revision, const std::string& token, milliseconds timeout,
                  EtcdRange& out) override {
    grpc::ClientContext context;
    set_deadline(context, timeout);
    set_token(context, token);
    pb::RangeRequest request;
    request.set_key(key);
    request.set_range_end(range_end);
    request.set_keys_only(keys_only);
    request.set_revision(revision);
    pb::RangeResponse response;
    const grpc::Status status = kv_->Range(&context, request, &response);
    if (status.ok()) out = to_range(response);
    return from(status);
  }

  RawStatus txn(const EtcdTxn& txn, const std::string& token, milliseconds timeout,
                EtcdTxnResult& out) override {
    grpc::ClientContext context;
    set_deadline(context, timeout);
    set_token(context, token);
    pb::TxnRequest request;
    for (const EtcdCompare& c : txn.compare) to_compare(c, *request.add_compare());
    for (const EtcdOp& op : txn.success) to_op(op, *request.add_success());
    for (const EtcdOp& op : txn.failure) to_op(op, *request.add_failure());
    pb::TxnResponse response;
    const grpc::Status status = kv_->Txn(&context, request, &response);
    if (!status.ok()) return from(status);
    out = EtcdTxnResult{};
    out.succeeded = response.succeeded();
    out.revision = response.header().revision();
    for (const pb::ResponseOp& r : response.responses()) {
      EtcdOpResult result;
      switch (r.response_case()) {
        case pb::ResponseOp::kResponseRange:
          result.kind = EtcdOp::Kind::kRange;
          result.range = to_range(r.response_range());
          break;
        case pb::ResponseOp::kResponsePut:
          result.kind = EtcdOp::Kind::kPut;
          break;
        case pb::ResponseOp::kResponseDeleteRange:
          result.kind = EtcdOp::Kind::kDelete;
          result.deleted = r.response_delete_range().deleted();
          break;
        default:
          return {13, "etcd answered an operation of the transaction with no known response"};
      }
      out.responses.push_back(std::move(result));
    }
    return {};
  }

  RawStatus grant(std::int64_t ttl_seconds, const std::string& token, milliseconds timeout,
                  EtcdLeaseGrant& out) override {
    grpc::ClientContext context;
    set_deadline(context, timeout);
    set_token(context, token);
    pb::LeaseGrantRequest request;
    request.set_ttl(ttl_seconds);
    pb::LeaseGrantResponse response;
    const grpc::Status status = lease_->LeaseGrant(&context, request, &response);
    if (!status.ok()) return from(status);
    if (!response.error().empty()) return {13, response.error()};
    out = {response.id(), response.ttl()};
    return {};
  }

  RawStatus revoke(std::int64_t id, const std::string& token, milliseconds timeout) override {
    grpc::ClientContext context;
    set_deadline(context, timeout);
    set_token(context, token);
    pb::LeaseRevokeRequest request;
    request.set_id(id);
    pb::LeaseRevokeResponse response;
    return from(lease_->LeaseRevoke(&context, request, &response));
  }

  RawStatus time_to_live(std::int64_t id, const std::string& token, milliseconds timeout,
                         EtcdLeaseTtl& out) override {
    grpc::ClientContext context;
    set_deadline(context, timeout);
    set_token(context, token);
    pb::LeaseTimeToLiveRequest request;
    request.set_id(id);
    pb::LeaseTimeToLiveResponse response;
    const grpc::Status status = lease_->LeaseTimeToLive(&context, request, &response);
    if (status.ok()) out = {response.ttl(), response.grantedttl()};
    return from(status);
  }

  RawStatus authenticate(const std::string& user, const std::string& password, milliseconds timeout,
                         std::string& token) override {
    grpc::ClientContext context;
    set_deadline(context, timeout);
    pb::AuthenticateRequest request;
    request.set_name(user);
    request.set_password(password);
    pb::AuthenticateResponse response;
    const grpc::Status status = auth_->Authenticate(&context, request, &response);
    if (status.ok()) token = response.token();
    return from(status);
  }

  std::unique_ptr<api::RawKeepAliveStream> keep_alive(const std::string& token) override {
    return std::make_unique<KeepAliveStream>(*lease_, token);
  }
  std::unique_ptr<api::RawWatchStream> watch(const std::string& token) override {
    return std::make_unique<WatchStream>(*watch_, token);
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::KV::Stub> kv_;
  std::unique_ptr<pb::Lease::Stub> lease_;
  std::unique_ptr<pb::Watch::Stub> watch_;
  std::unique_ptr<pb::Auth::Stub> auth_;
};

// The PEM certificate in `pem` (the first), or null.
X509* read_certificate(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return nullptr;
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

bool common_name(const std::string& cert_pem, std::string& name, std::string& error) {
  X509* cert = read_certificate(cert_pem);
  if (cert == nullptr) {
    error = "holds no PEM certificate";
    return false;
  }
  name.clear();
  X509_NAME* subject = X509_get_subject_name(cert);
  const int at = subject != nullptr ? X509_NAME_get_index_by_NID(subject, NID_commonName, -1) : -1;
  if (at >= 0) {
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, data);
    if (n > 0) name.assign(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(n));
    OPENSSL_free(utf8);
  }
  X509_free(cert);
  return true;
}

std::unique_ptr<api::RawChannel> make_channel(const api::ChannelSettings& settings,
                                              std::string& error) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (settings.tls) {
    if (!settings.ca_pem.empty()) {
      X509* ca = read_certificate(settings.ca_pem);
      if (ca == nullptr) {
        error = "the CA file holds no PEM certificate";
        return nullptr;
      }
      X509_free(ca);
    }
    if (!settings.cert_pem.empty()) {
      X509* cert = read_certificate(settings.cert_pem);
      if (cert == nullptr) {
        error = "the client certificate file holds no PEM certificate";
        return nullptr;
      }
      BIO* bio =
          BIO_new_mem_buf(settings.key_pem.data(), static_cast<int>(settings.key_pem.size()));
      EVP_PKEY* key =
          bio != nullptr ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr;
      BIO_free(bio);
      const bool matches = key != nullptr && X509_check_private_key(cert, key) == 1;
      EVP_PKEY_free(key);
      X509_free(cert);
      if (key == nullptr) {
        error = "the client key file holds no PEM private key";
        return nullptr;
      }
      if (!matches) {
        error = "the client key does not belong to the client certificate";
        return nullptr;
      }
    }
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = settings.ca_pem;
    options.pem_private_key = settings.key_pem;
    options.pem_cert_chain = settings.cert_pem;
    credentials = grpc::SslCredentials(options);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  // A member that went away is tried again soon after it returns (gRPC's default backoff grows
  // to two minutes), and each channel is its own connection (not shared with another client of
  // the process, whose streams would then share its fate).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Pings on open streams, so that a member that stops answering (a black hole) ends them.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(settings.ping_interval.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(settings.ping_timeout.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 64 << 20);
  args.SetString(GRPC_ARG_PRIMARY_USER_AGENT_STRING, "flurry");
  return std::make_unique<Channel>(grpc::CreateCustomChannel(settings.target, credentials, args));
}

}  // namespace
}  // namespace flurry::internal::etcd_module

extern "C" {
// The module's entry (etcd_module_api.h, kEtcdModuleEntry).
__attribute__((visibility(
    "default"))) extern const flurry::internal::etcd_module_api::EtcdModule flurry_etcd_module_v1;
const flurry::internal::etcd_module_api::EtcdModule flurry_etcd_module_v1 = {
    FLURRY_VERSION, &flurry::internal::etcd_module::make_channel,
    &flurry::internal::etcd_module::common_name};
}

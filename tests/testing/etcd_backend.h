// The etcd backend of the NodeRegistry conformance suite (registry_backend.h), against a real
// etcd (etcd_server.h): each fixture object is its own registry, a cluster name no other object
// of the process uses, on the process's one server.
//
// etcd keeps lease time itself, so time cannot be faked: let_time_pass() sleeps, and a lease is
// seen gone up to expiry_slack after its TTL (the leader looks for expired leases every 500 ms,
// then deletes their keys through Raft). The TTL is etcd's minimum, 2 s.
//
// SecuredEtcdBackend: the same against EtcdServer::secured() (TLS with a client certificate,
// authentication as user `flurry`, tokens that expire after 2 s).
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "etcd_server.h"
#include "fake_clock.h"
#include "flurry/registry.h"
#include "registry/etcd_client.h"
#include "registry_backend.h"

namespace flurry::testing {

template <bool kSecured>
class BasicEtcdBackend final : public RegistryBackend {
 public:
  explicit BasicEtcdBackend(FakeClock& /*clock*/) : cluster_(unique_cluster()) {
    (void)server();  // started here, on the test's main thread
  }

  static EtcdServer& server() { return kSecured ? EtcdServer::secured() : EtcdServer::shared(); }

  std::string name() const override { return kSecured ? "etcd (TLS, auth)" : "etcd"; }
  RegistryCapabilities capabilities() const override {
    return {.leases_expire = true,
            .node_count_limited_by_layout = true,
            .expiry_slack = std::chrono::milliseconds(1500),
            .forced_release = true};
  }
  std::chrono::milliseconds ttl() const override { return std::chrono::seconds(2); }
  void let_time_pass(std::chrono::milliseconds d) override { std::this_thread::sleep_for(d); }
  Result<std::unique_ptr<NodeRegistry>> open(std::string_view layout) override {
    Result<std::string> endpoint = server().endpoint();
    if (!endpoint.ok()) return endpoint.status();
    EtcdRegistryOptions options;
    options.endpoints = {*endpoint};
    options.cluster = cluster_;
    options.ttl = ttl();
    if (kSecured) {
      options.tls = server().client_tls();
      options.user = "flurry";
      options.password = EtcdServer::password_of("flurry");
    }
    return open_etcd_registry(options, layout, SystemClock::coarse());
  }
  void corrupt_horizon(std::uint64_t node) override {
    const std::string key = "/flurry/" + cluster_ + "/horizon/" + std::to_string(node);
    internal::EtcdTxn txn;  // only a horizon saved before
    txn.compare = {{key,
                    internal::EtcdCompare::Target::kCreateRevision,
                    internal::EtcdCompare::Result::kGreater,
                    0,
                    {}}};
    txn.success = {internal::EtcdOp::put(key, "flurry-horizon 1\nlayout x\n")};
    Result<internal::EtcdTxnResult> r = server().client()->txn(txn);
    if (!r.ok() || !r->succeeded) {  // the fixture itself is broken
      std::cerr << "EtcdBackend::corrupt_horizon(" << node
                << "): " << (r.ok() ? "no horizon saved" : r.status().to_string()) << "\n";
      std::abort();
    }
  }

  const std::string& cluster() const { return cluster_; }

 private:
  static std::string unique_cluster() {
    static std::atomic<int> next{0};
    return "test-" + std::to_string(::getpid()) + "-" + std::to_string(next.fetch_add(1));
  }

  std::string cluster_;
};

using EtcdBackend = BasicEtcdBackend<false>;
using SecuredEtcdBackend = BasicEtcdBackend<true>;

}  // namespace flurry::testing

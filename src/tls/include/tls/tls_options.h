// The server's TLS settings (tls_cert_file, tls_key_file, tls_client_ca_file), typed: the files
// only; they are read and checked at start by tls::make_server_context (src/tls/server.h) and
// again on SIGHUP. The HTTP listener serves HTTPS with them, and the gRPC listener its TLS.
#pragma once

#include <filesystem>
#include <optional>

namespace flurry::tls {

struct TlsOptions {
  // The server's certificate chain (PEM, leaf first) and its private key (PEM, unencrypted):
  // both or neither (load_config refuses one alone). Neither: plain HTTP.
  std::optional<std::filesystem::path> cert_file;
  std::optional<std::filesystem::path> key_file;
  // The CAs (PEM) that sign client certificates: given, every client must present one (mTLS).
  // Needs cert_file and key_file.
  std::optional<std::filesystem::path> client_ca_file;

  [[nodiscard]] bool enabled() const noexcept { return cert_file.has_value(); }
};

}  // namespace flurry::tls

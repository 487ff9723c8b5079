// TLS for flurry's HTTP listener: a ServerContext made once from the certificate, key and client
// CA files (re-read by reload() on SIGHUP), and a ServerStream per connection over the
// connection's own socket.
//
// As client.h: OpenSSL lives in the module flurry_tls.so, loaded at the first
// make_server_context() (module_loader.h); this header includes nothing of it. The stream's
// operations complete through a plain function pointer and its argument (IoCallback): no
// allocation or std::function per read or write, and nothing of the stream's type in the caller.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "flurry/status.h"

namespace flurry::tls {

// The HTTP server's sockets (bound to a plain io_context executor), the type the module's streams
// are built over.
using ServerSocket =
    boost::asio::basic_stream_socket<boost::asio::ip::tcp, boost::asio::io_context::executor_type>;

struct ServerFiles {
  std::filesystem::path cert_file;                      // the certificate chain (PEM), leaf first
  std::filesystem::path key_file;                       // its private key (PEM, unencrypted)
  std::optional<std::filesystem::path> client_ca_file;  // given: clients must present a cert
};

// Called on the socket's executor when an operation completes: `target` as given, the error and
// the bytes transferred (0 for the handshake and the shutdown).
using IoCallback = void (*)(void* target, const boost::system::error_code& ec, std::size_t n);

// One TLS connection over a socket that outlives it. One operation of each kind at a time, as
// for Asio's ssl::stream; closing the socket makes the pending ones complete with an error.
class ServerStream {
 public:
  virtual ~ServerStream() = default;
  virtual void async_handshake(IoCallback done, void* target) = 0;
  virtual void async_read_some(boost::asio::mutable_buffer buffer, IoCallback done,
                               void* target) = 0;
  // All of `buffer`, as asio::async_write.
  virtual void async_write(boost::asio::const_buffer buffer, IoCallback done, void* target) = 0;
  // Sends close_notify and waits for the peer's (or its end of the stream).
  virtual void async_shutdown(IoCallback done, void* target) = 0;
  // Why the handshake failed, for the log: "certificate verify failed: ...", "no shared
  // cipher", "peer did not return a certificate".
  [[nodiscard]] virtual std::string describe_error(const boost::system::error_code& ec) const = 0;
};

// Thread-safe. TLS 1.2 minimum, AEAD ciphers with forward secrecy only for TLS 1.2, the
// server's order of preference, no compression, no renegotiation; session tickets for
// resumption. With client_ca_file, a client certificate signed by one of those CAs is required.
class ServerContext {
 public:
  virtual ~ServerContext() = default;

  // A stream over `socket` (which must outlive it) with the files loaded last.
  [[nodiscard]] virtual std::unique_ptr<ServerStream> new_stream(ServerSocket& socket) = 0;

  // Reads the files again: new handshakes use them, open connections keep theirs. On an error
  // (as make_server_context's) the files loaded before stay in use.
  [[nodiscard]] virtual Status reload() = 0;

  // The certificate in use, for the log: "subject=\"CN=...\" not_after=... sha256=AB:CD:...".
  [[nodiscard]] virtual std::string describe() const = 0;
};

// Loads the module (first use) and the files: FAILED_PRECONDITION naming the file and the cause:
// missing or unreadable, no PEM certificate or private key in it (an encrypted key is refused),
// the key does not match the certificate, the key file writable by its group or others or
// readable by others; and when flurry_tls.so cannot be found or loaded.
[[nodiscard]] Result<std::shared_ptr<ServerContext>> make_server_context(const ServerFiles& files);

}  // namespace flurry::tls

// TLS for flurry's HTTP clients (tls/http_client.h: the etcd registry, the command-line tool, the
// C++ client): a ClientContext made once from the CA, certificate and key files, then one HTTPS
// exchange per call, on a connection kept from an earlier exchange when the peer allows it.
//
// OpenSSL is not linked into flurry: it lives in the module flurry_tls.so (src/tls/module),
// loaded with dlopen() at the first make_client_context() of the process (module_loader.h), so a
// process that never makes a TLS context maps neither libssl nor libcrypto. This header includes
// nothing of OpenSSL.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "flurry/status.h"
#include "tls/http_message.h"

namespace flurry::tls {

// The files of a client's TLS settings, typed at the edge; an empty optional is "not given".
struct ClientFiles {
  std::optional<std::filesystem::path> ca_file;    // PEM bundle; none: the system's CAs
  std::optional<std::filesystem::path> cert_file;  // client certificate (PEM) for mTLS
  std::optional<std::filesystem::path> key_file;   // its key (PEM, unencrypted); both or neither
};

// Thread-safe, immutable once made (but for its cache of TLS sessions and idle connections).
// Verifies the peer's chain and its name or IP address against the host connected to (SNI sent
// for names); TLS 1.2 minimum. Sessions are kept per host:port and resumed by the next new
// connection to the same peer, so only the first connection pays a full handshake.
//
// Connections are kept too: after an answer read whole, when neither the request nor the answer
// says "Connection: close" (nor the answer is HTTP/1.0 without keep-alive), the connection is kept
// idle, at most 2 per host:port and for at most 10 s, and the next exchange with that peer sends
// its request on it: no connect, no handshake. A failure of an exchange closes the peer's idle
// connections and forgets its session.
//
// A kept connection the server has closed meanwhile (its keep-alive timeout) is seen before use
// when its close has arrived (anything to read on an idle connection) and not used. When the
// close crosses the request instead (writing the request fails, or reading finds the end of the
// stream or a reset before any byte of the answer), the request is sent again, once, on a new
// connection, within the same deadline. Why that is safe: a server closes an idle connection
// only when it has no request in progress, so it had not taken this one, and HTTP/1.1 clients
// do the same (RFC 9112 section 9.3.1). A server that read the request and died before any byte
// of its answer looks the same, and then the request may run twice: the etcd client's requests
// bear that (it already sends a request whose answer was lost to the next endpoint; its writes
// are transactions guarded by compares). Any other failure on a kept connection (a timeout, a
// reset after part of the answer) is returned as on a new one, never sent again.
class ClientContext {
 public:
  virtual ~ClientContext() = default;

  // As HttpClient::exchange (tls/http_client.h: one request, one deadline for all of it,
  // `body_limit`, errors naming `where` and the stage), over TLS, on a kept connection (above) or
  // a new one. A failed handshake says why: "<where>: TLS handshake: certificate verify failed:
  // certificate has expired" (or "unable to get local issuer certificate", "hostname mismatch", "IP
  // address mismatch"), "the server asked for a client certificate and none is configured ...",
  // "tlsv1 alert unknown ca (the server asked for this client's certificate and may not accept it
  // ...)" (with TLS 1.3 a refused client certificate shows after the handshake, while sending or
  // reading: the alert, or a reset); IO (UNAVAILABLE) for all of them. Never retried as plain
  // HTTP.
  [[nodiscard]] virtual Result<HttpResponse> exchange(const std::string& host, std::uint16_t port,
                                                      const HttpRequest& request,
                                                      std::chrono::milliseconds timeout,
                                                      std::size_t body_limit,
                                                      const std::string& where) = 0;
};

// Loads the module (first use in the process) and the files. INVALID_ARGUMENT when only one of
// cert_file/key_file is given; FAILED_PRECONDITION naming the file and the cause: missing or
// unreadable, no PEM certificate / private key in it (an encrypted key is refused: no password
// can be given), the key does not match the certificate; and when flurry_tls.so cannot be found
// or loaded ("TLS needs flurry_tls.so: looked for ...").
[[nodiscard]] Result<std::shared_ptr<ClientContext>> make_client_context(const ClientFiles& files);

}  // namespace flurry::tls

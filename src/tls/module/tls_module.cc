// flurry_tls.so: everything of TLS that needs OpenSSL, behind module_api.h. Loaded with dlopen()
// by the loader (src/tls/client.cc) on the first use of TLS in the process.
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string_view>
#include <vector>

#include "flurry/mutex.h"
#include "module_api.h"

namespace flurry::tls::module_api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

// "\"path\"" for messages (core/quote.h is flurry's out-of-line code, which the module does not
// link).
std::string quoted(const std::filesystem::path& path) {
  return "\"" + path.string() + "\"";
}

// The reason of OpenSSL's oldest queued error ("no start line"), and the queue emptied.
std::string openssl_reason() {
  const unsigned long code = ::ERR_peek_error();
  ::ERR_clear_error();
  if (code == 0) return "unknown error";
  const char* reason = ::ERR_reason_error_string(code);
  return reason != nullptr ? reason : "error " + std::to_string(code);
}

struct BioDeleter {
  void operator()(BIO* bio) const { ::BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* cert) const { ::X509_free(cert); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { ::EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioDeleter>;
using Cert = std::unique_ptr<X509, X509Deleter>;
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;

// A file's bytes, or false with `error` naming the file and the system's reason.
bool read_file(const std::filesystem::path& path, std::string_view what, std::string& out,
               Error& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int saved = errno;
    error = {ErrorKind::kFailedPrecondition,
             std::string(what) + " " + quoted(path) + " cannot be read: " + std::strerror(saved)};
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return true;
}

// Every certificate of a PEM file, in order; none is an error naming the file.
bool read_certificates(const std::filesystem::path& path, std::string_view what,
                       std::vector<Cert>& certs, Error& error) {
  std::string pem;
  if (!read_file(path, what, pem, error)) return false;
  Bio bio(::BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (X509* cert = ::PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ::ERR_clear_error();  // the end of the file reads as an error
  if (certs.empty()) {
    error = {ErrorKind::kFailedPrecondition,
             std::string(what) + " " + quoted(path) + " holds no PEM certificate"};
    return false;
  }
  return true;
}

// Refuses to prompt for a password: an encrypted key fails to load.
int no_password(char*, int, int, void*) {
  return 0;
}

bool read_private_key(const std::filesystem::path& path, std::string_view what, Key& key,
                      Error& error) {
  std::string pem;
  if (!read_file(path, what, pem, error)) return false;
  Bio bio(::BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  key.reset(::PEM_read_bio_PrivateKey(bio.get(), nullptr, no_password, nullptr));
  // The key's bytes are not kept past here.
  ::OPENSSL_cleanse(pem.data(), pem.size());
  if (key == nullptr) {
    error = {ErrorKind::kFailedPrecondition,
             std::string(what) + " " + quoted(path) + " holds no usable PEM private key (" +
                 openssl_reason() + "; an encrypted key is not supported)"};
    return false;
  }
  return true;
}

// The trust anchors: the PEM bundle, or the system's CAs.
bool load_trust(SSL_CTX* ctx, const std::optional<std::filesystem::path>& ca_file,
                std::string_view what, Error& error) {
  if (!ca_file) {
    if (::SSL_CTX_set_default_verify_paths(ctx) != 1) {
      error = {ErrorKind::kFailedPrecondition,
               "the system's CA certificates cannot be loaded: " + openssl_reason()};
      return false;
    }
    return true;
  }
  std::vector<Cert> cas;
  if (!read_certificates(*ca_file, what, cas, error)) return false;
  X509_STORE* store = ::SSL_CTX_get_cert_store(ctx);
  for (const Cert& ca : cas) {
    if (::X509_STORE_add_cert(store, ca.get()) != 1) {
      error = {ErrorKind::kFailedPrecondition,
               std::string(what) + " " + quoted(*ca_file) + ": " + openssl_reason()};
      return false;
    }
  }
  return true;
}

// The certificate chain and its key, checked to match.
bool load_identity(SSL_CTX* ctx, const std::filesystem::path& cert_file,
                   const std::filesystem::path& key_file, std::string_view what, Error& error) {
  std::vector<Cert> chain;
  if (!read_certificates(cert_file, std::string(what) + " certificate", chain, error)) {
    return false;
  }
  Key key;
  if (!read_private_key(key_file, std::string(what) + " key", key, error)) return false;
  bool ok = ::SSL_CTX_use_certificate(ctx, chain.front().get()) == 1;
  for (std::size_t i = 1; ok && i < chain.size(); ++i) {
    ok = ::SSL_CTX_add1_chain_cert(ctx, chain[i].get()) == 1;
  }
  if (!ok) {
    error = {ErrorKind::kFailedPrecondition,
             std::string(what) + " certificate " + quoted(cert_file) + ": " + openssl_reason()};
    return false;
  }
  if (::SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || ::SSL_CTX_check_private_key(ctx) != 1) {
    ::ERR_clear_error();
    error = {ErrorKind::kFailedPrecondition, std::string(what) + " key " + quoted(key_file) +
                                                 " does not match the certificate " +
                                                 quoted(cert_file)};
    return false;
  }
  return true;
}

// Set on an SSL when the server asked for a client certificate (its CertificateRequest), so that a
// failure after it can say so: with TLS 1.3 a server that refuses the client's certificate (or its
// absence) does it after the client's handshake is done, and the client may see the alert, or
// only a reset while it sends its request.
int asked_for_certificate_index() {
  static const int index = ::SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

int note_certificate_request(SSL* ssl, void*) {
  ::SSL_set_ex_data(ssl, asked_for_certificate_index(), reinterpret_cast<void*>(1));
  return 1;  // go on: the certificate set, if any, is sent
}

struct SessionDeleter {
  void operator()(SSL_SESSION* session) const { ::SSL_SESSION_free(session); }
};
using Session = std::unique_ptr<SSL_SESSION, SessionDeleter>;

// An idle connection is reused for at most this long after its answer, then closed. Servers and
// the middleboxes between close idle connections on their own schedule (often silently): a short
// bound makes a connection closed meanwhile rare; and a connection keeps the peer as verified
// when it was made, so a replaced certificate is seen within seconds. Lease renewals (every ttl/3:
// 3.3 s with the default 10 s lease) find theirs; with a lease of 30 s or more they make a new
// connection (a resumed handshake), as before connections were kept.
constexpr std::chrono::seconds kIdleConnectionLifetime{10};
// Idle connections kept per peer: about one per caller at the same time (the lease keeper's
// renewal, a claim or a horizon save); more would only hold sockets.
constexpr std::size_t kIdleConnectionsPerPeer = 2;

using Clock = std::chrono::steady_clock;

// One TLS connection with the io_context that runs its operations: kept while idle, so it cannot
// share the io_context of an exchange.
struct Connection {
  explicit Connection(ssl::context& context) : stream(ioc, context) {}
  // Declared first, destroyed last: handlers left pending at a timeout are destroyed with it.
  asio::io_context ioc{1};
  beast::ssl_stream<beast::tcp_stream> stream;
  Clock::time_point idle_since;
};

class Client final : public RawClient {
 public:
  Client() : context_(ssl::context::tls_client) {}

  bool init(const ClientFiles& files, Error& error) {
    SSL_CTX* ctx = context_.native_handle();
    ::SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    ::SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    // Sessions are kept by this object (sessions_), per peer; OpenSSL's own cache is not used.
    ::SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    if (!load_trust(ctx, files.ca_file, "TLS CA file", error)) return false;
    if (files.cert_file && files.key_file) {
      if (!load_identity(ctx, *files.cert_file, *files.key_file, "TLS client", error)) {
        return false;
      }
      has_certificate_ = true;
    }
    ::SSL_CTX_set_cert_cb(ctx, note_certificate_request, nullptr);
    return true;
  }

  bool exchange(const std::string& host, std::uint16_t port,
                const http::request<http::string_body>& request, std::chrono::milliseconds timeout,
                std::size_t body_limit, const std::string& where, HttpResponse& response,
                Error& error) override {
    const Clock::time_point deadline = Clock::now() + timeout;
    const std::string peer = host + ":" + std::to_string(port);
    const Exchange exchange{host, port, peer, request, timeout, deadline, body_limit, where};
    std::unique_ptr<Connection> idle = take_idle(peer);
    // One the server has closed (or written to) meanwhile is not worth a try: a new connection.
    while (idle != nullptr && !quiet(*idle)) idle = take_idle(peer);
    if (idle != nullptr) {
      const Outcome outcome = attempt(std::move(idle), /*fresh=*/false, exchange, response, error);
      // Ended before any answer (the server's keep-alive timeout crossed the request): sent
      // again once, on a new connection (client.h says why that is safe).
      if (outcome != Outcome::kClosedBeforeAnswer) return outcome == Outcome::kAnswered;
    }
    return attempt(std::make_unique<Connection>(context_), /*fresh=*/true, exchange, response,
                   error) == Outcome::kAnswered;
  }

 private:
  // What one exchange is about, the same for both of its attempts.
  struct Exchange {
    const std::string& host;
    std::uint16_t port;
    const std::string& peer;  // host:port
    const http::request<http::string_body>& request;
    std::chrono::milliseconds timeout;
    Clock::time_point deadline;
    std::size_t body_limit;
    const std::string& where;
  };

  enum class Outcome {
    kAnswered,
    kFailed,              // `error` set
    kClosedBeforeAnswer,  // a reused connection failed before any byte of the answer
  };

  // The request on `connection`, new (connected and handshaken here) or idle; kept idle after an
  // answer that allows it.
  Outcome attempt(std::unique_ptr<Connection> connection, bool fresh, const Exchange& exchange,
                  HttpResponse& response, Error& error) {
    asio::io_context& ioc = connection->ioc;
    ioc.restart();
    auto& stream = connection->stream;
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(exchange.body_limit);
    SSL* ssl = stream.native_handle();

    bool done = false;
    beast::error_code failure;
    std::string_view stage = fresh ? "resolving the host" : "sending the request";
    const auto fail = [&](beast::error_code ec) {
      failure = ec;
      done = true;
    };
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(exchange.deadline - Clock::now());
    beast::tcp_stream& tcp_layer = beast::get_lowest_layer(stream);
    tcp_layer.expires_after(remaining);
    const auto send = [&] {
      stage = "sending the request";
      http::async_write(stream, exchange.request, [&](beast::error_code ec, std::size_t) {
        if (ec) return fail(ec);
        stage = "waiting for the answer";
        http::async_read(stream, buffer, parser, [&](beast::error_code ec, std::size_t) {
          if (ec) return fail(ec);
          done = true;
        });
      });
    };
    tcp::resolver resolver(ioc);
    if (!fresh) {
      send();
    } else {
      if (!verify_peer_name(ssl, exchange.host)) {
        error = {ErrorKind::kIo,
                 exchange.where + ": TLS: cannot set the name to verify: " + openssl_reason()};
        return Outcome::kFailed;
      }
      if (Session cached = cached_session(exchange.peer)) ::SSL_set_session(ssl, cached.get());
      resolver.async_resolve(
          exchange.host, std::to_string(exchange.port), tcp::resolver::numeric_service,
          [&](beast::error_code ec, const tcp::resolver::results_type& results) {
            if (ec) return fail(ec);
            stage = "connecting";
            tcp_layer.async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
              if (ec) return fail(ec);
              // The request goes out in more than one TLS record (header, body): without
              // TCP_NODELAY the second waits for the server's delayed ACK, about 40 ms a request.
              beast::error_code ignored;
              tcp_layer.socket().set_option(tcp::no_delay(true), ignored);
              stage = "TLS handshake";
              stream.async_handshake(ssl::stream_base::client, [&](beast::error_code ec) {
                if (ec) return fail(ec);
                send();
              });
            });
          });
    }
    if (remaining.count() > 0) ioc.run_for(remaining);

    if (!fresh && done && failure && failure != beast::error::timeout &&
        (stage == "sending the request" ||
         (closed_by_peer(failure) && !parser.got_some() && buffer.size() == 0))) {
      ::ERR_clear_error();
      return Outcome::kClosedBeforeAnswer;
    }
    if (!done || failure) forget_peer(exchange.peer);
    if (!done || failure == beast::error::timeout) {
      error = {ErrorKind::kIo, exchange.where + ": no answer within " +
                                   std::to_string(exchange.timeout.count()) + " ms (while " +
                                   std::string(stage) + ")"};
      return Outcome::kFailed;
    }
    if (failure) {
      error = {ErrorKind::kIo,
               exchange.where + ": " + std::string(stage) + ": " + describe(ssl, failure)};
      ::ERR_clear_error();
      return Outcome::kFailed;
    }
    // Kept for the next new connection to this peer (TLS 1.3 tickets arrive after the handshake,
    // so the session is taken once the answer is read).
    if (fresh) keep_session(exchange.peer, ssl);
    // Answered: the server accepted this client's certificate, if it asked for one; a later
    // failure on this connection (reused) is not blamed on it.
    ::SSL_set_ex_data(ssl, asked_for_certificate_index(), nullptr);
    // Reused when both sides allow it and nothing is left unread.
    const bool reusable =
        exchange.request.keep_alive() && parser.keep_alive() && buffer.size() == 0;
    response = parser.release();
    if (reusable) {
      put_idle(exchange.peer, std::move(connection));
    } else {
      // No close_notify round trip: the answer is complete (its length known).
      beast::error_code ignored;
      tcp_layer.socket().shutdown(tcp::socket::shutdown_both, ignored);
    }
    return Outcome::kAnswered;
  }

  // Whether an idle connection has nothing to read, as it should: a server sends nothing
  // unasked in HTTP/1.1, so anything there is its close (a close_notify alert, the end of the
  // stream, a reset).
  static bool quiet(Connection& connection) {
    char byte = 0;
    const ssize_t peeked =
        ::recv(beast::get_lowest_layer(connection.stream).socket().native_handle(), &byte, 1,
               MSG_PEEK | MSG_DONTWAIT);
    return peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  // How a connection the server closed (after its idle timeout) fails: an end without
  // close_notify, an orderly end, or a reset.
  static bool closed_by_peer(const beast::error_code& ec) {
    return ec == asio::ssl::error::stream_truncated || ec == http::error::end_of_stream ||
           ec == asio::error::eof || ec == asio::error::connection_reset ||
           ec == asio::error::broken_pipe;
  }

  // SNI and the name checked for a host name; the address checked for an IP address.
  static bool verify_peer_name(SSL* ssl, const std::string& host) {
    boost::system::error_code not_an_address;
    asio::ip::make_address(host, not_an_address);
    if (!not_an_address) {
      return ::X509_VERIFY_PARAM_set1_ip_asc(::SSL_get0_param(ssl), host.c_str()) == 1;
    }
    return ::SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 &&
           ::SSL_set1_host(ssl, host.c_str()) == 1;
  }

  // Why a TLS stage failed, in words an operator can act on.
  std::string describe(SSL* ssl, const beast::error_code& ec) const {
    const long verify = ::SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      return std::string("certificate verify failed: ") + ::X509_verify_cert_error_string(verify);
    }
    std::string message = ec.message();
    if (ec == asio::ssl::error::stream_truncated) message = "the server closed the TLS connection";
    if (ec.category() == asio::error::get_ssl_category() &&
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_WRONG_VERSION_NUMBER) {
      message += " (the peer does not speak TLS: plain HTTP on that port?)";
    }
    if (::SSL_get_ex_data(ssl, asked_for_certificate_index()) != nullptr) {
      return has_certificate_ ? message +
                                    " (the server asked for this client's certificate and may "
                                    "not accept it: is it signed by a CA the server trusts?)"
                              : "the server asked for a client certificate and none is "
                                "configured (" +
                                    message + ")";
    }
    return message;
  }

  Session cached_session(const std::string& peer) {
    MutexLock lock(mutex_);
    const auto it = sessions_.find(peer);
    if (it == sessions_.end()) return nullptr;
    ::SSL_SESSION_up_ref(it->second.get());
    return Session(it->second.get());
  }

  // A copy of the connection's session: the connection's own is marked not resumable when the
  // connection is freed without a close_notify exchange (which would cost a round trip).
  void keep_session(const std::string& peer, SSL* ssl) {
    SSL_SESSION* current = ::SSL_get0_session(ssl);
    if (current == nullptr || ::SSL_SESSION_is_resumable(current) != 1) return;
    Session copy(::SSL_SESSION_dup(current));
    if (copy == nullptr) return;
    MutexLock lock(mutex_);
    sessions_[peer] = std::move(copy);
  }

  // After a failure the peer may have changed (a new certificate, another server): the next
  // exchange makes a new connection and a full handshake.
  void forget_peer(const std::string& peer) {
    std::deque<std::unique_ptr<Connection>> closed;  // closed outside the lock
    MutexLock lock(mutex_);
    sessions_.erase(peer);
    const auto it = idle_.find(peer);
    if (it == idle_.end()) return;
    closed = std::move(it->second);
    idle_.erase(it);
  }

  // The newest idle connection to `peer`, if any; idle connections past their lifetime (to any
  // peer) are closed on the way.
  std::unique_ptr<Connection> take_idle(const std::string& peer) {
    std::vector<std::unique_ptr<Connection>> expired;  // closed outside the lock
    std::unique_ptr<Connection> taken;
    MutexLock lock(mutex_);
    const Clock::time_point now = Clock::now();
    for (auto it = idle_.begin(); it != idle_.end();) {
      std::deque<std::unique_ptr<Connection>>& connections = it->second;  // oldest first
      while (!connections.empty() &&
             now - connections.front()->idle_since >= kIdleConnectionLifetime) {
        expired.push_back(std::move(connections.front()));
        connections.pop_front();
      }
      it = connections.empty() ? idle_.erase(it) : std::next(it);
    }
    const auto it = idle_.find(peer);
    if (it == idle_.end()) return nullptr;
    taken = std::move(it->second.back());
    it->second.pop_back();
    if (it->second.empty()) idle_.erase(it);
    return taken;
  }

  void put_idle(const std::string& peer, std::unique_ptr<Connection> connection) {
    connection->idle_since = Clock::now();
    std::unique_ptr<Connection> oldest;  // closed outside the lock
    MutexLock lock(mutex_);
    std::deque<std::unique_ptr<Connection>>& connections = idle_[peer];
    connections.push_back(std::move(connection));
    if (connections.size() > kIdleConnectionsPerPeer) {
      oldest = std::move(connections.front());
      connections.pop_front();
    }
  }

  ssl::context context_;  // configured in init(), then only read (OpenSSL locks its own state)
  bool has_certificate_ = false;
  Mutex mutex_;
  // host:port -> the last resumable session
  std::map<std::string, Session> sessions_ FLURRY_GUARDED_BY(mutex_);
  // host:port -> its idle connections, oldest first (at most kIdleConnectionsPerPeer)
  std::map<std::string, std::deque<std::unique_ptr<Connection>>> idle_ FLURRY_GUARDED_BY(mutex_);
};

// ---- The server ----

// TLS 1.2: ECDHE key exchange and AEAD ciphers only (TLS 1.3's suites are all of that kind).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// TLS 1.3: all three of its usual suites, AES-128 first (the cheapest per record with AES-NI;
// OpenSSL's default order puts AES-256 first).
constexpr const char* kTls13Suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

// A server context made from the files, or null with `error` set.
std::shared_ptr<ssl::context> load_server_context(const ServerFiles& files, Error& error) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* ctx = context->native_handle();
  ::SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  ::SSL_CTX_set_options(
      ctx, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
  if (::SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1 ||
      ::SSL_CTX_set_ciphersuites(ctx, kTls13Suites) != 1) {
    error = {ErrorKind::kFailedPrecondition, "TLS: cannot set the ciphers: " + openssl_reason()};
    return nullptr;
  }
  // Resumed sessions (tickets) must come from this server's own context.
  static constexpr unsigned char kSessionContext[] = "flurry";
  ::SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  if (!load_identity(ctx, files.cert_file, files.key_file, "TLS", error)) return nullptr;
  if (files.client_ca_file) {
    if (!load_trust(ctx, files.client_ca_file, "TLS client CA file", error)) return nullptr;
    // The CAs' names go in the certificate request, so a client can pick its certificate.
    STACK_OF(X509_NAME)* names = ::SSL_load_client_CA_file(files.client_ca_file->c_str());
    ::ERR_clear_error();
    if (names != nullptr) ::SSL_CTX_set_client_CA_list(ctx, names);
    ::SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return context;
}

// "subject=\"CN=...\" not_after=2027-01-01T00:00:00Z sha256=AB:CD:..." of the context's
// certificate.
std::string describe_certificate(const ssl::context& context) {
  X509* cert = ::SSL_CTX_get0_certificate(const_cast<ssl::context&>(context).native_handle());
  if (cert == nullptr) return "no certificate";
  char subject[256] = {};
  ::X509_NAME_oneline(::X509_get_subject_name(cert), subject, sizeof subject);
  std::string out = std::string("subject=\"") + subject + "\"";
  std::tm tm{};
  if (::ASN1_TIME_to_tm(::X509_get0_notAfter(cert), &tm) == 1) {
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    out += std::string(" not_after=") + when;
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (::X509_digest(cert, ::EVP_sha256(), digest, &length) == 1) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    out += " sha256=";
    for (unsigned int i = 0; i < length; ++i) {
      if (i > 0) out += ':';
      out += kHex[digest[i] >> 4];
      out += kHex[digest[i] & 15];
    }
  }
  ::ERR_clear_error();
  return out;
}

// Where Asio allocates the operations of one chain of a stream (its reads, or its writes):
// one block, reused while it is free. Asio's own recycling of operation memory relies on its
// thread-local call stack, which is the executable's copy, not this module's: without this every
// socket operation of a TLS connection would be a malloc and a free (about 7 a request).
//
// Owned by its stream, but outliving it while an operation still holds the block: when a server
// stops without waiting (HttpServer::stop past its drain) connections are deleted with operations
// pending, which the io_context frees later.
class HandlerMemory {
 public:
  void* allocate(std::size_t size) {
    if (!in_use_ && size <= sizeof storage_) {
      in_use_ = true;
      return storage_;
    }
    return ::operator new(size);
  }
  void deallocate(void* pointer) noexcept {
    if (pointer != storage_) {
      ::operator delete(pointer);
      return;
    }
    in_use_ = false;
    if (orphaned_) delete this;
  }
  // The stream is gone: freed now, or by the deallocation of the block in use.
  void release() noexcept {
    if (in_use_) {
      orphaned_ = true;
    } else {
      delete this;
    }
  }

 private:
  alignas(std::max_align_t) unsigned char storage_[1024];
  bool in_use_ = false;
  bool orphaned_ = false;
};

struct HandlerMemoryRelease {
  void operator()(HandlerMemory* memory) const noexcept { memory->release(); }
};
using HandlerMemoryPtr = std::unique_ptr<HandlerMemory, HandlerMemoryRelease>;

template <typename T>
class HandlerAllocator {
 public:
  using value_type = T;
  explicit HandlerAllocator(HandlerMemory& memory) noexcept : memory_(&memory) {}
  template <typename U>
  HandlerAllocator(const HandlerAllocator<U>& other) noexcept : memory_(other.memory_) {}
  T* allocate(std::size_t n) { return static_cast<T*>(memory_->allocate(sizeof(T) * n)); }
  void deallocate(T* pointer, std::size_t) noexcept { memory_->deallocate(pointer); }
  template <typename U>
  bool operator==(const HandlerAllocator<U>& other) const noexcept {
    return memory_ == other.memory_;
  }

 private:
  template <typename>
  friend class HandlerAllocator;
  HandlerMemory* memory_;
};

// The completion handed to Asio: the caller's callback, and the memory its operations use.
struct Completion {
  using allocator_type = HandlerAllocator<void>;
  IoCallback done;
  void* target;
  HandlerMemory* memory;

  allocator_type get_allocator() const noexcept { return allocator_type(*memory); }
  void operator()(const error_code& ec, std::size_t n = 0) const { done(target, ec, n); }
};

class Stream final : public ServerStream {
 public:
  Stream(std::shared_ptr<ssl::context> context, ServerSocket& socket)
      : context_(std::move(context)), stream_(socket, *context_) {
    // OpenSSL's record buffers stay released between records (Asio's SSL_MODE_RELEASE_BUFFERS):
    // keeping them would save two allocations a request but hold 34 KiB more per idle connection
    // (76 KiB instead of 42).
  }

  void async_handshake(IoCallback done, void* target) override {
    stream_.async_handshake(ssl::stream_base::server, Completion{done, target, reads_.get()});
  }
  void async_read_some(asio::mutable_buffer buffer, IoCallback done, void* target) override {
    stream_.async_read_some(buffer, Completion{done, target, reads_.get()});
  }
  void async_write(asio::const_buffer buffer, IoCallback done, void* target) override {
    asio::async_write(stream_, buffer, Completion{done, target, writes_.get()});
  }
  void async_shutdown(IoCallback done, void* target) override {
    stream_.async_shutdown(Completion{done, target, writes_.get()});
  }
  std::string describe_error(const error_code& ec) const override {
    SSL* ssl = const_cast<ssl::stream<ServerSocket&>&>(stream_).native_handle();
    const long verify = ::SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      return std::string("client certificate verify failed: ") +
             ::X509_verify_cert_error_string(verify);
    }
    if (ec == asio::ssl::error::stream_truncated) return "the client closed the connection";
    return ec.message();
  }

 private:
  HandlerMemoryPtr reads_{new HandlerMemory};   // the handshake's and the reads' operations
  HandlerMemoryPtr writes_{new HandlerMemory};  // the writes' and the shutdown's
  std::shared_ptr<ssl::context> context_;       // the files this connection was accepted with
  ssl::stream<ServerSocket&> stream_;           // destroyed first: its operations use the memory
};

class Server final : public RawServer {
 public:
  Server(ServerFiles files, std::shared_ptr<ssl::context> context)
      : files_(std::move(files)), context_(std::move(context)) {}

  std::unique_ptr<ServerStream> new_stream(ServerSocket& socket) override {
    std::shared_ptr<ssl::context> context;
    {
      MutexLock lock(mutex_);
      context = context_;
    }
    return std::make_unique<Stream>(std::move(context), socket);
  }

  bool reload(Error& error) override {
    std::shared_ptr<ssl::context> fresh = load_server_context(files_, error);
    if (fresh == nullptr) return false;
    MutexLock lock(mutex_);
    context_ = std::move(fresh);
    return true;
  }

  std::string describe() const override {
    std::shared_ptr<ssl::context> context;
    {
      MutexLock lock(mutex_);
      context = context_;
    }
    return describe_certificate(*context);
  }

 private:
  const ServerFiles files_;
  mutable Mutex mutex_;
  std::shared_ptr<ssl::context> context_ FLURRY_GUARDED_BY(mutex_);  // replaced whole by reload()
};

std::unique_ptr<RawServer> make_server(const ServerFiles& files, Error& error) {
  std::shared_ptr<ssl::context> context = load_server_context(files, error);
  if (context == nullptr) return nullptr;
  return std::make_unique<Server>(files, std::move(context));
}

std::unique_ptr<RawClient> make_client(const ClientFiles& files, Error& error) {
  auto client = std::make_unique<Client>();
  if (!client->init(files, error)) return nullptr;
  return client;
}

}  // namespace
}  // namespace flurry::tls::module_api

extern "C" {
// The module's one entry point (module_api.h).
__attribute__((
    visibility("default"))) extern const flurry::tls::module_api::TlsModule flurry_tls_module_v1;
const flurry::tls::module_api::TlsModule flurry_tls_module_v1 = {
    FLURRY_VERSION, &flurry::tls::module_api::make_client, &flurry::tls::module_api::make_server};
}

// The TLS client (src/tls/client.h) through the real module flurry_tls.so (found through
// FLURRY_MODULE_DIR, set by ctest), against a real HTTPS server (tests/testing/https_server.py,
// Python's ssl) and certificates made by tests/testing/make_certs.sh.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "test_store.h"
#include "tls/client.h"
#include "tls/http_client.h"
#include "tls/module_loader.h"
#include "tls/pinned_files.h"

namespace flurry::tls {
namespace {

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using namespace std::chrono_literals;

// The certificates of this test process, made once and removed at its end.
class CertsDir {
 public:
  CertsDir() {
    char pattern[] = "/tmp/flurry-tls-client-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return;
    path_ = pattern;
    const std::string command =
        std::string(FLURRY_TESTING_DIR "/make_certs.sh ") + path_.string() + " flurry";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
  }
  ~CertsDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  CertsDir(const CertsDir&) = delete;
  CertsDir& operator=(const CertsDir&) = delete;
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

const fs::path& certs_dir() {
  static const CertsDir dir;
  return dir.path();
}

fs::path cert(const std::string& name) {
  return certs_dir() / name;
}

// https_server.py, started for one test and stopped (by its PID) at the end of it.
class HttpsServer {
 public:
  explicit HttpsServer(const std::string& name, const std::string& extra = "") {
    const std::string command =
        "exec /usr/bin/python3 " FLURRY_TESTING_DIR "/https_server.py --cert " +
        cert(name + ".pem").string() + " --key " + cert(name + ".key").string() + " " + extra;
    pipe_ = ::popen(command.c_str(), "r");
    if (pipe_ == nullptr) return;
    int port = 0;
    if (std::fscanf(pipe_, "%d %d", &pid_, &port) == 2) port_ = static_cast<std::uint16_t>(port);
  }
  ~HttpsServer() {
    if (pid_ > 0) ::kill(pid_, SIGTERM);
    if (pipe_ != nullptr) ::pclose(pipe_);
  }
  HttpsServer(const HttpsServer&) = delete;
  HttpsServer& operator=(const HttpsServer&) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }

 private:
  FILE* pipe_ = nullptr;
  int pid_ = 0;
  std::uint16_t port_ = 0;
};

http::request<http::string_body> get(const std::string& host, std::uint16_t port) {
  http::request<http::string_body> req{http::verb::get, "/hello", 11};
  req.set(http::field::host, host + ":" + std::to_string(port));
  req.keep_alive(false);
  req.prepare_payload();
  return req;
}

Result<HttpResponse> call(ClientContext& context, std::uint16_t port,
                          const std::string& host = "127.0.0.1") {
  return context.exchange(host, port, get(host, port), 5s, 1 << 20, "etcd https://test");
}

std::shared_ptr<ClientContext> context_with(const ClientFiles& files) {
  Result<std::shared_ptr<ClientContext>> made = make_client_context(files);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? *made : nullptr;
}

TEST(TlsClient, VerifiesTheServerAgainstTheCaAndResumesItsSession) {
  HttpsServer server("server");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  Result<HttpResponse> first = call(*context, server.port());
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->result_int(), 200);
  EXPECT_NE(first->body().find("\"path\": \"/hello\""), std::string::npos) << first->body();
  EXPECT_NE(first->body().find("\"resumed\": false"), std::string::npos) << first->body();
  // A new connection for the next exchange, but no full handshake: the session is resumed.
  Result<HttpResponse> second = call(*context, server.port());
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_NE(second->body().find("\"resumed\": true"), std::string::npos) << second->body();
  // By name too (SNI and the name checked): the certificate is for localhost as well.
  Result<HttpResponse> named = call(*context, server.port(), "localhost");
  ASSERT_TRUE(named.ok()) << named.status().message();
}

TEST(TlsClient, ResumesTls12SessionsToo) {
  HttpsServer server("server", "--max-tls 1.2");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  ASSERT_TRUE(call(*context, server.port()).ok());
  Result<HttpResponse> second = call(*context, server.port());
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_NE(second->body().find("\"resumed\": true"), std::string::npos) << second->body();
}

// As the etcd client asks over TLS: keep the connection (HTTP/1.1's default).
Result<HttpResponse> call_keeping(ClientContext& context, std::uint16_t port) {
  http::request<http::string_body> req = get("127.0.0.1", port);
  req.keep_alive(true);
  return context.exchange("127.0.0.1", port, req, 5s, 1 << 20, "etcd https://test");
}

// https_server.py's numbers of the connection and of the request on it, as "1/2".
std::string connection_and_request(const Result<HttpResponse>& answer) {
  if (!answer.ok()) return answer.status().message();
  const std::string& body = answer->body();
  const auto number_after = [&](const std::string& key) {
    const std::size_t at = body.find("\"" + key + "\": ");
    if (at == std::string::npos) return std::string("?");
    const std::size_t from = at + key.size() + 4;
    return body.substr(from, body.find_first_not_of("0123456789", from) - from);
  };
  return number_after("connection") + "/" + number_after("request");
}

TEST(TlsClient, SendsTheNextRequestOnTheSameConnection) {
  HttpsServer server("server", "--keep-alive");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "1/1");
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "1/2");
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "1/3");
  // A request that says close is answered on the kept connection, which is not kept after it.
  EXPECT_EQ(connection_and_request(call(*context, server.port())), "1/4");
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "2/1");
}

TEST(TlsClient, SendsAgainOnANewConnectionWhenTheServerClosedTheIdleOne) {
  // The answers allow keep-alive, but the server closes each connection after its answer: the
  // next request goes on a new connection (the idle one is seen closed, or the request sent on
  // it finds its end and is sent again).
  HttpsServer server("server", "--close-after-answer");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "1/1");
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "2/1");
  std::this_thread::sleep_for(50ms);  // the close surely arrived
  Result<HttpResponse> third = call_keeping(*context, server.port());
  EXPECT_EQ(connection_and_request(third), "3/1");
  // The new connection resumed the session (it was not forgotten as after a failure).
  ASSERT_TRUE(third.ok());
  EXPECT_NE(third->body().find("\"resumed\": true"), std::string::npos) << third->body();
}

TEST(TlsClient, SendsARequestAgainOnceWhenAKeptConnectionEndsBeforeAnyAnswer) {
  // The server reads the second request of each connection and closes it without an answer: the
  // request is sent again on a new connection, which answers it.
  HttpsServer server("server", "--close-on-second-request");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "1/1");
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "2/1");
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "3/1");
}

TEST(TlsClient, DoesNotSendAgainARequestWhoseAnswerWasCut) {
  // Part of the answer came: the server took the request, which must not run twice.
  HttpsServer server("server", "--cut-second-answer");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "1/1");
  Result<HttpResponse> cut = call_keeping(*context, server.port());
  ASSERT_FALSE(cut.ok()) << cut->body();
  EXPECT_EQ(cut.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(cut.status().message().find("etcd https://test: waiting for the answer: "),
            std::string::npos)
      << cut.status().message();
  // No second connection was made for it: the next exchange makes the second.
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "2/1");
}

TEST(TlsClient, DoesNotReuseAConnectionTheServerSaysItCloses) {
  // The server says "Connection: close" but leaves the connection open: still not reused.
  HttpsServer server("server", "--close-header-only");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "1/1");
  EXPECT_EQ(connection_and_request(call_keeping(*context, server.port())), "2/1");
}

TEST(TlsClient, SharesItsIdleConnectionsBetweenThreads) {
  HttpsServer server("server", "--keep-alive");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  constexpr int kThreads = 4;
  constexpr int kRequests = 25;
  std::atomic<int> failures{0};
  std::atomic<int> highest_connection{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRequests; ++i) {
        const std::string numbers = connection_and_request(call_keeping(*context, server.port()));
        const int connection = std::atoi(numbers.c_str());
        if (connection == 0) ++failures;
        int seen = highest_connection.load();
        while (connection > seen && !highest_connection.compare_exchange_weak(seen, connection)) {
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  std::cerr << "connections: " << highest_connection.load() << "\n";  // for the log
  // At most two connections are kept idle per peer, so the 100 requests of 4 threads need some
  // new connections, but far fewer than a connection a request.
  EXPECT_LE(highest_connection.load(), kThreads * kRequests / 2);
}

// The error of an exchange that must fail, checked to be an IO error naming `where`.
std::string refusal(ClientContext& context, std::uint16_t port,
                    const std::string& host = "127.0.0.1") {
  Result<HttpResponse> result = call(context, port, host);
  EXPECT_FALSE(result.ok());
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(result.status().message().rfind("etcd https://test: ", 0), 0u)
      << result.status().message();
  std::cerr << "refused: " << result.status().message() << "\n";  // for the log
  return result.status().message();
}

TEST(TlsClient, RefusesAnExpiredCertificate) {
  HttpsServer server("expired");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  EXPECT_NE(refusal(*context, server.port())
                .find("TLS handshake: certificate verify failed: certificate has expired"),
            std::string::npos);
}

TEST(TlsClient, RefusesACertificateOfAnUnknownIssuer) {
  HttpsServer server("server");
  ASSERT_NE(server.port(), 0);
  // The system's CAs do not include the test CA.
  auto system_cas = context_with({});
  ASSERT_NE(system_cas, nullptr);
  EXPECT_NE(refusal(*system_cas, server.port()).find("unable to get local issuer certificate"),
            std::string::npos);
  // Nor does the wrong CA.
  auto other_ca = context_with({cert("other-ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(other_ca, nullptr);
  EXPECT_NE(refusal(*other_ca, server.port()).find("certificate verify failed"), std::string::npos);
}

TEST(TlsClient, RefusesASelfSignedCertificate) {
  HttpsServer server("selfsigned");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  EXPECT_NE(refusal(*context, server.port()).find("certificate verify failed: self"),
            std::string::npos);
}

TEST(TlsClient, ChecksTheNameAndTheAddress) {
  HttpsServer server("wronghost");
  ASSERT_NE(server.port(), 0);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  EXPECT_NE(refusal(*context, server.port(), "localhost").find("hostname mismatch"),
            std::string::npos);
  EXPECT_NE(refusal(*context, server.port()).find("IP address mismatch"), std::string::npos);
}

TEST(TlsClient, PresentsItsCertificateToAServerThatRequiresOne) {
  HttpsServer server("server", "--client-ca " + cert("ca.pem").string());
  ASSERT_NE(server.port(), 0);
  auto anonymous = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(anonymous, nullptr);
  EXPECT_NE(refusal(*anonymous, server.port())
                .find("the server asked for a client certificate and none is configured"),
            std::string::npos);
  auto client =
      context_with({cert("ca.pem"), cert("client-flurry.pem"), cert("client-flurry.key")});
  ASSERT_NE(client, nullptr);
  Result<HttpResponse> served = call(*client, server.port());
  ASSERT_TRUE(served.ok()) << served.status().message();
  EXPECT_NE(served->body().find("\"client_cn\": \"flurry\""), std::string::npos) << served->body();
  auto stranger =
      context_with({cert("ca.pem"), cert("other-client.pem"), cert("other-client.key")});
  ASSERT_NE(stranger, nullptr);
  // With TLS 1.3 the refusal comes after the client's handshake: the alert ("tlsv1 alert unknown
  // ca"), or a reset while the request is sent; either way the message says what to look at.
  EXPECT_NE(refusal(*stranger, server.port())
                .find("the server asked for this client's certificate and may not accept it"),
            std::string::npos);
}

TEST(TlsClient, RefusesAPlainHttpServer) {
  // A listener that answers anything with plain HTTP: the handshake fails, nothing is retried.
  const std::string command =
      "exec /usr/bin/python3 -c 'import socket,os,sys\n"
      "s=socket.socket();s.bind((\"127.0.0.1\",0));s.listen()\n"
      "print(os.getpid(),s.getsockname()[1],flush=True)\n"
      "while True:\n c,_=s.accept();c.recv(4096)\n"
      " c.sendall(b\"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nhi\")\n"
      " c.close()'";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  int pid = 0;
  int plain_port = 0;
  ASSERT_EQ(std::fscanf(pipe, "%d %d", &pid, &plain_port), 2);
  auto context = context_with({cert("ca.pem"), std::nullopt, std::nullopt});
  ASSERT_NE(context, nullptr);
  EXPECT_NE(refusal(*context, static_cast<std::uint16_t>(plain_port))
                .find("TLS handshake: wrong version number (the peer does not speak TLS"),
            std::string::npos);
  ::kill(pid, SIGTERM);
  ::pclose(pipe);
}

TEST(TlsClientFiles, NameTheFileAndTheCause) {
  const auto refused = [](const ClientFiles& files) {
    Result<std::shared_ptr<ClientContext>> made = make_client_context(files);
    EXPECT_FALSE(made.ok());
    return made.ok() ? Status() : made.status();
  };
  const fs::path missing = certs_dir() / "missing.pem";
  Status st = refused({missing, std::nullopt, std::nullopt});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("TLS CA file \"" + missing.string() +
                              "\" cannot be read: No such file or directory"),
            std::string::npos)
      << st.message();

  const fs::path not_pem = certs_dir() / "not-pem.txt";
  {
    std::ofstream out(not_pem);
    out << "not a certificate\n";
  }
  st = refused({not_pem, std::nullopt, std::nullopt});
  EXPECT_NE(st.message().find("\"" + not_pem.string() + "\" holds no PEM certificate"),
            std::string::npos)
      << st.message();

  st = refused({cert("ca.pem"), cert("client-flurry.pem"), std::nullopt});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("given without its key file"), std::string::npos) << st.message();

  st = refused({cert("ca.pem"), cert("client-flurry.pem"), cert("server.key")});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("TLS client key \"" + cert("server.key").string() +
                              "\" does not match the certificate"),
            std::string::npos)
      << st.message();

  // A certificate where the key should be (private, so that the mode check passes).
  const fs::path not_a_key = certs_dir() / "not-a-key.pem";
  fs::copy_file(cert("client-flurry.pem"), not_a_key, fs::copy_options::overwrite_existing);
  fs::permissions(not_a_key, fs::perms::owner_read | fs::perms::owner_write);
  st = refused({cert("ca.pem"), cert("client-flurry.pem"), not_a_key});
  EXPECT_NE(st.message().find("holds no usable PEM private key"), std::string::npos)
      << st.message();
  // A key others may read.
  const fs::path open_key = certs_dir() / "open.key";
  fs::copy_file(cert("client-flurry.key"), open_key, fs::copy_options::overwrite_existing);
  fs::permissions(open_key, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                fs::perms::others_read);
  st = refused({cert("ca.pem"), cert("client-flurry.pem"), open_key});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("TLS client key \"" + open_key.string() +
                              "\" has mode 0644: others may read it"),
            std::string::npos)
      << st.message();
  // No key material in any message.
  EXPECT_EQ(st.message().find("PRIVATE KEY-----"), std::string::npos);
}

// gRPC's TLS files as flurry serve hands them over (tls/pinned_files.h): only pairs that load are
// ever seen at the fixed paths, replaced whole (issue 32).
TEST(PinnedServerFiles, OnlyAPairThatLoadsIsEverSeenAtTheFixedPaths) {
  testing::TempDir tmp;
  const fs::path live_cert = tmp.path() / "live.pem";
  const fs::path live_key = tmp.path() / "live.key";
  const auto put = [](const fs::path& from, const fs::path& to) {
    const fs::path next = to.string() + ".new";
    fs::copy_file(from, next, fs::copy_options::overwrite_existing);
    fs::permissions(next, fs::perms::owner_read | fs::perms::owner_write);
    fs::rename(next, to);
  };
  const auto contents = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const auto describe = [](const ServerFiles& files) {
    Result<std::shared_ptr<ServerContext>> made = make_server_context(files);
    return made.ok() ? (*made)->describe() : "error: " + made.status().message();
  };
  put(cert("server.pem"), live_cert);
  put(cert("server.key"), live_key);
  const ServerFiles live{live_cert, live_key, cert("ca.pem")};

  PinnedServerFiles pinned;
  EXPECT_TRUE(pinned.paths().cert_file.empty());
  ASSERT_TRUE(pinned.pin(live).ok());
  const ServerFiles paths = pinned.paths();
  EXPECT_EQ(paths.cert_file, paths.key_file);
  EXPECT_EQ(paths.cert_file.parent_path(), "/proc/self/fd");
  ASSERT_TRUE(paths.client_ca_file.has_value());
  EXPECT_EQ(contents(*paths.client_ca_file), contents(cert("ca.pem")));
  const std::string server_a = describe({cert("server.pem"), cert("server.key"), std::nullopt});
  EXPECT_EQ(describe(paths), server_a);  // the pinned pair loads: chain and key in one file
  const std::string pinned_a = contents(paths.cert_file);
  EXPECT_NE(pinned_a.find("PRIVATE KEY-----"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(paths.cert_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  const auto unchanged = [&pinned, &live] {
    Result<bool> r = pinned.refresh(live);
    return r.ok() && !*r;
  };
  EXPECT_TRUE(unchanged());  // nothing changed

  // A garbage certificate: refused naming the file, the pinned pair unchanged, tried once.
  {
    std::ofstream(live_cert) << "-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n";
  }
  const Status garbage = pinned.pin(live);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.message().find(live_cert.string()), std::string::npos) << garbage.message();
  EXPECT_EQ(contents(paths.cert_file), pinned_a);
  // A key of another certificate beside a good one: refused, likewise.
  put(cert("wronghost.pem"), live_cert);
  Result<bool> mismatched = pinned.refresh(live);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("does not match"), std::string::npos)
      << mismatched.status().message();
  EXPECT_TRUE(unchanged());  // the same files: not tried again
  EXPECT_EQ(contents(paths.cert_file), pinned_a);
  EXPECT_EQ(describe(paths), server_a);

  // A good new pair: pinned at the same paths, whole.
  put(cert("wronghost.key"), live_key);
  Result<bool> renewed = pinned.refresh(live);
  ASSERT_TRUE(renewed.ok()) << renewed.status().to_string();
  EXPECT_TRUE(*renewed);
  EXPECT_EQ(pinned.paths().cert_file, paths.cert_file);
  EXPECT_EQ(describe(paths),
            describe({cert("wronghost.pem"), cert("wronghost.key"), std::nullopt}));
  EXPECT_NE(describe(paths), server_a);
}

TEST(ModuleLoader, NamesWhereItLookedForAMissingModule) {
  const fs::path nowhere = certs_dir() / "no-such-dir" / "flurry_tls.so";
  Result<internal::LoadedModule> loaded =
      internal::load_module({nowhere}, "flurry_tls_module_v1", "the TLS module",
                            "TLS needs flurry_tls.so, which is not installed", "; install it");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().message(),
            "TLS needs flurry_tls.so, which is not installed (looked for " + nowhere.string() +
                "); install it");
  // A file that is not a shared object: the loader's error, naming the file.
  const fs::path bogus = cert("ca.pem");
  loaded = internal::load_module({bogus}, "flurry_tls_module_v1", "the TLS module", "", "");
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("the TLS module \"" + bogus.string() +
                                           "\" cannot be loaded: "),
            std::string::npos)
      << loaded.status().message();
}

// A module runs with flurry's rights: one that someone else could have put in place or changed
// is refused before it is opened, naming the file or directory and why (issue 32).
TEST(ModuleLoader, RefusesAModuleOthersCouldHaveChanged) {
  const char* dir = std::getenv("FLURRY_MODULE_DIR");
  ASSERT_NE(dir, nullptr) << "ctest sets FLURRY_MODULE_DIR";
  const fs::path real = fs::path(dir) / "flurry_tls.so";
  ASSERT_TRUE(fs::exists(real)) << real;
  testing::TempDir tmp;
  const auto load = [](const fs::path& path) {
    return internal::load_module({path}, "flurry_tls_module_v1", "the TLS module", "", "");
  };
  const auto refused = [&](const fs::path& path, const std::string& part) {
    Result<internal::LoadedModule> loaded = load(path);
    ASSERT_FALSE(loaded.ok()) << path;
    EXPECT_EQ(loaded.status().code(), StatusCode::kFailedPrecondition);
    const std::string& m = loaded.status().message();
    EXPECT_NE(m.find("the TLS module \"" + path.string() + "\" is refused: "), std::string::npos)
        << m;
    EXPECT_NE(m.find(part), std::string::npos) << m << " lacks " << part;
  };

  // Found through a link in a private directory of this user: loaded.
  const fs::path good = tmp.path() / "good";
  fs::create_directory(good);
  fs::permissions(good, fs::perms::owner_all);
  fs::create_symlink(real, good / "flurry_tls.so");
  Result<internal::LoadedModule> loaded = load(good / "flurry_tls.so");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_NE(loaded->entry, nullptr);

  // A directory anyone may write to, even through a link to a good file.
  const fs::path open_dir = tmp.path() / "open";
  fs::create_directory(open_dir);
  fs::permissions(open_dir, fs::perms::all);
  fs::create_symlink(real, open_dir / "flurry_tls.so");
  refused(open_dir / "flurry_tls.so",
          "its directory \"" + open_dir.string() + "\" has mode 0777: anyone may change it");
  // A copy its group may write.
  const fs::path copies = tmp.path() / "copies";
  fs::create_directory(copies);
  fs::permissions(copies, fs::perms::owner_all);
  const fs::path copy = copies / "flurry_tls.so";
  fs::copy_file(real, copy);
  fs::permissions(copy, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_write);
  refused(copy, "the file \"" + copy.string() + "\" has mode 0760: its group may change it");
  // A good directory holding a link to a file in a group-writable one.
  const fs::path shared = tmp.path() / "shared";
  fs::create_directory(shared);
  fs::permissions(shared, fs::perms::owner_all | fs::perms::group_all);
  fs::copy_file(real, shared / "flurry_tls.so");
  fs::permissions(shared / "flurry_tls.so", fs::perms::owner_all);
  fs::create_symlink(shared / "flurry_tls.so", good / "linked.so");
  refused(good / "linked.so", "its directory \"" + shared.string() + "\" has mode 0770");
  // Another user's file (needs root to make one).
  if (::geteuid() == 0) {
    const fs::path theirs = copies / "theirs.so";
    fs::copy_file(real, theirs);
    fs::permissions(theirs, fs::perms::owner_all);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    refused(theirs, "is owned by user ID 65534, neither root nor the user flurry runs as");
  }
}

TEST(ModuleLoader, LooksInFlurryModuleDirFirst) {
  const char* saved = std::getenv("FLURRY_MODULE_DIR");
  const std::string restore = saved != nullptr ? saved : "";
  ::setenv("FLURRY_MODULE_DIR", "/opt/flurry-modules", 1);
  std::vector<fs::path> paths = internal::module_paths("flurry_tls.so");
  ASSERT_GE(paths.size(), 3u);
  EXPECT_EQ(paths[0], fs::path("/opt/flurry-modules/flurry_tls.so"));
  EXPECT_EQ(paths[1].filename(), "flurry_tls.so");
  ::unsetenv("FLURRY_MODULE_DIR");
  paths = internal::module_paths("flurry_tls.so");
  // Beside the binary, ../lib/flurry, then the configured install's directory and the Debian
  // package's (once if they are the same), last.
  const bool same = internal::kInstalledModuleDir == internal::kPackagedModuleDir;
  ASSERT_EQ(paths.size(), same ? 3u : 4u);
  EXPECT_EQ(paths[2], fs::path(internal::kInstalledModuleDir) / "flurry_tls.so");
  EXPECT_TRUE(paths[2].is_absolute());
  EXPECT_EQ(paths[2].parent_path().filename(), "flurry");
  EXPECT_EQ(paths.back(), fs::path("/usr/lib/flurry/flurry_tls.so"));
  if (saved != nullptr) ::setenv("FLURRY_MODULE_DIR", restore.c_str(), 1);
}

// ---- The plain side of the one exchange (tls/http_client.h): the same keep-alive rules ----

// As call_keeping, plain HTTP through an HttpClient without TLS.
Result<HttpResponse> plain_call(HttpClient& client, std::uint16_t port, bool keep_alive = true) {
  http::request<http::string_body> req = get("127.0.0.1", port);
  req.keep_alive(keep_alive);
  return client.exchange({false, "127.0.0.1", port}, req, 5s, 1 << 20, "http://test");
}

TEST(PlainHttpClient, KeepsTheConnectionAsTheTlsClientDoes) {
  HttpsServer server("server", "--plain --keep-alive");
  ASSERT_NE(server.port(), 0);
  HttpClient client;
  EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "1/1");
  EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "1/2");
  // A request that says close is answered on the kept connection, which is not kept after it.
  EXPECT_EQ(connection_and_request(plain_call(client, server.port(), false)), "1/3");
  EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "2/1");
  // An https:// exchange without a TLS context is refused, never sent in plain text.
  http::request<http::string_body> req = get("127.0.0.1", server.port());
  Result<HttpResponse> refused =
      client.exchange({true, "127.0.0.1", server.port()}, req, 5s, 1 << 20, "https://test");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "2/2");
}

TEST(PlainHttpClient, SendsAgainOnceOnlyWhenNoAnswerBegan) {
  {
    HttpsServer server("server", "--plain --close-after-answer");
    ASSERT_NE(server.port(), 0);
    HttpClient client;
    EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "1/1");
    EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "2/1");
  }
  {
    HttpsServer server("server", "--plain --close-on-second-request");
    ASSERT_NE(server.port(), 0);
    HttpClient client;
    EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "1/1");
    EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "2/1");
  }
  {
    HttpsServer server("server", "--plain --cut-second-answer");
    ASSERT_NE(server.port(), 0);
    HttpClient client;
    EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "1/1");
    Result<HttpResponse> cut = plain_call(client, server.port());
    ASSERT_FALSE(cut.ok()) << cut->body();
    EXPECT_EQ(cut.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(cut.status().message().find("http://test: waiting for the answer: "),
              std::string::npos)
        << cut.status().message();
    EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "2/1");
  }
  {
    HttpsServer server("server", "--plain --close-header-only");
    ASSERT_NE(server.port(), 0);
    HttpClient client;
    EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "1/1");
    EXPECT_EQ(connection_and_request(plain_call(client, server.port())), "2/1");
  }
}

// A deadline covers the whole exchange: a server that accepts and never answers costs the
// timeout, and the message names the stage.
TEST(PlainHttpClient, OneDeadlineForTheWholeExchange) {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor silent(
      ioc, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  HttpClient client;
  http::request<http::string_body> req = get("127.0.0.1", silent.local_endpoint().port());
  const auto start = std::chrono::steady_clock::now();
  Result<HttpResponse> late = client.exchange({false, "127.0.0.1", silent.local_endpoint().port()},
                                              req, 300ms, 1 << 20, "http://test");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(late.status().message(),
            "http://test: no answer within 300 ms (while waiting for the answer)");
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 10s);  // a loaded machine may be late; never unbounded
}

}  // namespace
}  // namespace flurry::tls

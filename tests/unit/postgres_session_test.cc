// The one libpq session (src/db/postgres_session.h) measures its deadlines on the clock it
// is given: the PostgreSQL registry and the PostgreSQL segment store, pointed at a server that
// never answers, give up when their injected monotonic clock says the deadline has passed, not
// when the system's steady clock does. No PostgreSQL needed: a listening socket that never
// answers stands in for a hung server.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "db/postgres_conninfo.h"
#include "flurry/clock.h"
#include "flurry/registry.h"
#include "flurry/segment_store.h"
#include "free_port.h"
#include "segment_values.h"

namespace flurry {

using flurry::testing::count_of;
using flurry::testing::seg_tag;
namespace {

using namespace std::chrono_literals;

constexpr const char* kLayout = "time:41@1ms,node:10,seq:12;epoch=2025-01-01Z";

// Monotonic time that moves `step` forward at every read, whatever real time does: a deadline
// of any length passes after a few reads.
class SteppingClock final : public MonotonicClock {
 public:
  explicit SteppingClock(Nanos step) : step_(step) {}
  [[nodiscard]] MonoTime now() const noexcept override {
    return MonoTime(std::chrono::hours(1000) + step_ * reads_.fetch_add(1));
  }
  bool wait_until(MonoTime, std::stop_token) noexcept override { return true; }
  [[nodiscard]] long reads() const noexcept { return reads_.load(); }

 private:
  const Nanos step_;
  mutable std::atomic<long> reads_{0};
};

// A socket on 127.0.0.1 that listens and never answers: the kernel completes the handshake, so
// libpq sends its startup packet and waits for an answer that never comes.
class SilentServer {
 public:
  SilentServer() {
    fd_ = testing::listen_loopback(port_);
    if (fd_ < 0) ADD_FAILURE() << "cannot listen on 127.0.0.1";
  }
  ~SilentServer() {
    if (fd_ >= 0) ::close(fd_);
  }
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;

  // No TLS or GSS negotiation: the startup packet is what goes unanswered.
  [[nodiscard]] std::string url() const {
    return "postgresql://flurry@127.0.0.1:" + std::to_string(port_) +
           "/ids?sslmode=disable&gssencmode=disable";
  }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

std::chrono::steady_clock::duration since(std::chrono::steady_clock::time_point start) {
  return std::chrono::steady_clock::now() - start;
}

// The registry's operations are bounded by min(ttl / 3, 2 s): 2 s here by the injected clock,
// which runs 1 s a read, so the open gives up long before 2 s of real time have passed.
TEST(PostgresSessionTest, TheRegistrysDeadlineIsMeasuredOnTheInjectedClock) {
  SilentServer server;
  SteppingClock clock(1s);
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<NodeRegistry>> r =
      open_postgres_registry(server.url(), 60s, kLayout, clock);
  const auto took = since(start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  // The same code and reason as the segment store's below: one session, one mapping.
  EXPECT_EQ(r.status().reason(), Reason::kIo) << r.status().to_string();
  EXPECT_NE(r.status().message().find("no answer from the server within 2000 ms"),
            std::string::npos)
      << r.status().to_string();
  EXPECT_GT(clock.reads(), 0);
  EXPECT_LT(took, 1500ms) << "the deadline was measured on real time";
}

// A segment store with a two-minute timeout: by the injected clock (20 s a read) the call
// gives up after a few reads; by the steady clock it would hang for two minutes.
TEST(PostgresSessionTest, TheSegmentStoresDeadlineIsMeasuredOnTheInjectedClock) {
  SilentServer server;
  SteppingClock clock(20s);
  Result<SegmentStoreSpec> spec = parse_segment_store(server.url(), "/nonexistent");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  SegmentStoreOptions options;
  options.timeout = 120s;
  options.clock = &clock;
  Result<std::unique_ptr<SegmentStore>> store = open_segment_store(*spec, options);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  const auto start = std::chrono::steady_clock::now();
  Result<SegmentAllocation> got = (*store)->allocate(seg_tag("orders"), 100);
  const auto took = since(start);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().reason(), Reason::kIo) << got.status().to_string();
  EXPECT_NE(got.status().message().find("no answer from the server within 120000 ms"),
            std::string::npos)
      << got.status().to_string();
  EXPECT_LT(took, 30s) << "the deadline was measured on real time";
}

// The connection string is parsed once: the parsed form keeps libpq's settings and the
// redacted text, and what it refuses it refuses with check_postgres_url's message.
TEST(PostgresSessionTest, APostgresUrlIsParsedOnceWithItsProof) {
  Result<internal::PostgresUrl> url =
      internal::PostgresUrl::parse("postgresql://flurry:s3cret@db:5433/ids?sslmode=require");
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  EXPECT_EQ(url->setting("host"), "db");
  EXPECT_EQ(url->setting("port"), "5433");
  EXPECT_EQ(url->setting("dbname"), "ids");
  EXPECT_EQ(url->setting("password"), "s3cret");
  EXPECT_EQ(url->setting("application_name"), "");
  EXPECT_EQ(url->redacted(), "postgresql://flurry:***@db:5433/ids?sslmode=require");
  Result<internal::PostgresUrl> bad = internal::PostgresUrl::parse("host=db port=99999");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), internal::check_postgres_url("host=db port=99999").message());
  EXPECT_NE(bad.status().message().find("not a port number"), std::string::npos);
}

}  // namespace
}  // namespace flurry

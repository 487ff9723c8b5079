// A program that uses an installed flurry as any other project would: only <flurry/...> headers
// and the installed static libraries (tests/package/check_install.sh builds it with
// find_package(flurry) and with pkg-config). It leases a node ID from an SQLite registry, issues
// IDs, checks that they are unique and increasing, decodes one, takes a range of a segment tag,
// and turns an ID into an order number and back.
// Usage: flurry_consumer STATE_DIR
#include <flurry/clock.h>
#include <flurry/decoded_id.h>
#include <flurry/generator.h>
#include <flurry/layout.h>
#include <flurry/order_number.h>
#include <flurry/registry.h>
#include <flurry/segment_store.h>
#include <flurry/status.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kIdCount = 10000;

int fail(const std::string& what, const flurry::Status& status) {
  std::fprintf(stderr, "flurry_consumer: %s: %s\n", what.c_str(), status.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: flurry_consumer STATE_DIR\n");
    return 2;
  }
  const std::filesystem::path state_dir = argv[1];

  // flurry::core and flurry::registry: a node ID leased from SQLite, a generator on it.
  flurry::Result<flurry::Layout> layout = flurry::Layout::parse("flurry");
  if (!layout.ok()) return fail("layout", layout.status());
  flurry::SystemClock& clock = flurry::SystemClock::coarse();
  flurry::Result<std::unique_ptr<flurry::NodeRegistry>> registry = flurry::open_sqlite_registry(
      (state_dir / "registry.db").string(), std::chrono::seconds(10), clock, layout->to_string());
  if (!registry.ok()) return fail("registry", registry.status());
  const std::string owner = "flurry_consumer:" + std::to_string(::getpid());
  flurry::Result<flurry::Claim> claim = (*registry)->claim(owner, layout->node_count());
  if (!claim.ok()) return fail("claim", claim.status());
  const flurry::Lease lease = claim->lease;
  flurry::LeasedHorizonStore store(**registry, std::move(*claim));
  flurry::GeneratorOptions options;
  options.node = lease.node;
  flurry::Result<std::unique_ptr<flurry::Generator>> generator =
      flurry::Generator::create(*layout, options, clock, store);
  if (!generator.ok()) return fail("generator", generator.status());

  std::vector<std::uint64_t> ids(kIdCount);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    flurry::Result<std::uint64_t> id = (*generator)->next();
    if (!id.ok()) return fail("next", id.status());
    ids[i] = *id;
  }
  for (std::size_t i = 1; i < ids.size(); ++i) {
    if (ids[i] <= ids[i - 1]) {
      std::fprintf(stderr, "flurry_consumer: ID %zu (%llu) is not above the one before (%llu)\n", i,
                   static_cast<unsigned long long>(ids[i]),
                   static_cast<unsigned long long>(ids[i - 1]));
      return 1;
    }
  }
  std::printf("ids: %zu unique and increasing\n", ids.size());

  flurry::Result<flurry::DecodedId> decoded = flurry::decode_id(*layout, ids.back());
  if (!decoded.ok()) return fail("decode", decoded.status());
  std::printf("decoded: node=%llu", static_cast<unsigned long long>(decoded->parts.node));
  for (const flurry::DecodedField& field : decoded->fields) {
    std::printf(" %s=%llu", field.name.c_str(), static_cast<unsigned long long>(field.value));
  }
  std::printf("\n");
  if (decoded->parts.node != lease.node) {
    std::fprintf(stderr, "flurry_consumer: decoded node %llu, leased %llu\n",
                 static_cast<unsigned long long>(decoded->parts.node),
                 static_cast<unsigned long long>(lease.node));
    return 1;
  }
  if (flurry::Status closed = (*generator)->close(); !closed.ok()) return fail("close", closed);
  if (flurry::Status released = (*registry)->release(lease); !released.ok()) {
    return fail("release", released);
  }

  // flurry::segment: a tag in an SQLite store, one range of it.
  flurry::Result<flurry::SegmentStoreSpec> spec = flurry::parse_segment_store("sqlite", state_dir);
  if (!spec.ok()) return fail("segment store", spec.status());
  flurry::Result<std::unique_ptr<flurry::SegmentStore>> segments =
      flurry::open_segment_store(*spec);
  if (!segments.ok()) return fail("segment store", segments.status());
  flurry::SegmentTagSpec tag;
  tag.tag = "orders";
  tag.start = 1000;
  tag.step = 100;
  if (flurry::Status created = (*segments)->create_tag(tag); !created.ok()) {
    return fail("create tag", created);
  }
  flurry::Result<flurry::SegmentTag> orders = flurry::SegmentTag::of("orders");
  if (!orders.ok()) return fail("tag", orders.status());
  flurry::Result<flurry::SegmentAllocation> range = (*segments)->allocate(*orders, 100);
  if (!range.ok()) return fail("allocate", range.status());
  std::printf("segment: orders [%llu, %llu)\n", static_cast<unsigned long long>(range->start),
              static_cast<unsigned long long>(range->end));

  // flurry::order: a key given in code (no key file), the last ID to an order number and back.
  // libcrypto is opened here, on first use.
  flurry::Result<flurry::OrderKeySet> keys =
      flurry::OrderKeySet::parse("1 = 2b7e151628aed2a6abf7158809cf4f3c", "the consumer's key");
  if (!keys.ok()) return fail("order keys", keys.status());
  flurry::Result<flurry::OrderNumberFormat> format =
      flurry::OrderNumberFormat::create(flurry::OrderNumberOptions{}, *keys);
  if (!format.ok()) return fail("order format", format.status());
  flurry::Result<std::string> number = format->encode(ids.back());
  if (!number.ok()) return fail("order encode", number.status());
  flurry::Result<std::uint64_t> back = format->decode(*number);
  if (!back.ok()) return fail("order decode", back.status());
  if (*back != ids.back()) {
    std::fprintf(stderr, "flurry_consumer: order number %s decoded to another ID\n",
                 number->c_str());
    return 1;
  }
  std::printf("order: %zu characters, decodes back\n", number->size());
  return 0;
}

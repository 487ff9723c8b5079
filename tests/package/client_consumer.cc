// A program that uses the installed C++ client as any other project would, built with nothing but
// `c++ $(pkg-config --cflags --libs flurry-client)` against the install (tests/package/
// check_prefix.sh): it asks a running server for IDs, checks that they are unique and increasing,
// and decodes one with the server's layout.
// Usage: flurry_client_consumer http://HOST:PORT
#include <flurry/client.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kIdCount = 1000;

int fail(const char* what, const flurry::Status& status) {
  std::fprintf(stderr, "flurry_client_consumer: %s: %s\n", what, status.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: flurry_client_consumer http://HOST:PORT\n");
    return 2;
  }
  flurry::ClientOptions options;
  options.endpoints = {argv[1]};
  flurry::ClientResult<std::unique_ptr<flurry::Client>> opened = flurry::Client::open(options);
  if (!opened.ok()) return fail("open", opened.status());
  flurry::Client& client = **opened;

  flurry::ClientResult<std::vector<std::uint64_t>> ids = client.next(kIdCount);
  if (!ids.ok()) return fail("next", ids.status());
  for (std::size_t i = 1; i < ids->size(); ++i) {
    if ((*ids)[i] <= (*ids)[i - 1]) {
      std::fprintf(stderr, "flurry_client_consumer: IDs not increasing at %zu\n", i);
      return 1;
    }
  }
  std::printf("ids: %zu unique and increasing\n", ids->size());
  flurry::ClientResult<flurry::DecodedId> decoded = client.decode(ids->front());
  if (!decoded.ok()) return fail("decode", decoded.status());
  std::printf("decoded: id=%llu node=%llu unix_ms=%lld\n",
              static_cast<unsigned long long>(decoded->id),
              static_cast<unsigned long long>(decoded->parts.node),
              static_cast<long long>(decoded->unix_ms));
  client.close();
  return 0;
}

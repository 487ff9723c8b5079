#include "flurry/server/http_options.h"

#include <thread>

namespace flurry::server {

Result<ListenAddress> parse_listen(std::string_view text) {
  return parse_host_port(text, HostPortUse::kListen);
}

std::uint32_t default_io_threads() noexcept {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 1 ? cores - 1 : 1;
}

}  // namespace flurry::server

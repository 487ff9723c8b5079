// Internal: the /segments monitoring page (segments_page.html), embedded into the binary at build
// time (src/server/CMakeLists.txt generates its definition). One self-contained HTML document:
// inline CSS and JS, no external requests.
#pragma once

#include <string_view>

namespace flurry::server {

// The page's HTML, as served (text/html; charset=utf-8).
[[nodiscard]] std::string_view segments_page() noexcept;

}  // namespace flurry::server

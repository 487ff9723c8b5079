// The console (docs/operations.md "The console"): its page, script and style sheet, embedded at
// build time (embedded_files.h), served without a token: they carry no data. Every request the
// page makes goes to the JSON API and needs that route's own scope.
//
//   GET /console, /console/      console/index.html
//   GET /console/console.js      console/console.js
//   GET /console/console.css     console/console.css
#include <array>
#include <string_view>

#include "embedded_files.h"
#include "routes.h"

namespace flurry::server {
namespace {

// What the console's files are served with: a policy that lets the page load its own script and
// style sheet and talk to its own origin, nothing else (no inline script or style, no framing).
constexpr std::array<HttpHeader, 2> kConsoleHeaders = {{
    {"Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
    {"Referrer-Policy", "no-referrer"},
}};

void add_file(RouteTable& table, std::string_view pattern, std::string_view file_path) {
  const EmbeddedFile* file = find_embedded_file(file_path);
  if (file == nullptr) return;  // not embedded: the path stays 404
  table.add(Route::kConsole, Methods::kGetHead, pattern, {Scope::kNone}, [file](RouteCall& c) {
    QueryParams q;
    if (Status st = parse_query(c.query, c.path, {}, q, c.scratch.query); !st.ok()) {
      c.fail(st);
      return;
    }
    c.response.content_type = file->content_type;
    c.response.cache_control = "no-cache";
    c.response.headers = kConsoleHeaders;
    c.body.append(file->bytes);
  });
}

}  // namespace

void add_console_routes(RouteTable& table, ops::Operations& /*ops*/) {
  add_file(table, "/console", "console/index.html");
  add_file(table, "/console/", "console/index.html");
  add_file(table, "/console/console.js", "console/console.js");
  add_file(table, "/console/console.css", "console/console.css");
}

}  // namespace flurry::server

// Internal: quoting outside input inside error messages, so a message stays one readable
// line whatever bytes the input held. The one quoting helper of the project: the core, the
// registry, the server and the command-line tool all quote through it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flurry::internal {

// How many bytes of the input quote() shows by default.
inline constexpr std::size_t kQuoteMax = 64;

// `"text"` with `"` and `\` escaped by a backslash and control and non-ASCII bytes as \xNN, cut
// short with "..." after `max` bytes: outside input inside a message stays one printable ASCII
// line of bounded length.
[[nodiscard]] std::string quote(std::string_view text, std::size_t max = kQuoteMax);
// `'c'` with `'` and `\` escaped by a backslash and control and non-ASCII bytes as \xNN.
[[nodiscard]] std::string quote_char(char c);
// quote(text, max) with the credentials a URL or an endpoint may carry replaced by "***": in each
// piece of `text` (pieces end at a comma or a blank), what stands between the start of its
// authority (after "://", else the piece's start) and its last '@' ("user:password@"), and the
// value of every query parameter whose name holds "pass", "secret" or "token". For messages about
// text that may hold a password (etcd endpoints, a server's URL): quote() would show it.
[[nodiscard]] std::string quote_redacted(std::string_view text, std::size_t max = kQuoteMax);

}  // namespace flurry::internal

// What the verbs that talk to a running `flurry serve` (`flurry segment --server`, `flurry order
// new --server`) make of an answer they did not expect: one error with the server's own code and
// message.
#pragma once

#include <string>
#include <string_view>

#include "flurry/status.h"
#include "http_client.h"
#include "ops/tokens.h"

namespace flurry::cli {

// The server's answer other than the expected status as an error: "<server> answered HTTP 404
// NOT_FOUND: <message>", its JSON error body's code and message (or the start of a body that is
// not one), then `hint_401` or `hint_403` for those statuses and the Retry-After of a 503. The
// code follows the HTTP status (400 INVALID_ARGUMENT, 401/403 PERMISSION_DENIED, 404 NOT_FOUND,
// 409 ALREADY_EXISTS, 503 UNAVAILABLE, other 5xx INTERNAL).
[[nodiscard]] Status server_error(const HttpEndpoint& server, const HttpResponse& r,
                                  std::string_view hint_401 = {}, std::string_view hint_403 = {});

// The tokens a verb may send to a server, read and assembled as the server does
// (ops::read_tokens, flurry/server/tokens.h): those of `token_file` (the server's token_file
// format) and then the token of `admin_token_file` (with the scopes admin and orders:decode), an
// admin token that the token file lists too refused as the server refuses it; an empty name
// falls back to FLURRY_TOKEN_FILE, FLURRY_ADMIN_TOKEN_FILE. `files` names the files read, for
// messages. Never printed.
struct CliTokens {
  ops::TokenList tokens;
  std::string files;
};
[[nodiscard]] Result<CliTokens> read_cli_tokens(const std::string& token_file,
                                                const std::string& admin_token_file);

// A failed exchange with the server: what the server answered is already in the message (its
// status, error code and message); a transport failure also says UNAVAILABLE (IO). Exit code 1.
[[nodiscard]] int fail_server(const Status& status);

}  // namespace flurry::cli

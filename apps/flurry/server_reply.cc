#include "server_reply.h"

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common.h"
#include "core/quote.h"

namespace flurry::cli {
namespace {

using json = nlohmann::ordered_json;

// A member of the error object as one line of text ("-" when absent).
std::string member(const json& error, std::string_view key) {
  const auto it = error.find(key);
  if (it == error.end()) return "-";
  if (it->is_string()) return one_line(it->get<std::string>());
  return it->dump(-1, ' ', false, json::error_handler_t::replace);
}

// The value of `option`, else of the environment variable `variable`; empty when neither is set.
std::string option_or_env(const std::string& option, const char* variable) {
  if (!option.empty()) return option;
  const char* env = std::getenv(variable);
  return env != nullptr ? std::string(env) : std::string();
}

}  // namespace

Result<CliTokens> read_cli_tokens(const std::string& token_file,
                                  const std::string& admin_token_file) {
  const std::string listed = option_or_env(token_file, "FLURRY_TOKEN_FILE");
  const std::string admin = option_or_env(admin_token_file, "FLURRY_ADMIN_TOKEN_FILE");
  const auto given = [](const std::string& name) {
    return name.empty() ? std::nullopt : std::optional<std::filesystem::path>(name);
  };
  Result<ops::TokenList> tokens = ops::read_tokens(given(listed), given(admin), "--token-file");
  if (!tokens.ok()) return tokens.status();
  CliTokens out{std::move(tokens).value(), {}};
  if (!listed.empty()) out.files = internal::quote(listed);
  if (!admin.empty()) out.files += (out.files.empty() ? "" : " and ") + internal::quote(admin);
  return out;
}

Status server_error(const HttpEndpoint& server, const HttpResponse& r, std::string_view hint_401,
                    std::string_view hint_403) {
  std::string what = "HTTP " + std::to_string(r.status);
  const json body = json::parse(r.body, nullptr, false);
  const json* error = nullptr;
  if (body.is_object()) {
    const auto it = body.find("error");
    if (it != body.end() && it->is_object()) error = &*it;
  }
  if (error != nullptr) {
    what += " " + member(*error, "code") + ": " + member(*error, "message");
  } else if (!r.body.empty()) {
    what += ": " + internal::quote(r.body, 200);
  }
  if (r.status == 401) {
    what += hint_401;
  } else if (r.status == 403) {
    what += hint_403;
  } else if (r.status == 503 && !r.retry_after.empty()) {
    what += " (retry after " + one_line(r.retry_after) + " s)";
  }
  StatusCode code = StatusCode::kUnknown;
  if (r.status == 400) code = StatusCode::kInvalidArgument;
  if (r.status == 401 || r.status == 403) code = StatusCode::kPermissionDenied;
  if (r.status == 404) code = StatusCode::kNotFound;
  if (r.status == 409) code = StatusCode::kAlreadyExists;
  if (r.status == 503) code = StatusCode::kUnavailable;
  if (r.status >= 500 && r.status != 503) code = StatusCode::kInternal;
  return Status(code, server.to_string() + " answered " + what);
}

int fail_server(const Status& status) {
  if (status.reason() == Reason::kIo) return fail(status);
  print_error(status.message());
  return kExitFailure;
}

}  // namespace flurry::cli

// flurry segment: segment mode's tags (docs/segments.md) for operators and scripts. Each verb
// works against the stores directly (--store, as `serve`'s segment_stores, in --data-dir) or
// against a running server (--server http://HOST:PORT, its HTTP routes). In store mode `next`
// serves through a SegmentService over the stores, so residues and several stores behave exactly
// as in the server.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "app/config.h"
#include "common.h"
#include "core/numbers.h"
#include "core/quote.h"
#include "flurry/host_dir.h"
#include "flurry/open_registry.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "flurry/timefmt.h"
#include "http_client.h"
#include "server_reply.h"
#include "verbs.h"

namespace flurry::cli {
namespace {

using json = nlohmann::ordered_json;
using internal::quote;

// Where a verb works: options every segment verb has.
struct TargetArgs {
  std::string store;
  std::string data_dir = default_data_dir().string();  // flurry serve's default data_dir
  std::string host_dir;  // empty: $FLURRY_HOST_DIR, else default_host_dir(), as serve's host_dir
  std::string server;
  std::string admin_token_file;
  std::string token_file;
  std::string timeout_ms = "5000";
  TlsArgs tls;  // --ca-file, --cert-file, --key-file (an https:// server)
  CLI::Option* store_opt = nullptr;
  CLI::Option* data_dir_opt = nullptr;
  CLI::Option* host_dir_opt = nullptr;
  CLI::Option* server_opt = nullptr;
  CLI::Option* admin_token_opt = nullptr;
  CLI::Option* token_opt = nullptr;
};

struct CreateArgs {
  TargetArgs target;
  std::string tag;
  std::string start = "1";
  std::string step = "1000";
  std::string description;
  std::string delta;
  std::string remainder;
  bool strict = false;
  CLI::Option* description_opt = nullptr;
};

struct SegmentListArgs {
  TargetArgs target;
  bool json = false;
};

struct ShowArgs {
  TargetArgs target;
  std::string tag;
  bool json = false;
};

struct SegmentNextArgs {
  TargetArgs target;
  std::string tag;
  std::string count = "1";
};

// The checked target: a store list or a server, never both.
struct Target {
  std::optional<HttpEndpoint> server;
  std::vector<SegmentStoreSpec> stores;
  std::chrono::milliseconds timeout{5000};
  // Server mode: the tokens of --token-file (FLURRY_TOKEN_FILE) and --admin-token-file
  // (FLURRY_ADMIN_TOKEN_FILE), read by the server's own reader; each request sends the first
  // one with the scope its route needs. Never printed.
  ops::TokenList tokens;
  std::string token_files;         // the files, for messages
  std::filesystem::path data_dir;  // store mode: where this host's segment floors live
  std::filesystem::path host_dir;  // store mode: and the host-wide ones (host_dir.h)
};

Result<Target> target_of(const TargetArgs& args) {
  Target t;
  t.timeout = std::chrono::milliseconds(parse_uint(args.timeout_ms, "--timeout-ms", 1, 3'600'000));
  const bool has_server = args.server_opt->count() > 0;
  if (has_server && args.store_opt->count() > 0) {
    throw UsageError(
        "--store and --server cannot be used together: --store works on the stores directly, "
        "--server asks a running server");
  }
  if (has_server && args.data_dir_opt->count() > 0) {
    throw UsageError("--data-dir is for store mode; a server uses its own data directory");
  }
  if (has_server && args.host_dir_opt->count() > 0) {
    throw UsageError("--host-dir is for store mode; a server uses its own host directory");
  }
  if (!has_server && (args.token_opt->count() > 0 || args.admin_token_opt->count() > 0)) {
    throw UsageError(
        "--token-file and --admin-token-file are for --server; store mode works on the store "
        "directly");
  }
  if (has_server) {
    Result<HttpEndpoint> endpoint = parse_server_url(args.server, args.tls);
    if (!endpoint.ok()) throw UsageError("--server: " + endpoint.status().message());
    t.server = *endpoint;
    Result<CliTokens> tokens = read_cli_tokens(args.token_file, args.admin_token_file);
    if (!tokens.ok()) return tokens.status();
    t.tokens = std::move(tokens->tokens);
    t.token_files = std::move(tokens->files);
    return t;
  }
  if (args.data_dir.empty()) throw UsageError("--data-dir: must not be empty");
  const std::string location = args.store.empty() ? "sqlite" : args.store;
  Result<std::vector<SegmentStoreSpec>> specs = parse_segment_stores(location, args.data_dir);
  if (!specs.ok()) throw UsageError("--store: " + specs.status().message());
  t.stores = std::move(specs).value();
  t.data_dir = args.data_dir;
  // The host directory as serve reads its host_dir setting: the flag, FLURRY_HOST_DIR, /var/tmp.
  if (args.host_dir_opt->count() > 0) {
    if (args.host_dir.empty()) throw UsageError("--host-dir: must not be empty");
    t.host_dir = args.host_dir;
  } else if (const char* env = std::getenv("FLURRY_HOST_DIR"); env != nullptr && *env != '\0') {
    t.host_dir = env;
  } else {
    t.host_dir = default_host_dir();
  }
  return t;
}

// ---- Output shared by both modes ----

std::string time_text(std::int64_t unix_ms) {
  return format_unix_ms(unix_ms);
}

// A tag's stored row, as the server's GET /v1/segments lists it.
json row_json(const SegmentTagInfo& t) {
  return json{{"tag", t.tag},
              {"max_id", std::to_string(t.max_id)},
              {"step", t.step},
              {"delta", t.delta},
              {"remainder", t.remainder},
              {"strict", t.strict},
              {"description", t.description},
              {"update_time", time_text(t.update_time_unix_ms)}};
}

void print_json_pretty(const json& j) {
  // Descriptions come from outside: never let odd bytes turn into an exception.
  std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

// A JSON value as text: strings as they are ("-" when empty), anything else as JSON.
std::string text_of(const json& j) {
  if (j.is_string()) {
    const std::string text = one_line(j.get<std::string>());
    return text.empty() ? "-" : text;
  }
  if (j.is_null()) return "-";
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string field(const json& j, std::string_view key) {
  if (!j.is_object()) return "-";
  const auto it = j.find(key);
  return it == j.end() ? "-" : text_of(*it);
}

// "key: value" lines, values aligned.
void print_fields(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, key.size());
  for (const auto& [key, value] : fields) {
    std::cout << key << ":" << std::string(width - key.size() + 1, ' ') << value << "\n";
  }
}

// The list of tags (entries shaped as row_json) as a table.
void print_tag_table(const json& tags) {
  if (!tags.is_array() || tags.empty()) {
    std::cout << "no tags (create one with 'flurry segment create TAG')\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"TAG", "MAX_ID", "STEP", "DELTA", "REMAINDER", "UPDATE_TIME", "DESCRIPTION"}};
  for (const json& t : tags) {
    rows.push_back({field(t, "tag"), field(t, "max_id"), field(t, "step"), field(t, "delta"),
                    field(t, "remainder"), field(t, "update_time"), field(t, "description")});
  }
  print_rows(rows);
}

void print_row(const json& row, const std::string& store) {
  std::vector<std::pair<std::string, std::string>> fields = {{"tag", field(row, "tag")}};
  if (!store.empty()) fields.emplace_back("store", store);
  fields.insert(fields.end(), {{"max_id", field(row, "max_id") + " (the next range starts here)"},
                               {"step", field(row, "step")},
                               {"delta", field(row, "delta")},
                               {"remainder", field(row, "remainder")},
                               {"strict", field(row, "strict")},
                               {"description", field(row, "description")},
                               {"update_time", field(row, "update_time")}});
  print_fields(fields);
}

// ---- Store mode ----

Result<std::vector<std::unique_ptr<SegmentStore>>> open_stores(const Target& t) {
  std::vector<std::unique_ptr<SegmentStore>> stores;
  SegmentStoreOptions options;
  options.timeout = t.timeout;
  for (const SegmentStoreSpec& spec : t.stores) {
    Result<std::unique_ptr<SegmentStore>> store = open_segment_store(spec, options);
    if (!store.ok()) return store.status();
    stores.push_back(std::move(store).value());
  }
  return stores;
}

// A service over the stores, as `serve` builds one; a caller waits for a store at most the
// timeout, as for any other store call.
Result<std::unique_ptr<SegmentService>> open_service(const Target& t) {
  Result<std::vector<std::unique_ptr<SegmentStore>>> stores = open_stores(t);
  if (!stores.ok()) return stores.status();
  SegmentOptions options;
  options.max_wait = t.timeout;
  // The same floors as a server on this data directory and host: never below what a store gave
  // any flurry process of the host.
  options.floor_dir = t.data_dir / "segment-floors";
  Result<HostDir> host = HostDir::open(t.host_dir);
  if (!host.ok()) return host.status().with_prefix("the host directory (--host-dir)");
  options.host_dir = std::move(host).value();
  return SegmentService::create(std::move(stores).value(), std::move(options));
}

// Every store's row of `tag` (a tag created over several stores has one in each, with its own
// remainder). NOT_FOUND when no store has it.
int store_show(const Target& t, const SegmentTag& tag, bool as_json) {
  Result<std::vector<std::unique_ptr<SegmentStore>>> stores = open_stores(t);
  if (!stores.ok()) return fail(stores.status());
  std::vector<std::pair<std::string, SegmentTagInfo>> found;
  for (const auto& store : *stores) {
    Result<SegmentTagInfo> info = store->tag(tag);
    if (info.ok()) {
      found.emplace_back(store->describe(), std::move(info).value());
    } else if (info.status().code() != StatusCode::kNotFound) {
      return fail(info.status());
    }
  }
  if (found.empty()) {
    return fail(Status(StatusCode::kNotFound,
                       "no segment tag " + quote(tag.view()) + " in " +
                           (t.stores.size() == 1 ? (*stores)[0]->describe()
                                                 : std::to_string(t.stores.size()) + " stores") +
                           " (create it with 'flurry segment create')"));
  }
  if (as_json) {
    json rows = json::array();
    for (const auto& [where, info] : found) {
      json row = row_json(info);
      row["store"] = where;
      rows.push_back(std::move(row));
    }
    print_json_pretty(json{{"tag", tag.name()}, {"stores", std::move(rows)}});
    return kExitOk;
  }
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (i > 0) std::cout << "\n";
    print_row(row_json(found[i].second), found[i].first);
  }
  return kExitOk;
}

int store_create(const Target& t, const SegmentTagSpec& spec) {
  Result<std::unique_ptr<SegmentService>> service = open_service(t);
  if (!service.ok()) return fail(service.status());
  if (Status st = (*service)->create_tag(spec); !st.ok()) return fail(st);
  service->reset();
  // The spec's tag passed check_segment_tag_spec (run_create): this cannot fail.
  const Result<SegmentTag> tag = SegmentTag::of(spec.tag);
  if (!tag.ok()) return fail(tag.status());
  return store_show(t, *tag, false);
}

int store_list(const Target& t, bool as_json) {
  Result<std::unique_ptr<SegmentService>> service = open_service(t);
  if (!service.ok()) return fail(service.status());
  Result<std::vector<SegmentTagInfo>> tags = (*service)->list_tags();
  if (!tags.ok()) return fail(tags.status());
  json rows = json::array();
  for (const SegmentTagInfo& info : *tags) rows.push_back(row_json(info));
  if (as_json) {
    print_json_pretty(json{{"tags", std::move(rows)}});
  } else {
    print_tag_table(rows);
  }
  return kExitOk;
}

int store_next(const Target& t, const SegmentTag& tag, std::uint64_t count) {
  Result<std::unique_ptr<SegmentService>> service = open_service(t);
  if (!service.ok()) return fail(service.status());
  const std::uint64_t chunk = std::min(count, (*service)->options().max_batch);
  std::vector<std::uint64_t> ids(static_cast<std::size_t>(chunk));
  OutputBuffer out(STDOUT_FILENO);
  for (std::uint64_t left = count; left > 0 && out.error() == 0;) {
    const std::uint64_t n = std::min(left, chunk);
    const std::span<std::uint64_t> batch(ids.data(), static_cast<std::size_t>(n));
    // 1 <= n <= max_batch by the loop.
    const Result<IdCount> size = IdCount::of(n, (*service)->options().max_batch);
    if (!size.ok()) return fail(size.status());
    if (Status st = (*service)->next(tag, *size, batch); !st.ok()) {
      (void)out.flush();  // the IDs already issued are the caller's
      return fail(st);
    }
    for (std::uint64_t id : batch) out.append_id_line(id, Encoding::kDecimal);
    left -= n;
  }
  if (!out.flush()) {
    print_error(std::string("cannot write to standard output: ") + std::strerror(out.error()));
    return kExitFailure;
  }
  return kExitOk;
}

// ---- Server mode ----

// The server's answer other than the expected status as an error, with what to do about 401
// and 403: which scope the request needs and where the tokens came from.
Status server_error(const Target& t, const HttpResponse& r, ops::Scope scope, bool sent_token) {
  const std::string name(ops::to_string(scope));
  const std::string give = "give --token-file PATH holding a line <token> " + name +
                           (ops::kAdminTokenScopes.has(scope)
                                ? " (or --admin-token-file PATH with the server's admin token)"
                                : "");
  const std::string hint_401 =
      sent_token ? " (the server does not accept the token from " + t.token_files + ")"
                 : " (this request needs a token with scope " + name + ": " + give + ")";
  const std::string hint_403 = sent_token ? " (the token from " + t.token_files +
                                                " does not have scope " + name + " on this server)"
                                          : " (the server has no token with scope " + name + ")";
  return cli::server_error(*t.server, r, hint_401, hint_403);
}

HttpRequest get(std::string target) {
  HttpRequest request;
  request.target = std::move(target);
  return request;
}

// One request to a route that needs `scope` (the scope the server's route table gives it), with
// the first token that has it; the answer's JSON when it has status `expect`, the server's error
// otherwise.
Result<json> call(const Target& t, HttpRequest request, ops::Scope scope, int expect) {
  const ops::TokenEntry* token = ops::token_with(t.tokens, scope);
  if (token != nullptr) request.headers.emplace_back("Authorization", "Bearer " + token->token);
  Result<HttpResponse> r = http_call(*t.server, request, t.timeout);
  if (!r.ok()) return r.status();
  if (r->status != expect) return server_error(t, *r, scope, token != nullptr);
  json body = json::parse(r->body, nullptr, false);
  if (body.is_discarded()) {
    return Status(StatusCode::kInternal, t.server->to_string() + " " + request.target +
                                             ": the answer is not JSON: " + quote(r->body, 200));
  }
  return body;
}

int server_create(const Target& t, const SegmentTagSpec& spec, bool has_description,
                  bool has_residue) {
  json body = {{"tag", spec.tag}, {"start", spec.start}, {"step", spec.step}};
  if (has_description) body["description"] = spec.description;
  if (spec.strict) body["strict"] = true;
  if (has_residue) {
    body["delta"] = spec.delta;
    body["remainder"] = spec.remainder;
  }
  HttpRequest request;
  request.method = "POST";
  request.target = "/v1/segments";
  request.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  Result<json> created = call(t, std::move(request), ops::Scope::kAdmin, 201);
  if (!created.ok()) return fail_server(created.status());
  print_row(*created, "");
  return kExitOk;
}

int server_list(const Target& t, bool as_json) {
  Result<json> listed = call(t, get("/v1/segments"), ops::Scope::kRead, 200);
  if (!listed.ok()) return fail_server(listed.status());
  if (as_json) {
    print_json_pretty(*listed);
  } else {
    print_tag_table(listed->is_object() ? listed->value("tags", json::array()) : json::array());
  }
  return kExitOk;
}

std::string buffer_text(const json& b) {
  if (!b.is_object()) return "-";
  return field(b, "start") + ".." + field(b, "end") + " (" + field(b, "remaining") +
         " left), delta " + field(b, "delta") + ", step " + field(b, "step") + ", from " +
         field(b, "store") + " at " + field(b, "fetched_at") + " in " + field(b, "fetch_ms") +
         " ms";
}

int server_show(const Target& t, const std::string& tag, bool as_json) {
  Result<json> shown = call(t, get("/v1/segments/" + tag), ops::Scope::kRead, 200);
  if (!shown.ok()) return fail_server(shown.status());
  if (as_json) {
    print_json_pretty(*shown);
    return kExitOk;
  }
  const json& s = *shown;
  const json stored = s.is_object() ? s.value("stored", json()) : json();
  const json none;
  print_fields(
      {{"tag", field(s, "tag")},
       {"served", field(s, "served")},
       {"step", field(s, "step") + " (base " + field(s, "base_step") + ")"},
       {"remaining", field(s, "remaining")},
       {"fetching", field(s, "fetching")},
       {"current", buffer_text(s.is_object() ? s.value("current", none) : none)},
       {"next", buffer_text(s.is_object() ? s.value("next", none) : none)},
       {"ids_issued", field(s, "ids_issued")},
       {"ids_skipped", field(s, "ids_skipped")},
       {"ranges_fetched", field(s, "ranges_fetched")},
       {"store_errors", field(s, "store_errors")},
       {"waits", field(s, "waits")},
       {"unavailable", field(s, "unavailable")},
       {"last_error", field(s, "last_error")},
       {"stored", "max_id " + field(stored, "max_id") + ", step " + field(stored, "step") +
                      ", delta " + field(stored, "delta") + ", remainder " +
                      field(stored, "remainder") + ", updated " + field(stored, "update_time")},
       {"description", field(stored, "description")}});
  return kExitOk;
}

// An ID of an answer: a decimal string (as the server writes them) or a JSON number.
std::optional<std::uint64_t> id_of(const json& j) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (!j.is_string()) return std::nullopt;
  const internal::ParsedUint n = internal::parse_uint(j.get_ref<const std::string&>());
  if (!n.ok()) return std::nullopt;
  return n.value;
}

int server_next(const Target& t, const std::string& tag, std::uint64_t count) {
  OutputBuffer out(STDOUT_FILENO);
  for (std::uint64_t left = count; left > 0 && out.error() == 0;) {
    const std::uint64_t n = std::min(left, kServerChunk);
    const std::string target = "/v1/segments/" + tag + "/ids?count=" + std::to_string(n);
    Result<json> got = call(t, get(target), ops::Scope::kIds, 200);
    if (!got.ok()) {
      (void)out.flush();
      return fail_server(got.status());
    }
    const json* ids = nullptr;
    if (got->is_object()) {
      const auto it = got->find("ids");
      if (it != got->end() && it->is_array()) ids = &*it;
    }
    if (ids == nullptr || ids->size() != n) {
      (void)out.flush();
      return fail(Status(StatusCode::kInternal, t.server->to_string() + target + ": not the " +
                                                    std::to_string(n) +
                                                    " IDs asked for: " + quote(got->dump(), 200)));
    }
    for (const json& j : *ids) {
      const std::optional<std::uint64_t> id = id_of(j);
      if (!id) {
        (void)out.flush();
        return fail(Status(StatusCode::kInternal,
                           t.server->to_string() + target +
                               ": an ID is not a decimal number: " + quote(j.dump(), 64)));
      }
      out.append_id_line(*id, Encoding::kDecimal);
    }
    left -= n;
  }
  if (!out.flush()) {
    print_error(std::string("cannot write to standard output: ") + std::strerror(out.error()));
    return kExitFailure;
  }
  return kExitOk;
}

// ---- The verbs ----

int run_create(const CreateArgs& args) {
  Result<Target> target = target_of(args.target);
  if (!target.ok()) return fail(target.status());
  const Target& t = *target;
  SegmentTagSpec spec;
  spec.tag = args.tag;
  spec.start = parse_uint(args.start, "--start", 0, UINT64_MAX);
  spec.step = parse_uint(args.step, "--step", 1, UINT64_MAX);
  spec.description = args.description;
  spec.strict = args.strict;
  const bool has_residue = !args.delta.empty() || !args.remainder.empty();
  if (has_residue) {
    if (args.delta.empty() || args.remainder.empty()) {
      throw UsageError("--delta and --remainder go together");
    }
    spec.delta = parse_uint(args.delta, "--delta", 1, UINT64_MAX);
    spec.remainder = parse_uint(args.remainder, "--remainder", 0, UINT64_MAX);
  }
  // The library's checks (tag name, ranges) before any store or server is asked.
  if (Status st = check_segment_tag_spec(spec); !st.ok()) return fail(st);
  if (t.server) return server_create(t, spec, args.description_opt->count() > 0, has_residue);
  return store_create(t, spec);
}

int run_segment_list(const SegmentListArgs& args) {
  Result<Target> target = target_of(args.target);
  if (!target.ok()) return fail(target.status());
  const Target& t = *target;
  return t.server ? server_list(t, args.json) : store_list(t, args.json);
}

int run_show(const ShowArgs& args) {
  Result<Target> target = target_of(args.target);
  if (!target.ok()) return fail(target.status());
  const Target& t = *target;
  // Also keeps the tag safe in a URL path: its characters need no escaping.
  const Result<SegmentTag> tag = SegmentTag::of(args.tag);
  if (!tag.ok()) return fail(tag.status());
  return t.server ? server_show(t, tag->name(), args.json) : store_show(t, *tag, args.json);
}

int run_segment_next(const SegmentNextArgs& args) {
  Result<Target> target = target_of(args.target);
  if (!target.ok()) return fail(target.status());
  const Target& t = *target;
  const std::uint64_t count = parse_uint(args.count, "--count", 1, UINT64_MAX);
  const Result<SegmentTag> tag = SegmentTag::of(args.tag);
  if (!tag.ok()) return fail(tag.status());
  return t.server ? server_next(t, tag->name(), count) : store_next(t, *tag, count);
}

void add_target_options(CLI::App& cmd, TargetArgs& args) {
  args.store_opt = cmd.add_option(
      "--store", args.store,
      "Work on these stores directly, as serve's segment_stores: sqlite (DATA_DIR/segments.db, "
      "the default), sqlite:PATH, postgresql://... or host=... dbname=...; several separated by "
      "commas");
  args.data_dir_opt = cmd.add_option("--data-dir", args.data_dir,
                                     "Data directory: the sqlite store and this host's segment "
                                     "floors (as serve's data_dir)")
                          ->capture_default_str();
  args.host_dir_opt = cmd.add_option(
      "--host-dir", args.host_dir,
      "Host directory: the segment floors every flurry process of this host shares (as serve's "
      "host_dir; default: $FLURRY_HOST_DIR, else /var/tmp)");
  args.server_opt = cmd.add_option("--server", args.server,
                                   "Ask a running server instead: http://HOST:PORT or "
                                   "https://HOST:PORT");
  add_tls_options(cmd, args.tls);
  args.token_opt = cmd.add_option("--token-file", args.token_file,
                                  "With --server: a token file as the server's token_file (lines "
                                  "<token> <scopes>); each request sends a token with the scope "
                                  "it needs (default: $FLURRY_TOKEN_FILE)");
  args.admin_token_opt = cmd.add_option("--admin-token-file", args.admin_token_file,
                                        "With --server: the file holding the server's admin "
                                        "token (default: $FLURRY_ADMIN_TOKEN_FILE)");
  cmd.add_option("--timeout-ms", args.timeout_ms,
                 "Longest one store operation or server request may take")
      ->capture_default_str();
}

}  // namespace

Verb add_segment(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "segment",
      "Segment mode's tags: create, list, show and take IDs, on the stores directly (--store) or "
      "through a running server (--server)");
  cmd->require_subcommand(1);

  auto create = std::make_shared<CreateArgs>();
  CLI::App* create_cmd = cmd->add_subcommand(
      "create",
      "Create a tag; with several stores each gets delta = the number of stores and remainder = "
      "its position");
  create_cmd->add_option("TAG", create->tag, "The tag: 1-128 of A-Z a-z 0-9 . _ -")->required();
  create_cmd->add_option("--start", create->start, "The first ID")->capture_default_str();
  create_cmd->add_option("--step", create->step, "The base step: IDs per range at low demand")
      ->capture_default_str();
  create->description_opt =
      create_cmd->add_option("--description", create->description, "Free text (at most 256 bytes)");
  create_cmd->add_option(
      "--delta", create->delta,
      "Only IDs x with x % delta == remainder (one store only; with --remainder)");
  create_cmd->add_option("--remainder", create->remainder, "See --delta");
  create_cmd->add_flag("--strict", create->strict,
                       "Strictly increasing across every server: served only by the timestamp "
                       "oracle's leader (serve --tso), from one store");
  add_target_options(*create_cmd, create->target);

  auto list = std::make_shared<SegmentListArgs>();
  CLI::App* list_cmd = cmd->add_subcommand("list", "Every tag with its stored row, by name");
  list_cmd->add_flag("--json", list->json, "Print JSON (as the server's GET /v1/segments)");
  add_target_options(*list_cmd, list->target);

  auto show = std::make_shared<ShowArgs>();
  CLI::App* show_cmd = cmd->add_subcommand(
      "show",
      "One tag: its stored row in each store (store mode), or the server's buffers, counters and "
      "stored row (--server)");
  show_cmd->add_option("TAG", show->tag, "The tag")->required();
  show_cmd->add_flag("--json", show->json, "Print JSON");
  add_target_options(*show_cmd, show->target);

  auto next = std::make_shared<SegmentNextArgs>();
  CLI::App* next_cmd = cmd->add_subcommand("next", "Take IDs of a tag, one per line, increasing");
  next_cmd->add_option("TAG", next->tag, "The tag")->required();
  next_cmd->add_option("-n,--count", next->count, "How many IDs")->capture_default_str();
  add_target_options(*next_cmd, next->target);

  return {cmd, [=] {
            if (create_cmd->parsed()) return run_create(*create);
            if (list_cmd->parsed()) return run_segment_list(*list);
            if (show_cmd->parsed()) return run_show(*show);
            return run_segment_next(*next);
          }};
}

}  // namespace flurry::cli

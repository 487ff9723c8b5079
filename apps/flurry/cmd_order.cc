// flurry order encode|decode|new: order numbers (docs/order-numbers.md) from the command line,
// with the same formats as `flurry serve` (the same settings, defaults and FF1 tweaks), so
// numbers of either decode with the other.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/config.h"
#include "common.h"
#include "core/numbers.h"
#include "decoded_output.h"
#include "flurry/decoded_id.h"
#include "flurry/layout.h"
#include "flurry/order_number.h"
#include "http_client.h"
#include "next_local.h"
#include "order/order_formats.h"
#include "order/order_settings.h"
#include "server_reply.h"
#include "settings_args.h"
#include "verbs.h"

namespace flurry::cli {
namespace {

using json = nlohmann::ordered_json;

// The format options, named and defaulted as the settings order_* of `flurry serve`.
struct FormatArgs {
  std::string key_file;
  std::string layout = "flurry";
  std::string tag;  // the source: a segment tag; empty: the snowflake layout
  std::string alphabet = "digits";
  std::string check;  // empty: the alphabet's default
  std::string length = "0";
  std::string prefix;
  std::string segment_prefix;  // the server's order_segment_prefix
  std::string utc_offset = "+00:00";
  std::string group = "0";
  std::string separator = "-";
};

struct OrderArgs {
  FormatArgs format;
  std::vector<std::string> values;  // encode: IDs; decode: order numbers
  bool json = false;
  CLI::Option* layout_option = nullptr;
  // new
  std::string count = "1";
  std::string server;
  TlsArgs tls;             // --ca-file, --cert-file, --key-file (an https:// server)
  std::string token_file;  // --token-file: a token with scope ids for a server that wants one
  std::string state_dir;   // --state-dir (an alias of --data-dir), when state_dir_opt counts it
  std::string node;
  CLI::Option* state_dir_opt = nullptr;
  SettingsArgs settings;  // the registry settings of flurry serve (kRegistrySettings)
};

// `parse` of `text`, or a UsageError naming the flag.
template <typename Parse>
auto parsed(std::string_view flag, const std::string& text, Parse parse) {
  auto r = parse(text);
  if (!r.ok()) throw UsageError(std::string(flag) + ": " + r.status().message());
  return std::move(r).value();
}

order::OrderSettings settings_of(const FormatArgs& a) {
  order::OrderSettings s;
  s.alphabet = parsed("--alphabet", a.alphabet, order::parse_order_alphabet);
  if (!a.check.empty()) s.check = parsed("--check", a.check, order::parse_order_check);
  s.length = parsed("--length", a.length, order::parse_order_length);
  s.prefix = parsed("--prefix", a.prefix, order::parse_order_prefix);
  s.tag_prefixes = parsed("--segment-prefix", a.segment_prefix, order::parse_order_segment_prefix);
  if (Status st = order::check_order_prefixes(s, "--prefix", "--segment-prefix"); !st.ok()) {
    throw UsageError(st.message());
  }
  s.utc_offset_minutes = parsed("--utc-offset", a.utc_offset, order::parse_utc_offset);
  s.group = parsed("--group", a.group, order::parse_order_group);
  s.separator = parsed("--separator", a.separator, order::parse_order_separator);
  if (Status st = order::check_order_settings(s, "--check", "--alphabet"); !st.ok()) {
    throw UsageError(st.message());
  }
  return s;
}

// The formats of the options under the keys of --key-file (else FLURRY_ORDER_KEYS).
Result<std::unique_ptr<order::OrderFormats>> formats_of(const FormatArgs& a) {
  const order::OrderSettings settings = settings_of(a);
  std::optional<std::filesystem::path> file;
  if (!a.key_file.empty()) file = a.key_file;
  Result<std::optional<OrderKeySet>> keys =
      order::load_order_keys(file, app::flurry_environment(), false);
  if (!keys.ok()) return keys.status();
  if (!*keys) {
    throw UsageError("no order-number keys: give --key-file FILE or set FLURRY_ORDER_KEYS");
  }
  Result<Layout> layout = Layout::parse(a.layout);
  if (!layout.ok()) return layout.status();
  // The largest max_lead a server may run with: the command line does not know the server's, and
  // must not refuse a number a server issued.
  return order::OrderFormats::create(settings, std::move(**keys), *layout, SystemClock::coarse(),
                                     std::chrono::hours(24));
}

// The format of the source: the tag's, or the layout's.
Result<const OrderNumberFormat*> source_format(order::OrderFormats& formats, const FormatArgs& a,
                                               std::shared_ptr<const OrderNumberFormat>& hold) {
  if (a.tag.empty()) return &formats.snowflake();
  if (Status st = SegmentTag::of(a.tag).status(); !st.ok()) {
    throw UsageError("--tag: " + st.message());
  }
  Result<std::shared_ptr<const OrderNumberFormat>> f = formats.segment(a.tag);
  if (!f.ok()) return f.status();
  hold = std::move(f).value();
  return hold.get();
}

int write_out(OutputBuffer& out) {
  if (!out.flush()) {
    print_error(std::string("cannot write to standard output: ") + std::strerror(out.error()));
    return kExitFailure;
  }
  return kExitOk;
}

int run_encode(const OrderArgs& args) {
  std::vector<std::uint64_t> ids;
  for (const std::string& v : args.values) ids.push_back(parse_uint(v, "ID", 0, UINT64_MAX));
  Result<std::unique_ptr<order::OrderFormats>> formats = formats_of(args.format);
  if (!formats.ok()) return fail(formats.status());
  std::shared_ptr<const OrderNumberFormat> hold;
  Result<const OrderNumberFormat*> format = source_format(**formats, args.format, hold);
  if (!format.ok()) return fail(format.status());
  OutputBuffer out(STDOUT_FILENO);
  for (const std::uint64_t id : ids) {
    Result<std::string> code = (*format)->encode(id);
    if (!code.ok()) {
      (void)out.flush();
      return fail(InvalidArgument("ID " + std::to_string(id) + ": " + code.status().message()));
    }
    out.append(*code);
    out.append("\n");
  }
  return write_out(out);
}

int run_order_decode(const OrderArgs& args) {
  Result<std::unique_ptr<order::OrderFormats>> formats = formats_of(args.format);
  if (!formats.ok()) return fail(formats.status());
  std::shared_ptr<const OrderNumberFormat> hold;
  Result<const OrderNumberFormat*> format = source_format(**formats, args.format, hold);
  if (!format.ok()) return fail(format.status());
  const bool fields = args.format.tag.empty() && args.layout_option->count() > 0;
  const Layout& layout = (*formats)->layout();
  for (const std::string& code : args.values) {
    OrderDecodeError why;
    Result<std::uint64_t> id = (*format)->decode(code, &why);
    if (!id.ok()) {
      std::cout.flush();
      print_error(one_line(code) + ": " + id.status().message() + " (kind " +
                  std::string(to_string(why.kind)) + ", position " + std::to_string(why.position) +
                  ")");
      return kExitFailure;
    }
    const char version = (*formats)->key_version(code, args.format.tag);
    std::optional<DecodedId> d;
    if (fields) {
      Result<DecodedId> got = decode_id(layout, *id);
      if (!got.ok()) return fail(got.status());
      d = std::move(got).value();
    }
    if (args.json) {
      json j;
      j["order_number"] = code;
      j["key_version"] = std::string(1, version);
      j["source"] = args.format.tag.empty() ? "snowflake" : "segment";
      if (!args.format.tag.empty()) j["tag"] = args.format.tag;
      j["id"] = std::to_string(*id);
      if (d) {
        const json decoded = decoded_json(*d, layout);
        for (const auto& item : decoded.items()) {
          if (item.key() != "id") j[item.key()] = item.value();
        }
      }
      print_json(j);
    } else if (d) {
      std::cout << "order_number " << code << "\nkey_version " << version << '\n';
      print_decoded(*d, layout);
    } else {
      std::cout << *id << '\n';
    }
  }
  return kExitOk;
}

// Order numbers from a running server: GET /v1/order-numbers?count=N[&tag=T], in chunks.
int new_from_server(const OrderArgs& args, std::uint64_t count) {
  Result<HttpEndpoint> endpoint = parse_server_url(args.server, args.tls);
  if (!endpoint.ok()) throw UsageError("--server: " + endpoint.status().message());
  // A server whose open_scopes leave out ids wants a token with it (FLURRY_TOKEN_FILE too).
  Result<CliTokens> tokens = read_cli_tokens(args.token_file, {});
  if (!tokens.ok()) return fail(tokens.status());
  const ops::TokenEntry* token = ops::token_with(tokens->tokens, ops::Scope::kIds);
  OutputBuffer out(STDOUT_FILENO);
  for (std::uint64_t left = count; left > 0;) {
    const std::uint64_t n = std::min(left, kServerChunk);
    HttpRequest request;
    request.target = "/v1/order-numbers?count=" + std::to_string(n);
    if (!args.format.tag.empty()) request.target += "&tag=" + args.format.tag;
    if (token != nullptr) request.headers.emplace_back("Authorization", "Bearer " + token->token);
    Result<HttpResponse> r = http_call(*endpoint, request, std::chrono::seconds(10));
    if (!r.ok()) return fail(r.status());
    if (r->status != 200) {
      (void)out.flush();
      return fail_server(server_error(
          *endpoint, *r,
          token != nullptr ? " (the server does not accept the token from " + tokens->files + ")"
                           : std::string(" (give --token-file PATH holding a line <token> ids)"),
          token != nullptr
              ? " (the token from " + tokens->files + " does not have scope ids on this server)"
              : std::string(" (the server has no token with scope ids)")));
    }
    const json body = json::parse(r->body, nullptr, false);
    const json* numbers = nullptr;
    if (body.is_object() && body.contains("order_numbers") && body["order_numbers"].is_array()) {
      numbers = &body["order_numbers"];
    }
    if (numbers == nullptr || numbers->size() != n) {
      (void)out.flush();
      return fail(Status(StatusCode::kInternal, endpoint->to_string() + request.target +
                                                    ": not the order numbers asked for"));
    }
    for (const json& code : *numbers) {
      if (!code.is_string()) continue;
      out.append(code.get<std::string>());
      out.append("\n");
    }
    left -= n;
  }
  return write_out(out);
}

int run_new(const OrderArgs& args) {
  const std::uint64_t count = parse_uint(args.count, "-n", 1, UINT64_MAX);
  if (!args.server.empty()) return new_from_server(args, count);
  if (!args.format.tag.empty()) {
    throw UsageError("--tag needs --server: segment IDs come from a server's tag");
  }
  Result<std::unique_ptr<order::OrderFormats>> formats = formats_of(args.format);
  if (!formats.ok()) return fail(formats.status());
  const OrderNumberFormat& format = (*formats)->snowflake();
  NextArgs next;
  next.count = args.count;
  next.layout = args.format.layout;
  next.state_dir = args.state_dir;
  next.state_dir_given = args.state_dir_opt != nullptr && args.state_dir_opt->count() > 0;
  next.settings = gather_inputs(args.settings);
  next.node = args.node;
  std::string line(format.length() + 1, '\n');
  return run_next(next, [&](std::span<const std::uint64_t> ids, OutputBuffer& out) {
    for (const std::uint64_t id : ids) {
      Result<std::size_t> n = format.encode_to(id, std::span<char>(line.data(), format.length()));
      if (!n.ok()) return n.status();
      out.append(std::string_view(line.data(), *n));
      out.append("\n");
    }
    return OkStatus();
  });
}

void add_format_options(CLI::App& cmd, OrderArgs& args) {
  FormatArgs& f = args.format;
  cmd.add_option("--key-file", f.key_file,
                 "The order-number key file (VERSION = HEX per line; default: the environment "
                 "variable FLURRY_ORDER_KEYS)")
      ->type_name("FILE");
  args.layout_option =
      cmd.add_option("--layout", f.layout,
                     "The snowflake layout of the IDs (their largest ID, their date); decode: "
                     "print the ID's fields too")
          ->type_name("LAYOUT")
          ->capture_default_str();
  cmd.add_option("--tag", f.tag, "The source is this segment tag, not the snowflake layout")
      ->type_name("TAG");
  cmd.add_option("--alphabet", f.alphabet, "digits or base32")
      ->type_name("NAME")
      ->capture_default_str();
  cmd.add_option("--check", f.check,
                 "damm, luhn (digits), mod37 (base32) or none (default: damm for digits, mod37 "
                 "for base32)")
      ->type_name("NAME");
  cmd.add_option("--length", f.length, "Payload characters (0: the fewest that cover the source)")
      ->type_name("N")
      ->capture_default_str();
  cmd.add_option("--prefix", f.prefix, "date (the ID's YYMMDD) or a literal of 1-8 of 0-9, A-Z")
      ->type_name("PREFIX");
  cmd.add_option("--segment-prefix", f.segment_prefix,
                 "The server's order_segment_prefix: TAG=LITERAL pairs (*=LITERAL for the others) "
                 "or one LITERAL for every tag")
      ->type_name("PREFIXES");
  cmd.add_option("--utc-offset", f.utc_offset, "The UTC offset of the date prefix")
      ->type_name("OFFSET")
      ->capture_default_str();
  cmd.add_option("--group", f.group, "Display group size (0: none)")
      ->type_name("N")
      ->capture_default_str();
  cmd.add_option("--separator", f.separator, "Group separator: - _ . / or a space")
      ->type_name("CHAR")
      ->capture_default_str();
}

}  // namespace

Verb add_order(CLI::App& app) {
  auto encode_args = std::make_shared<OrderArgs>();
  auto decode_args = std::make_shared<OrderArgs>();
  auto new_args = std::make_shared<OrderArgs>();
  CLI::App* cmd = app.add_subcommand(
      "order", "Order numbers: IDs encrypted (FF1) into fixed-length numbers, and back");
  cmd->require_subcommand(1);

  CLI::App* encode = cmd->add_subcommand("encode", "Print the order number of each ID");
  encode->add_option("id", encode_args->values, "IDs (decimal)")->type_name("ID")->required();
  add_format_options(*encode, *encode_args);

  CLI::App* decode = cmd->add_subcommand("decode", "Print the ID of each order number");
  decode->add_option("code", decode_args->values, "Order numbers (separators ignored)")
      ->type_name("CODE")
      ->required();
  decode->add_flag("--json", decode_args->json, "One JSON object per number");
  add_format_options(*decode, *decode_args);

  CLI::App* fresh = cmd->add_subcommand(
      "new", "Issue order numbers: from a server (--server), else locally as `flurry next` does");
  fresh->add_option("-n,--count", new_args->count, "How many (at least 1)")
      ->type_name("N")
      ->capture_default_str();
  fresh
      ->add_option("--server", new_args->server,
                   "Fetch them from a running flurry serve, http://HOST:PORT or https://HOST:PORT")
      ->type_name("URL");
  fresh->add_option("--token-file", new_args->token_file,
                    "With --server: a token file as the server's token_file; a token with scope "
                    "ids is sent (default: $FLURRY_TOKEN_FILE)");
  new_args->state_dir_opt =
      fresh
          ->add_option("--state-dir", new_args->state_dir,
                       "Local: another name of --data-dir, as for flurry next (default: " +
                           default_data_dir().string() + ")")
          ->type_name("DIR");
  fresh->add_option("--node", new_args->node, "Local: a static node ID, as for flurry next")
      ->type_name("ID");
  // Local: the registry settings of flurry serve, as for flurry next.
  add_settings_options(*fresh, new_args->settings, kRegistrySettings);
  add_format_options(*fresh, *new_args);
  add_tls_options(*fresh, new_args->tls);  // after --key-file (the order keys)

  return {cmd, [encode, decode, encode_args, decode_args, new_args] {
            if (encode->parsed()) return run_encode(*encode_args);
            if (decode->parsed()) return run_order_decode(*decode_args);
            return run_new(*new_args);
          }};
}

}  // namespace flurry::cli

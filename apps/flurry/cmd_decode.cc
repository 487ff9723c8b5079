// flurry decode: take an ID apart with a layout. Works for expired layouts too.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "common.h"
#include "decoded_output.h"
#include "flurry/codec.h"
#include "flurry/decoded_id.h"
#include "flurry/layout.h"
#include "flurry/timefmt.h"
#include "flurry/wide_id.h"
#include "verbs.h"

namespace flurry::cli {
namespace {

struct DecodeArgs {
  std::string id;
  std::string layout = "flurry";
  std::string format = "dec";
  bool json = false;
  bool format_given = false;
};

int run_decode(const DecodeArgs& args) {
  IdEncoding format = parse_format(args.format);
  // Without --format, a UUID or a ULID is recognised by its shape (no 64-bit encoding has it).
  if (!args.format_given) {
    if (const std::optional<WideFormat> wide = detect_wide_format(args.id)) format = *wide;
  }

  Result<Layout> layout = Layout::parse(args.layout);
  if (!layout.ok()) return fail(layout.status());
  Result<IdTextCodec> codec = IdTextCodec::create(*layout, format);
  if (!codec.ok()) return fail(codec.status());
  Result<std::uint64_t> id = codec->decode(args.id);
  if (!id.ok()) return fail(id.status());
  // No check_alive(): IDs of an expired layout must still decode.
  Result<DecodedId> d = decode_id(*layout, *id);
  if (!d.ok()) return fail(d.status());
  if (args.json) {
    print_json(decoded_json(*d, *layout));
  } else {
    print_decoded(*d, *layout);
  }
  return kExitOk;
}

}  // namespace

Verb add_decode(CLI::App& app) {
  auto args = std::make_shared<DecodeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "decode", "Show the fields, time, node and encodings of an ID (expired layouts too)");
  cmd->add_option("id", args->id,
                  "The ID, in the encoding given by --format (without it: decimal, or a UUIDv7 or "
                  "ULID recognised by its shape)")
      ->type_name("ID")
      ->required();
  cmd->add_option("--layout", args->layout, "Layout text or preset name the ID was issued with")
      ->type_name("LAYOUT")
      ->capture_default_str();
  CLI::Option* format = cmd->add_option("--format", args->format,
                                        "Encoding of the ID argument: " + id_encoding_names())
                            ->type_name("FORMAT")
                            ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object (the ID as a decimal string)");
  return {cmd, [args, format] {
            args->format_given = format->count() > 0;
            return run_decode(*args);
          }};
}

}  // namespace flurry::cli

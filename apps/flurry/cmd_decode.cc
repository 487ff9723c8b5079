// flurry decode: take an ID apart with a layout. Works for expired layouts too.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "common.h"
#include "flurry/codec.h"
#include "flurry/decoded_id.h"
#include "flurry/layout.h"
#include "flurry/timefmt.h"
#include "verbs.h"

namespace flurry::cli {
namespace {

struct DecodeArgs {
  std::string id;
  std::string layout = "flurry";
  std::string format = "dec";
  bool json = false;
};

void print_text(const DecodedId& d, const Layout& layout) {
  std::size_t width = 0;
  std::size_t value_width = 0;
  for (const DecodedField& f : d.fields) {
    width = std::max(width, f.name.size());
    value_width = std::max(value_width, std::to_string(f.value).size());
  }
  const auto pad = [](const std::string& s, std::size_t w) {
    return s + std::string(w > s.size() ? w - s.size() : 0, ' ');
  };

  std::ostream& out = std::cout;
  out << "id         " << d.id << '\n';
  out << "layout     " << layout.to_string() << '\n';
  out << "fields\n";
  for (const DecodedField& f : d.fields) {
    out << "  " << pad(f.name, width) << "  " << pad(std::to_string(f.value), value_width) << "  ("
        << f.bits << (f.bits == 1 ? " bit" : " bits") << ")\n";
  }
  out << "time       " << format_time(d.time) << '\n';
  out << "unix_ms    " << d.unix_ms << '\n';
  out << "ticks      " << d.parts.ticks << '\n';
  out << "node       " << d.parts.node << '\n';
  out << "seq        " << d.parts.seq << '\n';
  if (d.has_clock) out << "clock      " << d.parts.clock << '\n';
  out << "encodings\n";
  for (const EncodedId& e : d.encodings) {
    out << "  " << pad(std::string(e.name), 6) << "  " << e.text << '\n';
  }
}

void print_json(const DecodedId& d, const Layout& layout) {
  nlohmann::ordered_json j;
  j["id"] = encode_id(d.id, Encoding::kDecimal);
  j["layout"] = layout.to_string();
  j["time"] = format_time(d.time);
  j["unix_ms"] = d.unix_ms;
  j["ticks"] = d.parts.ticks;
  j["node"] = d.parts.node;
  j["seq"] = d.parts.seq;
  if (d.has_clock) j["clock"] = d.parts.clock;
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  for (const DecodedField& f : d.fields) fields[f.name] = f.value;
  j["fields"] = std::move(fields);
  nlohmann::ordered_json encodings = nlohmann::ordered_json::object();
  for (const EncodedId& e : d.encodings) encodings[std::string(e.name)] = e.text;
  j["encodings"] = std::move(encodings);
  // Field names come from outside: never let odd bytes turn into an exception.
  std::cout << j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
}

int run_decode(const DecodeArgs& args) {
  const Encoding encoding = parse_format(args.format);

  Result<Layout> layout = Layout::parse(args.layout);
  if (!layout.ok()) return fail(layout.status());
  // No check_alive(): IDs of an expired layout must still decode.
  Result<DecodedId> d = decode_id(*layout, args.id, encoding);
  if (!d.ok()) return fail(d.status());
  if (args.json) {
    print_json(*d, *layout);
  } else {
    print_text(*d, *layout);
  }
  return kExitOk;
}

}  // namespace

Verb add_decode(CLI::App& app) {
  auto args = std::make_shared<DecodeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "decode", "Show the fields, time, node and encodings of an ID (expired layouts too)");
  cmd->add_option("id", args->id, "The ID, in the encoding given by --format")
      ->type_name("ID")
      ->required();
  cmd->add_option("--layout", args->layout, "Layout text or preset name the ID was issued with")
      ->type_name("LAYOUT")
      ->capture_default_str();
  cmd->add_option("--format", args->format, "Encoding of the ID argument: " + encoding_names())
      ->type_name("FORMAT")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object (the ID as a decimal string)");
  return {cmd, [args] { return run_decode(*args); }};
}

}  // namespace flurry::cli

// flurry decode: take an ID apart with a layout. Works for expired layouts too.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "flurry/codec.h"
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

constexpr std::array<Encoding, 4> kEncodings = {Encoding::kDecimal, Encoding::kHex,
                                                Encoding::kBase32, Encoding::kBase62};

void print_text(std::uint64_t id, const Layout& layout, const IdParts& parts, TimePoint time,
                std::int64_t unix_ms) {
  std::vector<std::pair<std::string, std::string>> fields;
  std::size_t width = 0;
  for (const Field& f : layout.fields()) {
    fields.emplace_back(f.name, std::to_string(layout.field_value(id, f)));
    width = std::max(width, f.name.size());
  }
  const auto pad = [](const std::string& s, std::size_t w) {
    return s + std::string(w > s.size() ? w - s.size() : 0, ' ');
  };
  std::size_t value_width = 0;
  for (const auto& [name, value] : fields) value_width = std::max(value_width, value.size());

  std::ostream& out = std::cout;
  out << "id         " << id << '\n';
  out << "layout     " << layout.to_string() << '\n';
  out << "fields\n";
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const Field& f = layout.fields()[i];
    out << "  " << pad(fields[i].first, width) << "  " << pad(fields[i].second, value_width)
        << "  (" << f.bits << (f.bits == 1 ? " bit" : " bits") << ")\n";
  }
  out << "time       " << format_time(time) << '\n';
  out << "unix_ms    " << unix_ms << '\n';
  out << "ticks      " << parts.ticks << '\n';
  out << "node       " << parts.node << '\n';
  out << "seq        " << parts.seq << '\n';
  if (layout.clock_field() != nullptr) out << "clock      " << parts.clock << '\n';
  out << "encodings\n";
  for (Encoding e : kEncodings) {
    const std::string name(to_string(e));
    out << "  " << pad(name, 6) << "  " << encode_id(id, e) << '\n';
  }
}

void print_json(std::uint64_t id, const Layout& layout, const IdParts& parts, TimePoint time,
                std::int64_t unix_ms) {
  nlohmann::ordered_json j;
  j["id"] = encode_id(id, Encoding::kDecimal);
  j["layout"] = layout.to_string();
  j["time"] = format_time(time);
  j["unix_ms"] = unix_ms;
  j["ticks"] = parts.ticks;
  j["node"] = parts.node;
  j["seq"] = parts.seq;
  if (layout.clock_field() != nullptr) j["clock"] = parts.clock;
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  for (const Field& f : layout.fields()) fields[f.name] = layout.field_value(id, f);
  j["fields"] = std::move(fields);
  nlohmann::ordered_json encodings = nlohmann::ordered_json::object();
  for (Encoding e : kEncodings) encodings[std::string(to_string(e))] = encode_id(id, e);
  j["encodings"] = std::move(encodings);
  // Field names come from outside: never let odd bytes turn into an exception.
  std::cout << j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
}

int run_decode(const DecodeArgs& args) {
  const Encoding encoding = parse_format(args.format);

  Result<Layout> layout = Layout::parse(args.layout);
  if (!layout.ok()) return fail(layout.status());
  Result<std::uint64_t> id = decode_id(args.id, encoding);
  if (!id.ok()) return fail(id.status());
  // No check_alive(): IDs of an expired layout must still decode.
  Result<IdParts> parts = layout->decompose(*id);
  if (!parts.ok()) return fail(parts.status());

  const TimePoint time = layout->time_of(parts->ticks);
  const std::int64_t unix_ms =
      std::chrono::floor<std::chrono::milliseconds>(time).time_since_epoch().count();
  if (args.json) {
    print_json(*id, *layout, *parts, time, unix_ms);
  } else {
    print_text(*id, *layout, *parts, time, unix_ms);
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
  cmd->add_option("--format", args->format,
                  "Encoding of the ID argument: dec, hex, base32 or base62")
      ->type_name("FORMAT")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object (the ID as a decimal string)");
  return {cmd, [args] { return run_decode(*args); }};
}

}  // namespace flurry::cli

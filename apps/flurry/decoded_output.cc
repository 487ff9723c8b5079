#include "decoded_output.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <utility>

#include "flurry/codec.h"
#include "flurry/timefmt.h"

namespace flurry::cli {

void print_decoded(const DecodedId& d, const Layout& layout) {
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

nlohmann::ordered_json decoded_json(const DecodedId& d, const Layout& layout) {
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
  return j;
}

void print_json(const nlohmann::ordered_json& j) {
  // Field names come from outside: never let odd bytes turn into an exception.
  std::cout << j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
}

}  // namespace flurry::cli

#include "segment_body.h"

#include <array>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "core/quote.h"

namespace flurry::http {
namespace {

using internal::quote;
using nlohmann::json;

constexpr std::array<std::string_view, 7> kFields = {"tag",   "start",     "step",  "description",
                                                     "delta", "remainder", "strict"};

std::string field_list() {
  std::string out;
  for (std::size_t i = 0; i < kFields.size(); ++i) {
    out += i == 0 ? "" : i + 1 == kFields.size() ? " and " : ", ";
    out += kFields[i];
  }
  return out;
}

std::string_view type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a fractional or very large number";
    default:
      return "something else";
  }
}

Status wrong_type(std::string_view field, std::string_view expected, const json& v) {
  return InvalidArgument("field \"" + std::string(field) + "\" must be " + std::string(expected) +
                         ", not " + std::string(type_name(v)));
}

Result<std::uint64_t> whole_number(std::string_view field, const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer()) {
    return InvalidArgument("field \"" + std::string(field) + "\" must not be negative, got " +
                           std::to_string(v.get<std::int64_t>()));
  }
  return wrong_type(field, "a whole number from 0 to 18446744073709551615", v);
}

Result<std::string> text(std::string_view field, const json& v) {
  if (!v.is_string()) return wrong_type(field, "a string", v);
  return v.get<std::string>();
}

}  // namespace

Result<SegmentTagSpec> parse_segment_tag_body(std::string_view body) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  std::size_t first = 0;
  while (first < body.size() && blank(body[first])) ++first;
  if (first == body.size()) {
    return InvalidArgument(
        "the request body is empty; expected a JSON object such as "
        "{\"tag\":\"orders\",\"start\":1,\"step\":1000}");
  }
  // Repeated fields are refused: with two "step"s, which one the client meant is a guess.
  std::string repeated;
  std::array<bool, kFields.size()> seen{};
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event,
                                                json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      for (std::size_t i = 0; i < kFields.size(); ++i) {
        if (kFields[i] != key) continue;
        if (seen[i] && repeated.empty()) repeated = key;
        seen[i] = true;
      }
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(body.begin(), body.end(), note_keys);
  } catch (const json::parse_error& e) {
    return InvalidArgument("the request body is not valid JSON (at byte " +
                           std::to_string(e.byte > 0 ? e.byte - 1 : 0) + ")");
  } catch (const json::exception&) {
    // out_of_range: a number too large even for a double (1e999).
    return InvalidArgument("the request body holds a number too large to read");
  }
  if (!doc.is_object()) {
    return InvalidArgument("the request body must be a JSON object, not " +
                           std::string(type_name(doc)));
  }
  if (!repeated.empty()) return InvalidArgument("field \"" + repeated + "\" is given twice");
  SegmentTagSpec spec;
  bool has_tag = false;
  for (const auto& [key, value] : doc.items()) {
    if (key == "tag") {
      Result<std::string> t = text(key, value);
      if (!t.ok()) return t.status();
      spec.tag = std::move(t).value();
      has_tag = true;
    } else if (key == "description") {
      Result<std::string> t = text(key, value);
      if (!t.ok()) return t.status();
      spec.description = std::move(t).value();
    } else if (key == "strict") {
      if (!value.is_boolean()) return wrong_type(key, "true or false", value);
      spec.strict = value.get<bool>();
    } else if (key == "start" || key == "step" || key == "delta" || key == "remainder") {
      Result<std::uint64_t> n = whole_number(key, value);
      if (!n.ok()) return n.status();
      (key == "start"   ? spec.start
       : key == "step"  ? spec.step
       : key == "delta" ? spec.delta
                        : spec.remainder) = *n;
    } else {
      return InvalidArgument("unknown field " + quote(key) + "; the body takes " + field_list());
    }
  }
  if (!has_tag) return InvalidArgument("field \"tag\" is missing");
  return spec;
}

}  // namespace flurry::http

#include "order_decode.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "core/quote.h"

namespace flurry::client_internal {

using json = nlohmann::json;

namespace {

void percent_encode(std::string_view text, std::string& out) {
  constexpr char kHex[] = "0123456789ABCDEF";
  for (char c : text) {
    const bool plain = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                       c == '-' || c == '_' || c == '.' || c == '~';
    if (plain) {
      out += c;
    } else {
      const auto byte = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
}

// A text member, or none.
std::optional<std::string> text_of(const json& doc, const char* key) {
  if (!doc.contains(key) || !doc[key].is_string()) return std::nullopt;
  return doc[key].get<std::string>();
}

}  // namespace

std::string order_decode_target(std::string_view code, const std::optional<std::string>& tag) {
  std::string target = "/v1/order-numbers/";
  percent_encode(code, target);
  if (tag) {
    target += "?tag=";
    percent_encode(*tag, target);
  }
  return target;
}

Result<DecodedOrder> parse_decoded_order(std::string_view body) {
  const auto unfit = [&](std::string_view why) {
    return Status(StatusCode::kUnknown,
                  "GET /v1/order-numbers: " + std::string(why) + ": " + internal::quote(body, 200));
  };
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return unfit("the answer is not a JSON object");
  DecodedOrder out;
  const std::optional<std::string> id = text_of(doc, "id");
  if (!id || id->empty()) return unfit("no \"id\" of decimal text");
  const auto [end, ec] = std::from_chars(id->data(), id->data() + id->size(), out.id);
  if (ec != std::errc() || end != id->data() + id->size()) {
    return unfit("\"id\" is not decimal text below 2^64");
  }
  const std::optional<std::string> source = text_of(doc, "source");
  if (source == "snowflake") {
    out.source = DecodedOrder::Source::kSnowflake;
  } else if (source == "segment") {
    out.source = DecodedOrder::Source::kSegment;
    out.tag = text_of(doc, "tag");
    if (!out.tag) return unfit("a segment number without its \"tag\"");
  } else {
    return unfit("\"source\" is neither \"snowflake\" nor \"segment\"");
  }
  out.order_number = text_of(doc, "order_number").value_or("");
  out.key_version = text_of(doc, "key_version").value_or("");
  return out;
}

}  // namespace flurry::client_internal

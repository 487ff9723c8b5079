#include "query.h"

#include <cassert>

#include "core/percent.h"
#include "text.h"

namespace flurry::http {
namespace {

bool needs_decoding(std::string_view s) noexcept {
  return s.find_first_of("%+") != std::string_view::npos;
}

// "a", "a and b", "a, b and c".
std::string list_names(std::span<const std::string_view> names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

Status unknown_parameter(std::string_view key, std::string_view route,
                         std::span<const std::string_view> allowed) {
  if (allowed.empty()) {
    return InvalidArgument("unknown parameter " + quote(key) + " (" + std::string(route) +
                           " takes no parameters)");
  }
  return InvalidArgument("unknown parameter " + quote(key) + " (" + std::string(route) + " takes " +
                         list_names(allowed) + ")");
}

}  // namespace

Status parse_query(std::string_view query, std::string_view route,
                   std::span<const std::string_view> allowed, QueryParams& params,
                   QueryScratch& scratch) {
  assert(allowed.size() <= kMaxQueryParams);
  if (allowed.size() > kMaxQueryParams) allowed = allowed.first(kMaxQueryParams);
  std::size_t pos = 0;
  while (pos <= query.size()) {
    std::size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    const std::string_view part = query.substr(pos, amp - pos);
    pos = amp + 1;
    if (part.empty()) continue;
    const std::size_t eq = part.find('=');
    const std::string_view raw_key = part.substr(0, eq);
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    std::string_view key = raw_key;
    if (needs_decoding(raw_key)) {
      if (!internal::percent_decode(raw_key, scratch.key, internal::PlusSign::kSpace).ok()) {
        return InvalidArgument("bad percent-encoding in the query string: " + quote(raw_key));
      }
      key = scratch.key;
    }
    std::size_t index = allowed.size();
    for (std::size_t i = 0; i < allowed.size(); ++i) {
      if (allowed[i] == key) {
        index = i;
        break;
      }
    }
    if (index == allowed.size()) return unknown_parameter(key, route, allowed);
    if (params.present[index]) {
      return InvalidArgument("parameter " + quote(key) + " is given more than once");
    }
    params.present[index] = true;
    if (needs_decoding(raw_value)) {
      if (!internal::percent_decode(raw_value, scratch.values[index], internal::PlusSign::kSpace)
               .ok()) {
        return InvalidArgument("parameter " + quote(key) + ": bad percent-encoding in " +
                               quote(raw_value));
      }
      params.value[index] = scratch.values[index];
    } else {
      params.value[index] = raw_value;
    }
  }
  return OkStatus();
}

Result<std::string_view> path_segment(std::string_view raw, QueryScratch& scratch) {
  if (raw.find('%') == std::string_view::npos) return raw;
  if (!internal::percent_decode(raw, scratch.path, internal::PlusSign::kPlus).ok()) {
    return InvalidArgument("bad percent-encoding in the path: " + quote(raw));
  }
  return std::string_view(scratch.path);
}

}  // namespace flurry::http

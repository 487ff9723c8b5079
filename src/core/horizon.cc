#include "flurry/horizon.h"

#include <limits>
#include <vector>

#include "core/durable_file.h"
#include "core/numbers.h"

namespace flurry {
namespace {

constexpr std::string_view kMagic = "flurry-horizon 1";
constexpr std::size_t kMaxFileSize = 64 * 1024;

Status corrupt(std::string what) {
  return Status(Reason::kCorrupt, "horizon record is corrupt: " + std::move(what));
}

// A decimal unsigned integer that fills `s`.
bool parse_number(std::string_view s, std::uint64_t& out) {
  const internal::ParsedUint n = internal::parse_uint(s);
  out = n.value;
  return n.ok();
}

// A horizon: -1 (never used) or a tick count up to 2^63 - 1.
bool parse_horizon(std::string_view s, std::int64_t& out) {
  if (s == "-1") {
    out = -1;
    return true;
  }
  const internal::ParsedUint n = internal::parse_uint(s, std::numeric_limits<std::int64_t>::max());
  out = static_cast<std::int64_t>(n.value);
  return n.ok();
}

}  // namespace

std::string format_horizon_record(const HorizonRecord& record) {
  std::string body;
  body += kMagic;
  body += "\nlayout " + record.layout;
  body += "\nnode " + std::to_string(record.node);
  body += "\ngeneration " + std::to_string(record.generation);
  body += "\nhorizons";
  for (std::int64_t h : record.horizons) {
    body += ' ';
    body += std::to_string(h);
  }
  body += "\n";
  return body + "check " + std::to_string(internal::fnv1a64(body)) + "\n";
}

Result<HorizonRecord> parse_horizon_record(std::string_view text) {
  const std::size_t check_pos = text.rfind("check ");
  if (check_pos == std::string_view::npos || (check_pos != 0 && text[check_pos - 1] != '\n')) {
    return corrupt("no check line (the file may be truncated)");
  }
  const std::string_view body = text.substr(0, check_pos);
  std::string_view check_line = text.substr(check_pos + 6);
  if (check_line.empty() || check_line.back() != '\n') return corrupt("check line is truncated");
  check_line.remove_suffix(1);
  std::uint64_t expected = 0;
  if (!parse_number(check_line, expected) || expected != internal::fnv1a64(body)) {
    return corrupt("checksum does not match the content");
  }

  // The body is exactly five lines in a fixed order; anything else is rejected.
  std::vector<std::string_view> lines;
  for (std::string_view rest = body; !rest.empty();) {
    const std::size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) return corrupt("the last line is not terminated");
    lines.push_back(rest.substr(0, nl));
    rest.remove_prefix(nl + 1);
  }
  constexpr std::string_view kKeys[] = {"layout ", "node ", "generation ", "horizons "};
  if (lines.size() != 5) {
    return corrupt("expected 5 lines before the check line, found " + std::to_string(lines.size()));
  }
  if (lines[0] != kMagic) return corrupt("line 1 is not \"" + std::string(kMagic) + "\"");
  std::string_view values[4];
  for (std::size_t i = 0; i < 4; ++i) {
    if (!lines[i + 1].starts_with(kKeys[i])) {
      return corrupt("line " + std::to_string(i + 2) + " should start with \"" +
                     std::string(kKeys[i]) + "\"");
    }
    values[i] = lines[i + 1].substr(kKeys[i].size());
  }
  HorizonRecord record;
  record.layout = std::string(values[0]);
  if (record.layout.empty()) return corrupt("line 2 has an empty layout");
  if (!parse_number(values[1], record.node)) return corrupt("line 3 has a bad node number");
  if (!parse_number(values[2], record.generation)) {
    return corrupt("line 4 has a bad generation number");
  }
  for (std::string_view r = values[3];;) {
    const std::size_t sp = r.find(' ');
    std::int64_t h = 0;
    if (!parse_horizon(r.substr(0, sp), h)) return corrupt("line 5 has a bad horizon");
    record.horizons.push_back(h);
    if (sp == std::string_view::npos) break;
    r.remove_prefix(sp + 1);
  }
  if (record.generation >= record.horizons.size()) {
    return corrupt("generation " + std::to_string(record.generation) + " has no horizon");
  }
  // Leading zeros, signs and the like parse but are not what format_horizon_record writes.
  if (format_horizon_record(record) != text) return corrupt("the text is not in canonical form");
  return record;
}

FileHorizonStore::FileHorizonStore(std::filesystem::path file) : file_(std::move(file)) {}

std::filesystem::path FileHorizonStore::path_for(const std::filesystem::path& state_dir,
                                                 std::uint64_t node) {
  return state_dir / ("horizon-node-" + std::to_string(node) + ".state");
}

Result<HorizonRecord> FileHorizonStore::load() {
  Result<std::string> text = internal::read_small_file(file_, kMaxFileSize);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return Status(StatusCode::kNotFound, "no horizon file " + file_.string());
    }
    return text.status();
  }
  Result<HorizonRecord> record = parse_horizon_record(*text);
  if (!record.ok()) return record.status().with_prefix(file_.string());
  return record;
}

Status FileHorizonStore::save(const HorizonRecord& record) {
  return internal::write_file_durably(file_, format_horizon_record(record));
}

}  // namespace flurry

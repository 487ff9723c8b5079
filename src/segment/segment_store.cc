// Segment stores: tag names and specs, where a store lives (parsing and printing the locations
// operators write), and opening one. The backends are sqlite_segment_store.cc and
// postgres_segment_store.cc.
#include "flurry/segment_store.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/durable_file.h"
#include "core/quote.h"
#include "core/utf8.h"
#include "db/postgres_conninfo.h"
#include "stores.h"

namespace flurry {
namespace {

constexpr std::size_t kMaxTagBytes = 128;
constexpr std::size_t kMaxDescriptionBytes = 256;
constexpr std::uint64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::string_view kTagAlphabet = "A-Z, a-z, 0-9, '.', '_' and '-'";
constexpr std::string_view kLocationForms =
    "expected sqlite, sqlite:PATH, a postgresql:// or postgres:// URL, or PostgreSQL key=value "
    "pairs (host=... dbname=...)";

bool is_tag_byte(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

using internal::invalid_utf8_at;

bool is_postgres_url(std::string_view text) {
  return text.starts_with("postgresql://") || text.starts_with("postgres://");
}

// A keyword of a key=value connection string at the start of `text` ("host=", "dbname =").
bool starts_with_keyword(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && ((text[i] >= 'a' && text[i] <= 'z') || text[i] == '_')) ++i;
  if (i == 0) return false;
  while (i < text.size() && is_blank(text[i])) ++i;
  return i < text.size() && text[i] == '=';
}

// A URL's scheme at the start of `text` ("mysql://"): a location of its own, if not a known one.
bool starts_with_scheme(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() &&
         ((text[i] >= 'a' && text[i] <= 'z') || (text[i] >= 'A' && text[i] <= 'Z') ||
          (i > 0 && ((text[i] >= '0' && text[i] <= '9') || text[i] == '+' || text[i] == '.' ||
                     text[i] == '-')))) {
    ++i;
  }
  return i > 0 && text.substr(i).starts_with("://");
}

// True when `piece` (trimmed) begins a store location of its own. Other pieces after a comma
// continue the location before them: libpq's own lists ("postgresql://h1,h2/ids", "host=h1,h2
// port=5432,5433"), or a comma inside a file name.
bool starts_location(std::string_view piece) {
  return piece == "sqlite" || piece.starts_with("sqlite:") || starts_with_scheme(piece) ||
         starts_with_keyword(piece);
}

// What a location refuses to show of itself: a URL's scheme only (its other parts may hold a
// password), nothing of a text with an '@' (user:password@host), the rest quoted.
std::string shown(std::string_view text) {
  if (const std::size_t scheme = text.find("://"); scheme != std::string_view::npos) {
    return "a " + internal::quote(text.substr(0, scheme)) + ":// URL";
  }
  if (text.find('@') != std::string_view::npos) return "the location given";
  return internal::quote(text);
}

// The same store, however written: the file's path made absolute and normal, or the connection
// string's settings as libpq reads them (so a URL and key=value pairs naming one database match).
std::string identity(const SegmentStoreSpec& spec) {
  if (spec.kind == SegmentStoreSpec::Kind::kSqlite) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::weakly_canonical(spec.sqlite_path, ec);
    if (ec) p = std::filesystem::absolute(spec.sqlite_path, ec).lexically_normal();
    if (ec) p = spec.sqlite_path.lexically_normal();
    return "sqlite:" + p.string();
  }
  if (spec.parsed_postgres_url == nullptr) return "postgres:" + spec.postgres_url;
  std::vector<std::string> settings;
  for (const auto& [key, value] : spec.parsed_postgres_url->settings()) {
    settings.push_back(key + "=" + value);
  }
  std::sort(settings.begin(), settings.end());
  std::string out = "postgres:";
  for (const std::string& s : settings) out += s + '\0';
  return out;
}

// The tag rule (SegmentTag's doc): the one place it is checked, for SegmentTag::of and for the
// tag of a spec (check_segment_tag_spec).
Status check_tag_name(std::string_view tag) {
  if (tag.empty()) {
    return InvalidArgument("segment tag: empty; a tag is 1 to 128 bytes of " +
                           std::string(kTagAlphabet));
  }
  if (tag.size() > kMaxTagBytes) {
    return InvalidArgument("segment tag " + internal::quote(tag) + ": " +
                           std::to_string(tag.size()) + " bytes long; at most " +
                           std::to_string(kMaxTagBytes));
  }
  if (tag == "." || tag == "..") {
    // They name directories in paths and URLs (/v1/segments/.. is /v1), never a tag.
    return InvalidArgument("segment tag " + internal::quote(tag) +
                           ": \".\" and \"..\" are not tag names (they name directories in "
                           "paths and URLs)");
  }
  for (std::size_t i = 0; i < tag.size(); ++i) {
    if (!is_tag_byte(tag[i])) {
      return InvalidArgument("segment tag " + internal::quote(tag) + ": byte " +
                             std::to_string(i + 1) + " is " + internal::quote_char(tag[i]) +
                             ", not one of " + std::string(kTagAlphabet));
    }
  }
  return OkStatus();
}

}  // namespace

Result<SegmentTag> SegmentTag::of(std::string_view name) {
  if (Status st = check_tag_name(name); !st.ok()) return st;
  return SegmentTag(std::string(name));
}

Result<SegmentTag> SegmentTag::of(std::string_view name, std::string_view where) {
  if (Status st = check_tag_name(name); !st.ok()) {
    return InvalidArgument(std::string(where) + " is not a valid tag name: " + st.message());
  }
  return SegmentTag(std::string(name));
}

Status internal::check_allocation_step(std::uint64_t step) {
  if (step < 1 || step > kMaxSegmentStep) {
    return InvalidArgument("step: " + std::to_string(step) + " is out of range (1 to " +
                           std::to_string(kMaxSegmentStep) + ")");
  }
  return OkStatus();
}

Status check_segment_tag_spec(const SegmentTagSpec& spec) {
  if (Status st = check_tag_name(spec.tag); !st.ok()) return st;
  if (spec.step < 1 || spec.step > kMaxSegmentStep) {
    return InvalidArgument("step: " + std::to_string(spec.step) + " is out of range (1 to " +
                           std::to_string(kMaxSegmentStep) + ")");
  }
  if (spec.delta < 1 || spec.delta > kMaxSegmentDelta) {
    return InvalidArgument("delta: " + std::to_string(spec.delta) + " is out of range (1 to " +
                           std::to_string(kMaxSegmentDelta) + ")");
  }
  if (spec.remainder >= spec.delta) {
    return InvalidArgument("remainder: " + std::to_string(spec.remainder) +
                           " must be below delta (" + std::to_string(spec.delta) + ")");
  }
  if (spec.start > kInt64Max - spec.step) {
    return InvalidArgument("start: " + std::to_string(spec.start) + " + step " +
                           std::to_string(spec.step) + " passes 2^63 - 1 (" +
                           std::to_string(kInt64Max) + ")");
  }
  if (spec.description.size() > kMaxDescriptionBytes) {
    return InvalidArgument("description: " + std::to_string(spec.description.size()) +
                           " bytes long; at most " + std::to_string(kMaxDescriptionBytes));
  }
  if (spec.description.find('\0') != std::string::npos) {
    return InvalidArgument("description: contains a NUL byte");
  }
  if (const std::size_t at = invalid_utf8_at(spec.description); at != std::string::npos) {
    return InvalidArgument("description: not UTF-8 (byte " + std::to_string(at + 1) + ")");
  }
  return OkStatus();
}

Status internal::check_stored_segment_row(std::string_view where, std::string_view tag,
                                          std::int64_t max_id, std::int64_t step,
                                          std::int64_t delta, std::int64_t remainder) {
  const auto corrupt = [&](std::string why) {
    return Status(Reason::kCorrupt, "segment tag " + internal::quote(tag) + " in " +
                                        std::string(where) + ": " + std::move(why));
  };
  if (max_id < 0) return corrupt("max_id " + std::to_string(max_id) + " is negative");
  if (step < 1 || static_cast<std::uint64_t>(step) > kMaxSegmentStep) {
    return corrupt("step " + std::to_string(step) + " is out of range (1 to " +
                   std::to_string(kMaxSegmentStep) + ")");
  }
  if (delta < 1 || static_cast<std::uint64_t>(delta) > kMaxSegmentDelta) {
    return corrupt("delta " + std::to_string(delta) + " is out of range (1 to " +
                   std::to_string(kMaxSegmentDelta) + ")");
  }
  if (remainder < 0 || remainder >= delta) {
    return corrupt("remainder " + std::to_string(remainder) + " is not in 0 to delta - 1 (" +
                   std::to_string(delta - 1) + ")");
  }
  return OkStatus();
}

Status internal::explain_refused_allocation(std::string_view where, std::string_view tag,
                                            const SegmentTagInfo& row, std::uint64_t floor,
                                            std::uint64_t asked) {
  if (row.max_id < floor) return segment_store_regressed(where, tag, row.max_id, floor);
  const auto max_id = static_cast<std::int64_t>(row.max_id);
  if (Status st = check_stored_segment_row(where, tag, max_id, static_cast<std::int64_t>(row.step),
                                           static_cast<std::int64_t>(row.delta),
                                           static_cast<std::int64_t>(row.remainder));
      !st.ok()) {
    return st;
  }
  if (static_cast<std::uint64_t>(max_id) > kInt64Max - asked) {
    return Status(StatusCode::kOutOfRange,
                  "segment tag " + internal::quote(tag) + " in " + std::string(where) +
                      " has run out: max_id " + std::to_string(max_id) + " + step " +
                      std::to_string(asked) + " would pass 2^63 - 1 (" + std::to_string(kInt64Max) +
                      "); nothing was allocated");
  }
  return OkStatus();
}

Status internal::segment_store_regressed(std::string_view where, std::string_view tag,
                                         std::uint64_t max_id, std::uint64_t floor) {
  return Status(
      Reason::kStoreRegressed,
      "segment store " + std::string(where) + " went backwards: tag " + internal::quote(tag) +
          " has max_id " + std::to_string(max_id) + ", below " + std::to_string(floor) +
          ", the end of the last range it gave this host; nothing was allocated. "
          "Repair the store (set max_id to at least " +
          std::to_string(floor) + "); this node serves the tag again at its next attempt");
}

Status internal::segment_tag_not_found(std::string_view where, std::string_view tag) {
  return Status(StatusCode::kNotFound,
                "no segment tag " + internal::quote(tag) + " in " + std::string(where));
}

Status internal::segment_tag_exists(std::string_view where, std::string_view tag) {
  return Status(StatusCode::kAlreadyExists,
                "segment tag " + internal::quote(tag) + " already exists in " + std::string(where));
}

Result<SegmentStoreSpec> parse_segment_store(std::string_view text,
                                             const std::filesystem::path& data_dir) {
  text = trim(text);
  if (text.empty()) return InvalidArgument("segment store: empty; " + std::string(kLocationForms));
  if (text.find('\0') != std::string_view::npos) {
    return InvalidArgument("segment store: contains a NUL byte");
  }
  SegmentStoreSpec spec;
  if (text == "sqlite") {
    spec.kind = SegmentStoreSpec::Kind::kSqlite;
    spec.sqlite_path = data_dir / "segments.db";
    spec.in_data_dir = true;
    return spec;
  }
  if (text.starts_with("sqlite:")) {
    const std::string_view path = text.substr(7);
    if (path.empty()) {
      return InvalidArgument("segment store \"sqlite:\": no file after \"sqlite:\"");
    }
    if (path == ":memory:" || path.starts_with("file:")) {
      return InvalidArgument("segment store " + internal::quote(text) +
                             ": an SQLite store is a file path, not an in-memory database or a "
                             "file: URI");
    }
    if (std::filesystem::path(path).filename().empty()) {
      return InvalidArgument("segment store " + internal::quote(text) +
                             ": names a directory, not a file");
    }
    spec.kind = SegmentStoreSpec::Kind::kSqlite;
    spec.sqlite_path = std::filesystem::path(path);
    return spec;
  }
  if (is_postgres_url(text) || text.find('=') != std::string_view::npos) {
    Result<internal::PostgresUrl> parsed = internal::PostgresUrl::parse(text);
    if (!parsed.ok()) {
      // Only libpq's reason, which PostgresUrl::parse scrubbed: a malformed string may hide its
      // password from redact_postgres_url.
      return parsed.status().with_prefix("segment store");
    }
    spec.kind = SegmentStoreSpec::Kind::kPostgres;
    spec.postgres_url = std::string(text);
    spec.parsed_postgres_url =
        std::make_shared<const internal::PostgresUrl>(std::move(parsed).value());
    return spec;
  }
  return InvalidArgument("segment store " + shown(text) + ": unknown kind; " +
                         std::string(kLocationForms));
}

namespace {

// Splits a store list at the commas that start another location (starts_location): [begin, end)
// of each; an empty entry (two commas in a row, one at an end) is an empty span of its own.
std::vector<std::pair<std::size_t, std::size_t>> location_spans(std::string_view text) {
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? text.size() : comma;
    const std::string_view piece = trim(text.substr(start, end - start));
    if (piece.empty()) {
      spans.emplace_back(start, start);
    } else if (spans.empty() || spans.back().first == spans.back().second ||
               starts_location(piece)) {
      spans.emplace_back(start, end);
    } else {
      spans.back().second = end;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return spans;
}

// INVALID_ARGUMENT when `id` (the identity of `spec`, the next entry) is among the identities
// of the entries before it.
Status check_not_listed(const std::vector<std::string>& identities, const std::string& id,
                        const SegmentStoreSpec& spec) {
  for (std::size_t j = 0; j < identities.size(); ++j) {
    if (identities[j] == id) {
      return InvalidArgument("segment stores: entries " + std::to_string(j + 1) + " and " +
                             std::to_string(identities.size() + 1) + " are the same store (" +
                             to_string(spec) + ")");
    }
  }
  return OkStatus();
}

}  // namespace

std::string redact_segment_stores(std::string_view text) {
  std::string out;
  std::size_t copied = 0;
  for (const auto& [begin, end] : location_spans(text)) {
    const std::string_view entry = text.substr(begin, end - begin);
    const std::string_view location = trim(entry);
    const std::size_t lead = location.empty() ? 0 : location.data() - entry.data();
    out.append(text.substr(copied, begin + lead - copied));
    out += internal::redact_postgres_url(location);
    copied = begin + lead + location.size();
  }
  out.append(text.substr(copied));
  return out;
}

Result<std::vector<SegmentStoreSpec>> parse_segment_stores(std::string_view text,
                                                           const std::filesystem::path& data_dir) {
  if (trim(text).empty()) {
    return InvalidArgument("segment stores: empty; at least one store is needed (" +
                           std::string(kLocationForms) + ")");
  }
  std::vector<std::string_view> locations;
  for (const auto& [begin, end] : location_spans(text)) {
    if (begin == end) {
      return InvalidArgument("segment stores: entry " + std::to_string(locations.size() + 1) +
                             " is empty (two commas in a row, or one at an end)");
    }
    locations.push_back(text.substr(begin, end - begin));
  }
  std::vector<SegmentStoreSpec> specs;
  std::vector<std::string> identities;
  for (std::size_t i = 0; i < locations.size(); ++i) {
    Result<SegmentStoreSpec> spec = parse_segment_store(locations[i], data_dir);
    if (!spec.ok()) {
      return spec.status().with_prefix("segment stores: entry " + std::to_string(i + 1));
    }
    std::string id = identity(*spec);
    if (Status st = check_not_listed(identities, id, *spec); !st.ok()) return st;
    identities.push_back(std::move(id));
    specs.push_back(std::move(spec).value());
  }
  return specs;
}

Status place_segment_stores(std::vector<SegmentStoreSpec>& specs,
                            const std::filesystem::path& data_dir) {
  std::vector<std::string> identities;
  for (SegmentStoreSpec& spec : specs) {
    if (spec.in_data_dir) spec.sqlite_path = data_dir / "segments.db";
    std::string id = identity(spec);
    if (Status st = check_not_listed(identities, id, spec); !st.ok()) return st;
    identities.push_back(std::move(id));
  }
  return OkStatus();
}

std::string to_string(const SegmentStoreSpec& spec) {
  if (spec.kind == SegmentStoreSpec::Kind::kSqlite) return "sqlite:" + spec.sqlite_path.string();
  if (spec.parsed_postgres_url != nullptr) return spec.parsed_postgres_url->redacted();
  return internal::redact_postgres_url(spec.postgres_url);
}

Result<SegmentStoreIdentity> SegmentStore::identity(Blocking) {
  SegmentStoreIdentity id;
  id.address = describe();
  return id;
}

Result<std::string> internal::new_segment_store_id() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      return internal::io_error("cannot draw a store ID", "getrandom", errno);
    }
  }
  std::string out = "store-id:";
  for (unsigned char b : bytes) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", b);
    out += hex;
  }
  return out;
}

bool internal::is_segment_store_id(std::string_view text) {
  constexpr std::string_view kPrefix = "store-id:";
  if (!text.starts_with(kPrefix) || text.size() != kPrefix.size() + 32) return false;
  return std::all_of(text.begin() + kPrefix.size(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string internal::postgres_store_address(const PostgresUrl& url) {
  std::string host = url.setting("host");
  if (host.empty()) host = url.setting("hostaddr");
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return "postgres-address:host=" + host + ";port=" + url.setting("port") +
         ";dbname=" + url.setting("dbname");
}

Result<std::unique_ptr<SegmentStore>> open_segment_store(const SegmentStoreSpec& spec,
                                                         const SegmentStoreOptions& options) {
  if (options.timeout.count() <= 0) {
    return InvalidArgument("timeout: " + std::to_string(options.timeout.count()) +
                           " ms; a segment store's timeout must be positive");
  }
  switch (spec.kind) {
    case SegmentStoreSpec::Kind::kSqlite:
      if (spec.sqlite_path.empty()) {
        return InvalidArgument("segment store: an SQLite store needs a file path");
      }
      return internal::open_sqlite_segment_store(spec.sqlite_path, options);
    case SegmentStoreSpec::Kind::kPostgres:
      if (spec.parsed_postgres_url != nullptr) {
        return internal::open_postgres_segment_store(*spec.parsed_postgres_url, options);
      }
      {
        // A spec built by hand: its text is parsed here, the edge for it.
        Result<internal::PostgresUrl> parsed = internal::PostgresUrl::parse(spec.postgres_url);
        if (!parsed.ok()) return parsed.status().with_prefix("segment store");
        return internal::open_postgres_segment_store(std::move(parsed).value(), options);
      }
  }
  return InvalidArgument("segment store: unknown kind");
}

}  // namespace flurry

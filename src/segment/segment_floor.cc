// SegmentFloors: see segment_floor.h.
#include "segment_floor.h"

#include <cerrno>
#include <cstdio>
#include <system_error>

#include "core/durable_file.h"
#include "core/numbers.h"
#include "core/private_files.h"
#include "core/quote.h"

namespace flurry::internal {
namespace {

constexpr std::size_t kMaxFileSize = 4096;
constexpr std::string_view kMagic = "flurry-segment-floor 1";

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The file's text without its last line, and its check line.
std::string body_of(std::string_view store, std::string_view tag, const SegmentFloorEntry& e) {
  std::string out(kMagic);
  out += "\nstore " + std::string(store) + "\ntag " + std::string(tag) + "\nfloor " +
         std::to_string(e.floor) + "\ndelta " + std::to_string(e.delta) + "\nremainder " +
         std::to_string(e.remainder) + "\n";
  return out;
}

std::string file_text(std::string_view store, std::string_view tag, const SegmentFloorEntry& e) {
  const std::string body = body_of(store, tag, e);
  return body + "check " + hex64(fnv1a64(body)) + "\n";
}

}  // namespace

SegmentFloors::SegmentFloors(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::filesystem::path SegmentFloors::path_for(std::string_view store, std::string_view tag) const {
  if (dir_.empty()) return {};
  std::string key(store);
  key += '\0';
  key += tag;
  // Tags are [A-Za-z0-9._-] (never "." or ".."), so the tag itself keeps the name readable; the
  // hash tells stores apart.
  return dir_ / ("floor-" + hex64(fnv1a64(key)) + "-" + std::string(tag));
}

Result<SegmentFloorEntry> SegmentFloors::load_file(std::string_view store, std::string_view tag,
                                                   const std::filesystem::path& path) const {
  Result<std::string> text = read_small_file(path, kMaxFileSize);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return SegmentFloorEntry{};
    return text.status();
  }
  const auto corrupt = [&](std::string_view why) {
    return Status(Reason::kCorrupt, "segment store floor " + quote(path.string()) + ": " +
                                        std::string(why) +
                                        " (remove it only if the store is known to be above "
                                        "every ID this host issued for the tag)");
  };
  const std::size_t check_at = text->rfind("check ");
  if (check_at == std::string::npos || text->back() != '\n') return corrupt("torn or not a floor");
  const std::string_view body = std::string_view(*text).substr(0, check_at);
  const std::string_view check =
      std::string_view(*text).substr(check_at + 6, text->size() - check_at - 7);
  if (check != hex64(fnv1a64(body))) return corrupt("its check does not match (torn or edited)");
  SegmentFloorEntry e;
  std::string_view rest = body;
  const auto line = [&]() {
    const std::size_t nl = rest.find('\n');
    const std::string_view l = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    return l;
  };
  if (line() != kMagic) return corrupt("not a segment floor file");
  if (line() != "store " + std::string(store)) return corrupt("written for another store");
  if (line() != "tag " + std::string(tag)) return corrupt("written for another tag");
  const auto number = [&](std::string_view key, std::uint64_t& out) {
    const std::string_view l = line();
    if (!l.starts_with(key)) return false;
    const ParsedUint n = parse_uint(l.substr(key.size()));
    out = n.value;
    return n.ok();
  };
  if (!number("floor ", e.floor) || !number("delta ", e.delta) ||
      !number("remainder ", e.remainder) || !rest.empty()) {
    return corrupt("unreadable");
  }
  return e;
}

Result<SegmentFloorEntry> SegmentFloors::get(std::string_view store, std::string_view tag) {
  std::lock_guard lock(mu_);
  SegmentFloorEntry mine;
  if (auto it = memory_.find(std::make_pair(std::string(store), std::string(tag)));
      it != memory_.end()) {
    mine = it->second;
  }
  if (dir_.empty()) return mine;
  PrivateDirLock dir_lock;
  if (Status st = dir_lock.lock(dir_); !st.ok()) return st;
  Result<SegmentFloorEntry> file = load_file(store, tag, path_for(store, tag));
  if (!file.ok()) return file.status();
  if (file->floor > mine.floor) return *file;
  if (mine.delta == 0) {
    mine.delta = file->delta;
    mine.remainder = file->remainder;
  }
  return mine;
}

Status SegmentFloors::raise(std::string_view store, std::string_view tag, std::uint64_t end,
                            std::uint64_t delta, std::uint64_t remainder) {
  std::lock_guard lock(mu_);
  SegmentFloorEntry& mine = memory_[std::make_pair(std::string(store), std::string(tag))];
  SegmentFloorEntry next{std::max(mine.floor, end), delta, remainder};
  if (!dir_.empty()) {
    PrivateDirLock dir_lock;
    if (Status st = dir_lock.lock(dir_); !st.ok()) return st;
    const std::filesystem::path path = path_for(store, tag);
    Result<SegmentFloorEntry> file = load_file(store, tag, path);
    if (!file.ok()) return file.status();
    next.floor = std::max(next.floor, file->floor);
    if (Status st = write_file_durably(path, file_text(store, tag, next)); !st.ok()) return st;
  }
  mine = next;
  return OkStatus();
}

}  // namespace flurry::internal

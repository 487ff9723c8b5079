// SegmentFloors: see segment_floor.h.
#include "segment_floor.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <optional>
#include <system_error>

#include "core/durable_file.h"
#include "core/numbers.h"
#include "core/private_files.h"
#include "core/quote.h"

namespace flurry::internal {
namespace {

constexpr std::size_t kMaxFileSize = 4096;
constexpr std::string_view kMagic = "flurry-segment-floor 1";  // a key's file (earlier versions)
constexpr std::size_t kMaxTagFileSize = 1 << 20;
constexpr std::string_view kTagMagic = "flurry-segment-floors 1";  // a tag's file

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Both floor files end in "check <fnv1a64 of what precedes it>\n": sets `body` to what precedes
// the line and returns nullptr when it matches, otherwise why the file is not to be trusted.
const char* checked_body(const std::string& text, std::string_view& body) {
  const std::size_t check_at = text.rfind("check ");
  if (check_at == std::string::npos || text.empty() || text.back() != '\n') {
    return "torn or not a floor";
  }
  body = std::string_view(text).substr(0, check_at);
  const std::string_view check =
      std::string_view(text).substr(check_at + 6, text.size() - check_at - 7);
  if (check != hex64(fnv1a64(body))) return "its check does not match (torn or edited)";
  return nullptr;
}

// Tags are [A-Za-z0-9._-] (never "." or ".."), so the tag itself keeps a name readable; the hash
// tells keys apart.
std::string file_name(std::string_view prefix, std::string_view store, std::string_view tag) {
  std::string key(store);
  key += '\0';
  key += tag;
  return std::string(prefix) + hex64(fnv1a64(key)) + "-" + std::string(tag);
}

// What the floor file `path` says of (store, tag); a zero entry when there is none.
Result<SegmentFloorEntry> load_file(std::string_view store, std::string_view tag,
                                    const std::filesystem::path& path) {
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
  std::string_view body;
  if (const char* why = checked_body(*text, body)) return corrupt(why);
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

std::string hex_of(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::optional<std::string> unhex(std::string_view hex) {
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]);
    const int lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

// One file per tag holds the tag's floors under every key this host knows:
//   flurry-segment-floors 1
//   tag <tag>
//   key <hex of the key> <floor> <delta> <remainder>     (one line per key, by key)
//   check <FNV-1a of the lines above>
using TagFloors = std::map<std::string, SegmentFloorEntry>;

std::string tag_file_text(std::string_view tag, const TagFloors& floors) {
  std::string body(kTagMagic);
  body += "\ntag " + std::string(tag) + "\n";
  for (const auto& [key, e] : floors) {
    body += "key " + hex_of(key) + " " + std::to_string(e.floor) + " " + std::to_string(e.delta) +
            " " + std::to_string(e.remainder) + "\n";
  }
  return body + "check " + hex64(fnv1a64(body)) + "\n";
}

// What the tag file `path` holds; empty when there is none.
Result<TagFloors> load_tag_file(std::string_view tag, const std::filesystem::path& path) {
  Result<std::string> text = read_small_file(path, kMaxTagFileSize);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return TagFloors{};
    return text.status();
  }
  const auto corrupt = [&](std::string_view why) {
    return Status(Reason::kCorrupt, "segment store floors " + quote(path.string(), 1024) + ": " +
                                        std::string(why) +
                                        " (remove it only if every store is known to be above "
                                        "every ID this host issued for the tag)");
  };
  std::string_view body;
  if (const char* why = checked_body(*text, body)) return corrupt(why);
  std::string_view rest = body;
  const auto line = [&]() {
    const std::size_t nl = rest.find('\n');
    const std::string_view l = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    return l;
  };
  if (line() != kTagMagic) return corrupt("not a segment floor file");
  if (line() != "tag " + std::string(tag)) return corrupt("written for another tag");
  TagFloors out;
  while (!rest.empty()) {
    std::string_view l = line();
    const auto word = [&]() {
      const std::size_t sp = l.find(' ');
      const std::string_view w = l.substr(0, sp);
      l.remove_prefix(sp == std::string_view::npos ? l.size() : sp + 1);
      return w;
    };
    if (word() != "key") return corrupt("unreadable");
    const std::optional<std::string> key = unhex(word());
    SegmentFloorEntry e;
    bool ok = key.has_value();
    for (std::uint64_t* field : {&e.floor, &e.delta, &e.remainder}) {
      const ParsedUint n = parse_uint(word());
      ok = ok && n.ok();
      *field = n.value;
    }
    if (!ok || !l.empty() || !out.emplace(*key, e).second) return corrupt("unreadable");
  }
  return out;
}

}  // namespace

SegmentFloorKeys segment_floor_keys(const SegmentStoreIdentity& id, std::string_view described) {
  SegmentFloorKeys out;
  for (const std::string* key : {&id.store_id, &id.place, &id.address}) {
    if (!key->empty() && std::find(out.keys.begin(), out.keys.end(), *key) == out.keys.end()) {
      out.keys.push_back(*key);
    }
  }
  if (out.keys.empty()) {
    out.keys.emplace_back(described);
  } else {
    out.legacy.emplace_back(described);
  }
  return out;
}

SegmentFloors::SegmentFloors(std::filesystem::path dir, HostDir host)
    : dir_(std::move(dir)), host_(std::move(host)) {}

std::filesystem::path SegmentFloors::path_for(std::string_view key, std::string_view tag) const {
  if (dir_.empty()) return {};
  return dir_ / file_name("floor-", key, tag);
}

std::filesystem::path SegmentFloors::tag_path(std::string_view tag) const {
  if (dir_.empty()) return {};
  return dir_ / ("floors-" + std::string(tag));
}

std::string SegmentFloors::host_file_name(std::string_view tag) {
  return "segfloors-" + std::string(tag);
}

Status SegmentFloors::collect(const SegmentFloorKeys& keys, std::string_view tag, bool with_host,
                              std::vector<Seen>& out) const {
  const std::size_t n = keys.keys.size();
  const auto add = [&](const TagFloors& floors) {
    for (std::size_t k = 0; k < n; ++k) {
      if (auto it = floors.find(keys.keys[k]); it != floors.end())
        out.push_back(Seen{it->second, k});
    }
  };
  for (std::size_t k = 0; k < n + keys.legacy.size(); ++k) {
    const std::string& key = k < n ? keys.keys[k] : keys.legacy[k - n];
    if (auto it = memory_.find(std::make_pair(key, std::string(tag))); it != memory_.end()) {
      out.push_back(Seen{it->second, k});
    }
    // Earlier versions kept a file per key, keyed by the location's text.
    if (!dir_.empty()) {
      Result<SegmentFloorEntry> file = load_file(key, tag, path_for(key, tag));
      if (!file.ok()) return file.status();
      if (file->floor > 0 || file->delta > 0) out.push_back(Seen{*file, k});
    }
  }
  if (!dir_.empty()) {
    Result<TagFloors> floors = load_tag_file(tag, tag_path(tag));
    if (!floors.ok()) return floors.status();
    add(*floors);
  }
  if (!with_host || host_.own().empty()) return OkStatus();
  Result<std::vector<HostDir::Entry>> entries = host_.entries();
  if (!entries.ok())
    return entries.status().with_prefix("cannot read the host-wide segment floors");
  for (const HostDir::Entry& entry : *entries) {
    Result<TagFloors> floors = load_tag_file(tag, entry.dir / host_file_name(tag));
    if (!floors.ok()) {
      return floors.status().with_prefix("the host-wide segment floors of user ID " +
                                         std::to_string(entry.uid));
    }
    add(*floors);
  }
  return OkStatus();
}

Result<SegmentFloorEntry> SegmentFloors::get(const SegmentFloorKeys& keys, std::string_view tag) {
  MutexLock lock(mu_);
  PrivateDirLock dir_lock;
  if (!dir_.empty()) {
    if (Status st = dir_lock.lock(dir_); !st.ok()) return st;
  }
  std::vector<Seen> seen;
  if (Status st = collect(keys, tag, /*with_host=*/true, seen); !st.ok()) return st;
  SegmentFloorEntry out;
  std::optional<Seen> residue;  // the highest floor with a residue under the first key with one
  for (const Seen& s : seen) {
    out.floor = std::max(out.floor, s.entry.floor);
    if (s.entry.delta == 0) continue;
    if (!residue || s.key < residue->key ||
        (s.key == residue->key && s.entry.floor > residue->entry.floor)) {
      residue = s;
    }
  }
  if (residue) {
    out.delta = residue->entry.delta;
    out.remainder = residue->entry.remainder;
  }
  return out;
}

Status SegmentFloors::raise(const SegmentFloorKeys& keys, std::string_view tag, std::uint64_t end,
                            std::uint64_t delta, std::uint64_t remainder) {
  MutexLock lock(mu_);
  PrivateDirLock dir_lock;
  if (!dir_.empty()) {
    if (Status st = dir_lock.lock(dir_); !st.ok()) return st;
  }
  PrivateDirLock host_lock;
  if (!host_.own().empty()) {
    if (Status st = host_lock.lock(host_.own()); !st.ok()) {
      return st.with_prefix("the host-wide segment floors");
    }
  }
  // Never below what any copy says, under any key: a key new to this host (a store seen under
  // another spelling first) starts at the store's floor, not at this range.
  std::vector<Seen> seen;
  if (Status st = collect(keys, tag, /*with_host=*/false, seen); !st.ok()) return st;
  SegmentFloorEntry next{end, delta, remainder};
  for (const Seen& s : seen) next.floor = std::max(next.floor, s.entry.floor);
  // One file per directory, every key in it: one durable write each.
  if (!dir_.empty()) {
    Result<TagFloors> floors = load_tag_file(tag, tag_path(tag));
    if (!floors.ok()) return floors.status();
    for (const std::string& key : keys.keys) (*floors)[key] = next;
    if (Status st = write_file_durably(tag_path(tag), tag_file_text(tag, *floors)); !st.ok()) {
      return st;
    }
  }
  if (!host_.own().empty()) {
    Result<TagFloors> floors = load_tag_file(tag, host_.own() / host_file_name(tag));
    if (!floors.ok()) return floors.status().with_prefix("the host-wide segment floors");
    for (const std::string& key : keys.keys) {
      if (auto it = floors->find(key); it != floors->end()) {
        next.floor = std::max(next.floor, it->second.floor);
      }
    }
    for (const std::string& key : keys.keys) (*floors)[key] = next;
    if (Status st = host_.write_shared(host_file_name(tag), tag_file_text(tag, *floors));
        !st.ok()) {
      return st.with_prefix("cannot keep the host-wide segment floors");
    }
  }
  for (const std::string& key : keys.keys) memory_[std::make_pair(key, std::string(tag))] = next;
  return OkStatus();
}

}  // namespace flurry::internal

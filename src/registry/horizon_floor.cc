// HorizonFloor: this host's memory of node horizons, so that a registry that went backwards
// cannot make a process issue an ID again.
//
// Per node it keeps two records: `pending`, the newest one handed to the registry (written here
// before the registry write, so it is above every ID that may have been issued), and `accepted`,
// the newest one the registry confirmed. A registry found below `accepted` went backwards (an
// error worth an alarm); one between `accepted` and `pending` may only have missed the last write
// (a crash or a failed write between the two): the claim starts above `pending` either way.
//
// The local copy of a node is one file holding both records, replaced atomically:
//   flurry-horizon-floor 1
//   <pending record, as format_horizon_record writes it>
//   <accepted record>
#include "flurry/horizon_floor.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "core/durable_file.h"
#include "core/private_files.h"
#include "flurry/timefmt.h"

namespace flurry {
namespace {

constexpr std::string_view kMagic = "flurry-horizon-floor 1\n";
constexpr std::string_view kRecordMagic = "flurry-horizon 1\n";
constexpr std::size_t kMaxFileSize = 128 * 1024;

// Letters, digits and '-' of `key`, for a readable file name.
std::string file_safe(std::string_view key) {
  std::string out;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '-';
  }
  return out.substr(0, 40);
}

std::string hex16(std::uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<std::size_t>(i)] = kDigits[v & 15];
  return out;
}

HorizonRecord empty_like(const HorizonRecord& r) {
  HorizonRecord e = r;
  std::fill(e.horizons.begin(), e.horizons.end(), -1);
  return e;
}

// Layouts compare by structure: `node:10` and `worker:10` are one layout (Layout::structure).
bool same_shape(const HorizonRecord& a, const HorizonRecord& b) {
  return a.node == b.node && a.horizons.size() == b.horizons.size() &&
         Layout::same_structure(a.layout, b.layout);
}

std::string structure_of(const std::string& layout) {
  Result<Layout> parsed = Layout::parse(layout);
  return parsed.ok() ? parsed->structure() : layout;
}

constexpr std::size_t kMaxHostRecordSize = 64 * 1024;

// `mine` is what this process last wrote; `file` what the file holds now; `next` what this
// process wants to write. Values this process wrote may go down; values someone else raised
// above them stay.
HorizonRecord combine(const HorizonRecord& next, const HorizonRecord* mine,
                      const HorizonRecord* file) {
  HorizonRecord out = next;
  if (file == nullptr || !same_shape(*file, next)) return out;
  for (std::size_t g = 0; g < out.horizons.size(); ++g) {
    const std::int64_t ours = mine != nullptr && same_shape(*mine, next) ? mine->horizons[g] : -1;
    if (file->horizons[g] > ours) out.horizons[g] = std::max(out.horizons[g], file->horizons[g]);
  }
  return out;
}

Result<std::pair<HorizonRecord, HorizonRecord>> parse_floor(std::string_view text,
                                                            const std::filesystem::path& path) {
  const auto corrupt = [&](std::string_view why) {
    return Status(Reason::kCorrupt,
                  "the host-local horizon copy " + path.string() +
                      " is corrupt: " + std::string(why) +
                      "; it guards against a registry that went backwards, so flurry will not "
                      "guess: restore it, or remove it if you know the registry is intact");
  };
  if (!text.starts_with(kMagic)) return corrupt("it does not start with the floor header");
  text.remove_prefix(kMagic.size());
  const std::size_t second = text.find(kRecordMagic, 1);
  if (second == std::string_view::npos) return corrupt("it holds one record, not two");
  Result<HorizonRecord> pending = parse_horizon_record(text.substr(0, second));
  if (!pending.ok()) return corrupt(pending.status().message());
  Result<HorizonRecord> accepted = parse_horizon_record(text.substr(second));
  if (!accepted.ok()) return corrupt(accepted.status().message());
  if (!same_shape(*pending, *accepted)) return corrupt("its two records disagree");
  return std::pair{std::move(pending).value(), std::move(accepted).value()};
}

// Requires the caller's mutex. An exclusive flock on dir/.lock, held while `lock` lives; none
// when memory only.
Status lock_copies(const std::filesystem::path& dir, internal::PrivateDirLock& lock) {
  if (dir.empty()) return OkStatus();
  Status st = lock.lock(dir);
  return st.ok() ? st : st.with_prefix("the directory of the host-local horizon copies");
}

}  // namespace

HorizonFloor::HorizonFloor(std::filesystem::path dir, std::string registry_key, std::string layout,
                           HostDir host)
    : dir_(std::move(dir)),
      registry_key_(std::move(registry_key)),
      layout_(std::move(layout)),
      structure_(structure_of(layout_)),
      // The kind ("etcd" of "etcd:cluster=..."), readable; the hash tells identities apart.
      file_prefix_(file_safe(std::string_view(registry_key_).substr(0, registry_key_.find(':'))) +
                   "-" + hex16(internal::fnv1a64(registry_key_ + "\n" + structure_)).substr(0, 12) +
                   "-node-"),
      legacy_prefix_(file_safe(std::string_view(registry_key_).substr(0, registry_key_.find(':'))) +
                     "-" + hex16(internal::fnv1a64(registry_key_ + "\n" + layout_)).substr(0, 12) +
                     "-node-"),
      host_(std::move(host)) {}

std::filesystem::path HorizonFloor::path_for(std::uint64_t node) const {
  if (dir_.empty()) return {};
  return dir_ / (file_prefix_ + std::to_string(node) + ".state");
}

std::string HorizonFloor::host_record_name(std::uint64_t node) const {
  return "node-" + hex16(internal::fnv1a64(structure_)) + "-" + std::to_string(node) + ".horizon";
}

Result<HorizonFloor::Entry> HorizonFloor::load_file(std::uint64_t node) const {
  return load_path(path_for(node), node);
}

Result<HorizonFloor::Entry> HorizonFloor::load_path(const std::filesystem::path& path,
                                                    std::uint64_t node) const {
  if (path.empty()) return Status(StatusCode::kNotFound, "no local copy");
  Result<std::string> text = internal::read_small_file(path, kMaxFileSize);
  if (!text.ok()) return text.status();
  Result<std::pair<HorizonRecord, HorizonRecord>> records = parse_floor(*text, path);
  if (!records.ok()) return records.status();
  auto& [pending, accepted] = *records;
  if (!Layout::same_structure(pending.layout, layout_) || pending.node != node) {
    return Status(Reason::kStateMismatch,
                  "the host-local horizon copy " + path.string() + " was written for node " +
                      std::to_string(pending.node) + " with layout \"" + pending.layout +
                      "\", not node " + std::to_string(node) + " with \"" + layout_ + "\"");
  }
  return Entry{std::move(pending), std::move(accepted)};
}

Status HorizonFloor::write_file(std::uint64_t node, const Entry& entry, bool durable) const {
  const std::string text = std::string(kMagic) + format_horizon_record(entry.pending) +
                           format_horizon_record(entry.accepted);
  Status st = durable ? internal::write_file_durably(path_for(node), text)
                      : internal::write_file_atomically(path_for(node), text);
  return st.ok() ? st : st.with_prefix("cannot keep the host-local horizon copy");
}

Result<std::optional<HorizonRegression>> HorizonFloor::raise(Claim& claim) {
  const std::uint64_t node = claim.lease.node;
  MutexLock lock(mu_);
  internal::PrivateDirLock dir_lock;
  if (Status st = lock_copies(dir_, dir_lock); !st.ok()) return st;

  // What this process remembers, then what the host-local copy says.
  std::vector<std::pair<Entry, std::string>> known;
  if (auto it = written_.find(node); it != written_.end()) {
    known.emplace_back(it->second, "this process");
  }
  // The copy keyed by the layout's structure, then one an older flurry keyed by its text.
  for (const std::string* prefix : {&file_prefix_, &legacy_prefix_}) {
    if (dir_.empty() || (prefix == &legacy_prefix_ && legacy_prefix_ == file_prefix_)) continue;
    const std::filesystem::path path = dir_ / (*prefix + std::to_string(node) + ".state");
    Result<Entry> file = load_path(path, node);
    if (file.ok()) {
      known.emplace_back(std::move(file).value(), "this host's copy " + path.string());
    } else if (file.status().code() != StatusCode::kNotFound) {
      return file.status();
    }
  }

  std::optional<HorizonRegression> regression;
  std::optional<HorizonRecord>& inherited = claim.inherited;
  // A registry record for another layout is refused by Generator::create; leave it alone.
  if (inherited && !Layout::same_structure(inherited->layout, layout_)) return regression;
  for (const auto& [k, where] : known) {
    if (!inherited) {
      inherited = empty_like(k.pending);
    } else if (!same_shape(*inherited, k.pending)) {
      continue;  // Generator::create refuses the registry's record
    }
    bool raised = false;
    for (std::size_t g = 0; g < k.pending.horizons.size(); ++g) {
      const std::int64_t registry = inherited->horizons[g];
      const std::int64_t gap = k.accepted.horizons[g] - registry;
      if (gap > 0 &&
          (!regression || gap > regression->remembered_tick - regression->registry_tick)) {
        regression = HorizonRegression{node, g, registry, k.accepted.horizons[g], where};
      }
      if (k.pending.horizons[g] > inherited->horizons[g]) {
        inherited->horizons[g] = k.pending.horizons[g];
        raised = true;
      }
    }
    // Continue in the generation this host used last when the registry lagged behind it.
    if (raised) inherited->generation = k.pending.generation;
  }
  // Then every process of the host, whatever its user, registry or data directory: not a
  // regression of this registry (they may never have used it), only a floor.
  if (Status st = raise_to_host(node, inherited); !st.ok()) return st;
  if (inherited) {
    // The baseline of the next remember(): the claim counts as written and accepted.
    written_[node] = Entry{*inherited, *inherited};
  }
  return regression;
}

Status HorizonFloor::raise_to_host(std::uint64_t node,
                                   std::optional<HorizonRecord>& inherited) const {
  if (host_.own().empty()) return OkStatus();
  Result<std::vector<HostDir::Entry>> entries = host_.entries();
  if (!entries.ok()) return entries.status().with_prefix("cannot read the host-wide horizons");
  const std::string name = host_record_name(node);
  for (const HostDir::Entry& entry : *entries) {
    const std::filesystem::path path = entry.dir / name;
    Result<std::string> text = internal::read_small_file(path, kMaxHostRecordSize);
    if (!text.ok()) {
      if (text.status().code() == StatusCode::kNotFound) continue;
      return text.status().with_prefix("cannot read the host-wide horizon record");
    }
    Result<HorizonRecord> record = parse_horizon_record(*text);
    if (!record.ok() || record->node != node ||
        !Layout::same_structure(record->layout, structure_)) {
      return Status(Reason::kCorrupt,
                    "the host-wide horizon record " + path.string() + " (user ID " +
                        std::to_string(entry.uid) + ") is corrupt or for another node or layout" +
                        (record.ok() ? "" : ": " + record.status().message()) +
                        "; it tells where that user's processes stopped issuing as node " +
                        std::to_string(node) +
                        ", so flurry will not guess: restore or remove it if you know that node "
                        "is not in use on this host");
    }
    if (!inherited) {
      inherited = empty_like(*record);
      inherited->layout = layout_;
    } else if (inherited->horizons.size() != record->horizons.size()) {
      continue;  // a registry record of another shape: Generator::create refuses it
    }
    bool raised = false;
    for (std::size_t g = 0; g < record->horizons.size(); ++g) {
      if (record->horizons[g] > inherited->horizons[g]) {
        inherited->horizons[g] = record->horizons[g];
        raised = true;
      }
    }
    if (raised) inherited->generation = record->generation;
  }
  return OkStatus();
}

Status HorizonFloor::write_host(const HorizonRecord& record, const HorizonRecord* mine) const {
  if (host_.own().empty()) return OkStatus();
  const std::filesystem::path path = host_.own() / host_record_name(record.node);
  std::optional<HorizonRecord> file;
  Result<std::string> text = internal::read_small_file(path, kMaxHostRecordSize);
  if (text.ok()) {
    Result<HorizonRecord> parsed = parse_horizon_record(*text);
    if (parsed.ok()) file = std::move(parsed).value();
  } else if (text.status().code() != StatusCode::kNotFound) {
    return text.status().with_prefix("cannot keep the host-wide horizon record");
  }
  HorizonRecord out = combine(record, mine, file ? &*file : nullptr);
  out.layout = structure_;
  Status st = host_.write_shared(host_record_name(record.node), format_horizon_record(out));
  return st.ok() ? st : st.with_prefix("cannot keep the host-wide horizon record");
}

Status HorizonFloor::write_half(const HorizonRecord& record, bool pending,
                                const HorizonRecord* mine) const {
  if (dir_.empty()) return OkStatus();
  internal::PrivateDirLock dir_lock;
  if (Status st = lock_copies(dir_, dir_lock); !st.ok()) return st;
  Result<Entry> file = load_file(record.node);
  if (!file.ok() && file.status().code() != StatusCode::kNotFound) return file.status();
  const bool usable = file.ok() && same_shape(file->pending, record);
  Entry entry = usable ? std::move(file).value() : Entry{record, empty_like(record)};
  HorizonRecord& half = pending ? entry.pending : entry.accepted;
  half = usable ? combine(record, mine, &half) : record;
  // The pending half is what keeps IDs unique: durable before the registry is written. The
  // accepted half only tells a regression from a missed write; a power loss that takes its
  // last update back costs at most a false alarm, so it skips the two fsyncs.
  return write_file(record.node, entry, /*durable=*/pending);
}

Status HorizonFloor::remember(const HorizonRecord& record) {
  if (!Layout::same_structure(record.layout, layout_)) {
    return Status(Reason::kStateMismatch, "a horizon record for layout \"" + record.layout +
                                              "\" cannot be kept with layout \"" + layout_ +
                                              "\"'s");
  }
  MutexLock lock(mu_);
  auto it = written_.find(record.node);
  if (it != written_.end() && !same_shape(it->second.pending, record)) {
    written_.erase(it);
    it = written_.end();
  }
  const HorizonRecord* mine = it != written_.end() ? &it->second.pending : nullptr;
  if (Status st = write_half(record, true, mine); !st.ok()) return st;
  if (Status st = write_host(record, mine); !st.ok()) return st;
  if (it == written_.end()) {
    written_.emplace(record.node, Entry{record, empty_like(record)});
  } else {
    it->second.pending = record;
  }
  return OkStatus();
}

Status HorizonFloor::accepted(const HorizonRecord& record) {
  MutexLock lock(mu_);
  auto it = written_.find(record.node);
  if (it == written_.end() || !same_shape(it->second.pending, record)) {
    return Status(Reason::kStateMismatch,
                  "node " + std::to_string(record.node) +
                      "'s horizon was accepted without being remembered first");
  }
  if (it->second.accepted == record) return OkStatus();
  // Usually up; down only with the tight horizon of a clean stop, which is still above every
  // value another owner had accepted (this one started above what it inherited).
  if (Status st = write_half(record, false, &it->second.accepted); !st.ok()) return st;
  it->second.accepted = record;
  return OkStatus();
}

std::string describe_regression(const HorizonRegression& r, const Layout& layout) {
  const auto at = [&](std::int64_t tick) {
    return "tick " + std::to_string(tick) + " (" +
           format_time(layout.time_of(static_cast<std::uint64_t>(tick))) + ")";
  };
  return "node " + std::to_string(r.node) + " generation " + std::to_string(r.generation) +
         ": the registry holds " +
         (r.registry_tick < 0 ? std::string("no horizon") : "horizon " + at(r.registry_tick)) +
         ", below " + at(r.remembered_tick) + " that it accepted earlier (remembered by " +
         r.where + ")";
}

}  // namespace flurry

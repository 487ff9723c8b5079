#include "flurry/layout.h"

#include <array>
#include <limits>
#include <set>

#include "core/numbers.h"
#include "core/quote.h"
#include "flurry/timefmt.h"

namespace flurry {
namespace {

constexpr std::array<Layout::Preset, 9> kPresets = {{
    {"flurry", "time:41@1ms,node:10,seq:12;epoch=2025-01-01Z",
     "the default: 69 years of milliseconds, 1024 nodes, 4096 IDs per millisecond each"},
    {"twitter", "time:41@1ms,datacenter:5,worker:5,seq:12;epoch=2010-11-04T01:42:54.657Z",
     "Twitter's original Snowflake: 32 datacenters of 32 workers, Twitter's epoch"},
    {"sonyflake", "time:39@10ms,seq:8,machine:16;epoch=2014-09-01Z",
     "Sonyflake: 10 ms units for 174 years, 65536 machines in the low bits, 25600 IDs/s each"},
    {"instagram", "time:40@1ms,shard:13,seq:10;epoch=2011-08-24T21:07:01.721Z",
     "Instagram's sharded IDs (time narrowed to 40 bits to keep the sign bit 0)"},
    {"uid-generator", "time:28@1s,worker:22,seq:13;epoch=2016-05-20Z",
     "Baidu uid-generator: 28 bits of seconds; with its own epoch it ran out in 2024"},
    {"multiclock", "time:41@1ms,clock:4,worker:8,seq:10;epoch=2025-01-01Z",
     "16 clock generations survive large clock steps back without waiting"},
    {"region", "time:40@1ms,region:3,worker:10,seq:10;epoch=2025-01-01Z",
     "8 regions of 1024 workers (time narrowed to 40 bits to keep the sign bit 0)"},
    {"js-safe", "time:41@1ms,node:5,seq:7;epoch=2025-01-01Z;bits=53",
     "fits in 53 bits, so JavaScript numbers hold it exactly: 32 nodes, 128 IDs/ms each"},
    {"tso", "time:45@1ms,seq:18;epoch=2025-01-01Z",
     "the timestamp oracle's (flurry serve --tso): one issuer, 262144 values per millisecond"},
}};

__extension__ using Int128 = __int128;  // GCC/Clang; -Wpedantic needs the marker
__extension__ using Uint128 = unsigned __int128;

constexpr int kMaxNameLength = 32;
constexpr std::size_t kMaxText = 1024;  // the longest layout text parse() reads

Status bad(std::string_view text, std::string what) {
  return InvalidArgument("bad layout " + internal::quote(text) + ": " + std::move(what));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A decimal number of digits only that fills `s`, below 10^18; nullopt otherwise.
std::optional<std::int64_t> parse_int(std::string_view s) {
  const internal::ParsedUint n = internal::parse_uint(s, 999'999'999'999'999'999);
  if (!n.ok()) return std::nullopt;
  return static_cast<std::int64_t>(n.value);
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  if (name.front() < 'a' || name.front() > 'z') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string format_unit(Nanos unit) {
  using namespace std::chrono;
  if (unit % seconds(1) == Nanos(0)) return std::to_string(unit / seconds(1)) + "s";
  if (unit % milliseconds(1) == Nanos(0)) return std::to_string(unit / milliseconds(1)) + "ms";
  return std::to_string(unit / microseconds(1)) + "us";
}

// "1ms", "10ms", "1s", "100us".
Result<Nanos> parse_unit(std::string_view text, std::string_view layout_text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view number = text.substr(0, digits);
  const std::string_view suffix = text.substr(digits);
  Nanos scale{};
  if (suffix == "us") {
    scale = std::chrono::microseconds(1);
  } else if (suffix == "ms") {
    scale = std::chrono::milliseconds(1);
  } else if (suffix == "s") {
    scale = std::chrono::seconds(1);
  } else {
    return bad(layout_text, "unknown time unit " + internal::quote(text) +
                                " (write a count and us, ms or s, e.g. 1ms or 10ms)");
  }
  const auto count = parse_int(number);
  if (!count || *count == 0 || *count > 1'000'000'000) {
    return bad(layout_text, "time unit " + internal::quote(text) +
                                " needs a whole count from 1 to 1000000000 before its suffix");
  }
  return Nanos(*count * scale.count());
}

// Splits on `sep`, keeping empty pieces.
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

// What the text names before the options: the field list, from the text or from a preset.
struct Source {
  std::string_view fields;
  std::vector<std::string_view> preset_options;  // the preset's own options, if any
  std::vector<std::string_view> options;         // the caller's, which override them
  std::string preset;  // the preset's name when the text is a preset with no options
};

std::string preset_names() {
  std::string names;
  for (const Layout::Preset& p : kPresets) {
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  return names;
}

// Splits the trimmed text into the field list and the options, expanding a preset name.
Result<Source> resolve_preset(std::string_view full, std::string_view text) {
  const std::vector<std::string_view> segments = split(text, ';');
  Source src;
  src.fields = trim(segments[0]);
  src.options.assign(segments.begin() + 1, segments.end());
  bool is_preset = false;
  for (const Layout::Preset& p : kPresets) {
    if (p.name != src.fields) continue;
    const std::vector<std::string_view> preset_segments = split(p.text, ';');
    src.fields = preset_segments[0];
    src.preset_options.assign(preset_segments.begin() + 1, preset_segments.end());
    if (src.options.empty()) src.preset = std::string(p.name);
    is_preset = true;
    break;
  }
  if (!is_preset && src.fields.find_first_of(":,") == std::string_view::npos) {
    return bad(full, "unknown preset " + internal::quote(src.fields) +
                         " (presets: " + preset_names() +
                         "; or write fields, e.g. time:41@1ms,node:10,seq:12;epoch=2025-01-01Z)");
  }
  return src;
}

struct Options {
  std::optional<std::string_view> epoch;
  std::optional<std::string_view> bits;
};

// Reads one list of key=value options into `out`, each key at most once.
Status read_options(std::string_view full, const std::vector<std::string_view>& list,
                    Options& out) {
  std::set<std::string_view> seen;
  for (std::string_view opt : list) {
    opt = trim(opt);
    const std::size_t eq = opt.find('=');
    if (opt.empty() || eq == std::string_view::npos) {
      return bad(full, "option " + internal::quote(opt) + " must be key=value (epoch=, bits=)");
    }
    const std::string_view key = trim(opt.substr(0, eq));
    const std::string_view value = trim(opt.substr(eq + 1));
    if (!seen.insert(key).second) {
      return bad(full, "option " + internal::quote(key) + " is given twice");
    }
    if (key == "epoch") {
      out.epoch = value;
    } else if (key == "bits") {
      out.bits = value;
    } else {
      return bad(full, "unknown option " + internal::quote(key) + " (known: epoch, bits)");
    }
  }
  return OkStatus();
}

// The preset's options first, then the caller's, which override them.
Result<Options> parse_options(std::string_view full, const Source& src) {
  Options options;
  if (Status s = read_options(full, src.preset_options, options); !s.ok()) return s;
  if (Status s = read_options(full, src.options, options); !s.ok()) return s;
  return options;
}

// The total width: 63 unless bits= is given.
Result<int> parse_total_bits(std::string_view full, std::optional<std::string_view> text) {
  if (!text) return 63;
  const auto bits = parse_int(*text);
  if (!bits || *bits < 3 || *bits > 63) {
    return bad(full, "bits=" + internal::quote(*text) +
                         ": the total width must be a whole number from 3 to 63");
  }
  return static_cast<int>(*bits);
}

Result<TimePoint> parse_epoch(std::string_view full, std::optional<std::string_view> text) {
  if (!text) return bad(full, "no epoch given (add e.g. \";epoch=2025-01-01Z\")");
  Result<TimePoint> epoch = parse_time(*text);
  if (!epoch.ok()) return bad(full, "epoch: " + epoch.status().message());
  if (epoch->time_since_epoch() % std::chrono::milliseconds(1) != Nanos(0)) {
    return bad(full, "epoch " + internal::quote(*text) + " must be a whole millisecond");
  }
  return *epoch;
}

// The fields as parsed, before the checks that need all of them.
struct FieldList {
  std::vector<Field> fields;
  std::set<std::string_view> names;
  std::optional<std::size_t> time_index;
  std::optional<std::size_t> seq_index;
  std::optional<std::size_t> clock_index;
  int node_bits = 0;
  int sum = 0;
  Nanos unit{};
};

// Parses field `i` (counted from 0), `piece` of the field list, and appends it to `list`.
Status parse_field(std::string_view full, std::size_t i, std::string_view piece, FieldList& list) {
  const std::string where = "field " + std::to_string(i + 1) + " " + internal::quote(piece);
  if (piece.empty()) return bad(full, "field " + std::to_string(i + 1) + " is empty");
  const std::size_t colon = piece.find(':');
  if (colon == std::string_view::npos) {
    return bad(full, where + " must be name:width (e.g. node:10)");
  }
  const std::string_view name = trim(piece.substr(0, colon));
  std::string_view width_text = trim(piece.substr(colon + 1));
  std::optional<std::string_view> unit_text;
  if (const std::size_t at = width_text.find('@'); at != std::string_view::npos) {
    unit_text = trim(width_text.substr(at + 1));
    width_text = trim(width_text.substr(0, at));
  }
  if (!valid_name(name)) {
    return bad(full, where + ": a field name is 1-32 characters of a-z, 0-9 and _, " +
                         "starting with a letter");
  }
  if (!list.names.insert(name).second) {
    return bad(full, where + ": the name " + internal::quote(name) + " is used twice");
  }
  const auto width = parse_int(width_text);
  if (!width) return bad(full, where + ": the width must be a whole number of bits");
  if (*width < 1) return bad(full, where + ": a field needs at least 1 bit");
  if (*width > 63) return bad(full, where + ": a field can be at most 63 bits wide");

  Field field{std::string(name), FieldKind::kNode, static_cast<int>(*width), 0};
  if (name == "time") {
    field.kind = FieldKind::kTime;
    if (i != 0) return bad(full, "the time field must come first (most significant)");
    list.time_index = i;
    Result<Nanos> unit = unit_text ? parse_unit(*unit_text, full)
                                   : Result<Nanos>(Nanos(std::chrono::milliseconds(1)));
    if (!unit.ok()) return unit.status();
    list.unit = *unit;
  } else {
    if (unit_text) return bad(full, where + ": only the time field takes a unit (@...)");
    if (name == "seq") {
      field.kind = FieldKind::kSeq;
      list.seq_index = i;
    } else if (name == "clock") {
      field.kind = FieldKind::kClock;
      list.clock_index = i;
    } else {
      list.node_bits += field.bits;
    }
  }
  list.sum += field.bits;
  list.fields.push_back(std::move(field));
  return OkStatus();
}

// Parses the comma-separated field list and checks it as a whole: a time, a seq and a node
// field, widths summing to `total_bits`. Sets each field's shift.
Result<FieldList> parse_fields(std::string_view full, std::string_view text, int total_bits) {
  FieldList list;
  const std::vector<std::string_view> pieces = split(text, ',');
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (Status s = parse_field(full, i, trim(pieces[i]), list); !s.ok()) return s;
  }
  if (!list.time_index) {
    return bad(full, "there is no time field (the first field, e.g. time:41@1ms)");
  }
  if (!list.seq_index) return bad(full, "there is no seq field (e.g. seq:12)");
  if (list.sum != total_bits) {
    return bad(full, "the field widths sum to " + std::to_string(list.sum) +
                         " bits; they must sum to " + std::to_string(total_bits) +
                         (total_bits == 63 ? " (the sign bit stays 0)"
                                           : " (bits=" + std::to_string(total_bits) + ")"));
  }
  int shift = total_bits;
  for (Field& f : list.fields) {
    shift -= f.bits;
    f.shift = shift;
  }
  return list;
}

// The reciprocal of `unit` for Layout::ticks_at (see the members' comment in layout.h): for a
// divisor d >= 1 and l = ceil(log2 d), m = ceil(2^(63 + l) / d). Then m * d - 2^(63 + l) lies in
// [0, d) and so below 2^l, the condition under which floor(n / d) = floor(n * m / 2^(63 + l))
// for every 0 <= n < 2^63. m < 2^64 since d > 2^(l - 1) (m = 2^63 when d is a power of two).
struct UnitReciprocal {
  std::uint64_t multiplier;
  int high_shift;  // the shift minus 64
};

UnitReciprocal unit_reciprocal(Nanos unit) {
  // parse_unit() accepts 1 us to 10^9 s, so d >= 1000 and l >= 10: the shift is at least 64.
  const auto d = static_cast<std::uint64_t>(unit.count());
  const int l = 64 - __builtin_clzll(d - 1);
  const int shift = 63 + l;
  const Uint128 numerator = static_cast<Uint128>(1) << shift;
  const Uint128 m = (numerator - 1) / d + 1;  // ceil(numerator / d)
  return {static_cast<std::uint64_t>(m), shift - 64};
}

// epoch + 2^time_bits * unit, saturating at the largest representable time.
TimePoint end_of(TimePoint epoch, int time_bits, Nanos unit) {
  const Int128 span = (static_cast<Int128>(1) << time_bits) * unit.count();
  const Int128 end = static_cast<Int128>(epoch.time_since_epoch().count()) + span;
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  return TimePoint(Nanos(end > max ? max : static_cast<std::int64_t>(end)));
}

}  // namespace

std::span<const Layout::Preset> Layout::presets() noexcept {
  return kPresets;
}

Result<Layout> Layout::parse(std::string_view text) {
  if (text.size() > kMaxText) {
    return InvalidArgument("bad layout: text is " + std::to_string(text.size()) +
                           " characters long; the limit is " + std::to_string(kMaxText));
  }
  const std::string_view full = text;
  text = trim(text);
  if (text.empty()) return InvalidArgument("bad layout: the text is empty (try \"flurry\")");

  Result<Source> src = resolve_preset(full, text);
  if (!src.ok()) return src.status();
  Result<Options> options = parse_options(full, *src);
  if (!options.ok()) return options.status();
  Result<int> total_bits = parse_total_bits(full, options->bits);
  if (!total_bits.ok()) return total_bits.status();
  Result<TimePoint> epoch = parse_epoch(full, options->epoch);
  if (!epoch.ok()) return epoch.status();
  Result<FieldList> list = parse_fields(full, src->fields, *total_bits);
  if (!list.ok()) return list.status();

  Layout layout;
  layout.preset_ = std::move(src->preset);
  layout.total_bits_ = *total_bits;
  layout.epoch_ = *epoch;
  layout.unit_ = list->unit;
  layout.node_bits_ = list->node_bits;
  layout.time_index_ = *list->time_index;
  layout.seq_index_ = *list->seq_index;
  layout.clock_index_ = list->clock_index;
  layout.fields_ = std::move(list->fields);
  layout.end_ = end_of(layout.epoch_, layout.time_field().bits, layout.unit_);
  const UnitReciprocal reciprocal = unit_reciprocal(layout.unit_);
  layout.unit_reciprocal_ = reciprocal.multiplier;
  layout.unit_reciprocal_high_shift_ = reciprocal.high_shift;
  return layout;
}

Status Layout::check_alive(TimePoint now) const {
  const std::string name = preset_.empty() ? to_string() : preset_;
  if (now < epoch_) {
    return Status(Reason::kClockBeforeEpoch,
                  "layout " + internal::quote(name, kMaxText) + ": its epoch " +
                      format_time(epoch_) + " lies in the future (the clock reads " +
                      format_time(now) + "); IDs cannot be issued before it");
  }
  if (now >= end_) {
    const std::string today = format_time(now).substr(0, 10);
    const Field& t = time_field();
    return Status(Reason::kTimeExhausted,
                  "layout " + internal::quote(name, kMaxText) + ": its " + std::to_string(t.bits) +
                      "-bit time field of " + format_unit(unit_) + " units from epoch " +
                      format_time(epoch_) + " ran out on " + format_time(end_) +
                      "; to fix it, give a recent epoch (e.g. \"" +
                      (preset_.empty() ? std::string("...") : preset_) + ";epoch=" + today +
                      "Z\") or a wider time field");
  }
  return OkStatus();
}

std::string Layout::to_string() const {
  std::string out;
  for (const Field& f : fields_) {
    if (!out.empty()) out += ',';
    out += f.name;
    out += ':';
    out += std::to_string(f.bits);
    if (f.kind == FieldKind::kTime) {
      out += '@';
      out += format_unit(unit_);
    }
  }
  out += ";epoch=" + format_time(epoch_);
  if (total_bits_ != 63) out += ";bits=" + std::to_string(total_bits_);
  return out;
}

std::string Layout::structure() const {
  std::string out;
  int node_run = 0;   // the width of the adjacent node fields joined so far
  int node_runs = 0;  // node runs written (a layout may split its node bits around seq)
  const auto append = [&out](const std::string& field) {
    if (!out.empty()) out += ',';
    out += field;
  };
  const auto flush_node = [&] {
    if (node_run == 0) return;
    ++node_runs;
    append((node_runs == 1 ? std::string("node") : "node" + std::to_string(node_runs)) + ':' +
           std::to_string(node_run));
    node_run = 0;
  };
  for (const Field& f : fields_) {
    if (f.kind == FieldKind::kNode) {
      node_run += f.bits;
      continue;
    }
    flush_node();
    switch (f.kind) {
      case FieldKind::kTime:
        append("time:" + std::to_string(f.bits) + '@' + format_unit(unit_));
        break;
      case FieldKind::kClock:
        append("clock:" + std::to_string(f.bits));
        break;
      case FieldKind::kSeq:
        append("seq:" + std::to_string(f.bits));
        break;
      case FieldKind::kNode:
        break;
    }
  }
  flush_node();
  out += ";epoch=" + format_time(epoch_);
  if (total_bits_ != 63) out += ";bits=" + std::to_string(total_bits_);
  return out;
}

bool Layout::same_structure(std::string_view a, std::string_view b) {
  if (a == b) return true;
  Result<Layout> la = parse(a);
  Result<Layout> lb = parse(b);
  return la.ok() && lb.ok() && la->structure() == lb->structure();
}

double Layout::rate_limit_per_second() const noexcept {
  const double per_unit = static_cast<double>(std::uint64_t{1} << seq_field().bits);
  return per_unit * 1e9 / static_cast<double>(unit_.count());
}

std::uint64_t Layout::clock_generations() const noexcept {
  const Field* c = clock_field();
  return c ? std::uint64_t{1} << c->bits : 1;
}

Result<std::uint64_t> Layout::compose(const IdParts& parts) const {
  auto out_of_range = [](const Field& f, std::uint64_t v) {
    return Status(StatusCode::kOutOfRange, "field " + internal::quote(f.name) + " = " +
                                               std::to_string(v) + " does not fit in its " +
                                               std::to_string(f.bits) + " bits (max " +
                                               std::to_string(f.max_value()) + ")");
  };
  std::uint64_t id = 0;
  if (parts.ticks > time_field().max_value()) return out_of_range(time_field(), parts.ticks);
  id |= parts.ticks << time_field().shift;
  if (parts.seq > seq_field().max_value()) return out_of_range(seq_field(), parts.seq);
  id |= parts.seq << seq_field().shift;
  if (const Field* c = clock_field()) {
    if (parts.clock > c->max_value()) return out_of_range(*c, parts.clock);
    id |= parts.clock << c->shift;
  } else if (parts.clock != 0) {
    return Status(StatusCode::kOutOfRange,
                  "clock = " + std::to_string(parts.clock) + " but the layout has no clock field");
  }
  if (parts.node >= node_count()) {
    return Status(StatusCode::kOutOfRange, "node " + std::to_string(parts.node) +
                                               " is out of range: this layout has " +
                                               std::to_string(node_count()) + " node IDs (0-" +
                                               std::to_string(node_count() - 1) + ")");
  }
  int remaining = node_bits_;
  for (const Field& f : fields_) {
    if (f.kind != FieldKind::kNode) continue;
    remaining -= f.bits;
    id |= ((parts.node >> remaining) & f.max_value()) << f.shift;
  }
  return id;
}

Result<IdParts> Layout::decompose(std::uint64_t id) const {
  if (total_bits_ < 64 && (id >> total_bits_) != 0) {
    return InvalidArgument("ID " + std::to_string(id) + " has bits set above bit " +
                           std::to_string(total_bits_ - 1) + ", so this layout (" + to_string() +
                           ") cannot have produced it");
  }
  IdParts parts;
  parts.ticks = field_value(id, time_field());
  parts.seq = field_value(id, seq_field());
  if (const Field* c = clock_field()) parts.clock = field_value(id, *c);
  for (const Field& f : fields_) {
    if (f.kind == FieldKind::kNode) parts.node = parts.node << f.bits | field_value(id, f);
  }
  return parts;
}

TimePoint Layout::time_of(std::uint64_t ticks) const noexcept {
  const Int128 t = static_cast<Int128>(epoch_.time_since_epoch().count()) +
                   static_cast<Int128>(ticks) * unit_.count();
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  return TimePoint(Nanos(t > max ? max : static_cast<std::int64_t>(t)));
}

std::int64_t Layout::ticks_at_by_division(TimePoint t) const noexcept {
  const std::int64_t a = t.time_since_epoch().count();
  const std::int64_t b = epoch_.time_since_epoch().count();
  const std::int64_t u = unit_.count();
  std::int64_t d64 = 0;
  if (!__builtin_sub_overflow(a, b, &d64)) {
    std::int64_t q = d64 / u;
    if (d64 % u != 0 && d64 < 0) --q;  // floor
    return q;
  }
  const Int128 d = static_cast<Int128>(a) - b;
  Int128 q = d / u;
  if (d % u != 0 && d < 0) --q;
  return static_cast<std::int64_t>(q);  // |d| < 2^64 and unit >= 1 us: fits
}

}  // namespace flurry

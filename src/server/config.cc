#include "flurry/server/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <thread>
#include <variant>

#include "flurry/generator.h"
#include "flurry/layout.h"
#include "text.h"

extern char** environ;  // NOLINT: POSIX

namespace flurry::server {
namespace {

constexpr std::array<std::string_view, 18> kKeys = {
    "listen",       "data_dir",           "registry",
    "node",         "node_from_hostname", "layout",
    "lease_ttl_ms", "rollback",           "max_lead_ms",
    "max_wait_ms",  "horizon_window_ms",  "io_threads",
    "max_batch",    "max_connections",    "idle_timeout_ms",
    "header_limit", "body_limit",         "log_level"};

constexpr std::string_view kConfigVariable = "FLURRY_CONFIG";

// A value before it is checked against its setting: text from the environment or a flag, or a
// typed TOML value.
struct Raw {
  enum class Type { kText, kInteger, kBool, kString, kOther } type = Type::kText;
  std::string text;          // kText, kString
  std::int64_t integer = 0;  // kInteger
  bool boolean = false;      // kBool
  std::string toml_type;     // kOther: what the file held instead
  std::string source;        // "flag --x", "environment variable FLURRY_X", "file.toml:3"
};

using Member = std::variant<std::string Config::*, std::uint64_t Config::*, std::uint32_t Config::*,
                            bool Config::*, std::optional<std::uint64_t> Config::*>;

struct Spec {
  std::string_view key;
  Member member;
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  // For strings: the allowed values, empty when any non-empty text goes (checked elsewhere).
  std::span<const std::string_view> choices = {};
};

constexpr std::array<std::string_view, 2> kRegistries = {"sqlite", "static"};
constexpr std::array<std::string_view, 3> kRollbacks = {"wait", "fail", "clock"};
constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug",    "info", "warn",
                                                        "error", "critical", "off"};

constexpr std::uint64_t kDay = 86'400'000;

const std::array<Spec, 18>& specs() {
  static const std::array<Spec, 18> kSpecs = {{
      {"listen", &Config::listen},
      {"data_dir", &Config::data_dir},
      {"registry", &Config::registry, 0, 0, kRegistries},
      {"node", &Config::node, 0, std::uint64_t{1} << 62},
      {"node_from_hostname", &Config::node_from_hostname},
      {"layout", &Config::layout},
      {"lease_ttl_ms", &Config::lease_ttl_ms, 500, kDay},
      {"rollback", &Config::rollback, 0, 0, kRollbacks},
      {"max_lead_ms", &Config::max_lead_ms, 0, kDay},
      {"max_wait_ms", &Config::max_wait_ms, 0, kDay},
      {"horizon_window_ms", &Config::horizon_window_ms, 1, 2 * kDay},
      {"io_threads", &Config::io_threads, 1, 256},
      {"max_batch", &Config::max_batch, 1, 10'000'000},
      {"max_connections", &Config::max_connections, 1, 1'000'000},
      {"idle_timeout_ms", &Config::idle_timeout_ms, 100, kDay},
      {"header_limit", &Config::header_limit, 512, 1 << 20},
      {"body_limit", &Config::body_limit, 0, std::uint64_t{64} << 20},
      {"log_level", &Config::log_level, 0, 0, kLogLevels},
  }};
  return kSpecs;
}

const Spec* find_spec(std::string_view key) {
  for (const Spec& s : specs()) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

std::string join(std::span<const std::string_view> items, std::string_view last_sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? last_sep : ", ";
    out += items[i];
  }
  return out;
}

// Levenshtein distance, for "did you mean" hints.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean \"lease_ttl_ms\"?)" for a near miss, else "".
std::string suggestion(std::string_view unknown, bool as_env) {
  std::string best;
  std::size_t best_distance = 3;
  for (std::string_view key : kKeys) {
    const std::string candidate = as_env ? env_name(key) : std::string(key);
    const std::size_t d = distance(unknown, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best.empty() ? std::string() : " (did you mean " + quote(best) + "?)";
}

Status bad(std::string_view key, const std::string& why, std::string_view source) {
  return InvalidArgument(std::string(key) + ": " + why + " (" + std::string(source) + ")");
}

Result<std::uint64_t> parse_whole(std::string_view text) {
  if (text.empty()) return InvalidArgument("the value is empty; expected a whole number");
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return InvalidArgument(quote(text) + " is not a whole number");
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument(quote(text) + " is too large");
  }
  return v;
}

// Applies one raw value to `config`, checking it against its spec.
// The position of the first byte that is not part of valid UTF-8, or npos.
std::size_t invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = cp << 6 | (cc & 0x3F);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

Status apply(Config& config, const Spec& spec, const Raw& raw) {
  const std::string_view key = spec.key;
  const auto type_error = [&](std::string_view expected) {
    return bad(key, "expected " + std::string(expected) + ", got " + raw.toml_type, raw.source);
  };
  struct Visitor {
    Config& config;
    const Spec& spec;
    const Raw& raw;
    const decltype(type_error)& type_err;

    Status uint_value(std::uint64_t& out) const {
      std::uint64_t v = 0;
      if (raw.type == Raw::Type::kText) {
        Result<std::uint64_t> parsed = parse_whole(raw.text);
        if (!parsed.ok()) return bad(spec.key, parsed.status().message(), raw.source);
        v = *parsed;
      } else if (raw.type == Raw::Type::kInteger) {
        if (raw.integer < 0) {
          return bad(spec.key, std::to_string(raw.integer) + " must not be negative", raw.source);
        }
        v = static_cast<std::uint64_t>(raw.integer);
      } else {
        return type_err("an integer");
      }
      if (v < spec.min || v > spec.max) {
        return bad(spec.key,
                   std::to_string(v) + " is out of range (" + std::to_string(spec.min) + " to " +
                       std::to_string(spec.max) + ")",
                   raw.source);
      }
      out = v;
      return OkStatus();
    }

    Status operator()(std::string Config::*m) const {
      std::string v;
      if (raw.type == Raw::Type::kText || raw.type == Raw::Type::kString) {
        v = raw.text;
      } else {
        return type_err("a string");
      }
      if (v.empty()) return bad(spec.key, "is empty", raw.source);
      // A setting --print-config could not write back as TOML is refused up front.
      if (const std::size_t at = invalid_utf8_at(v); at != std::string_view::npos) {
        return bad(spec.key, "is not valid UTF-8 (at byte " + std::to_string(at) + ")", raw.source);
      }
      if (!spec.choices.empty() &&
          std::find(spec.choices.begin(), spec.choices.end(), v) == spec.choices.end()) {
        return bad(spec.key, quote(v) + " is not one of " + join(spec.choices, " or "), raw.source);
      }
      config.*m = std::move(v);
      return OkStatus();
    }
    Status operator()(std::uint64_t Config::*m) const { return uint_value(config.*m); }
    Status operator()(std::uint32_t Config::*m) const {
      std::uint64_t v = 0;
      if (Status st = uint_value(v); !st.ok()) return st;
      config.*m = static_cast<std::uint32_t>(v);
      return OkStatus();
    }
    Status operator()(std::optional<std::uint64_t> Config::*m) const {
      std::uint64_t v = 0;
      if (Status st = uint_value(v); !st.ok()) return st;
      config.*m = v;
      return OkStatus();
    }
    Status operator()(bool Config::*m) const {
      if (raw.type == Raw::Type::kBool) {
        config.*m = raw.boolean;
        return OkStatus();
      }
      if (raw.type != Raw::Type::kText) return type_err("true or false");
      if (raw.text == "true" || raw.text == "1") {
        config.*m = true;
      } else if (raw.text == "false" || raw.text == "0") {
        config.*m = false;
      } else {
        return bad(spec.key, quote(raw.text) + " is not true or false", raw.source);
      }
      return OkStatus();
    }
  };
  return std::visit(Visitor{config, spec, raw, type_error}, spec.member);
}

std::string read_error(const std::string& path) {
  return "cannot read config file " + quote(path) + ": " + std::strerror(errno);
}

// Reads the TOML file into raw values, in file order.
Status read_file(const std::string& path, std::vector<std::pair<const Spec*, Raw>>& out) {
  std::string text;
  {
    errno = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in) return InvalidArgument(read_error(path));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return InvalidArgument(read_error(path));
    text = ss.str();
  }
  toml::table table;
  try {
    table = toml::parse(text, std::string_view(path));
  } catch (const toml::parse_error& e) {
    return InvalidArgument("config file " + path + ":" + std::to_string(e.source().begin.line) +
                           ":" + std::to_string(e.source().begin.column) + ": " +
                           std::string(e.description()));
  }
  for (auto&& [k, v] : table) {
    const std::string key(k.str());
    const std::string where = path + ":" + std::to_string(v.source().begin.line);
    const Spec* spec = find_spec(key);
    if (spec == nullptr) {
      const std::string hint = suggestion(key, false);
      return InvalidArgument("unknown key " + quote(key) + " in config file " + where +
                             (hint.empty() ? " (known keys: " + join(kKeys, " and ") + ")" : hint));
    }
    Raw raw;
    raw.source = where;
    if (v.is_integer()) {
      raw.type = Raw::Type::kInteger;
      raw.integer = v.as_integer()->get();
      raw.toml_type = "an integer";
    } else if (v.is_string()) {
      raw.type = Raw::Type::kString;
      raw.text = v.as_string()->get();
      raw.toml_type = "a string";
    } else if (v.is_boolean()) {
      raw.type = Raw::Type::kBool;
      raw.boolean = v.as_boolean()->get();
      raw.toml_type = "a boolean";
    } else {
      raw.type = Raw::Type::kOther;
      switch (v.type()) {
        case toml::node_type::table:
          raw.toml_type = "a table";
          break;
        case toml::node_type::array:
          raw.toml_type = "an array";
          break;
        case toml::node_type::floating_point:
          raw.toml_type = "a floating-point number";
          break;
        default:
          raw.toml_type = "a date or time";
          break;
      }
    }
    out.emplace_back(spec, std::move(raw));
  }
  return OkStatus();
}

Status check_combinations(const Config& c, const std::map<std::string, std::string>& source) {
  const auto src = [&](std::string_view key) -> std::string {
    auto it = source.find(std::string(key));
    return it == source.end() ? "default" : it->second;
  };
  if (Result<ListenAddress> l = parse_listen(c.listen); !l.ok()) {
    return bad("listen", l.status().message(), src("listen"));
  }
  Result<Layout> layout = Layout::parse(c.layout);
  if (!layout.ok()) return bad("layout", layout.status().message(), src("layout"));
  if (c.registry == "static") {
    if (!c.node && !c.node_from_hostname) {
      return bad("registry",
                 "the static registry needs node (a fixed node ID) or node_from_hostname = true",
                 src("registry"));
    }
    if (c.node && c.node_from_hostname) {
      return bad("node", "node and node_from_hostname = true exclude each other", src("node"));
    }
  } else {
    if (c.node) {
      return bad("node",
                 "a node ID is only given with registry = \"static\"; the " + c.registry +
                     " registry leases one",
                 src("node"));
    }
    if (c.node_from_hostname) {
      return bad(
          "node_from_hostname",
          "only used with registry = \"static\"; the " + c.registry + " registry leases node IDs",
          src("node_from_hostname"));
    }
  }
  if (c.node && *c.node >= layout->node_count()) {
    return bad("node",
               std::to_string(*c.node) + " is out of range: layout " + quote(c.layout) +
                   " has node IDs 0-" + std::to_string(layout->node_count() - 1),
               src("node"));
  }
  if (c.horizon_window_ms <= c.max_lead_ms) {
    return InvalidArgument("horizon_window_ms (" + std::to_string(c.horizon_window_ms) + ", " +
                           src("horizon_window_ms") + ") must exceed max_lead_ms (" +
                           std::to_string(c.max_lead_ms) + ", " + src("max_lead_ms") + ")");
  }
  if (c.rollback == "clock" && layout->clock_field() == nullptr) {
    return bad("rollback",
               "\"clock\" needs a layout with a clock field (e.g. layout = \"multiclock\"); " +
                   quote(c.layout) + " has none",
               src("rollback"));
  }
  return OkStatus();
}

std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace

std::span<const std::string_view> config_keys() noexcept {
  return kKeys;
}

std::string env_name(std::string_view key) {
  std::string out = "FLURRY_";
  for (char c : key) out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return out;
}

std::string flag_name(std::string_view key) {
  std::string out = "--";
  for (char c : key) out += c == '_' ? '-' : c;
  return out;
}

std::vector<std::pair<std::string, std::string>> flurry_environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.substr(0, 7) != "FLURRY_") continue;
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return out;
}

Result<ListenAddress> parse_listen(std::string_view text) {
  const auto malformed = [&] {
    return InvalidArgument(quote(text) +
                           " is not host:port (e.g. 127.0.0.1:7609, 0.0.0.0:7609, [::1]:7609)");
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return malformed();
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return malformed();
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return InvalidArgument(quote(text) + ": write an IPv6 address in brackets, e.g. [::1]:7609");
  }
  if (host.empty() || port.empty() || port.size() > 5) return malformed();
  for (char c : host) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '/' || c == '[' || c == ']') {
      return malformed();
    }
  }
  std::uint32_t p = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return malformed();
    p = p * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (p > 65535) return InvalidArgument(quote(text) + ": the port must be at most 65535");
  return ListenAddress{std::string(host), static_cast<std::uint16_t>(p)};
}

Result<Config> load_config(const ConfigInputs& inputs) {
  Config config;
  std::map<std::string, std::string> source;

  // The file.
  std::optional<std::string> file = inputs.file;
  if (!file) {
    for (const auto& [name, value] : inputs.env) {
      if (name == kConfigVariable) {
        if (value.empty()) {
          return InvalidArgument(
              "environment variable FLURRY_CONFIG is empty; unset it or name "
              "a TOML file");
        }
        file = value;
      }
    }
  }
  if (file) {
    if (file->empty()) return InvalidArgument("--config: the file name is empty");
    std::vector<std::pair<const Spec*, Raw>> values;
    if (Status st = read_file(*file, values); !st.ok()) return st;
    for (const auto& [spec, raw] : values) {
      if (Status st = apply(config, *spec, raw); !st.ok()) return st;
      source[std::string(spec->key)] = raw.source;
    }
  }

  // The environment, in a fixed order (the key order) so errors do not depend on `environ`.
  for (const auto& [name, value] : inputs.env) {
    if (name.substr(0, 7) != "FLURRY_" || name == kConfigVariable) continue;
    bool known = false;
    for (std::string_view key : kKeys) known = known || env_name(key) == name;
    if (!known) {
      const std::string hint = suggestion(name, true);
      if (!hint.empty()) {
        return InvalidArgument("environment variable " + name + " is not a flurry setting" + hint);
      }
      std::string names;
      for (std::string_view key : kKeys) names += (names.empty() ? "" : ", ") + env_name(key);
      return InvalidArgument("environment variable " + name +
                             " is not a flurry setting (known: " + names + ", FLURRY_CONFIG)");
    }
  }
  for (std::string_view key : kKeys) {
    const std::string var = env_name(key);
    for (const auto& [name, value] : inputs.env) {
      if (name != var) continue;
      Raw raw;
      raw.text = value;
      raw.source = "environment variable " + var;
      if (Status st = apply(config, *find_spec(key), raw); !st.ok()) return st;
      source[std::string(key)] = raw.source;
    }
  }

  // The flags.
  for (const FlagValue& f : inputs.flags) {
    const Spec* spec = find_spec(f.key);
    if (spec == nullptr) return InvalidArgument("unknown setting " + quote(f.key));
    Raw raw;
    raw.text = f.value;
    raw.source = "flag " + f.flag;
    if (Status st = apply(config, *spec, raw); !st.ok()) return st;
    source[f.key] = raw.source;
  }

  if (Status st = check_combinations(config, source); !st.ok()) return st;
  return config;
}

Status validate_config(const Config& config) {
  for (const Spec& spec : specs()) {
    Raw raw;
    raw.source = "default";
    bool present = true;
    std::visit(
        [&](auto m) {
          using T = std::remove_cvref_t<decltype(config.*m)>;
          if constexpr (std::is_same_v<T, std::string>) {
            raw.text = config.*m;
          } else if constexpr (std::is_same_v<T, bool>) {
            raw.type = Raw::Type::kBool;
            raw.boolean = config.*m;
          } else if constexpr (std::is_same_v<T, std::optional<std::uint64_t>>) {
            present = (config.*m).has_value();
            raw.text = present ? std::to_string(*(config.*m)) : "";
          } else {
            raw.text = std::to_string(config.*m);
          }
        },
        spec.member);
    if (!present) continue;
    Config scratch;
    if (Status st = apply(scratch, spec, raw); !st.ok()) return st;
  }
  return check_combinations(config, {});
}

std::string to_toml(const Config& c) {
  std::string out = "# flurry serve: effective configuration\n";
  const auto line = [&](std::string_view key, const std::string& value) {
    out += key;
    out += " = ";
    out += value;
    out += '\n';
  };
  line("listen", toml_string(c.listen));
  line("data_dir", toml_string(c.data_dir));
  line("registry", toml_string(c.registry));
  if (c.node) {
    line("node", std::to_string(*c.node));
  } else {
    out += "# node = (not set)\n";
  }
  line("node_from_hostname", c.node_from_hostname ? "true" : "false");
  line("layout", toml_string(c.layout));
  line("lease_ttl_ms", std::to_string(c.lease_ttl_ms));
  line("rollback", toml_string(c.rollback));
  line("max_lead_ms", std::to_string(c.max_lead_ms));
  line("max_wait_ms", std::to_string(c.max_wait_ms));
  line("horizon_window_ms", std::to_string(c.horizon_window_ms));
  line("io_threads", std::to_string(c.io_threads));
  line("max_batch", std::to_string(c.max_batch));
  line("max_connections", std::to_string(c.max_connections));
  line("idle_timeout_ms", std::to_string(c.idle_timeout_ms));
  line("header_limit", std::to_string(c.header_limit));
  line("body_limit", std::to_string(c.body_limit));
  line("log_level", toml_string(c.log_level));
  return out;
}

std::uint32_t default_io_threads() noexcept {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 1 ? cores - 1 : 1;
}

}  // namespace flurry::server

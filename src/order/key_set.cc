// OrderKeySet: AES keys by version character, and their text form (see order_number.h). No
// message built here ever contains key material: errors name the source and the line only.
#include <fcntl.h>
#include <string.h>  // explicit_bzero: a wipe the compiler cannot drop
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "core/quote.h"
#include "flurry/order_number.h"
#include "key_set_internal.h"

namespace flurry {
namespace {

constexpr std::size_t kMaxFileBytes = 64 * 1024;

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

char upper(char c) noexcept {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr std::string_view kVersionRule =
    "a key version is one character: 0-9 or A-Z without I, L, O and U";

// Wipes a buffer that held key material when it goes out of scope.
class Wipe {
 public:
  Wipe(void* p, std::size_t n) noexcept : p_(p), n_(n) {}
  Wipe(const Wipe&) = delete;
  Wipe& operator=(const Wipe&) = delete;
  ~Wipe() { explicit_bzero(p_, n_); }

 private:
  void* p_;
  std::size_t n_;
};

}  // namespace

namespace internal {
bool valid_key_version(char c) noexcept {
  if (c >= '0' && c <= '9') return true;
  return c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U';
}
}  // namespace internal

OrderKeySet::Keys::~Keys() {
  explicit_bzero(entries.data(), sizeof(entries));
}

OrderKeySet::OrderKeySet() : keys_(std::make_unique<Keys>()) {}
OrderKeySet::OrderKeySet(OrderKeySet&&) noexcept = default;
OrderKeySet& OrderKeySet::operator=(OrderKeySet&&) noexcept = default;
OrderKeySet::~OrderKeySet() = default;

Status OrderKeySet::add(char version, std::span<const std::uint8_t> key) {
  if (!keys_) keys_ = std::make_unique<Keys>();
  version = upper(version);
  if (!internal::valid_key_version(version)) return InvalidArgument(std::string(kVersionRule));
  for (std::size_t i = 0; i < keys_->count; ++i) {
    if (keys_->entries[i].version == version) {
      return InvalidArgument(std::string("key version '") + version + "' appears twice");
    }
  }
  if (key.size() != 16 && key.size() != 24 && key.size() != 32) {
    return InvalidArgument(std::string("the key for version '") + version + "' has " +
                           std::to_string(key.size()) +
                           " bytes; AES keys have 16, 24 or 32 (32, 48 or 64 hex digits)");
  }
  if (keys_->count == kMaxKeys) {
    return InvalidArgument("a key set holds at most " + std::to_string(kMaxKeys) + " keys");
  }
  Keys::Entry& e = keys_->entries[keys_->count++];
  e.version = version;
  e.size = static_cast<std::uint8_t>(key.size());
  std::memcpy(e.bytes.data(), key.data(), key.size());
  keys_->active = version;
  return OkStatus();
}

Status OrderKeySet::set_active(char version) {
  version = upper(version);
  for (std::size_t i = 0; keys_ && i < keys_->count; ++i) {
    if (keys_->entries[i].version == version) {
      keys_->active = version;
      return OkStatus();
    }
  }
  return InvalidArgument("no key has version " + internal::quote_char(version));
}

std::size_t OrderKeySet::size() const noexcept {
  return keys_ ? keys_->count : 0;
}

char OrderKeySet::active() const noexcept {
  return keys_ ? keys_->active : '\0';
}

std::string OrderKeySet::versions() const {
  std::string out;
  for (std::size_t i = 0; i < size(); ++i) out += keys_->entries[i].version;
  return out;
}

std::string OrderKeySet::to_string() const {
  if (empty()) return "order keys: none";
  std::string out = "order keys: version";
  out += size() == 1 ? " " : "s ";
  const std::string v = versions();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ", ";
    out += v[i];
  }
  out += " (active ";
  out += active();
  out += ')';
  return out;
}

Result<OrderKeySet> OrderKeySet::parse(std::string_view text, std::string_view source) {
  OrderKeySet set;
  char active = '\0';
  std::size_t active_line = 0;
  std::size_t line = 0;
  std::array<std::uint8_t, 32> key{};
  const Wipe wipe(key.data(), key.size());
  while (!text.empty() || line == 0) {
    ++line;
    const std::size_t end = text.find_first_of("\n;");
    const std::string_view entry = trim(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const auto where = [&] { return std::string(source) + " line " + std::to_string(line) + ": "; };
    if (entry.empty() || entry.front() == '#') {
      if (text.empty()) break;
      continue;
    }
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(where() + "expected `VERSION = HEX KEY` or `active = VERSION`");
    }
    const std::string_view name = trim(entry.substr(0, eq));
    const std::string_view value = trim(entry.substr(eq + 1));
    if (name.size() == 6 && (name == "active" || name == "ACTIVE")) {
      if (value.size() != 1 || !internal::valid_key_version(upper(value[0]))) {
        return InvalidArgument(where() +
                               "active names a key version: " + std::string(kVersionRule));
      }
      active = upper(value[0]);
      active_line = line;
      continue;
    }
    if (name.size() != 1 || !internal::valid_key_version(upper(name[0]))) {
      return InvalidArgument(where() + std::string(kVersionRule));
    }
    const char version = upper(name[0]);
    for (std::size_t i = 0; i < set.size(); ++i) {
      if (set.keys_->entries[i].version == version) {
        return InvalidArgument(where() + "key version '" + version + "' appears twice");
      }
    }
    if (value.size() != 32 && value.size() != 48 && value.size() != 64) {
      return InvalidArgument(where() + "the key for version '" + version + "' has " +
                             std::to_string(value.size()) +
                             " characters; AES keys are 32, 48 or 64 hex digits (16, 24 or 32 "
                             "bytes)");
    }
    for (std::size_t i = 0; i < value.size(); i += 2) {
      const int hi = hex_value(value[i]);
      const int lo = hex_value(value[i + 1]);
      if (hi < 0 || lo < 0) {
        return InvalidArgument(where() + "the key for version '" + version +
                               "' is not hexadecimal (0-9, a-f, A-F)");
      }
      key[i / 2] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    if (Status st = set.add(version, std::span(key.data(), value.size() / 2)); !st.ok()) {
      return st.with_prefix(std::string(source) + " line " + std::to_string(line));
    }
    if (text.empty()) break;
  }
  if (set.empty()) {
    return InvalidArgument(std::string(source) +
                           " holds no keys (expected lines `VERSION = HEX "
                           "KEY`)");
  }
  if (active != '\0') {
    if (Status st = set.set_active(active); !st.ok()) {
      return InvalidArgument(std::string(source) + " line " + std::to_string(active_line) +
                             ": active names version '" + active + "', which has no key");
    }
  }
  return set;
}

Result<OrderKeySet> OrderKeySet::load_file(const std::filesystem::path& path) {
  const std::string source = "key file " + internal::quote(path.string(), 256);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(Reason::kIo, "cannot open " + source + ": " + std::strerror(errno));
  }
  std::string content(kMaxFileBytes + 1, '\0');
  const Wipe wipe(content.data(), content.size());
  std::size_t size = 0;
  while (size < content.size()) {
    const ssize_t r = ::read(fd, content.data() + size, content.size() - size);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      return Status(Reason::kIo, "cannot read " + source + ": " + std::strerror(err));
    }
    if (r == 0) break;
    size += static_cast<std::size_t>(r);
  }
  ::close(fd);
  if (size > kMaxFileBytes) {
    return InvalidArgument(source + " is larger than " + std::to_string(kMaxFileBytes) + " bytes");
  }
  return parse(std::string_view(content.data(), size), source);
}

Result<OrderKeySet> OrderKeySet::from_env(const char* name) {
  const std::string source = "environment variable " + std::string(name);
  const char* value = std::getenv(name);
  if (value == nullptr) return InvalidArgument(source + " is not set");
  return parse(value, source);
}

}  // namespace flurry

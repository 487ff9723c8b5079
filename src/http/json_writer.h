// Internal: the HTTP layer's one JSON writer. Objects, arrays, keys and values written straight
// into an OutBuf (text.h), the commas placed by the writer: no tree, no allocation beyond the
// buffer's own growth. Strings (keys too) are escaped by OutBuf::append_json_string, so the
// output is valid UTF-8 JSON whatever the input held; numbers are written as OutBuf writes them
// (doubles in their shortest round-trip form, NaN and infinities as null).
//
// Usage: JsonWriter w(body); w.begin_object().field("node", 3).key("fields").begin_array() ...
// The caller nests correctly (every begin_* has its end_*, a value follows each key): the writer
// does not check that, it only keeps the commas right. At most kMaxDepth levels of nesting.
// Not thread-safe (one writer per body).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "text.h"

namespace flurry::http {

class JsonWriter {
 public:
  static constexpr std::size_t kMaxDepth = 64;

  explicit JsonWriter(OutBuf& out) noexcept : out_(out) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }

  // `"name":`; a value (or begin_*) must follow.
  JsonWriter& key(std::string_view name) {
    separate();
    out_.append_json_string(name);
    out_.push(':');
    after_key_ = true;
    return *this;
  }

  // A string, escaped.
  JsonWriter& value(std::string_view s) {
    separate();
    out_.append_json_string(s);
    return *this;
  }
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b) {
    separate();
    out_.append(b ? "true" : "false");
    return *this;
  }
  template <std::unsigned_integral T>
  JsonWriter& value(T n) {
    separate();
    out_.append_uint(n);
    return *this;
  }
  template <std::signed_integral T>
  JsonWriter& value(T n) {
    separate();
    out_.append_int(n);
    return *this;
  }
  JsonWriter& value(double d) {
    separate();
    out_.append_double(d);
    return *this;
  }
  // The value, or null when there is none.
  template <typename T>
  JsonWriter& value(const std::optional<T>& v) {
    return v ? value(*v) : null();
  }
  JsonWriter& null() {
    separate();
    out_.append("null");
    return *this;
  }
  // A 64-bit number as a decimal string ("123"), for clients whose numbers are doubles.
  JsonWriter& id_string(std::uint64_t id) {
    separate();
    out_.push('"');
    out_.append_uint(id);
    out_.push('"');
    return *this;
  }
  // JSON written elsewhere (a cached document, a trusted constant), taken as one value.
  JsonWriter& raw(std::string_view json) {
    separate();
    out_.append(json);
    return *this;
  }

  // key(name) then value(v).
  template <typename T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

  // Continues an object whose opening (and `members` members, 0 or more) some other writer
  // wrote, e.g. a cached prefix: the next key gets a comma when members > 0.
  JsonWriter& resume_object(std::size_t members) {
    ++depth_;
    set_has_members(members > 0);
    return *this;
  }

 private:
  JsonWriter& open(char c) {
    separate();
    out_.push(c);
    ++depth_;
    set_has_members(false);
    return *this;
  }
  JsonWriter& close(char c) {
    out_.push(c);
    --depth_;
    return *this;
  }
  // The comma before a member, unless it is the first of its container or follows its key.
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (depth_ == 0) return;
    if (has_members()) out_.push(',');
    set_has_members(true);
  }
  [[nodiscard]] bool has_members() const noexcept {
    return ((members_ >> (depth_ % kMaxDepth)) & 1U) != 0;
  }
  void set_has_members(bool yes) noexcept {
    const std::uint64_t bit = std::uint64_t{1} << (depth_ % kMaxDepth);
    members_ = yes ? (members_ | bit) : (members_ & ~bit);
  }

  OutBuf& out_;
  std::uint64_t members_ = 0;  // bit d: the container at depth d has a member already
  std::size_t depth_ = 0;
  bool after_key_ = false;
};

}  // namespace flurry::http

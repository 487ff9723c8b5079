#include "common.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <system_error>

#include "core/numbers.h"
#include "core/quote.h"

namespace flurry::cli {

std::string one_line(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

void print_error(std::string_view message) {
  std::cout.flush();
  std::cerr << "flurry: " << one_line(message) << '\n';
  std::cerr.flush();
}

int fail(const Status& status) {
  if (status.ok()) {
    print_error("internal error: failure reported with an OK status");
  } else if (status.reason() == Reason::kBadInput && !status.message().empty()) {
    print_error(status.message());
  } else {
    print_error(status.to_string());
  }
  return kExitFailure;
}

std::uint64_t parse_uint(std::string_view text, std::string_view option, std::uint64_t min,
                         std::uint64_t max) {
  const auto bad = [&](const std::string& why) {
    return UsageError(std::string(option) + ": " + internal::quote(text) + " " + why);
  };
  const internal::ParsedUint n = internal::parse_uint(text, max);
  switch (n.error) {
    case internal::UintError::kNone:
      break;
    case internal::UintError::kEmpty:
      throw bad("is empty; expected a whole number");
    case internal::UintError::kNotDigits:
      throw bad("is not a whole number");
    case internal::UintError::kTooLarge:
      throw bad("is too large (at most " + std::to_string(max) + ")");
  }
  if (n.value < min) throw bad("is too small (at least " + std::to_string(min) + ")");
  return n.value;
}

Nanos parse_millis(std::string_view text, std::string_view option) {
  // 10^12 ms is about 31 years; far below the 292 years nanoseconds in 64 bits can hold.
  constexpr std::uint64_t kMaxMillis = 1'000'000'000'000;
  const std::uint64_t ms = parse_uint(text, option, 0, kMaxMillis);
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

double parse_seconds(std::string_view text, std::string_view option, double max) {
  const auto bad = [&](const std::string& why) {
    return UsageError(std::string(option) + ": " + internal::quote(text) + " " + why);
  };
  if (text.empty()) throw bad("is empty; expected a number of seconds");
  for (char c : text) {
    if ((c < '0' || c > '9') && c != '.') throw bad("is not a number of seconds");
  }
  double value = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::fixed);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    throw bad("is not a number of seconds");
  }
  if (value <= 0) throw bad("must be more than 0");
  if (value > max) throw bad("is too large (at most " + format_number(max) + ")");
  return value;
}

IdEncoding parse_format(std::string_view text) {
  Result<IdEncoding> format = parse_id_encoding(text);
  if (!format.ok()) {
    throw UsageError("--format: " + internal::quote(text) + " is not an encoding (expected " +
                     id_encoding_names() + ")");
  }
  return *format;
}

RollbackPolicy parse_rollback(std::string_view text) {
  Result<RollbackPolicy> policy = parse_rollback_policy(text);
  if (!policy.ok()) {
    throw UsageError("--rollback: " + internal::quote(text) +
                     " is not a rollback policy (expected wait, fail or clock)");
  }
  return *policy;
}

std::string format_duration(Nanos d) {
  const std::int64_t ns = d.count();
  if (ns == 0) return "0s";
  struct Unit {
    std::int64_t ns;
    const char* suffix;
  };
  constexpr Unit kUnits[] = {{86'400'000'000'000, "d"}, {3'600'000'000'000, "h"},
                             {60'000'000'000, "min"},   {1'000'000'000, "s"},
                             {1'000'000, "ms"},         {1'000, "us"}};
  for (const Unit& u : kUnits) {
    if (ns % u.ns == 0) return std::to_string(ns / u.ns) + u.suffix;
  }
  return std::to_string(ns) + "ns";
}

std::string format_number(double value) {
  if (!std::isfinite(value)) return value > 0 ? "inf" : "nan";
  if (value == std::floor(value) && std::fabs(value) < 1e18) {
    return std::to_string(static_cast<std::int64_t>(value));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", value);
  return buf;
}

OutputBuffer::OutputBuffer(int fd, std::size_t capacity) : fd_(fd), buf_(capacity, '\0') {}

OutputBuffer::~OutputBuffer() {
  (void)flush();
}

bool OutputBuffer::flush() {
  std::size_t done = 0;
  while (error_ == 0 && done < used_) {
    const ssize_t n = ::write(fd_, buf_.data() + done, used_ - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      error_ = errno;
    } else {
      done += static_cast<std::size_t>(n);
    }
  }
  used_ = 0;
  return error_ == 0;
}

void OutputBuffer::reserve(std::size_t n) {
  if (buf_.size() - used_ < n) (void)flush();
}

void OutputBuffer::append(std::string_view text) {
  if (error_ != 0) return;
  if (text.size() > buf_.size()) {
    (void)flush();
    std::size_t done = 0;
    while (error_ == 0 && done < text.size()) {
      const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
      if (n < 0) {
        if (errno != EINTR) error_ = errno;
      } else {
        done += static_cast<std::size_t>(n);
      }
    }
    return;
  }
  reserve(text.size());
  text.copy(buf_.data() + used_, text.size());
  used_ += text.size();
}

void OutputBuffer::append_id_line(std::uint64_t id, Encoding encoding) {
  reserve(kMaxEncodedIdLength + 1);
  char* const begin = buf_.data() + used_;
  char* end = write_id(begin, id, encoding);
  *end++ = '\n';
  used_ += static_cast<std::size_t>(end - begin);
}

void OutputBuffer::append_id_line(std::uint64_t id, const IdTextCodec& codec) {
  reserve(IdTextCodec::kMaxTextLength + 1);
  char* const begin = buf_.data() + used_;
  char* end = codec.write(begin, id);
  *end++ = '\n';
  used_ += static_cast<std::size_t>(end - begin);
}

void print_rows(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

}  // namespace flurry::cli

#include "flurry/timefmt.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/quote.h"

namespace flurry {
namespace {

namespace chr = std::chrono;
using internal::quote;
using internal::quote_char;

constexpr std::string_view kExpectedForms =
    "expected a date \"YYYY-MM-DD\", \"YYYY-MM-DDZ\" or \"YYYY-MM-DDTHH:MM[:SS[.fraction]]Z\", "
    "or an integer count of milliseconds since the Unix epoch";

constexpr std::array<std::string_view, 12> kMonthNames = {
    "January", "February", "March",     "April",   "May",      "June",
    "July",    "August",   "September", "October", "November", "December"};

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

Status bad_time(std::string_view text, std::string_view why) {
  std::string msg = "bad time ";
  msg += quote(text);
  msg += ": ";
  msg += why;
  return InvalidArgument(std::move(msg));
}

// TimePoint::min() and max() with full precision (the parse tests check both ends).
constexpr std::string_view kRangeText =
    "outside the representable range 1677-09-21T00:12:43.145224192Z to "
    "2262-04-11T23:47:16.854775807Z";

// Writes `value` as exactly `width` decimal digits (value must fit).
char* put_digits(char* out, unsigned value, int width) noexcept {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  return out + width;
}

// A cursor over the text being parsed.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  [[nodiscard]] bool at_end() const noexcept { return pos_ >= text_.size(); }
  [[nodiscard]] char peek() const noexcept { return text_[pos_]; }
  [[nodiscard]] std::size_t pos() const noexcept { return pos_; }
  void advance() noexcept { ++pos_; }

  Status fail(std::string_view why) const { return bad_time(text_, why); }

  // "found 'x' at position N" or "but the text ends at position N".
  [[nodiscard]] std::string found() const {
    if (at_end()) return "but the text ends at position " + std::to_string(pos_);
    return "found " + quote_char(peek()) + " at position " + std::to_string(pos_);
  }

  // Reads exactly `width` digits naming `what`.
  Status fixed_digits(int width, std::string_view what, int& value) {
    value = 0;
    for (int i = 0; i < width; ++i) {
      if (at_end() || !is_digit(peek())) {
        return fail("expected a " + std::to_string(width) + "-digit " + std::string(what) + ", " +
                    found());
      }
      value = value * 10 + (peek() - '0');
      advance();
    }
    return OkStatus();
  }

  Status expect(char c, std::string_view after) {
    if (at_end() || peek() != c) {
      return fail("expected " + quote_char(c) + " after the " + std::string(after) + ", " +
                  found());
    }
    advance();
    return OkStatus();
  }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

// The integer form: an optionally negative count of milliseconds since the Unix epoch.
Result<TimePoint> parse_unix_millis(std::string_view text) {
  Parser p(text);
  bool negative = false;
  if (p.peek() == '-') {
    negative = true;
    p.advance();
  }
  if (p.at_end()) return p.fail("expected digits after '-'");
  // Magnitude limit: 2^63 - 1 for positive, 2^63 for negative counts.
  const std::uint64_t limit =
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + (negative ? 1 : 0);
  std::uint64_t magnitude = 0;
  bool overflow = false;
  for (; !p.at_end(); p.advance()) {
    const char c = p.peek();
    if (!is_digit(c)) {
      return p.fail("unexpected character " + quote_char(c) + " at position " +
                    std::to_string(p.pos()) + "; " + std::string(kExpectedForms));
    }
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (!overflow && magnitude > (limit - digit) / 10) overflow = true;
    if (!overflow) magnitude = magnitude * 10 + digit;
  }
  if (overflow) return p.fail("the integer count of milliseconds overflows 64 bits");
  // Two's complement: negating 2^63 as unsigned then converting gives INT64_MIN exactly.
  const auto ms =
      negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
  std::int64_t ns = 0;
  if (__builtin_mul_overflow(ms, std::int64_t{1'000'000}, &ns)) {
    return p.fail(std::to_string(ms) + " ms since the Unix epoch is " + std::string(kRangeText));
  }
  return TimePoint(Nanos(ns));
}

// "YYYY-MM-DD", checked against the calendar.
Result<chr::year_month_day> parse_date(Parser& p) {
  int year = 0;
  int month = 0;
  int day = 0;
  if (Status s = p.fixed_digits(4, "year", year); !s.ok()) return s;
  if (Status s = p.expect('-', "year"); !s.ok()) return s;
  if (Status s = p.fixed_digits(2, "month", month); !s.ok()) return s;
  if (Status s = p.expect('-', "month"); !s.ok()) return s;
  if (Status s = p.fixed_digits(2, "day", day); !s.ok()) return s;
  if (month < 1 || month > 12) {
    return p.fail("month " + std::to_string(month) + " is out of range 1-12");
  }
  const chr::year_month_day ymd{chr::year{year}, chr::month{static_cast<unsigned>(month)},
                                chr::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) {
    const chr::year_month_day_last last{
        chr::year{year}, chr::month_day_last{chr::month{static_cast<unsigned>(month)}}};
    return p.fail("day " + std::to_string(day) + " is out of range 1-" +
                  std::to_string(static_cast<unsigned>(last.day())) + " for " +
                  std::string(kMonthNames[static_cast<std::size_t>(month - 1)]) + " " +
                  std::to_string(year));
  }
  return ymd;
}

struct TimeOfDay {
  int hour = 0;
  int minute = 0;
  int second = 0;
  std::int64_t fraction_ns = 0;
};

// The digits after '.': at most 9 (nanoseconds).
Status parse_fraction(Parser& p, std::int64_t& fraction_ns) {
  int digits = 0;
  std::int64_t scale = 100'000'000;
  for (; !p.at_end() && is_digit(p.peek()); p.advance(), ++digits) {
    if (digits == 9) {
      return p.fail("the fraction of a second has more than 9 digits (finer than nanoseconds)");
    }
    fraction_ns += (p.peek() - '0') * scale;
    scale /= 10;
  }
  if (digits == 0) return p.fail("expected digits after '.', " + p.found());
  return OkStatus();
}

// "HH:MM[:SS[.fraction]]Z" after the 'T': in range, in UTC.
Status parse_time_of_day(Parser& p, TimeOfDay& t) {
  if (Status s = p.fixed_digits(2, "hour", t.hour); !s.ok()) return s;
  if (Status s = p.expect(':', "hour"); !s.ok()) return s;
  if (Status s = p.fixed_digits(2, "minute", t.minute); !s.ok()) return s;
  if (!p.at_end() && p.peek() == ':') {
    p.advance();
    if (Status s = p.fixed_digits(2, "second", t.second); !s.ok()) return s;
    if (!p.at_end() && p.peek() == '.') {
      p.advance();
      if (Status s = parse_fraction(p, t.fraction_ns); !s.ok()) return s;
    }
  }
  if (t.hour > 23) return p.fail("hour " + std::to_string(t.hour) + " is out of range 0-23");
  if (t.minute > 59) return p.fail("minute " + std::to_string(t.minute) + " is out of range 0-59");
  if (t.second > 59) {
    return p.fail("second " + std::to_string(t.second) +
                  " is out of range 0-59 (leap seconds are not accepted)");
  }
  if (p.at_end()) return p.fail("a time of day needs a trailing 'Z' (UTC)");
  if (p.peek() == '+' || p.peek() == '-') {
    return p.fail("time-zone offsets are not accepted: give the time in UTC with a trailing 'Z'");
  }
  if (p.peek() != 'Z') {
    return p.fail("unexpected character " + quote_char(p.peek()) + " at position " +
                  std::to_string(p.pos()) + " (a time of day needs a trailing 'Z' (UTC))");
  }
  p.advance();
  return OkStatus();
}

// The instant of a date and a time of day, if a TimePoint can hold it.
Result<TimePoint> instant_of(const Parser& p, const chr::year_month_day& ymd, const TimeOfDay& t) {
  // Years 0000-9999 keep these products far from int64 overflow; only the nanosecond
  // conversion can overflow.
  const std::int64_t days = chr::sys_days(ymd).time_since_epoch().count();
  const std::int64_t seconds = days * 86'400 + t.hour * 3'600 + t.minute * 60 + t.second;
  // Before 1970 the whole seconds alone may overflow while the sum does not (TimePoint::min()
  // is 43.145224192 s past a minute), so borrow one second into the fraction when negative.
  std::int64_t whole = seconds;
  std::int64_t part = t.fraction_ns;
  if (whole < 0 && part > 0) {
    whole += 1;
    part -= 1'000'000'000;
  }
  std::int64_t ns = 0;
  if (__builtin_mul_overflow(whole, std::int64_t{1'000'000'000}, &ns) ||
      __builtin_add_overflow(ns, part, &ns)) {
    return p.fail("the time is " + std::string(kRangeText));
  }
  return TimePoint(Nanos(ns));
}

// The calendar form: "YYYY-MM-DD", "YYYY-MM-DDZ" or "YYYY-MM-DDTHH:MM[:SS[.fraction]]Z".
Result<TimePoint> parse_calendar(std::string_view text) {
  Parser p(text);
  Result<chr::year_month_day> ymd = parse_date(p);
  if (!ymd.ok()) return ymd.status();
  TimeOfDay t;
  if (!p.at_end() && p.peek() == 'T') {
    p.advance();
    if (Status s = parse_time_of_day(p, t); !s.ok()) return s;
  } else if (!p.at_end() && p.peek() == 'Z') {
    p.advance();
  } else if (!p.at_end()) {
    return p.fail("unexpected character " + quote_char(p.peek()) + " at position " +
                  std::to_string(p.pos()) + " after the date (expected 'T', 'Z' or the end)");
  }
  if (!p.at_end()) {
    return p.fail("unexpected trailing text starting with " + quote_char(p.peek()) +
                  " at position " + std::to_string(p.pos()));
  }
  return instant_of(p, *ymd, t);
}

}  // namespace

std::string format_unix_ms(std::int64_t unix_ms) {
  constexpr std::int64_t kFirst =
      chr::ceil<chr::milliseconds>(TimePoint::min().time_since_epoch()).count();
  constexpr std::int64_t kLast =
      chr::floor<chr::milliseconds>(TimePoint::max().time_since_epoch()).count();
  if (unix_ms < kFirst || unix_ms > kLast) return "unix_ms " + std::to_string(unix_ms);
  return format_time(TimePoint(chr::milliseconds(unix_ms)));
}

std::string format_time(TimePoint t) {
  // Floor (not truncation towards zero) so times before 1970 round towards the past too.
  const auto ms = chr::floor<chr::milliseconds>(t);
  const auto day = chr::floor<chr::days>(ms);
  const chr::year_month_day ymd{day};
  const chr::hh_mm_ss<chr::milliseconds> hms{ms - day};

  // TimePoint spans 1677-2262, so the year always has exactly four digits.
  std::array<char, 24> buf{};
  char* out = buf.data();
  out = put_digits(out, static_cast<unsigned>(static_cast<int>(ymd.year())), 4);
  *out++ = '-';
  out = put_digits(out, static_cast<unsigned>(ymd.month()), 2);
  *out++ = '-';
  out = put_digits(out, static_cast<unsigned>(ymd.day()), 2);
  *out++ = 'T';
  out = put_digits(out, static_cast<unsigned>(hms.hours().count()), 2);
  *out++ = ':';
  out = put_digits(out, static_cast<unsigned>(hms.minutes().count()), 2);
  *out++ = ':';
  out = put_digits(out, static_cast<unsigned>(hms.seconds().count()), 2);
  *out++ = '.';
  out = put_digits(out, static_cast<unsigned>(hms.subseconds().count()), 3);
  *out++ = 'Z';
  return std::string(buf.data(), out);
}

Result<TimePoint> parse_time(std::string_view text) {
  if (text.empty()) return bad_time(text, "empty; " + std::string(kExpectedForms));
  // A calendar date starts with a 4-digit year and '-'; anything else starting with a digit or
  // '-' is the integer form.
  const bool calendar = text.size() >= 5 && is_digit(text[0]) && is_digit(text[1]) &&
                        is_digit(text[2]) && is_digit(text[3]) && text[4] == '-';
  if (calendar) return parse_calendar(text);
  if (is_digit(text[0]) || text[0] == '-') return parse_unix_millis(text);
  return bad_time(text, kExpectedForms);
}

}  // namespace flurry

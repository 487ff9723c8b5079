#include "date_prefix.h"

#include <chrono>
#include <string>

namespace flurry::internal {

Result<std::array<char, 6>> yymmdd(std::int64_t unix_ms, int utc_offset_minutes) {
  using std::chrono::days;
  using std::chrono::floor;
  using std::chrono::milliseconds;
  using std::chrono::minutes;
  // 2000-01-01 and 2100-01-01 in Unix ms; the offset is at most a day, so no overflow nearby.
  constexpr std::int64_t kLimit = 4'102'444'800'000;  // 2100-01-01
  if (unix_ms < -kLimit || unix_ms > kLimit) {
    return InvalidArgument("the ID's time (" + std::to_string(unix_ms) +
                           " ms since 1970) is outside 2000..2099, which a YYMMDD prefix cannot "
                           "tell apart");
  }
  const auto local =
      std::chrono::sys_time<milliseconds>(milliseconds(unix_ms)) + minutes(utc_offset_minutes);
  const std::chrono::year_month_day ymd{floor<days>(local)};
  const int year = static_cast<int>(ymd.year());
  if (year < 2000 || year > 2099) {
    return InvalidArgument("the ID's date (year " + std::to_string(year) +
                           ") is outside 2000..2099, which a YYMMDD prefix cannot tell apart");
  }
  const int yy = year % 100;
  const auto mm = static_cast<unsigned>(ymd.month());
  const auto dd = static_cast<unsigned>(ymd.day());
  return std::array<char, 6>{static_cast<char>('0' + yy / 10), static_cast<char>('0' + yy % 10),
                             static_cast<char>('0' + mm / 10), static_cast<char>('0' + mm % 10),
                             static_cast<char>('0' + dd / 10), static_cast<char>('0' + dd % 10)};
}

}  // namespace flurry::internal

// The order-number formats a server uses (docs/order-numbers.md, docs/operations.md "Order
// numbers"): one for the snowflake generator and one per segment tag, all under one key set and
// the same settings.
//
// - snowflake: max_id is the layout's largest ID; a date prefix is the ID's own date, from the
//   layout's time field (as /v1/ids/{id} decodes it); tweak "snowflake". Decoding accepts only
//   IDs the generator can have issued (plausible_snowflake).
// - segment tag T: max_id 2^63 - 1, tweak "segment:" + T, so two tags' numbers are unrelated
//   under one key; created on first use and cached (thread-safe). Segment IDs carry no time: a
//   date prefix is refused for them.
//
// Numbers are unique per source (the snowflake generator, or one tag): two sources may give the
// same number, unless each has a prefix of its own (order_prefix, order_segment_prefix).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "flurry/clock.h"
#include "flurry/layout.h"
#include "flurry/mutex.h"
#include "flurry/order_number.h"
#include "flurry/status.h"
#include "order_settings.h"

namespace flurry::order {

class OrderFormats {
 public:
  // Tag formats kept at most; beyond it a tag's format is made per request (decode only: a tag
  // is taken from before its format is made, so only tags that exist are cached on issue).
  static constexpr std::size_t kMaxCachedTags = 1024;

  // Makes the snowflake format; INVALID_ARGUMENT naming the settings when they do not fit (a
  // payload length too short for the layout's IDs, a key version the alphabet lacks). `wall`
  // (which must outlive this object) and `max_lead` bound the snowflake IDs decoding accepts.
  [[nodiscard]] static Result<std::unique_ptr<OrderFormats>> create(
      OrderSettings settings, OrderKeySet keys, const Layout& layout,
      Clock& wall = SystemClock::coarse(),
      std::chrono::milliseconds max_lead = std::chrono::milliseconds(1000));

  OrderFormats(const OrderFormats&) = delete;
  OrderFormats& operator=(const OrderFormats&) = delete;

  [[nodiscard]] const OrderNumberFormat& snowflake() const noexcept { return *snowflake_; }
  // OK when snowflake ID `id` can have been issued: its time not before the layout's epoch and
  // not later than the wall clock's now + max_lead. INVALID_ARGUMENT saying which otherwise.
  [[nodiscard]] Status plausible_snowflake(std::uint64_t id) const;

  // The key version of `text`, a number of `tag` (empty: of the snowflake generator) that
  // decoded: order_key_version with that source's prefix.
  [[nodiscard]] char key_version(std::string_view text, std::string_view tag = {}) const;

  // The format of segment tag `tag` (a checked tag name), with its prefix (prefix_of_tag).
  // INVALID_ARGUMENT with a date prefix, or a tag order_segment_prefix gives no prefix.
  // The pointer stays valid as long as this object.
  [[nodiscard]] Result<std::shared_ptr<const OrderNumberFormat>> segment(std::string_view tag);

  [[nodiscard]] const OrderSettings& settings() const noexcept { return settings_; }
  [[nodiscard]] const Layout& layout() const noexcept { return layout_; }
  // The key versions, e.g. "12", and the active one: for metrics and logs (never key bytes).
  [[nodiscard]] const std::string& versions() const noexcept { return versions_; }
  [[nodiscard]] char active() const noexcept { return active_; }
  // "19 digits + Damm check, key versions 1, 2 (active 2), ...": for the start log line.
  [[nodiscard]] std::string describe() const { return snowflake_->describe(); }

 private:
  OrderFormats(OrderSettings settings, OrderKeySet keys, Layout layout, Clock& wall,
               std::chrono::milliseconds max_lead);

  OrderSettings settings_;
  OrderKeySet keys_;
  Layout layout_;
  Clock& wall_;
  const std::chrono::milliseconds max_lead_;
  std::string versions_;
  char active_ = '\0';
  std::unique_ptr<OrderNumberFormat> snowflake_;
  mutable SharedMutex mu_;
  std::map<std::string, std::shared_ptr<const OrderNumberFormat>, std::less<>> tags_
      FLURRY_GUARDED_BY(mu_);
};

// The FF1 tweak of a source: "snowflake", "segment:" + tag.
[[nodiscard]] std::string order_tweak_snowflake();
[[nodiscard]] std::string order_tweak_segment(std::string_view tag);

}  // namespace flurry::order

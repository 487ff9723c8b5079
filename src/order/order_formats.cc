#include "order/order_formats.h"

#include <utility>

#include "flurry/decoded_id.h"
#include "flurry/timefmt.h"

namespace flurry::order {
namespace {

constexpr std::uint64_t kSegmentMaxId = (std::uint64_t{1} << 63) - 1;

std::uint64_t layout_max_id(const Layout& layout) {
  const int bits = layout.total_bits();
  return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

}  // namespace

std::string order_tweak_snowflake() {
  return "snowflake";
}

std::string order_tweak_segment(std::string_view tag) {
  return "segment:" + std::string(tag);
}

OrderFormats::OrderFormats(OrderSettings settings, OrderKeySet keys, Layout layout, Clock& wall,
                           std::chrono::milliseconds max_lead)
    : settings_(std::move(settings)),
      keys_(std::move(keys)),
      layout_(std::move(layout)),
      wall_(wall),
      max_lead_(max_lead),
      versions_(keys_.versions()),
      active_(keys_.active()) {}

Result<std::unique_ptr<OrderFormats>> OrderFormats::create(OrderSettings settings, OrderKeySet keys,
                                                           const Layout& layout, Clock& wall,
                                                           std::chrono::milliseconds max_lead) {
  std::unique_ptr<OrderFormats> f(
      new OrderFormats(std::move(settings), std::move(keys), layout, wall, max_lead));
  // The ID's own time, exactly as /v1/ids/{id} decodes it.
  const Layout* l = &f->layout_;
  IdTimeFunction unix_ms = [l](std::uint64_t id) -> Result<std::int64_t> {
    Result<DecodedId> d = decode_id(*l, id);
    if (!d.ok()) return d.status();
    return d->unix_ms;
  };
  Result<OrderNumberOptions> options = order_number_options(
      f->settings_, layout_max_id(layout), std::move(unix_ms), order_tweak_snowflake());
  if (!options.ok()) return options.status();
  const OrderFormats* self = f.get();
  options->plausible = [self](std::uint64_t id) { return self->plausible_snowflake(id); };
  Result<OrderNumberFormat> format = OrderNumberFormat::create(*options, f->keys_);
  if (!format.ok()) return InvalidArgument("order number settings: " + format.status().message());
  f->snowflake_ = std::make_unique<OrderNumberFormat>(std::move(format).value());
  return f;
}

Status OrderFormats::plausible_snowflake(std::uint64_t id) const {
  Result<DecodedId> d = decode_id(layout_, id);
  if (!d.ok()) return d.status();
  // A source issues no ID before its epoch nor beyond now + max_lead (the invariant "honest
  // time"): anything else was never issued, whatever its check character says.
  if (d->time < layout_.epoch()) {
    return InvalidArgument("decodes to an ID of " + format_time(d->time) +
                           ", before the layout's epoch: no server issued it (a forged or "
                           "mistyped number)");
  }
  const TimePoint latest = wall_.now() + max_lead_;
  if (d->time > latest) {
    return InvalidArgument("decodes to an ID of " + format_time(d->time) +
                           ", later than this clock allows (" + format_time(latest) +
                           "): no server issued it (a forged or mistyped number, or another "
                           "source's: a segment tag's number decodes with ?tag=TAG)");
  }
  return OkStatus();
}

char OrderFormats::key_version(std::string_view text, std::string_view tag) const {
  if (tag.empty() || settings_.tag_prefixes.empty()) return order_key_version(text, settings_);
  OrderSettings s = settings_;
  Result<std::string> prefix = settings_.prefix_of_tag(tag);
  s.prefix = prefix.ok() ? *prefix : std::string();
  return order_key_version(text, s);
}

Result<std::shared_ptr<const OrderNumberFormat>> OrderFormats::segment(std::string_view tag) {
  {
    ReaderLock lock(mu_);
    auto it = tags_.find(tag);
    if (it != tags_.end()) return it->second;
  }
  if (settings_.dated()) {
    return InvalidArgument(
        "order_prefix is \"date\", and segment IDs carry no date: order numbers from a segment "
        "tag need another order_prefix (none, or a literal)");
  }
  Result<std::string> prefix = settings_.prefix_of_tag(tag);
  if (!prefix.ok()) return InvalidArgument(prefix.status().message());
  OrderSettings settings = settings_;
  settings.prefix = std::move(prefix).value();
  Result<OrderNumberOptions> options =
      order_number_options(settings, kSegmentMaxId, {}, order_tweak_segment(tag));
  if (!options.ok()) return options.status();
  Result<OrderNumberFormat> format = OrderNumberFormat::create(*options, keys_);
  if (!format.ok()) return InvalidArgument("order number settings: " + format.status().message());
  auto made = std::make_shared<const OrderNumberFormat>(std::move(format).value());
  WriterLock lock(mu_);
  if (tags_.size() >= kMaxCachedTags) return made;
  auto [it, inserted] = tags_.emplace(std::string(tag), std::move(made));
  return it->second;
}

}  // namespace flurry::order

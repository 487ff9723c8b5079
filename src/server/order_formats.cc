#include "flurry/server/order_formats.h"

#include <mutex>
#include <utility>

#include "flurry/decoded_id.h"

namespace flurry::server {
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

OrderFormats::OrderFormats(OrderSettings settings, OrderKeySet keys, Layout layout)
    : settings_(std::move(settings)),
      keys_(std::move(keys)),
      layout_(std::move(layout)),
      versions_(keys_.versions()),
      active_(keys_.active()) {}

Result<std::unique_ptr<OrderFormats>> OrderFormats::create(OrderSettings settings, OrderKeySet keys,
                                                           const Layout& layout) {
  std::unique_ptr<OrderFormats> f(new OrderFormats(std::move(settings), std::move(keys), layout));
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
  Result<OrderNumberFormat> format = OrderNumberFormat::create(*options, f->keys_);
  if (!format.ok()) return InvalidArgument("order number settings: " + format.status().message());
  f->snowflake_ = std::make_unique<OrderNumberFormat>(std::move(format).value());
  return f;
}

Result<std::shared_ptr<const OrderNumberFormat>> OrderFormats::segment(std::string_view tag) {
  {
    std::shared_lock lock(mu_);
    auto it = tags_.find(tag);
    if (it != tags_.end()) return it->second;
  }
  if (settings_.dated()) {
    return InvalidArgument(
        "order_prefix is \"date\", and segment IDs carry no date: order numbers from a segment "
        "tag need another order_prefix (none, or a literal)");
  }
  Result<OrderNumberOptions> options =
      order_number_options(settings_, kSegmentMaxId, {}, order_tweak_segment(tag));
  if (!options.ok()) return options.status();
  Result<OrderNumberFormat> format = OrderNumberFormat::create(*options, keys_);
  if (!format.ok()) return InvalidArgument("order number settings: " + format.status().message());
  auto made = std::make_shared<const OrderNumberFormat>(std::move(format).value());
  std::unique_lock lock(mu_);
  if (tags_.size() >= kMaxCachedTags) return made;
  auto [it, inserted] = tags_.emplace(std::string(tag), std::move(made));
  return it->second;
}

}  // namespace flurry::server

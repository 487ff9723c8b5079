#include "ops/operations.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <string>
#include <utility>

#include "core/quote.h"
#include "ops/tso_metrics.h"

namespace flurry::ops {
namespace {

using std::chrono::milliseconds;

// How long a deferred request may wait for a thread of the store pool, at least: below this a
// short segment_max_wait_ms would turn an ordinary queue into UNAVAILABLE answers.
constexpr milliseconds kMinQueueWait{1000};

Status segments_off() {
  return Status(StatusCode::kNotFound, "segment mode is not served here");
}

Status orders_off() {
  return Status(StatusCode::kUnimplemented,
                "order numbers are off on this server: no keys are configured. Set "
                "order_key_file (FLURRY_ORDER_KEY_FILE, --order-key-file) to a key file, or the "
                "environment variable FLURRY_ORDER_KEYS, and restart (see docs/order-numbers.md)");
}

// A deferred call that waited in the pool's queue past its deadline.
Status waited_too_long() {
  return Status(StatusCode::kUnavailable,
                "segment requests wait for a slow or unavailable store, and this one waited its "
                "turn longer than segment_max_wait_ms allows");
}

Status would_block(std::string message) {
  return Status(Reason::kWouldBlock, std::move(message));
}

// Encodes `ids` with `format` into `numbers` (cleared first); on error `numbers` is cleared.
Status encode_all(const OrderNumberFormat& format, std::span<const std::uint64_t> ids,
                  OrderNumbers& numbers) {
  numbers.clear();
  const std::size_t length = format.length();
  numbers.text.resize(ids.size() * length);
  numbers.ends.reserve(ids.size());
  std::size_t used = 0;
  for (const std::uint64_t id : ids) {
    Result<std::size_t> n =
        format.encode_to(id, std::span<char>(numbers.text.data() + used, length));
    if (!n.ok()) {
      numbers.clear();
      return n.status();
    }
    used += *n;
    numbers.ends.push_back(used);
  }
  numbers.text.resize(used);
  return OkStatus();
}

}  // namespace

Operations::Operations(service::Service& service, SegmentService* segments,
                       order::OrderFormats* orders, Authorizer& authorizer, Pools& pools,
                       Clocks clocks)
    : service_(service),
      segments_(segments),
      orders_(orders),
      authorizer_(authorizer),
      pools_(pools),
      clocks_(clocks),
      codecs_(service.layout()) {}

bool Operations::late(const Deferral& deferral) const noexcept {
  return deferral.deadline != MonoTime::max() && clocks_.monotonic.now() > deferral.deadline;
}

Status Operations::defer_to_store(Deferral& deferral) const {
  const milliseconds wait =
      segments_ != nullptr ? std::max(milliseconds(segments_->options().max_wait), kMinQueueWait)
                           : kMinQueueWait;
  deferral.pool = Pool::kStore;
  deferral.deadline = clocks_.monotonic.now() + wait;
  return would_block("the request waits for a segment store");
}

// --- Snowflake IDs -------------------------------------------------------------------------

Status Operations::next_ids(IdCount count, std::span<std::uint64_t> out, Blocking blocking,
                            Deferral& deferral) {
  const std::span<std::uint64_t> ids = out.first(count.value());
  if (blocking == Blocking::kNever) {
    // Earlier requests wait for the generator: queue behind them rather than take the rate
    // budget from them (first come, first served under throttling).
    Status st = pools_.generator_waiting() > 0
                    ? would_block("earlier requests wait for the generator")
                    : service_.issue(ids, Blocking::kNever);
    if (st.reason() == Reason::kWouldBlock) deferral.pool = Pool::kGenerator;
    return st;
  }
  return service_.issue(ids, Blocking::kAllowed);
}

Result<TsoGrant> Operations::tso(IdCount count, Blocking blocking, Deferral& deferral) {
  if (tso_ == nullptr) {
    return Status(Reason::kTsoOff,
                  "the timestamp oracle is not served here (start the server with --tso)");
  }
  if (blocking == Blocking::kNever && pools_.generator_waiting() > 0) {
    deferral.pool = Pool::kGenerator;
    return would_block("earlier requests wait for the generator");
  }
  Result<TsoGrant> grant = tso_->grant(count.value(), blocking);
  if (!grant.ok() && grant.status().reason() == Reason::kWouldBlock) {
    deferral.pool = Pool::kGenerator;
  }
  return grant;
}

std::uint64_t Operations::tso_max_batch() const noexcept {
  return tso_ == nullptr ? 1 : tso_->max_batch();
}

std::optional<TsoLeaderAddress> Operations::tso_leader() const {
  if (tso_ == nullptr) return std::nullopt;
  return tso_->leader();
}

std::uint64_t Operations::max_batch() const noexcept {
  return service_.max_batch();
}

Result<DecodedId> Operations::decode_id(std::string_view text, Encoding encoding) const {
  return flurry::decode_id(service_.layout(), text, encoding);
}

Result<DecodedId> Operations::decode_id(std::string_view text, const IdTextCodec& codec) const {
  Result<std::uint64_t> id = codec.decode(text);
  if (!id.ok()) return id.status();
  return flurry::decode_id(service_.layout(), *id);
}

Result<AnyEncodingId> Operations::decode_id_any(std::string_view text) const {
  struct Reading {
    IdEncoding encoding;
    std::uint64_t id;
    DecodedId decoded;
  };
  std::vector<IdEncoding> encodings;
  for (const EncodingInfo& e : kEncodings) encodings.emplace_back(e.encoding);
  for (const WideFormatInfo& w : kWideFormats) encodings.emplace_back(w.format);
  std::vector<Reading> readings;
  std::string refusals;
  for (const IdEncoding encoding : encodings) {
    Result<const IdTextCodec*> codec = codecs_.get(encoding);
    if (!codec.ok()) continue;  // a wide format this layout cannot carry
    Result<std::uint64_t> id = (*codec)->decode(text);
    Result<DecodedId> decoded =
        id.ok() ? flurry::decode_id(service_.layout(), *id) : Result<DecodedId>(id.status());
    if (decoded.ok()) {
      readings.push_back({encoding, *id, std::move(decoded).value()});
    } else {
      refusals += std::string(refusals.empty() ? "" : "; ") + std::string(encoding.name()) + ": " +
                  decoded.status().message();
    }
  }
  if (readings.empty()) {
    return InvalidArgument("not an ID of this layout in any of its encodings (" + refusals + ")");
  }
  const auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string input = lower(text);
  const auto canonical = [&](const Reading& r) {
    return lower(codecs_.get(r.encoding).value()->encode(r.id)) == input;
  };
  auto used = std::find_if(readings.begin(), readings.end(), canonical);
  if (used == readings.end()) {
    used = std::find_if(readings.begin(), readings.end(),
                        [](const Reading& r) { return r.encoding.is_wide(); });
  }
  if (used == readings.end()) used = readings.begin();
  AnyEncodingId out{std::move(used->decoded), used->encoding, {}};
  for (const Reading& r : readings) {
    if (&r != &*used) out.also_valid_in.push_back(r.encoding);
  }
  return out;
}

const Layout& Operations::layout() const noexcept {
  return service_.layout();
}

std::uint64_t Operations::node() const noexcept {
  return service_.node();
}

Status Operations::readiness() const {
  return service_.readiness();
}

// --- Segment mode --------------------------------------------------------------------------

std::uint64_t Operations::segment_max_batch() const noexcept {
  return segments_ != nullptr ? segments_->options().max_batch : 1;
}

std::vector<std::string> Operations::segment_store_names() const {
  return segments_ != nullptr ? segments_->store_names() : std::vector<std::string>();
}

Result<std::uint64_t> Operations::strict_term(std::string_view tag) const {
  if (tso_ == nullptr) {
    return Status(StatusCode::kFailedPrecondition,
                  "segment tag " + internal::quote(tag) +
                      " is strict: only the timestamp oracle's leader serves it, and this server "
                      "runs no oracle (start it with --tso)");
  }
  const std::uint64_t term = tso_->term();
  if (term == 0) return tso_->not_leader();
  return term;
}

Status Operations::strict_gate(std::uint64_t term, const Status& taken) const {
  if (!taken.ok() &&
      (taken.code() != StatusCode::kUnavailable || taken.reason() == Reason::kWouldBlock)) {
    return taken;
  }
  // After the numbers were taken: a term that ended meanwhile loses them (a gap), never answers
  // them, since another leader may have answered higher ones since it began.
  if (Status gate = tso_->check_term(term); !gate.ok()) return gate;
  return taken;
}

Status Operations::segment_ids(const SegmentTag& tag, IdCount count, std::span<std::uint64_t> out,
                               Blocking blocking, Deferral& deferral) {
  if (segments_ == nullptr) return segments_off();
  // Waited in the pool's queue past the deadline: only what memory holds now.
  const bool too_late = late(deferral);
  const Blocking now = too_late ? Blocking::kNever : blocking;
  Status st;
  if (Result<SegmentCounter*> counter = segments_->counter(tag, now); !counter.ok()) {
    st = counter.status();
  } else if (!(*counter)->strict()) {
    st = (*counter)->next(count, out, now);
  } else if (Result<std::uint64_t> term = strict_term(tag.view()); !term.ok()) {
    st = term.status();
  } else {
    st = strict_gate(*term, (*counter)->next(count, out, now, *term));
  }
  if (st.ok()) segment_ids_issued_.fetch_add(count.value(), std::memory_order_relaxed);
  if (st.reason() != Reason::kWouldBlock) return st;
  if (too_late) return waited_too_long();
  return defer_to_store(deferral);
}

Result<SegmentRange> Operations::segment_range(const SegmentTag& tag, IdCount size,
                                               Blocking blocking, Deferral& deferral) {
  if (segments_ == nullptr) return segments_off();
  const bool too_late = late(deferral);
  const Blocking now = too_late ? Blocking::kNever : blocking;
  Result<SegmentRange> got = Status(StatusCode::kInternal, "unset");
  if (Result<SegmentCounter*> counter = segments_->counter(tag, now); !counter.ok()) {
    got = counter.status();
  } else if (!(*counter)->strict()) {
    got = segments_->range(tag, size, now);
  } else if (Result<std::uint64_t> term = strict_term(tag.view()); !term.ok()) {
    got = term.status();
  } else {
    got = segments_->range(tag, size, now, *term);
    if (Status st = strict_gate(*term, got.status()); !st.ok()) got = st;
  }
  if (got.ok()) segment_ids_issued_.fetch_add(size.value(), std::memory_order_relaxed);
  if (got.ok() || got.status().reason() != Reason::kWouldBlock) return got;
  if (too_late) return waited_too_long();
  return defer_to_store(deferral);
}

Result<RegistryListing> Operations::read_nodes() {
  MutexLock lock(nodes_mu_);
  for (;;) {
    if (nodes_last_ && nodes_last_->ok() &&
        clocks_.monotonic.now() - nodes_read_at_ < kNodesCacheTime) {
      return *nodes_last_;
    }
    if (!nodes_reading_) break;
    // Another call is reading: its answer is this one's too, error or not.
    const std::uint64_t generation = nodes_generation_;
    lock.wait(nodes_cv_,
              [&]() FLURRY_REQUIRES(nodes_mu_) { return nodes_generation_ != generation; });
    return *nodes_last_;
  }
  nodes_reading_ = true;
  const MonoTime started = clocks_.monotonic.now();
  lock.unlock();
  Result<RegistryListing> listing = service_.list_nodes();
  nodes_reads_.fetch_add(1, std::memory_order_relaxed);
  lock.lock();
  nodes_last_ = listing;
  nodes_read_at_ = started;  // kept for kNodesCacheTime from when the read began
  nodes_reading_ = false;
  ++nodes_generation_;
  nodes_cv_.notify_all();
  return listing;
}

Result<NodesReport> Operations::nodes(Blocking blocking, Deferral& deferral) {
  if (blocking == Blocking::kNever) return defer_to_store(deferral);
  if (late(deferral)) return waited_too_long();
  Result<RegistryListing> listing = read_nodes();
  if (!listing.ok()) return listing.status();
  NodesReport report;
  report.registry = service_.registry_description();
  report.now_unix_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clocks_.wall.now().time_since_epoch())
          .count();
  const service::ServiceState state = service_.state();
  report.this_node = state.node;
  report.this_token = state.token;
  report.listing = std::move(listing).value();
  return report;
}

ActivityCounts Operations::activity_counts() const noexcept {
  return {service_.ids_issued(), segment_ids_issued_.load(std::memory_order_relaxed),
          issued_snowflake_.load(std::memory_order_relaxed) +
              issued_segment_.load(std::memory_order_relaxed)};
}

Result<std::vector<SegmentTagInfo>> Operations::segment_tags(Blocking blocking,
                                                             Deferral& deferral) {
  if (segments_ == nullptr) return segments_off();
  if (blocking == Blocking::kNever) return defer_to_store(deferral);
  if (late(deferral)) return waited_too_long();
  return segments_->list_tags();
}

Result<SegmentTagReport> Operations::segment_tag(const SegmentTag& tag, Blocking blocking,
                                                 Deferral& deferral) {
  if (segments_ == nullptr) return segments_off();
  if (blocking == Blocking::kNever) return defer_to_store(deferral);
  if (late(deferral)) return waited_too_long();
  Result<SegmentTagState> state = segments_->inspect(tag.view());
  // One store read for this tag (never the whole list), and none for a tag known to be unknown.
  Result<SegmentTagInfo> row = segments_->stored_tag(tag);
  SegmentTagReport report;
  if (row.ok()) {
    report.stored = std::move(row).value();
  } else if (!state.ok()) {
    // Neither the stores nor memory know the tag: the stores' error says why (NOT_FOUND when
    // none has it).
    return row.status();
  }
  // A tag served here while the stores cannot be read is shown from memory, without its row.
  report.served = state.ok();
  if (state.ok()) {
    report.state = std::move(state).value();
  } else {
    report.state.tag = tag.name();
    report.state.step = report.stored->step;
    report.state.base_step = report.stored->step;
  }
  return report;
}

Result<SegmentTagInfo> Operations::create_segment_tag(const SegmentTagSpec& spec, Blocking blocking,
                                                      Deferral& deferral) {
  if (segments_ == nullptr) return segments_off();
  if (Status st = check_segment_tag_spec(spec); !st.ok()) return st;
  if (spec.strict && tso_ == nullptr) {
    return Status(StatusCode::kFailedPrecondition,
                  "a strict segment tag needs the timestamp oracle: only its leader serves the "
                  "tag, and this server runs none (start it with --tso)");
  }
  // Creating writes every store: never on the transport's thread.
  if (blocking == Blocking::kNever) return defer_to_store(deferral);
  if (late(deferral)) return waited_too_long();
  if (Status st = segments_->create_tag(spec); !st.ok()) return st;
  // The spec (its tag included) passed check_segment_tag_spec above, so this cannot fail.
  if (Result<SegmentTag> tag = SegmentTag::of(spec.tag); tag.ok()) {
    if (Result<SegmentTagInfo> row = segments_->stored_tag(*tag); row.ok()) return row;
  }
  // Created, but the stores could not be read back just now: the row as it was written.
  const std::size_t stores = segments_->store_names().size();
  SegmentTagInfo row;
  row.tag = spec.tag;
  row.max_id = spec.start;
  row.step = spec.step;
  row.description = spec.description;
  row.delta = stores > 1 ? stores : spec.delta;
  row.remainder = stores > 1 ? 0 : spec.remainder;
  row.strict = spec.strict;
  row.update_time_unix_ms =
      std::chrono::floor<milliseconds>(clocks_.wall.now()).time_since_epoch().count();
  return row;
}

// --- Order numbers -------------------------------------------------------------------------

Status Operations::check_order_numbers(const std::optional<SegmentTag>& tag) const {
  if (orders_ == nullptr) return orders_off();
  if (!tag) return OkStatus();
  if (segments_ == nullptr) return segments_off();
  // A date prefix needs the ID's time, which segment IDs do not carry.
  if (orders_->settings().dated()) return orders_->segment(tag->view()).status();
  return OkStatus();
}

Status Operations::new_order_numbers(IdCount count, const std::optional<SegmentTag>& tag,
                                     std::span<std::uint64_t> ids, OrderNumbers& numbers,
                                     Blocking blocking, Deferral& deferral) {
  if (Status st = check_order_numbers(tag); !st.ok()) return st;
  const std::span<std::uint64_t> taken = ids.first(count.value());
  if (!tag) {
    if (Status st = next_ids(count, ids, blocking, deferral); !st.ok()) return st;
    if (Status st = encode_all(orders_->snowflake(), taken, numbers); !st.ok()) return st;
    issued_snowflake_.fetch_add(taken.size(), std::memory_order_relaxed);
    return OkStatus();
  }
  if (Status st = segment_ids(*tag, count, ids, blocking, deferral); !st.ok()) return st;
  Result<std::shared_ptr<const OrderNumberFormat>> format = orders_->segment(tag->view());
  if (!format.ok()) return format.status();
  if (Status st = encode_all(**format, taken, numbers); !st.ok()) return st;
  issued_segment_.fetch_add(taken.size(), std::memory_order_relaxed);
  return OkStatus();
}

Result<DecodedOrderNumber> Operations::decode_order_number(std::string_view text,
                                                           const std::optional<SegmentTag>& tag,
                                                           OrderNumberFault& fault,
                                                           Blocking blocking, Deferral& deferral) {
  fault = OrderNumberFault{};
  if (orders_ == nullptr) return orders_off();
  std::shared_ptr<const OrderNumberFormat> tag_format;
  if (tag) {
    Result<std::shared_ptr<const OrderNumberFormat>> f = orders_->segment(tag->view());
    if (!f.ok()) return f.status();
    tag_format = std::move(f).value();
  }
  const OrderNumberFormat& format = tag_format ? *tag_format : orders_->snowflake();
  OrderDecodeError why;
  Result<std::uint64_t> id = format.decode(text, &why);
  if (!id.ok()) {
    decodes_error_.fetch_add(1, std::memory_order_relaxed);
    fault = OrderNumberFault{why.kind, why.position};
    // Without a tag a number is a snowflake number, never a guess between sources.
    if (!tag && segments_ != nullptr) {
      return InvalidArgument(id.status().message() +
                             " (this server also serves segment tags: a tag's order number "
                             "decodes only with ?tag=TAG)");
    }
    return id.status();
  }
  DecodedOrderNumber out;
  out.id = *id;
  if (!tag) {
    Result<DecodedId> decoded = flurry::decode_id(orders_->layout(), *id);
    if (!decoded.ok()) return decoded.status();
    decodes_ok_.fetch_add(1, std::memory_order_relaxed);
    out.key_version = orders_->key_version(text);
    out.decoded = std::move(decoded).value();
    return out;
  }
  out.segment = true;
  out.tag = tag->name();
  out.key_version = orders_->key_version(text, tag->view());
  // Answered only for an ID the tag has handed out: the stores say how far that is.
  if (segments_ == nullptr) return segments_off();
  if (blocking == Blocking::kNever) return defer_to_store(deferral);
  if (late(deferral)) return waited_too_long();
  Result<std::uint64_t> max_id = segments_->stored_max_id(*tag);
  // max_id is where the tag's next range starts: every ID handed out is below it.
  const bool issued = max_id.ok() && *id < *max_id;
  (issued ? decodes_ok_ : decodes_error_).fetch_add(1, std::memory_order_relaxed);
  if (!max_id.ok()) return max_id.status();
  if (!issued) {
    fault = OrderNumberFault{OrderDecodeError::Kind::kNoSuchId, 0};
    return InvalidArgument(
        "the order number decodes to ID " + std::to_string(*id) + " of segment tag " +
        internal::quote(tag->view()) + ", which no server has handed out (the tag's max_id is " +
        std::to_string(*max_id) + "): a forged or mistyped number, or another source's");
  }
  return out;
}

// --- Metrics -------------------------------------------------------------------------------

void Operations::write_metrics(service::PrometheusWriter& out) const {
  service_.write_metrics(out);
  if (const TimestampOracle* tso = tso_oracle(); tso != nullptr) write_tso_metrics(*tso, out);
  using Type = service::PrometheusWriter::Type;
  if (segments_ != nullptr) {
    const std::vector<SegmentTagState> tags = segments_->inspect_all();
    // /metrics needs no token, so it names tags only to whoever may list them anyway (scope
    // read open); otherwise each family is one sample, the sum over every tag, without labels.
    const bool by_tag = !authorizer_.needs_token(ops::Scope::kRead);
    const auto each = [&](std::string_view name, Type type, std::string_view help, auto value) {
      out.family(name, type, help);
      if (by_tag) {
        for (const SegmentTagState& t : tags) out.sample(name, value(t), {{"tag", t.tag}});
        return;
      }
      decltype(value(std::declval<const SegmentTagState&>())) sum{};
      for (const SegmentTagState& t : tags) sum += value(t);
      out.sample(name, sum, {});
    };
    each("flurry_segment_ids_issued_total", Type::kCounter, "Segment IDs handed out, by tag.",
         [](const SegmentTagState& t) { return t.ids_issued; });
    each("flurry_segment_ids_skipped_total", Type::kCounter,
         "Segment IDs never handed out: ends of ranges too short for a range request.",
         [](const SegmentTagState& t) { return t.ids_skipped; });
    each("flurry_segment_ranges_fetched_total", Type::kCounter, "Ranges fetched from the stores.",
         [](const SegmentTagState& t) { return t.ranges_fetched; });
    each("flurry_segment_store_errors_total", Type::kCounter, "Failed range fetches.",
         [](const SegmentTagState& t) { return t.store_errors; });
    each("flurry_segment_waits_total", Type::kCounter,
         "Requests that found both buffers of the tag empty and waited.",
         [](const SegmentTagState& t) { return t.waits; });
    each("flurry_segment_unavailable_total", Type::kCounter,
         "Requests answered UNAVAILABLE after waiting segment_max_wait_ms.",
         [](const SegmentTagState& t) { return t.unavailable; });
    each("flurry_segment_store_regressed_total", Type::kCounter,
         "Ranges refused because a store was below what it had handed this host "
         "(STORE_REGRESSED).",
         [](const SegmentTagState& t) { return t.store_regressed; });
    each("flurry_segment_remaining", Type::kGauge, "IDs left in both buffers of the tag.",
         [](const SegmentTagState& t) { return static_cast<double>(t.remaining); });
    if (by_tag) {  // a sum of steps means nothing
      each("flurry_segment_step", Type::kGauge, "The step the tag's next fetch asks for.",
           [](const SegmentTagState& t) { return static_cast<double>(t.step); });
    }
    const SegmentService::LookupCounts lookups = segments_->lookup_counts();
    out.family("flurry_segment_tag_lookup_reads_total", Type::kCounter,
               "Store reads made to look segment tags up (first use, tag pages).");
    out.sample("flurry_segment_tag_lookup_reads_total", lookups.store_reads, {});
    out.family("flurry_segment_unknown_tag_hits_total", Type::kCounter,
               "Lookups of tags no store has, answered from memory (unknown_tag_ttl).");
    out.sample("flurry_segment_unknown_tag_hits_total", lookups.unknown_hits, {});
    out.family("flurry_segment_fetch_seconds", Type::kSummary,
               "Time the stores took to hand out a range.");
    if (by_tag) {
      for (const SegmentTagState& t : tags) {
        out.sample("flurry_segment_fetch_seconds_sum",
                   std::chrono::duration<double>(t.fetch_time_total).count(), {{"tag", t.tag}});
        out.sample("flurry_segment_fetch_seconds_count", t.ranges_fetched, {{"tag", t.tag}});
      }
    } else {
      double seconds = 0;
      std::uint64_t count = 0;
      for (const SegmentTagState& t : tags) {
        seconds += std::chrono::duration<double>(t.fetch_time_total).count();
        count += t.ranges_fetched;
      }
      out.sample("flurry_segment_fetch_seconds_sum", seconds, {});
      out.sample("flurry_segment_fetch_seconds_count", count, {});
    }
  }
  out.family("flurry_nodes_registry_reads_total", Type::kCounter,
             "Registry reads made for GET /v1/nodes (its answer is kept for a second).");
  out.sample("flurry_nodes_registry_reads_total", nodes_registry_reads(), {});
  out.family("flurry_order_numbers_issued_total", Type::kCounter,
             "Order numbers handed out, by source.");
  out.sample("flurry_order_numbers_issued_total", issued_snowflake_.load(std::memory_order_relaxed),
             {{"source", "snowflake"}});
  out.sample("flurry_order_numbers_issued_total", issued_segment_.load(std::memory_order_relaxed),
             {{"source", "segment"}});
  out.family("flurry_order_decodes_total", Type::kCounter,
             "Order numbers decoded over HTTP, by result.");
  out.sample("flurry_order_decodes_total", decodes_ok_.load(std::memory_order_relaxed),
             {{"result", "ok"}});
  out.sample("flurry_order_decodes_total", decodes_error_.load(std::memory_order_relaxed),
             {{"result", "error"}});
  if (orders_ == nullptr) return;
  out.family("flurry_order_key_info", Type::kGauge,
             "The order-number key versions (never key bytes); always 1.");
  const std::string active(1, orders_->active());
  out.sample("flurry_order_key_info", 1.0, {{"active", active}, {"versions", orders_->versions()}});
}

}  // namespace flurry::ops

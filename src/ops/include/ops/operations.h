// The operations users call, without any transport: typed requests in, one Status (or Result)
// out. HTTP (src/http/routes.h) and gRPC are adapters over this; it includes nothing of
// Beast, Asio, gRPC, JSON or HTTP.
//
//   snowflake IDs   next_ids, decode_id, layout/node/max_batch, readiness
//   timestamps      tso, tso_max_batch, tso_leader, tso_oracle (the timestamp oracle)
//   this process    nodes (the registry's listing), service_state, events, activity
//   segment mode    segment_ids, segment_range, segment_tags, segment_tag, create_segment_tag
//   order numbers   check_order_numbers, new_order_numbers, decode_order_number
//   credentials     admit (the credential alone, before the rest of a request is looked at)
//   metrics         write_metrics
//
// Values arrive parsed (values.h): nothing here checks a count or a tag name again, except
// create_segment_tag, which checks the spec it is given (check_segment_tag_spec, the tag's name
// included) and makes the tag of the created row from it.
//
// Blocking: see deferral.h. With Blocking::kNever an operation that would wait (the generator's
// slow path, a segment store, the delayed answer to an unknown token) returns UNAVAILABLE /
// WOULD_BLOCK having filled its Deferral; the transport runs the same call with kAllowed on
// that pool. Operations that always read or write a store (segment_tags, segment_tag,
// create_segment_tag, decode_order_number with a tag) are deferred with kNever every time.
//
// Errors are the Status of the layer below (codes, reasons and messages as documented in
// docs/operations.md); the transports turn them into their own answers (retry.h for retries).
//
// Thread-safe: every method may be called from any thread at any time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/codec.h"
#include "flurry/decoded_id.h"
#include "flurry/generator.h"
#include "flurry/layout.h"
#include "flurry/mutex.h"
#include "flurry/order_number.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "flurry/status.h"
#include "flurry/timestamp_oracle.h"
#include "flurry/wide_id.h"
#include "ops/activity.h"
#include "ops/authorizer.h"
#include "ops/deferral.h"
#include "ops/values.h"
#include "order/order_formats.h"
#include "service/prometheus.h"
#include "service/service.h"

namespace flurry::ops {

// One tag as segment_tag() reports it: this node's buffers and counters, and the stored row.
struct SegmentTagReport {
  // False when this node has not served the tag: `state` then holds the name and the stored
  // step only.
  bool served = false;
  SegmentTagState state;
  // The row of the first store that has the tag; empty when the stores cannot be read now and
  // the tag is served from memory.
  std::optional<SegmentTagInfo> stored;
};

// GET /v1/nodes: the registry's listing as this process sees it.
struct NodesReport {
  std::string registry;          // service::Service::registry_description()
  std::int64_t now_unix_ms = 0;  // this server's wall clock when read
  std::uint64_t this_node = 0;   // this process's current lease
  std::uint64_t this_token = 0;
  RegistryListing listing;
};

// What decode_id_any() found.
struct AnyEncodingId {
  DecodedId decoded;
  IdEncoding encoding = Encoding::kDecimal;  // the encoding the text was read in
  std::vector<IdEncoding> also_valid_in;     // the other encodings it is an ID in, in order
};

// Order numbers, packed: number i is text.substr(ends[i-1], ends[i] - ends[i-1]). Reused across
// calls (its memory is kept).
struct OrderNumbers {
  std::string text;
  std::vector<std::size_t> ends;
  [[nodiscard]] std::size_t size() const noexcept { return ends.size(); }
  [[nodiscard]] std::string_view operator[](std::size_t i) const noexcept {
    const std::size_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(text).substr(begin, ends[i] - begin);
  }
  void clear() noexcept {
    text.clear();
    ends.clear();
  }
};

// A decoded order number.
struct DecodedOrderNumber {
  char key_version = '\0';
  // True for a segment tag's number (`tag` set, `id` the tag's ID); false for a snowflake
  // number (`id` and `decoded` describe the ID).
  bool segment = false;
  std::string tag;
  std::uint64_t id = 0;
  DecodedId decoded;
};

// What was wrong with an order number that did not decode, beside the Status: the kind
// ("length", "check", ..., "no_such_id") and the 1-based position of the character (0: none).
struct OrderNumberFault {
  OrderDecodeError::Kind kind = OrderDecodeError::Kind::kNone;
  std::size_t position = 0;
};

class Operations {
 public:
  // `service` must be started before the first call. `segments` (null: segment mode is off,
  // its operations answer NOT_FOUND "segment mode is not served here") and `orders` (null:
  // order numbers are off, UNIMPLEMENTED saying how to configure keys) are optional. All must
  // outlive this. `clocks` time the deferral deadlines and the rows written back on creation.
  Operations(service::Service& service, SegmentService* segments, order::OrderFormats* orders,
             Authorizer& authorizer, Pools& pools, Clocks clocks = Clocks::system());
  Operations(const Operations&) = delete;
  Operations& operator=(const Operations&) = delete;

  // --- Snowflake IDs ---------------------------------------------------------------------

  // Fills out[0, count) with fresh IDs (out.size() >= count.value()). Service::issue's errors.
  // With Blocking::kNever: WOULD_BLOCK (Deferral pool kGenerator) when the generator would
  // wait, and at once while earlier requests wait on that pool (Pools::generator_waiting).
  [[nodiscard]] Status next_ids(IdCount count, std::span<std::uint64_t> out, Blocking blocking,
                                Deferral& deferral);
  // IdCount::parse / of against max_batch().
  [[nodiscard]] std::uint64_t max_batch() const noexcept;

  // Takes an ID of this server's layout apart. INVALID_ARGUMENT / BAD_INPUT for text that is
  // not an ID in `encoding`.
  [[nodiscard]] Result<DecodedId> decode_id(std::string_view text, Encoding encoding) const;
  // The same for text in the encoding of `codec` (one of id_codecs()'s): also UUIDv7 and ULID.
  [[nodiscard]] Result<DecodedId> decode_id(std::string_view text, const IdTextCodec& codec) const;
  // Text in whichever encoding of the layout it is an ID in (HTTP's encoding=auto, the console's
  // decode tool): every encoding id_codecs() can give for the layout is tried. The one used is
  // the encoding whose canonical text the input is (letter case aside), else a wide format (its
  // shape is unmistakable), else the first in kEncodings' order; the others the text also
  // decodes in (to other IDs, or the same one) are listed. INVALID_ARGUMENT / BAD_INPUT, with
  // each encoding's refusal, when it is an ID in none.
  [[nodiscard]] Result<AnyEncodingId> decode_id_any(std::string_view text) const;
  // Every encoding of IDs of this server's layout, made once: the transports turn a request's
  // encoding (a name, or gRPC's enum through its name) into its codec with
  // id_codecs().parse(name, where) or get(), which also refuses uuidv7 and ulid, with the
  // reason, when the layout cannot carry them (wide_id.h).
  [[nodiscard]] const IdTextCodecs& id_codecs() const noexcept { return codecs_; }

  [[nodiscard]] const Layout& layout() const noexcept;
  // The current node ID (it changes when a lost lease is replaced).
  [[nodiscard]] std::uint64_t node() const noexcept;
  // OK while IDs can be issued with proof of uniqueness (Service::readiness).
  [[nodiscard]] Status readiness() const;

  // --- This process ------------------------------------------------------------------------

  // Every node ID the registry knows (Service::list_nodes). Reads the registry (etcd: 1 + live
  // nodes requests): deferred to the store pool with kNever; the registry's errors pass through.
  // A listing read less than kNodesCacheTime ago (monotonic clock) is answered again from
  // memory, and calls that find none wait for the one read in flight instead of starting their
  // own (that read's error, too, is theirs; errors are not kept).
  [[nodiscard]] Result<NodesReport> nodes(Blocking blocking, Deferral& deferral);
  // How long nodes() keeps a listing.
  static constexpr std::chrono::seconds kNodesCacheTime{1};
  // Registry reads nodes() made (flurry_nodes_registry_reads_total).
  [[nodiscard]] std::uint64_t nodes_registry_reads() const noexcept {
    return nodes_reads_.load(std::memory_order_relaxed);
  }
  // What the process knows of its node (Service::state); never blocks.
  [[nodiscard]] service::ServiceState service_state() const { return service_.state(); }
  [[nodiscard]] const service::ServiceOptions& service_options() const noexcept {
    return service_.options();
  }
  [[nodiscard]] std::string registry_description() const { return service_.registry_description(); }
  // The recent notable events (Service::events).
  [[nodiscard]] const service::EventLog& events() const noexcept { return service_.events(); }
  // The totals the activity history samples: snowflake IDs (Service::issue, every transport),
  // segment IDs (segment_ids and segment_range) and order numbers issued.
  [[nodiscard]] ActivityCounts activity_counts() const noexcept;
  // The activity history the composition root built over activity_counts() (null: none).
  void set_activity(const ActivityHistory* activity) noexcept { activity_ = activity; }
  [[nodiscard]] const ActivityHistory* activity() const noexcept { return activity_; }

  // --- Timestamp oracle --------------------------------------------------------------------

  // The oracle of this server (null: off, flurry serve without --tso). Set by the composition
  // root before the transports start; must outlive this.
  void set_tso(TimestampOracle* oracle) noexcept { tso_ = oracle; }
  [[nodiscard]] bool tso_served() const noexcept { return tso_ != nullptr; }
  [[nodiscard]] const TimestampOracle* tso_oracle() const noexcept { return tso_; }
  // `count` consecutive timestamps (TimestampOracle::grant; `count` made against
  // tso_max_batch()). NOT_FOUND / TSO_OFF when the oracle is off. With Blocking::kNever
  // WOULD_BLOCK (Deferral pool kGenerator) when the oracle's generator would wait.
  [[nodiscard]] Result<TsoGrant> tso(IdCount count, Blocking blocking, Deferral& deferral);
  // TimestampOracle::max_batch, 1 when the oracle is off.
  [[nodiscard]] std::uint64_t tso_max_batch() const noexcept;
  // Where the oracle's leader is, as far as this server knows (nullopt: off, or none known).
  [[nodiscard]] std::optional<TsoLeaderAddress> tso_leader() const;

  // --- Segment mode ------------------------------------------------------------------------

  [[nodiscard]] bool segments_served() const noexcept { return segments_ != nullptr; }
  // The largest count / range size segment operations take (the segment service's max_batch;
  // 1 when segment mode is off).
  [[nodiscard]] std::uint64_t segment_max_batch() const noexcept;
  // describe() of each store (empty when segment mode is off).
  [[nodiscard]] std::vector<std::string> segment_store_names() const;

  // Fills out[0, count) with the tag's next IDs, increasing. `count` made against at most
  // segment_max_batch() (the service checks it no more). SegmentService::next's errors; with
  // kNever WOULD_BLOCK (pool kStore) when they are not in memory; UNAVAILABLE when run past the
  // deferral's deadline and still not in memory.
  //
  // A strict tag (SegmentTagSpec::strict) is served only while this server leads the timestamp
  // oracle: its numbers are taken in the oracle's current term (TimestampOracle::term) and
  // answered only if TimestampOracle::check_term, read after they were taken, still holds;
  // otherwise they are dropped (a gap) and the answer is UNAVAILABLE / NOT_LEADER (naming the
  // leader: tso_leader()) or NO_LEADER. Without the oracle: FAILED_PRECONDITION.
  [[nodiscard]] Status segment_ids(const SegmentTag& tag, IdCount count,
                                   std::span<std::uint64_t> out, Blocking blocking,
                                   Deferral& deferral);
  // `size` consecutive IDs of the tag from one range (SegmentService::range). Deferral and
  // strict tags as above.
  [[nodiscard]] Result<SegmentRange> segment_range(const SegmentTag& tag, IdCount size,
                                                   Blocking blocking, Deferral& deferral);
  // Every tag of the stores. Reads the stores: deferred with kNever.
  [[nodiscard]] Result<std::vector<SegmentTagInfo>> segment_tags(Blocking blocking,
                                                                 Deferral& deferral);
  // One tag: this node's state and the stored row (NOT_FOUND when neither the stores nor memory
  // know it). Reads the stores: deferred with kNever.
  [[nodiscard]] Result<SegmentTagReport> segment_tag(const SegmentTag& tag, Blocking blocking,
                                                     Deferral& deferral);
  // Creates a tag in every store (the transports admit scope admin first); `spec` is checked here
  // (check_segment_tag_spec). Returns the stored row (as written, when the stores cannot be read
  // back at once). ALREADY_EXISTS when a store has the tag; FAILED_PRECONDITION for a strict tag
  // on a server without the timestamp oracle (or with several stores). Writes the stores:
  // deferred with kNever.
  [[nodiscard]] Result<SegmentTagInfo> create_segment_tag(const SegmentTagSpec& spec,
                                                          Blocking blocking, Deferral& deferral);

  // --- Order numbers -----------------------------------------------------------------------

  // False when no keys are configured: every order-number operation answers UNIMPLEMENTED.
  [[nodiscard]] bool orders_served() const noexcept { return orders_ != nullptr; }

  // What new_order_numbers would refuse before taking anything: order numbers off
  // (UNIMPLEMENTED), `tag` given without segment mode (NOT_FOUND), a tag with a date prefix
  // (INVALID_ARGUMENT). For validation without issuing (HTTP HEAD).
  [[nodiscard]] Status check_order_numbers(const std::optional<SegmentTag>& tag) const;

  // Issues `count` IDs from the snowflake generator (no tag) or from segment tag `tag` and
  // encodes them into `numbers` (cleared first). `ids` is scratch space of at least count
  // IDs. check_order_numbers' errors, then those of next_ids or segment_ids (deferral likewise).
  [[nodiscard]] Status new_order_numbers(IdCount count, const std::optional<SegmentTag>& tag,
                                         std::span<std::uint64_t> ids, OrderNumbers& numbers,
                                         Blocking blocking, Deferral& deferral);

  // Decodes order number `text` of the snowflake generator (no tag) or of segment tag `tag`,
  // (the transports admit scope orders:decode first). UNIMPLEMENTED without keys; for text that
  // does not decode INVALID_ARGUMENT with `fault` filled (kind and position). A tag's number is
  // answered only for an ID the tag has handed out (below the stores' max_id: a forged number
  // whose check character fits is still refused, kind no_such_id), which reads the stores:
  // deferred with kNever.
  [[nodiscard]] Result<DecodedOrderNumber> decode_order_number(std::string_view text,
                                                               const std::optional<SegmentTag>& tag,
                                                               OrderNumberFault& fault,
                                                               Blocking blocking,
                                                               Deferral& deferral);

  // --- Credentials -------------------------------------------------------------------------

  // The tokens and their scopes. The transports admit a call before anything else of it is
  // looked at (so a caller without the scope learns nothing about the rest of its request),
  // each from one table of the scope every route or method needs (Authorizer::admit; a
  // deferred call passes the same deferral, which is then not compared again).
  [[nodiscard]] Authorizer& authorizer() const noexcept { return authorizer_; }

  // --- Metrics -----------------------------------------------------------------------------

  // The service's metrics (Service::write_metrics), then flurry_segment_* per tag served (each
  // family one unlabelled sum over the tags when the scope read needs a token: /metrics is open,
  // and tag names are read's to see), flurry_nodes_registry_reads_total and flurry_order_*
  // (numbers issued by source, decodes by result, key versions).
  void write_metrics(service::PrometheusWriter& out) const;

 private:
  // A deferral for the store pool: deadline segment max_wait (at least 1 s) from now.
  [[nodiscard]] Status defer_to_store(Deferral& deferral) const;
  // True when a call deferred with `deferral` runs past its deadline.
  [[nodiscard]] bool late(const Deferral& deferral) const noexcept;
  // The oracle's term a strict tag's request is served in: FAILED_PRECONDITION without the
  // oracle, the oracle's refusal (NOT_LEADER, NO_LEADER) when this server does not lead.
  [[nodiscard]] Result<std::uint64_t> strict_term(std::string_view tag) const;
  // A strict tag's answer once its numbers were taken in `term` (`taken`: how that went): the
  // oracle's gate, read now; a request refused because its term ended gets the oracle's word.
  [[nodiscard]] Status strict_gate(std::uint64_t term, const Status& taken) const;
  // The registry's listing for nodes(): kept, or shared with the read in flight, or read.
  [[nodiscard]] Result<RegistryListing> read_nodes() FLURRY_EXCLUDES(nodes_mu_);

  service::Service& service_;
  SegmentService* segments_;
  order::OrderFormats* orders_;
  Authorizer& authorizer_;
  Pools& pools_;
  Clocks clocks_;
  IdTextCodecs codecs_;
  std::atomic<std::uint64_t> issued_snowflake_{0};
  std::atomic<std::uint64_t> issued_segment_{0};
  std::atomic<std::uint64_t> segment_ids_issued_{0};
  const ActivityHistory* activity_ = nullptr;
  TimestampOracle* tso_ = nullptr;  // set before serving
  std::atomic<std::uint64_t> decodes_ok_{0};
  std::atomic<std::uint64_t> decodes_error_{0};
  // nodes(): the last listing read and when, the read in flight (one at a time).
  Mutex nodes_mu_;
  std::condition_variable nodes_cv_;
  bool nodes_reading_ FLURRY_GUARDED_BY(nodes_mu_) = false;
  // Reads completed, so a waiter knows its read ended.
  std::uint64_t nodes_generation_ FLURRY_GUARDED_BY(nodes_mu_) = 0;
  std::optional<Result<RegistryListing>> nodes_last_ FLURRY_GUARDED_BY(nodes_mu_);
  MonoTime nodes_read_at_ FLURRY_GUARDED_BY(nodes_mu_) = {};
  std::atomic<std::uint64_t> nodes_reads_{0};
};

}  // namespace flurry::ops

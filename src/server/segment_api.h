// Internal: segment mode's HTTP routes (docs/segments.md, docs/operations.md "Segment mode"),
// without the transport, beside the Api of the snowflake routes (api.h), which hands them over:
//
//   GET  /v1/segments/{tag}/ids?count=N    {"ids":["1","2"]}
//   GET  /v1/segments/{tag}/range?size=N   {"start":"1001","end":"2001","delta":1}
//   GET  /api/segment/get/{tag}            the ID as decimal text (Meituan Leaf's route)
//   GET  /v1/segments                      {"tags":[row, ...]}, from the stores
//   POST /v1/segments                      creates a tag (Authorization: Bearer <admin token>)
//   GET  /v1/segments/{tag}                the node's buffers and counters, and the stored row
//   GET  /segments                         the monitoring page (segments_page.h)
//
// Blocking: the I/O threads call handle() with Blocking::kNever. IDs then come from a tag's
// buffers or not at all: a request that would wait (both buffers empty, a tag not loaded yet)
// and every request that reads or writes a store itself (the list, one tag's stored row,
// creating a tag) comes back deferred (ApiResponse::deferred_segment); the transport runs
// complete() on the segment pool, a few threads of their own, so that a store outage never
// holds an I/O thread or the generator's blocking thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "api.h"
#include "flurry/clock.h"
#include "flurry/segment_service.h"
#include "flurry/server/prometheus.h"
#include "flurry/status.h"

namespace flurry::server {

// What a route guarded by the admin token does, for its messages: "creating tags over HTTP",
// "creating a tag", and what to do instead when no token is configured.
struct AdminAction {
  std::string_view plural;
  std::string_view singular;
  std::string_view alternative;
};

class SegmentApi {
 public:
  // `segments` and `clock` must outlive the SegmentApi. An empty `admin_token` disables tag
  // creation over HTTP (POST /v1/segments is then 403, saying how to enable it). The token is
  // kept here only, compared in constant time and never written anywhere.
  SegmentApi(SegmentService& segments, std::string admin_token,
             MonotonicClock& clock = SteadyClock::instance());
  SegmentApi(const SegmentApi&) = delete;
  SegmentApi& operator=(const SegmentApi&) = delete;

  // When `path` (the target's path, before '?') is one of the routes above: answers the request
  // into `r` and `body` (with Blocking::kNever possibly deferred, see above) and returns true.
  // Returns false, touching nothing, for any other path. Methods other than GET and HEAD (and
  // POST on /v1/segments) are 405 with Allow. HEAD on the routes that issue IDs checks the
  // parameters as GET does and issues nothing (no body, omit_content_length).
  bool handle(const ApiRequest& request, std::string_view path, std::string_view query,
              ApiResponse& r, OutBuf& body, QueryScratch& scratch, Blocking blocking);

  // Finishes a deferred request, allowing it to block: at most about segment_max_wait for IDs
  // and each store's timeout for store reads and writes. A request that waited in the pool's
  // queue past its deadline is answered 503 UNAVAILABLE at once (unless its IDs are in memory by
  // then). Writes the response as handle() does.
  void complete(const PendingSegment& pending, ApiResponse& r, OutBuf& body);

  // flurry_segment_* per tag this node has served (label tag): counters of IDs issued and
  // skipped, ranges fetched, store errors, waits and unavailable answers; gauges of the IDs
  // remaining in both buffers and of the step; the summary flurry_segment_fetch_seconds.
  void write_metrics(PrometheusWriter& out) const;

  // How long the answer to a wrong admin token is held back; while it is, every other attempt is
  // refused (503 UNAVAILABLE) without being compared, so guessing runs at most one try per delay.
  static constexpr std::chrono::milliseconds kFailedTokenDelay{100};

  // Checks the admin token of a request to a guarded route (`action` words the messages:
  // POST /v1/segments, GET /v1/order-numbers/{code}). True when `authorization` carries it.
  // Otherwise false with the answer written or under way: UNAUTHENTICATED (no header, or not
  // Bearer <token>), PERMISSION_DENIED (none configured) or UNAVAILABLE (another wrong token is
  // being answered) at once; a wrong token PERMISSION_DENIED after kFailedTokenDelay on this
  // object's clock: deferred to the segment pool with Blocking::kNever (r.deferred_segment,
  // complete() waits), waited here with Blocking::kAllowed. Compared in constant time.
  [[nodiscard]] bool admit(std::string_view authorization, const AdminAction& action,
                           ApiResponse& r, OutBuf& body, Blocking blocking);

  // Takes `n` IDs of `tag` (a checked name) for `route` and writes its body; with
  // Blocking::kNever a request whose IDs are not in memory is deferred to the segment pool
  // (complete() finishes it). The error response otherwise.
  void take_or_defer(Route route, std::string_view tag, std::uint64_t n, ApiResponse& r,
                     OutBuf& body, Blocking blocking);

  // Answers GET /v1/order-numbers/{code}?tag=`tag` whose number decoded to `id`: `answer` (a JSON
  // body) when `id` is below the tag's max_id in the stores (SegmentService::stored_max_id), so
  // that a forged number whose check character fits is still refused; 400 INVALID_ARGUMENT (kind
  // no_such_id) when it is not, 404 for a tag no store has, 503 when a store does not answer.
  // Reads the stores: with Blocking::kNever deferred to the segment pool.
  void answer_if_issued(std::string_view tag, std::uint64_t id, std::string answer, ApiResponse& r,
                        OutBuf& body, Blocking blocking);

  // Writes the body of IDs taken for Route::kOrderNumbers (order_api.h); set by the Api.
  using IdsWriter = std::function<Status(std::string_view tag, std::span<const std::uint64_t> ids,
                                         ApiResponse& r, OutBuf& body)>;
  void set_order_writer(IdsWriter writer) { order_writer_ = std::move(writer); }
  // Told the outcome of each answer_if_issued (true: answered 200); set by the Api.
  using DecodeCounter = std::function<void(bool ok)>;
  void set_decode_counter(DecodeCounter counter) { decode_counter_ = std::move(counter); }

 private:
  // The routes that take IDs (kSegmentIds, kSegmentRange, kSegmentLeafGet): checks the
  // parameters and the tag, then answers, defers or (HEAD) stops there.
  void take_request(Method method, Route route, std::string_view raw_tag, std::string_view query,
                    ApiResponse& r, OutBuf& body, QueryScratch& scratch, Blocking blocking);
  // Takes `n` IDs of `tag` for `route` and writes its body; on error writes nothing and returns
  // the error (WOULD_BLOCK with Blocking::kNever when the IDs are not in memory).
  [[nodiscard]] Status take(Route route, std::string_view tag, std::uint64_t n, Blocking blocking,
                            ApiResponse& r, OutBuf& body);
  // OK when `authorization` carries the admin token, else the error admit() answers; a wrong
  // token sets `wrong_token` and leaves the gate (comparing_) closed for the delayed answer.
  [[nodiscard]] Status authorize(std::string_view authorization, const AdminAction& action,
                                 bool& wrong_token);
  // Answers a delayed refusal (PendingSegment::refusal) once its deadline is reached, then opens
  // the gate.
  void refuse_after_delay(const PendingSegment& pending, ApiResponse& r, OutBuf& body);
  void create(const ApiRequest& request, std::string_view query, ApiResponse& r, OutBuf& body,
              QueryScratch& scratch, Blocking blocking);
  // Hands `pending` to the segment pool (ApiResponse::deferred_segment).
  void defer(PendingSegment pending, ApiResponse& r) const;
  [[nodiscard]] MonoTime queue_deadline() const;
  // The blocking halves, on the segment pool (or directly with Blocking::kAllowed).
  void list(ApiResponse& r, OutBuf& body);
  void check_issued(const PendingSegment& pending, ApiResponse& r, OutBuf& body);
  void tag_state(const std::string& tag, ApiResponse& r, OutBuf& body);
  void create_tag(const SegmentTagSpec& spec, ApiResponse& r, OutBuf& body);

  SegmentService& segments_;
  const std::string admin_token_;
  // Closed while a token is compared and while a wrong one's refusal is delayed.
  std::atomic<bool> comparing_{false};
  MonotonicClock& clock_;
  const std::string page_;  // the /segments page with this node's stores filled in
  IdsWriter order_writer_;
  DecodeCounter decode_counter_;
};

}  // namespace flurry::server

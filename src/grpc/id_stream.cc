// Ids.Stream (id_stream.h).
#include "id_stream.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "flurry/mutex.h"
#include "messages.h"

namespace flurry::grpc_api {
namespace {

using ops::Deferral;
using ops::IdCount;

// One long-lived stream of Next requests, answered in order. Reading the next request overlaps
// with writing earlier answers, but only while the answers issued and not yet taken by the
// transport stay small (kStreamAheadIds IDs, kStreamAheadResponses responses, and room left on the
// connection's and the server's StreamBudget, on which they are drawn): a client that stops
// reading stops the issuing, and a cancelled stream issues nothing more.
class IdStream final : public grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse> {
 public:
  IdStream(Calls& calls, grpc::CallbackServerContext* ctx)
      : calls_(calls),
        ctx_(ctx),
        started_(calls.clock_.now()),
        peer_(ctx->peer()),
        connection_(calls.stream_budget_.enter(peer_)) {
    MutexLock lock(mu_);
    reading_ = true;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::optional<NextCall> call;
    std::optional<Status> done;
    {
      MutexLock lock(mu_);
      reading_ = false;
      if (!ok) {  // the client closed its side (or went away): end once the answers are out
        read_closed_ = true;
        done = settle();
      } else if (Result<NextCall> checked =
                     next_call(calls_.ops_, request_, calls_.options_.max_message_bytes);
                 !checked.ok()) {  // the answers before it stand: sent first, then the error
        read_closed_ = true;
        error_ = checked.status();
        done = settle();
      } else {
        call = *checked;
        issuing_ = true;
      }
    }
    if (!call) {
      if (done) finish(*done);
      return;
    }
    v1::NextResponse response;
    Deferral deferral;
    Status st = issue_next(calls_.ops_, *call, response, Blocking::kNever, deferral);
    if (st.reason() == Reason::kWouldBlock) {
      calls_.pools_.post(deferral.pool, [this, call = *call, deferral]() mutable {
        v1::NextResponse late;
        const Status done = ctx_->IsCancelled()
                                ? Status(StatusCode::kCancelled, "cancelled")
                                : issue_next(calls_.ops_, call, late, Blocking::kAllowed, deferral);
        after_issue(call.count, std::move(late), done);
      });
      return;
    }
    after_issue(call->count, std::move(response), st);
  }

  void OnWriteDone(bool ok) override {
    std::optional<Status> done;
    {
      MutexLock lock(mu_);
      writing_ = false;
      ahead_ids_ -= static_cast<std::uint64_t>(queue_.front().ids_size());
      queue_.pop_front();
      calls_.stream_budget_.give(*connection_, drawn_.front());
      drawn_.pop_front();
      if (!ok) {
        read_closed_ = true;
        if (error_.ok())
          error_ = Status(StatusCode::kCancelled, "the stream broke while IDs were sent");
        queue_.clear();
        ahead_ids_ = 0;
        give_back_drawn();
      }
      done = settle();
    }
    // Once mu_ is released another thread may finish the stream and OnDone delete it (a deferred
    // issue runs on a pool thread gRPC does not wait for): nothing of this object is touched,
    // not even a member call, unless settle() gave this caller the status to finish with.
    if (done) finish(*done);
  }

  void OnDone() override {
    {
      MutexLock lock(mu_);
      give_back_drawn();
    }
    calls_.stream_budget_.leave(peer_);
    delete this;
  }

 private:
  static constexpr std::uint64_t kStreamAheadIds = 65536;
  static constexpr std::size_t kStreamAheadResponses = 64;

  void after_issue(IdCount count, v1::NextResponse response, const Status& st)
      FLURRY_EXCLUDES(mu_) {
    std::optional<Status> done;
    {
      MutexLock lock(mu_);
      issuing_ = false;
      if (!st.ok()) {
        read_closed_ = true;
        error_ = st;
      } else {
        calls_.count_sent(Method::kIdsStream, count.value());
        ahead_ids_ += count.value();
        const std::uint64_t bytes = response.ByteSizeLong();
        drawn_.push_back(calls_.stream_budget_.take(*connection_, bytes, bytes));
        queue_.push_back(std::move(response));
      }
      done = settle();
    }
    // Once mu_ is released another thread may finish the stream and OnDone delete it (a deferred
    // issue runs on a pool thread gRPC does not wait for): nothing of this object is touched,
    // not even a member call, unless settle() gave this caller the status to finish with.
    if (done) finish(*done);
  }

  // What the answers still waiting drew on the budget, given back.
  void give_back_drawn() FLURRY_REQUIRES(mu_) {
    for (const std::uint64_t bytes : drawn_) calls_.stream_budget_.give(*connection_, bytes);
    drawn_.clear();
  }

  // With mu_ held: writes the next answer, reads the next request while little is ahead, and
  // once nothing is being read, issued or written any more, returns the status to finish with
  // (once: the caller finishes with it after mu_ is released).
  std::optional<Status> settle() FLURRY_REQUIRES(mu_) {
    if (finished_) return std::nullopt;
    if (!writing_ && !queue_.empty()) {
      writing_ = true;
      StartWrite(&queue_.front());  // a deque keeps its elements in place as it grows
    }
    // With answers waiting, the next request is read only while the budget has room; the write
    // of the front one calls this again when it completes.
    if (!reading_ && !issuing_ && !read_closed_ && ahead_ids_ < kStreamAheadIds &&
        queue_.size() < kStreamAheadResponses &&
        (queue_.empty() || calls_.stream_budget_.has_room(*connection_))) {
      reading_ = true;
      StartRead(&request_);
    }
    if (read_closed_ && !reading_ && !issuing_ && !writing_ && queue_.empty()) {
      finished_ = true;
      return error_;
    }
    return std::nullopt;
  }

  // Without mu_: finishes the stream with `status`, which settle() returned to this caller only
  // (OnDone may then delete it).
  void finish(const Status& status) FLURRY_EXCLUDES(mu_) {
    Finish(calls_.answer(Method::kIdsStream, *ctx_, status, started_));
  }

  Calls& calls_;
  grpc::CallbackServerContext* ctx_;
  const MonoTime started_;
  const std::string peer_;
  StreamBudget::Connection* const connection_;
  Mutex mu_;
  v1::NextRequest request_ FLURRY_GUARDED_BY(mu_);  // the request being read
  // Answers issued, the front one being written.
  std::deque<v1::NextResponse> queue_ FLURRY_GUARDED_BY(mu_);
  // Bytes each answer in queue_ drew on the budget.
  std::deque<std::uint64_t> drawn_ FLURRY_GUARDED_BY(mu_);
  std::uint64_t ahead_ids_ FLURRY_GUARDED_BY(mu_) = 0;  // IDs in queue_
  bool reading_ FLURRY_GUARDED_BY(mu_) = false;
  bool issuing_ FLURRY_GUARDED_BY(mu_) = false;
  bool writing_ FLURRY_GUARDED_BY(mu_) = false;
  // No more requests: the client closed, broke, or sent a bad one.
  bool read_closed_ FLURRY_GUARDED_BY(mu_) = false;
  bool finished_ FLURRY_GUARDED_BY(mu_) = false;
  // What the stream ends with once the answers before it are out.
  Status error_ FLURRY_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse>* new_id_stream(
    Calls& calls, grpc::CallbackServerContext* ctx) {
  return new IdStream(calls, ctx);
}

}  // namespace flurry::grpc_api

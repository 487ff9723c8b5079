// Ids.StreamRange (range_stream.h).
#include "range_stream.h"

#include <grpcpp/alarm.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace flurry::grpc_api {
namespace {

using ops::Deferral;
using ops::IdCount;

// IDs per StreamRange message at most: 512 KiB, few enough messages for tens of millions of IDs a
// second. A stream starts at kRangeFirstChunkIds and doubles its chunk after each message the
// transport took, so a reader that stops early pins little.
constexpr std::uint64_t kRangeChunkIds = 65536;
// What an IdChunk adds to its 8 bytes an ID: the field's tag and length (at most 1 + 10 bytes).
constexpr std::uint64_t kChunkFramingBytes = 16;
constexpr std::uint64_t kRangeFirstChunkIds = 512;
// A chunk that would wait for the generator (throttled at the layout's rate, a clock wait) is not
// queued on the generator's thread ahead of unary calls: the stream tries again after this delay,
// doubled on each miss up to kRangeRetryMax.
constexpr std::chrono::milliseconds kRangeRetryMin{2};
constexpr std::chrono::milliseconds kRangeRetryMax{100};

// StreamRange: IDs issued a chunk at a time, the next chunk only once the transport took the one
// before (HTTP/2 flow control lets it go only when the client has room), so a slow reader holds
// back issuing and a cancelled stream issues nothing more. Chunks start small and double while the
// client keeps taking them; what is issued and not yet taken is drawn on the connection's and the
// server's StreamBudget. A chunk the generator cannot issue at once (throttled, a clock wait) is
// tried again after a delay instead of waiting on the generator's thread, so streams take only
// the rate unary calls leave. One step runs at a time (the start, a write's completion, an
// alarm), each starting the next: no lock.
class RangeStream final : public grpc::ServerWriteReactor<v1::IdChunk> {
 public:
  RangeStream(Calls& calls, grpc::CallbackServerContext* ctx, std::uint64_t count)
      : calls_(calls),
        ctx_(ctx),
        started_(calls.clock_.now()),
        remaining_(count),
        peer_(ctx->peer()),
        connection_(calls.stream_budget_.enter(peer_)) {
    // A chunk also fits grpc_max_message_bytes (at least 64 KiB): a message gRPC would refuse
    // to send after its IDs were issued would lose them.
    chunk_max_ = std::min({kRangeChunkIds, calls.ops_.max_batch(),
                           (calls.options_.max_message_bytes - kChunkFramingBytes) / 8});
    chunk_ids_ = std::min(kRangeFirstChunkIds, chunk_max_);
    next_chunk();
  }

  void OnWriteDone(bool ok) override {
    give_back();
    if (!ok) return end(Status(StatusCode::kCancelled, "the stream broke while IDs were sent"));
    chunk_ids_ = std::min(chunk_ids_ * 2, chunk_max_);
    next_chunk();
  }

  void OnDone() override {
    give_back();
    calls_.stream_budget_.leave(peer_);
    delete this;
  }

 private:
  void give_back() {
    if (held_ == 0) return;
    calls_.stream_budget_.give(*connection_, held_);
    held_ = 0;
  }

  void next_chunk() {
    if (remaining_ == 0) return end(OkStatus());
    if (ctx_->IsCancelled()) return end(Status(StatusCode::kCancelled, "cancelled"));
    const std::uint64_t least = std::min(kRangeFirstChunkIds, chunk_max_);
    held_ = calls_.stream_budget_.take(*connection_, std::min(remaining_, chunk_ids_) * 8,
                                       std::min(remaining_, least) * 8);
    // Less than asked when the budget is short: the chunk grows again from there.
    chunk_ids_ = std::max(least, held_ / 8);
    // held_ / 8 <= chunk_max_ <= max_batch: always a valid count.
    Result<IdCount> n = IdCount::of(held_ / 8, calls_.ops_.max_batch());
    if (!n.ok()) return end(n.status());
    count_ = *n;
    ids_.resize(count_.value());
    Deferral deferral;
    Status st = calls_.ops_.next_ids(count_, ids_, Blocking::kNever, deferral);
    if (st.reason() != Reason::kWouldBlock) {
      retry_ = std::chrono::milliseconds(0);
      return after_issue(st);
    }
    // Nothing was issued: give the bytes back and try again later, with a first-size chunk.
    give_back();
    // A stream that waits for the generator keeps no large buffer meanwhile (while it flows, the
    // two are reused from chunk to chunk: freeing and faulting them in again for every chunk cost
    // two thirds of a single stream's rate).
    if (ids_.capacity() > kRangeFirstChunkIds) std::vector<std::uint64_t>().swap(ids_);
    if (chunk_.ids().capacity() > kRangeFirstChunkIds * 8) {
      std::string().swap(*chunk_.mutable_ids());
    }
    chunk_ids_ = least;
    retry_ = std::clamp(retry_ * 2, kRangeRetryMin, kRangeRetryMax);
    // Two alarms taken in turn: the next retry is set from inside the previous one's callback,
    // which must not replace the function it is running.
    alarm_ ^= 1;
    alarms_[alarm_].Set(std::chrono::system_clock::now() + retry_, [this](bool) { next_chunk(); });
  }

  void after_issue(const Status& st) {
    if (!st.ok()) {
      give_back();
      return end(st);
    }
    std::string& packed = *chunk_.mutable_ids();
    packed.resize(ids_.size() * 8);
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(packed.data(), ids_.data(), packed.size());
    } else {
      for (std::size_t i = 0; i < ids_.size(); ++i) {
        for (int b = 0; b < 8; ++b) {
          packed[i * 8 + b] = static_cast<char>((ids_[i] >> (8 * b)) & 0xff);
        }
      }
    }
    remaining_ -= count_.value();
    calls_.count_sent(Method::kIdsStreamRange, count_.value());
    StartWrite(&chunk_);
  }

  void end(const Status& st) {
    Finish(calls_.answer(Method::kIdsStreamRange, *ctx_, st, started_));
  }

  Calls& calls_;
  grpc::CallbackServerContext* ctx_;
  const MonoTime started_;
  std::uint64_t remaining_;
  const std::string peer_;
  StreamBudget::Connection* const connection_;
  std::uint64_t chunk_max_ = 1;
  std::uint64_t chunk_ids_ = 1;  // the size of the next chunk, before the budget's say
  std::uint64_t held_ = 0;       // bytes drawn on the budget for the chunk being issued or sent
  std::chrono::milliseconds retry_{0};
  std::array<grpc::Alarm, 2> alarms_;
  std::size_t alarm_ = 0;
  IdCount count_ = IdCount::one();
  std::vector<std::uint64_t> ids_;
  v1::IdChunk chunk_;
};

}  // namespace

grpc::ServerWriteReactor<v1::IdChunk>* new_range_stream(Calls& calls,
                                                        grpc::CallbackServerContext* ctx,
                                                        std::uint64_t count) {
  return new RangeStream(calls, ctx, count);
}

}  // namespace flurry::grpc_api

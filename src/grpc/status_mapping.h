// A flurry Status as a gRPC status: the code of the same number and the message; for an error,
// the trailing metadata `flurry-reason` (its Reason) and `retry-after-ms` (where
// ops::retry_advice says to retry, as HTTP's Retry-After), and both again as google.rpc.ErrorInfo
// and RetryInfo in a google.rpc.Status (grpc-status-details-bin). A refusal of the timestamp
// oracle's follower (NOT_LEADER) also names the leader: ErrorInfo.metadata `leader_http` and
// `leader_grpc`.
#pragma once

#include <grpcpp/grpcpp.h>

#include "flurry/status.h"
#include "flurry/timestamp_oracle.h"

namespace flurry::grpc_api {

// The gRPC status of `status`, its trailing metadata added to `ctx`. Call it once per RPC, as it
// ends. Thread-safe as the context is: from the thread that finishes the call.
// `leader` (a NOT_LEADER status only; null otherwise): the oracle's leader, written into
// ErrorInfo.metadata as `leader_http` and `leader_grpc` ("HOST:PORT", each when not empty), and
// no retry advice (no RetryInfo, no retry-after-ms): the client asks the leader now, not this
// server later.
[[nodiscard]] grpc::Status to_grpc_status(grpc::CallbackServerContext& ctx, const Status& status,
                                          const TsoLeaderAddress* leader = nullptr);

}  // namespace flurry::grpc_api

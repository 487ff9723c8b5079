// A flurry Status as a gRPC status: the code of the same number and the message; for an error,
// the trailing metadata `flurry-reason` (its Reason) and `retry-after-ms` (where
// ops::retry_advice says to retry, as HTTP's Retry-After), and both again as google.rpc.ErrorInfo
// and RetryInfo in a google.rpc.Status (grpc-status-details-bin).
#pragma once

#include <grpcpp/grpcpp.h>

#include "flurry/status.h"

namespace flurry::grpc_api {

// The gRPC status of `status`, its trailing metadata added to `ctx`. Call it once per RPC, as it
// ends. Thread-safe as the context is: from the thread that finishes the call.
[[nodiscard]] grpc::Status to_grpc_status(grpc::CallbackServerContext& ctx, const Status& status);

}  // namespace flurry::grpc_api

// Ids.StreamRange: `count` IDs sent in chunks as the transport takes them (range_stream.cc).
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>

#include "calls.h"
#include "flurry/v1/flurry.pb.h"

namespace flurry::grpc_api {

namespace v1 = ::flurry::v1;

// The reactor of an admitted Ids.StreamRange call of `count` IDs (1 .. grpc_max_range); it
// deletes itself when the call is done.
grpc::ServerWriteReactor<v1::IdChunk>* new_range_stream(Calls& calls,
                                                        grpc::CallbackServerContext* ctx,
                                                        std::uint64_t count);

}  // namespace flurry::grpc_api

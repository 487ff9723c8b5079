// Ids.Stream: one long-lived stream of Next requests, answered in order (id_stream.cc).
#pragma once

#include <grpcpp/grpcpp.h>

#include "calls.h"
#include "flurry/v1/flurry.pb.h"

namespace flurry::grpc_api {

namespace v1 = ::flurry::v1;

// The reactor of an admitted Ids.Stream call; it deletes itself when the call is done.
grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse>* new_id_stream(
    Calls& calls, grpc::CallbackServerContext* ctx);

}  // namespace flurry::grpc_api

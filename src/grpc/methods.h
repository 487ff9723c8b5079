// The methods of flurry.v1 the gRPC adapter serves, their metric labels and the scope each needs:
// the one table of who may call what over gRPC, as HTTP's route table is for HTTP. Health and
// reflection need no scope and are not in it.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "ops/tokens.h"

namespace flurry::grpc_api {

enum class Method : std::size_t {
  kIdsNext,
  kIdsStream,
  kIdsStreamRange,
  kIdsDecode,
  kIdsLayout,
  kSegmentsNext,
  kSegmentsRange,
  kSegmentsList,
  kSegmentsGet,
  kSegmentsCreate,
  kOrderNumbersNew,
  kOrderNumbersDecode,
  kTsoGet,
  kTsoStream,
};
constexpr std::array<std::string_view, 14> kMethodNames = {
    "/flurry.v1.Ids/Next",        "/flurry.v1.Ids/Stream",       "/flurry.v1.Ids/StreamRange",
    "/flurry.v1.Ids/Decode",      "/flurry.v1.Ids/Layout",       "/flurry.v1.Segments/Next",
    "/flurry.v1.Segments/Range",  "/flurry.v1.Segments/List",    "/flurry.v1.Segments/Get",
    "/flurry.v1.Segments/Create", "/flurry.v1.OrderNumbers/New", "/flurry.v1.OrderNumbers/Decode",
    "/flurry.v1.Tso/Get",         "/flurry.v1.Tso/Stream"};
// The scope each method needs (flurry/server/tokens.h), in kMethodNames' order.
using ops::Scope;
constexpr std::array<Scope, 14> kMethodScopes = {
    Scope::kIds,           // Ids/Next
    Scope::kIds,           // Ids/Stream
    Scope::kIds,           // Ids/StreamRange
    Scope::kRead,          // Ids/Decode
    Scope::kRead,          // Ids/Layout
    Scope::kIds,           // Segments/Next
    Scope::kIds,           // Segments/Range
    Scope::kRead,          // Segments/List
    Scope::kRead,          // Segments/Get
    Scope::kAdmin,         // Segments/Create
    Scope::kIds,           // OrderNumbers/New
    Scope::kOrdersDecode,  // OrderNumbers/Decode
    Scope::kIds,           // Tso/Get
    Scope::kIds,           // Tso/Stream
};
static_assert(kMethodScopes.size() == kMethodNames.size());

}  // namespace flurry::grpc_api

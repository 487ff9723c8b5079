// Status to gRPC (status_mapping.h).
#include "status_mapping.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "ops/retry.h"

namespace flurry::grpc_api {
namespace {

// ---- google.rpc.Status in grpc-status-details-bin ----
// Protocol-buffer wire format by hand for the few messages of googleapis' google/rpc/status.proto
// and error_details.proto sent here (Debian ships no code for them); field numbers as googleapis
// defines them. Checked by parsing them with those protos in tests/integration/grpc_api.py.

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_uint(std::string& out, std::uint32_t field, std::uint64_t v) {
  put_varint(out, std::uint64_t{field} << 3);  // wire type 0: varint
  put_varint(out, v);
}

void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_varint(out, (std::uint64_t{field} << 3) | 2);  // wire type 2: length-delimited
  put_varint(out, bytes.size());
  out.append(bytes);
}

// google.protobuf.Any{type_url, value} as a google.rpc.Status detail (field 3).
void put_detail(std::string& status, std::string_view type, const std::string& value) {
  std::string any;
  put_bytes(any, 1, "type.googleapis.com/" + std::string(type));
  put_bytes(any, 2, value);
  put_bytes(status, 3, any);
}

// One entry of a map<string, string> field (a message {key = 1, value = 2}).
void put_map_entry(std::string& out, std::uint32_t field, std::string_view key,
                   std::string_view value) {
  std::string entry;
  put_bytes(entry, 1, key);
  put_bytes(entry, 2, value);
  put_bytes(out, field, entry);
}

// google.rpc.Status{code, message, details}: ErrorInfo{reason, domain "flurry", metadata (the
// leader's addresses)} when the error has a reason, RetryInfo{retry_delay} when the caller
// should retry.
std::string status_details(const Status& status, const ops::RetryAdvice& retry,
                           const TsoLeaderAddress* leader) {
  std::string out;
  put_uint(out, 1, static_cast<std::uint64_t>(status.code()));
  put_bytes(out, 2, status.message());
  if (status.reason() != Reason::kNone) {
    std::string info;
    put_bytes(info, 1, to_string(status.reason()));
    put_bytes(info, 2, "flurry");
    if (leader != nullptr) {
      if (!leader->http.empty()) put_map_entry(info, 3, "leader_http", leader->http);
      if (!leader->grpc.empty()) put_map_entry(info, 3, "leader_grpc", leader->grpc);
    }
    put_detail(out, "google.rpc.ErrorInfo", info);
  }
  if (retry.retry) {
    std::string delay;  // google.protobuf.Duration{seconds}
    put_uint(delay, 1, static_cast<std::uint64_t>(retry.after.count()));
    std::string info;
    put_bytes(info, 1, delay);
    put_detail(out, "google.rpc.RetryInfo", info);
  }
  return out;
}

}  // namespace

grpc::Status to_grpc_status(grpc::CallbackServerContext& ctx, const Status& status,
                            const TsoLeaderAddress* leader) {
  if (status.ok()) return grpc::Status::OK;
  if (status.reason() != Reason::kNone) {
    ctx.AddTrailingMetadata("flurry-reason", std::string(to_string(status.reason())));
  }
  // A redirect: the same call succeeds at the leader now, not here after a delay.
  const ops::RetryAdvice retry = leader != nullptr ? ops::RetryAdvice{} : ops::retry_advice(status);
  if (retry.retry) {
    ctx.AddTrailingMetadata(
        "retry-after-ms",
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(retry.after).count()));
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message(),
                      status_details(status, retry, leader));
}

}  // namespace flurry::grpc_api

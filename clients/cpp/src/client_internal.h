// The C++ client's pure functions and test hooks (docs/clients.md), exposed to its own tests:
// error answers, retry waits, batch sizes, the refill's parser, the order decode and tso()'s
// answers, checked against clients/conformance/cases.json; the retry loop's fake clock, sleep
// and jitter.
#pragma once

#include "batch_sizer.h"
#include "errors.h"
#include "flurry/client.h"
#include "ids_parser.h"
#include "order_decode.h"
#include "transport.h"
#include "tso_answer.h"

namespace flurry {
// Sets a client's TestHooks before its first call.
struct ClientTestAccess {
  static void set_hooks(Client& client, client_internal::TestHooks hooks);
};
}  // namespace flurry

// Planted include violations for tests/static/planted_layers.sh: checked by tools/check-layers.py
// as a source of the operations layer (src/ops). Never compiled. The lines marked PLANTED must be
// reported, the others must not. Kept as written (clang-format would sort the includes and so
// reorder the planted lines the test names in order).
// clang-format off
#include "core/quote.h"         // the core's shared helpers: below ops
#include "flurry/layout.h"      // the public API
#include "http/http_server.h"   // PLANTED: the HTTP layer is above ops
#include "http/api.h"           // PLANTED: a private header of the HTTP layer
#include "../http/json_views.h" // PLANTED: climbs out of the include roots
#include "order/order_formats.h"  // ops may use the order library
#include "service/service.h"    // ops sits on the service

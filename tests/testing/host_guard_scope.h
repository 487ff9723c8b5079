// Test processes running at once (ctest -j) are separate hosts to the node-ID host guard
// (flurry/host_guard.h): each narrows the guards' scope to itself before it starts a Service, so
// that two tests' services on one layout never step over each other's node IDs.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "flurry/host_guard.h"

namespace flurry::testing {

inline void use_own_host_guard_scope() {
  const std::string scope = "unit-test-" + std::to_string(::getpid());
  ::setenv(kHostGuardScopeVariable, scope.c_str(), 1);
}

}  // namespace flurry::testing

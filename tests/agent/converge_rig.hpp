// Converge on a fixture host behind the fake kernel (tests/support/fake_host.hpp), with the short
// timeouts the unit tests use: the rig of the converge, operator and real-host tests.
#pragma once

#include <chrono>

#include "agent/converge.hpp"
#include "tests/support/fake_host.hpp"

namespace hostprep::test {

// ConvergeOptions for `mode` whose unbind and lock waits end in half a second: a test that hits
// one fails fast instead of waiting out the product's minutes.
inline ConvergeOptions quickConverge(Mode mode) {
  ConvergeOptions co;
  co.mode = mode;
  co.unbindTimeout = std::chrono::milliseconds(500);
  co.lockTimeout = std::chrono::milliseconds(500);
  return co;
}

}  // namespace hostprep::test

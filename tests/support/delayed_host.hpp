// A host whose drivers take their time: a write that `delay` picks sleeps first, as a driver's
// remove() or probe() holds the write in the kernel (an unbind returns once remove() has; a
// drivers_probe once probe() has). Everything else goes to the wrapped host (the fake kernel)
// as it is. For tests and benchmarks of what runs at the same time; the sleep is the only change.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>
#include <thread>
#include <utility>

#include "drivers/seam/host.hpp"
#include "tests/support/forwarding_host.hpp"

namespace hostprep::test {

class DelayedHost final : public ForwardingHost {
 public:
  // How long a write of `data` to `path` takes before it happens (zero: no delay).
  using Delay =
      std::function<std::chrono::milliseconds(std::string_view path, std::string_view data)>;
  DelayedHost(Host& inner, Delay delay) : ForwardingHost(inner), delay_(std::move(delay)) {}

  Status writeAttr(std::string_view p, std::string_view data,
                   std::optional<std::chrono::milliseconds> t) override {
    if (auto d = delay_(p, data); d.count() > 0) std::this_thread::sleep_for(d);
    return ForwardingHost::writeAttr(p, data, t);
  }

 private:
  Delay delay_;
};

// The usual case: an unbind of one device takes `delay` (its driver's remove() is slow).
inline DelayedHost::Delay slowRemoveOf(std::string bdf, std::chrono::milliseconds delay) {
  return [bdf = std::move(bdf), delay](std::string_view p, std::string_view data) {
    return p.ends_with("/unbind") && data == bdf ? delay : std::chrono::milliseconds(0);
  };
}

}  // namespace hostprep::test

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

#include "drivers/host.hpp"

namespace hostprep::test {

class DelayedHost final : public Host {
 public:
  // How long a write of `data` to `path` takes before it happens (zero: no delay).
  using Delay =
      std::function<std::chrono::milliseconds(std::string_view path, std::string_view data)>;
  DelayedHost(Host& inner, Delay delay) : inner_(inner), delay_(std::move(delay)) {}

  const std::filesystem::path& root() const override { return inner_.root(); }
  Result<std::string> read(std::string_view p, size_t cap) const override {
    return inner_.read(p, cap);
  }
  Result<std::string> readAttr(std::string_view p, std::chrono::milliseconds t) const override {
    return inner_.readAttr(p, t);
  }
  Result<std::string> readLink(std::string_view p) const override { return inner_.readLink(p); }
  Result<std::vector<std::string>> list(std::string_view d) const override {
    return inner_.list(d);
  }
  bool exists(std::string_view p) const override { return inner_.exists(p); }
  Result<FileOwnership> ownership(std::string_view p) const override { return inner_.ownership(p); }
  Status writeAttr(std::string_view p, std::string_view data,
                   std::optional<std::chrono::milliseconds> t) override {
    if (auto d = delay_(p, data); d.count() > 0) std::this_thread::sleep_for(d);
    return inner_.writeAttr(p, data, t);
  }
  Status writeFileAtomic(std::string_view p, std::string_view data, mode_t mode) override {
    return inner_.writeFileAtomic(p, data, mode);
  }
  Status makeDirs(std::string_view p, mode_t mode) override { return inner_.makeDirs(p, mode); }
  Status removeFile(std::string_view p) override { return inner_.removeFile(p); }
  Result<FileLock> tryLock(std::string_view p) override { return inner_.tryLock(p); }

 private:
  Host& inner_;
  Delay delay_;
};

// The usual case: an unbind of one device takes `delay` (its driver's remove() is slow).
inline DelayedHost::Delay slowRemoveOf(std::string bdf, std::chrono::milliseconds delay) {
  return [bdf = std::move(bdf), delay](std::string_view p, std::string_view data) {
    return p.ends_with("/unbind") && data == bdf ? delay : std::chrono::milliseconds(0);
  };
}

}  // namespace hostprep::test

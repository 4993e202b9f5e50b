// A Host that passes every call to another one: the base of test hosts that change one thing
// (DelayedHost: a write takes its time; a counting host: how often each file is read).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/seam/host.hpp"

namespace hostprep::test {

class ForwardingHost : public Host {
 public:
  explicit ForwardingHost(Host& inner) : inner_(inner) {}

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
  Result<std::vector<std::string>> listUnordered(std::string_view d) const override {
    return inner_.listUnordered(d);
  }
  bool exists(std::string_view p) const override { return inner_.exists(p); }
  Result<FileOwnership> ownership(std::string_view p) const override { return inner_.ownership(p); }
  Status writeAttr(std::string_view p, std::string_view data,
                   std::optional<std::chrono::milliseconds> t) override {
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
};

}  // namespace hostprep::test

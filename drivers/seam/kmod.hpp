// Kernel modules: the only door to libkmod (kmod.cpp is the one file that includes it).
#pragma once

#include <memory>
#include <string>

#include "drivers/seam/host.hpp"

namespace hostprep {

class ModuleLoader {
 public:
  virtual ~ModuleLoader() = default;
  // Loads a module and its dependencies (modprobe semantics, module options from modprobe.d).
  virtual Status load(const std::string& module) = 0;
  // Is the module known to the kernel's module index (modules.dep or modules.builtin)?
  virtual bool available(const std::string& module) const = 0;
};

// libkmod over <root>/lib/modules/<release> and <root>/etc/modprobe.d. Loading refuses when the
// root's sys is not a live sysfs: a fixture or image root must never insert modules into the
// kernel this process runs on.
std::unique_ptr<ModuleLoader> makeKmodLoader(const Host& host, const std::string& kernelRelease);

}  // namespace hostprep

// What the next boot will do, read from configuration files rather than the running kernel: the
// kernel command line the boot loader will pass (GRUB defaults, kernel-install's
// etc/kernel/cmdline, Boot Loader Specification entries), modprobe.d directives, the modules
// loaded at boot, and the hostprep boot unit. Preflight reads it on a live host (does the fix
// survive a reboot?) and on an image root (is the image ready before any node boots it?).
// Absent files are states: an image without GRUB simply has no GRUB source.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/common/parsers.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

// One place a kernel command line is configured, e.g. "etc/default/grub GRUB_CMDLINE_LINUX".
struct CmdlineSource {
  std::string
      origin;  // host path, plus the variable for GRUB ("etc/default/grub GRUB_CMDLINE_LINUX")
  std::string text;
  Cmdline args;
};

// One directive of a modprobe.d file: "options vfio-pci ids=10de:2236", "blacklist nouveau",
// "softdep nvidia pre: vfio-pci", "install nouveau /bin/false". The module is normalised
// ('-' -> '_'); `args` is the rest of the line as words.
struct ModprobeDirective {
  std::string file;  // host path
  std::string verb;
  std::string module;
  std::vector<std::string> args;
};

// A module that is loaded at boot, and the file that says so.
struct BootModule {
  std::string file;
  std::string module;  // normalised
};

struct BootConfig {
  std::vector<CmdlineSource> cmdlines;      // in the order listed in bootconfig.cpp
  std::vector<ModprobeDirective> modprobe;  // etc/, run/, usr/lib/, lib/ modprobe.d
  std::vector<BootModule> bootModules;      // modules-load.d, etc/modules, initramfs-tools
  std::vector<std::string> enabledUnits;  // host paths of wants/ links to hostprep-prepare.service

  bool blacklisted(std::string_view module) const;  // "blacklist m" or "install m /bin/false|true"
  // Every value of "options <module> <key>=..." (module and key compared with '-' == '_').
  std::vector<std::string> optionValues(std::string_view module, std::string_view key) const;
  // Modules named in "softdep <module> pre: ..." lines.
  std::vector<std::string> softdepPre(std::string_view module) const;
  bool loadsAtBoot(std::string_view module) const;
};

// The unit hostprep installs to restore the mode at boot.
inline constexpr std::string_view kPrepareUnit = "hostprep-prepare.service";

// Reads every boot configuration source under the host root. Never fails: what is absent is
// simply not in the result.
BootConfig readBootConfig(const Host& host);

// Pure parsers, tested table-driven.
// Shell-style assignments of an etc/default/grub file: VAR=value, VAR="value", VAR='value',
// with "$VAR" / "${VAR}" expanded from earlier assignments (grub.d snippets append that way).
// `vars` carries values across files; returns it updated.
std::map<std::string, std::string> parseGrubDefaults(std::string_view text,
                                                     std::map<std::string, std::string> vars = {});
std::vector<ModprobeDirective> parseModprobeConf(std::string_view file, std::string_view text);
// modules-load.d / etc/modules / initramfs-tools/modules: one module per line (first word),
// '#' and ';' comments.
std::vector<BootModule> parseModulesList(std::string_view file, std::string_view text);
// The kernel arguments of a Boot Loader Specification entry ("options" lines, concatenated).
std::string parseLoaderEntryOptions(std::string_view text);

// Kernel parameter names treat '-' and '_' alike ("vfio-pci.ids" == "vfio_pci.ids").
std::optional<std::string> cmdlineValue(const Cmdline& c, std::string_view key);
// Every value of `key`, in command-line order ("" for a bare key): the kernel runs an argument's
// handler once per occurrence (init/main.c, obsolete_checksetup()), so intel_iommu=, amd_iommu=
// and iommu= apply every occurrence's options in turn, not only the last one's.
std::vector<std::string> cmdlineValues(const Cmdline& c, std::string_view key);
bool cmdlineHas(const Cmdline& c, std::string_view key);

}  // namespace hostprep

// Which modules a kernel release has, read from the text files depmod(8) writes beside its binary
// indexes and from modprobe.d(5), so that libkmod (and the libcrypto it brings) is opened only
// when the text cannot answer. libkmod stays the authority: these functions either answer exactly
// what its lookup would, or say that they cannot.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/seam/host.hpp"

namespace hostprep {

// The modprobe.d directories hostprep gives libkmod (kmod.cpp), relative to the root.
inline constexpr std::string_view kModprobeConfigDirs[] = {"etc/modprobe.d", "lib/modprobe.d"};

// Of `names` (normalised module names), those a text modules.dep or modules.builtin lists
// ("kernel/drivers/vfio/pci/vfio-pci.ko.xz: ..." lists vfio_pci).
std::set<std::string> namesListedIn(std::string_view text, const std::set<std::string>& names);

// Does an alias pattern match a normalised module name as libkmod matches it: the pattern with
// '-' read as '_' outside [...] (kmod's alias_normalize), then fnmatch(3)? A pattern too long or
// with too many '*' to evaluate cheaply counts as a match: callers then ask libkmod.
bool aliasMayMatch(std::string_view pattern, std::string_view name);

// Of `names`, those that an "alias <pattern> <module>" line of a text modules.alias matches.
std::set<std::string> namesMatchedByAliases(std::string_view text,
                                            const std::set<std::string>& names);
// Of `names`, those that a "<module>.alias=<pattern>" entry of modules.builtin.modinfo (NUL
// separated; the source of modules.builtin.alias.bin) matches.
std::set<std::string> namesMatchedByBuiltinAliases(std::string_view modinfo,
                                                   const std::set<std::string>& names);
// Of `names`, those a modprobe.d text names: an "alias" whose pattern matches, or an "install"
// command for the module (the two kinds of configuration libkmod's lookup consults).
std::set<std::string> namesInModprobeConfig(std::string_view text,
                                            const std::set<std::string>& names);

// Of `names`, those the release's modules.dep or modules.builtin lists (empty when neither
// text is there).
std::set<std::string> listedModules(const Host& host, const std::string& release,
                                    const std::set<std::string>& names);

// Of `names`, none of which listedModules() found, those libkmod's lookup could still resolve
// (kmod_module_new_from_lookup: modprobe.d aliases and install commands, modules.dep,
// modules.alias, modules.builtin, the built-in modules' aliases). A name left out is one the text
// files prove libkmod would not find. Every name is kept when a binary index is there without its
// text source (the text cannot speak for it).
std::set<std::string> resolvableModules(const Host& host, const std::string& release,
                                        const std::set<std::string>& names);

}  // namespace hostprep

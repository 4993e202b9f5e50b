// The values options take, each checked here once: the command line (agent/options) and the
// config file (agent/config) call the same function, so a value means the same in both and is
// refused with the same words. `where` names the place the caller read it from: "--gpu-ids" on
// the command line, "/etc/hostprep/config.yaml: selection.gpu-ids[1]" in the config file. Every
// error reads "<where>: '<value>' is not a <thing> (<how to write one>)" and exits 2.
#pragma once

#include <string>
#include <string_view>

#include "drivers/common/error.hpp"
#include "drivers/common/pci.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/platform.hpp"
#include "drivers/model/selection.hpp"

namespace hostprep {

// The agent's config file, a host path (under --root).
inline constexpr std::string_view kConfigPath = "/etc/hostprep/config.yaml";

// The vGPU config applied when none is named (vgpu-device-manager's "default").
inline constexpr std::string_view kDefaultVgpuConfigName = "default";

Result<Mode> parseModeValue(std::string_view where, std::string_view text);
// Confidential computing as the nvidia.com/cc.mode label names it: off, on, devtools, ppcie.
Result<CcMode> parseCcModeValue(std::string_view where, std::string_view text);
// What prepare does with NVSwitches: auto (follow Fabric Manager's FABRIC_MODE), with-gpus, leave.
Result<NvSwitchPolicy> parseNvSwitchValue(std::string_view where, std::string_view text);
Result<DriverProvider> parseDriverProviderValue(std::string_view where, std::string_view text);
Result<PciId> parsePciIdValue(std::string_view where, std::string_view text);  // 10de:2236
Result<Bdf> parseBdfValue(std::string_view where, std::string_view text);      // 0000:3b:00.0
// A driver or module name (checkDriverName): [A-Za-z0-9_-], 1..64 bytes.
Result<std::string> parseDriverValue(std::string_view where, std::string_view text);

// The device nodes whose holders block unbinding the host driver: a glob under /dev (it starts
// with "/dev/"), at most 255 bytes, with no ".." and no control character.
Result<std::string> parseHolderNodes(std::string_view where, std::string_view text);
// The glob in effect: `holderNodes`, or /dev/<host driver>* when it is empty.
std::string holderGlob(std::string_view holderNodes, std::string_view hostDriver);

// A vgpu-device-manager config name plays the role of the nvidia.com/vgpu.config label, so it
// is a Kubernetes label value: at most 63 characters of [A-Za-z0-9._-], beginning and ending
// with a letter or digit (kubernetes.io/docs/concepts/overview/working-with-objects/labels,
// "Syntax and character set"); hostprep also refuses the empty value.
Result<std::string> parseVgpuConfigName(std::string_view where, std::string_view text);

// A host file path hostprep reads or writes under --root: absolute, not ending in '/', no ".."
// component, no control character, at most 4096 bytes.
Result<std::string> parseHostFilePath(std::string_view where, std::string_view text);

}  // namespace hostprep

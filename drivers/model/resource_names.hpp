// Resource names the device plugins advertise, computed exactly as they compute them
// (NVIDIA/kubevirt-gpu-device-plugin, pkg/device_plugin/device_plugin.go), quirks included, so
// hostprep can say what a node will advertise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "drivers/common/pci.hpp"

namespace hostprep {

inline constexpr std::string_view kResourcePrefix = "nvidia.com/";
inline constexpr std::string_view kContainerResource = "nvidia.com/gpu";

// Human name of a PCI device from pci.ids text ("GA102GL [A10]"), nullopt when absent.
std::optional<std::string> pciIdsDeviceName(std::string_view pciIds, uint16_t vendor,
                                            uint16_t device);

// The sandbox device plugin's name rules: upper-case, '/' and '.' to '_', whitespace runs to '_',
// everything outside [A-Za-z0-9_.] dropped. "GA102GL [A10]" -> "GA102GL_A10".
std::string sanitizePciDeviceName(std::string_view raw);

// The passthrough resource the kubevirt-gpu-device-plugin advertises for a vfio-bound function
// with this device id. It only ever reads the 10de section of pci.ids; with no entry (or no
// pci.ids) it falls back to the raw lower-case device id: "nvidia.com/2235".
std::string passthroughResourceName(std::string_view pciIds, uint16_t device);

// A vGPU type name as the plugin turns it into a resource: whitespace runs to '_', case kept.
// "NVIDIA A10-12Q" -> "nvidia.com/NVIDIA_A10-12Q".
std::string vgpuResourceName(std::string_view typeName);

// KubeVirt's pciVendorSelector for a PCI id, "vendor_id:product_id" written upper-case as its user
// guide writes it ("10DE:1EB8"; https://kubevirt.io/user-guide/compute/host-devices/).
std::string pciVendorSelector(const PciId& id);

}  // namespace hostprep

// NVIDIA's GPU Operator beside hostprep: a host driver its driver container provides, and the
// operator's own agents that move GPUs between drivers.
//
// The operator's driver DaemonSet (NVIDIA/gpu-operator assets/state-driver) builds or ships
// nvidia.ko inside its container, loads it into the host's kernel and shares the container's root
// with the host at /run/nvidia/driver; the host's lib/modules has no nvidia at all. Its validator
// (NVIDIA/gpu-operator cmd/nvidia-validator) marks each stage it has validated with a file under
// /run/nvidia/validations (driver-ready; .driver-ctr-ready once the driver container is up).
//
// On vm-passthrough nodes the operator deploys its vfio-manager (assets/state-vfio-manager, node
// selector nvidia.com/gpu.deploy.vfio-manager), whose container runs NVIDIA/k8s-driver-manager's
// vfio-manage script ("bind --all" at start, "unbind --all" in its preStop hook), and on vm-vgpu
// nodes the vgpu-device-manager (NVIDIA/vgpu-device-manager, binary nvidia-vgpu-dm). Either moves
// the same GPUs hostprep moves: one owner per GPU.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "drivers/model/selection.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

inline constexpr std::string_view kOperatorDriverRoot = "run/nvidia/driver";
inline constexpr std::string_view kOperatorValidations = "run/nvidia/validations";

// The operator's driver root or its validation files are on the host.
bool operatorDriverPresent(const Host& host);

// Does the GPU Operator provide `module` here? operator: yes; host: no; auto: when the host's
// lib/modules/<release> lists no `module` (modules.dep, modules.builtin) and
// operatorDriverPresent().
bool operatorProvidesDriver(const Host& host, DriverProvider p, const std::string& kernelRelease,
                            std::string_view module);

// The message of a run or status while the operator's module is not loaded.
std::string waitingForOperatorDriver(std::string_view module);

// The operator's agents acting on this host's GPUs, from the processes under proc/ (their comm
// or the first words of their cmdline): "vfio-manager (pid 812: vfio-manage bind --all)",
// "vgpu-device-manager (pid 901: nvidia-vgpu-dm)". Sorted by pid; empty when none.
std::vector<std::string> operatorAgents(const Host& host);

}  // namespace hostprep

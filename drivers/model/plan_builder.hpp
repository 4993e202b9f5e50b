// A plan as makePlan builds it (plan.cpp), phase by phase, and the vGPU phases it hands to
// planVgpu (vgpu_plan.cpp). Internal to the two.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "drivers/model/plan.hpp"

namespace hostprep {

struct PlanBuilder {
  const Snapshot& s;
  Plan plan;
  std::set<std::string> modulesToLoad;
  std::vector<Step> deviceSteps;
  // vGPU phases, in the order they run: remove vGPU devices, disable or reset VFs (before any
  // driver moves: vfio refuses a PF with VFs), [deviceSteps], enable VFs, bind VFs, create.
  std::vector<Step> removeSteps, disableSteps, enableSteps, vfSteps, createSteps;

  // A step on a VF (or a vGPU device on it) belongs to its GPU: the executor runs a GPU's steps
  // in one lane, in plan order (its VFs appear once its sriov_numvfs is written).
  void stepOnVf(const Bdf& parent, const Bdf& gpu) {
    if (parent != gpu) plan.vfGpu[parent] = gpu;
  }

  void loadModule(const std::string& module, const std::string& driver) {
    if (s.moduleLoaded(module) || s.pciDrivers.count(driver)) return;
    if (modulesToLoad.insert(module).second) {
      plan.steps.push_back({StepKind::kLoadModule, std::nullopt, module, std::nullopt, {}});
    }
  }
  void step(StepKind k, const Bdf& b, std::string arg = {}) {
    deviceSteps.push_back({k, b, std::move(arg), std::nullopt, {}});
  }
};

// The vGPU part of a plan: for vm-vgpu, VFs on and the configured devices created (and stray
// ones removed); for the other modes, every vGPU device removed and VFs off.
Status planVgpu(PlanBuilder& b, const Selection& sel, const PlanInputs& in);

}  // namespace hostprep

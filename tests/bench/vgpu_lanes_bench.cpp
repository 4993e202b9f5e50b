// vGPU switches on a node of many GPUs: the executor's lanes (one per GPU, with its VFs and vGPU
// devices) against the same plan one step at a time. On the fake kernel, with NVIDIA's host driver
// modelled as slow where it is slow on real hardware, its remove() and probe() of a GPU (tens of
// milliseconds to seconds; here --delay-ms each, default 100). Everything else is the fake's
// speed, so the figures are the scheduling: the lanes' physical limit is one GPU's sequence, 1/N
// of the serial time. The VM cannot measure this (QEMU offers no SR-IOV GPU with vGPU types).
// Not a test: it prints figures for tests/bench/run and the README.
//
//   vgpu_lanes_bench [GPUS [DELAY_MS [RUNS]]]     defaults: 8 100 3
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "drivers/common/pci.hpp"
#include "drivers/model/plan.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/vgpu.hpp"
#include "drivers/switch/executor.hpp"
#include "tests/support/delayed_host.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::DelayedHost;

namespace {

// N A10s (as in tests/fixtures/vgpu-two-a10), each with its audio function in its group, on the
// vGPU manager's host driver with SR-IOV off: entering vm-vgpu parks each PF on pci-pf-stub to
// enable its 16 VFs and creates two A10-12Q devices on its first two VFs.
std::string hostYaml(int gpus) {
  std::string y =
      "kernel: 6.1.0-bench\ncmdline: intel_iommu=on\n"
      "modules: [nvidia, snd_hda_intel, vfio, vfio_iommu_type1, mdev]\n"
      "available_modules: [vfio_pci, pci_pf_stub, nvidia_vgpu_vfio]\ndevices:\n";
  for (int i = 0; i < gpus; ++i) {
    char bus[8];
    std::snprintf(bus, sizeof bus, "%02x", 0x10 + i);
    const std::string g = std::to_string(10 + i);
    y += std::string("  - bdf: \"0000:") + bus + ":00.0\"\n" +
         "    id: \"10de:2236\"\n    subsystem: \"10de:1482\"\n    class: \"030200\"\n" +
         "    driver: nvidia\n    group: " + g + "\n    unbind_lock: ok\n" +
         "    sriov:\n      total: 16\n      offset: 4\n      stride: 1\n" +
         "      vf_group_base: " + std::to_string(1000 + 100 * i) + "\n" +
         "      vf_mdev_types:\n" +
         "        - {id: nvidia-591, name: \"NVIDIA A10-4Q\", max: 6}\n" +
         "        - {id: nvidia-594, name: \"NVIDIA A10-12Q\", max: 2}\n" +
         "  - {bdf: \"0000:" + bus + ":00.1\", id: \"10de:1aef\", class: \"040300\", " +
         "driver: snd_hda_intel, group: " + g + "}\n";
  }
  return y;
}

bool isGpu(std::string_view bdf) { return bdf.size() == 12 && bdf.ends_with(":00.0"); }

// One switch, timed: the plan is made first (untimed), then applied.
double applyMs(test::FakeKernel& kernel, Host& host, Mode mode, bool parallel) {
  test::FakeModules modules(kernel);
  SelectionOptions so;
  auto s = readPlanSnapshot(kernel, so);
  auto sel = s ? selectDevices(*s, so) : Result<Selection>(s.error());
  if (!sel) {
    std::fprintf(stderr, "vgpu_lanes_bench: %s\n", sel.error().describe().c_str());
    std::exit(1);
  }
  PlanInputs in{mode, "nvidia", ""};
  in.vgpuHost = readPlanVgpuHost(kernel, *s, *sel);  // what prepare reads
  in.vgpuVfioAvailable = modules.available("nvidia_vgpu_vfio");
  auto plan = makePlan(*s, *sel, in);
  if (!plan) {
    std::fprintf(stderr, "vgpu_lanes_bench: %s\n", plan.error().describe().c_str());
    std::exit(1);
  }
  ApplyOptions opt;
  opt.parallel = parallel;
  Kernel k{host, modules};
  const auto t0 = std::chrono::steady_clock::now();
  auto res = applyPlan(k, *plan, opt);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!res) {
    std::fprintf(stderr, "vgpu_lanes_bench: %s\n", res.error().describe().c_str());
    std::exit(1);
  }
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int gpus = argc > 1 ? std::atoi(argv[1]) : 8;
  const int delayMs = argc > 2 ? std::atoi(argv[2]) : 100;
  const int runs = argc > 3 ? std::atoi(argv[3]) : 3;
  if (gpus < 1 || gpus > 64 || delayMs < 0 || runs < 1) {
    std::fprintf(stderr, "usage: vgpu_lanes_bench [GPUS 1..64 [DELAY_MS [RUNS]]]\n");
    return 2;
  }
  // Each switch timed with the modelled delays and without them (the fake kernel's own cost,
  // which the lanes cannot shorten: its writes take one lock). The lanes' limit is that cost
  // plus one GPU's delays, nvidia's remove() and probe(), either way.
  std::printf("%-12s %5s %9s %12s %12s %12s %12s %12s %12s\n", "", "gpus", "delay ms",
              "enter serial", "enter lanes", "enter limit", "leave serial", "leave lanes",
              "leave limit");
  std::vector<double> enter[2][2], leave[2][2];  // [no delay, delay][serial, lanes]
  for (int r = 0; r < runs; ++r) {
    for (int delayed : {0, 1}) {
      const auto delay = std::chrono::milliseconds(delayed ? delayMs : 0);
      for (int parallel : {0, 1}) {
        test::Fixture fx(test::Fixture::HostYaml{hostYaml(gpus)});
        test::FakeKernel kernel(fx.root());
        // nvidia's remove() of a GPU (an unbind from nvidia) and its probe() (a drivers_probe of
        // a GPU whose override names no other driver) take `delay`; pci-pf-stub's are quick.
        DelayedHost host(kernel, [&](std::string_view path, std::string_view data) {
          if (!isGpu(data)) return std::chrono::milliseconds(0);
          if (path == "sys/bus/pci/drivers/nvidia/unbind") return delay;
          if (path != "sys/bus/pci/drivers_probe") return std::chrono::milliseconds(0);
          auto o = kernel.read("sys/bus/pci/devices/" + std::string(data) + "/driver_override");
          const auto names = o ? parseDriverOverride(*o) : std::nullopt;
          return !names || *names == "nvidia" ? delay : std::chrono::milliseconds(0);
        });
        enter[delayed][parallel].push_back(applyMs(kernel, host, Mode::kVmVgpu, parallel != 0));
        leave[delayed][parallel].push_back(applyMs(kernel, host, Mode::kContainer, parallel != 0));
      }
    }
  }
  const double oneGpu = 2.0 * delayMs;
  std::printf("vgpu-lanes   %5d %9d %12.1f %12.1f %12.1f %12.1f %12.1f %12.1f\n", gpus, delayMs,
              median(enter[1][0]), median(enter[1][1]), median(enter[0][1]) + oneGpu,
              median(leave[1][0]), median(leave[1][1]), median(leave[0][1]) + oneGpu);
  std::printf("vgpu-lanes   %5d %9d %12.1f %12.1f %12s %12.1f %12.1f %12s\n", gpus, 0,
              median(enter[0][0]), median(enter[0][1]), "-", median(leave[0][0]),
              median(leave[0][1]), "-");
  return 0;
}

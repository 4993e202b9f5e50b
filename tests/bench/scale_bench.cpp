// Scale: how the cost of reading the host (snapshot) and building what depends on it grows with
// the number of PCI functions. Generates fixture hosts of 16, 256 and 4096 functions (GPUs with
// audio companions, one group per pair) and prints the median time per run and per function; then
// what the agent reads after a uevent names one function (refresh: the snapshot and the vGPU view
// of that function and of the vGPU parents) against a full read of the vGPU view; and one
// device's VFIO driver looked up in a distribution-sized modules.alias, and its name in pci.ids;
// and the journal of a plan that disables 16 x 255 VFs, which lists each VF's driver and override.
// Not a test: it prints figures for tests/bench/run and the README.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/journal.hpp"
#include "drivers/model/plan.hpp"
#include "drivers/model/resource_names.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"
#include "drivers/published/status.hpp"
#include "drivers/published/status_formats.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;

namespace {

// GPUs with their audio functions, one group per pair: on nvidia and snd_hda_intel, or all on
// `driver` (vfio-pci: a passthrough node).
std::string hostYaml(int functions, const std::string& driver = {}) {
  std::string modules = driver.empty() ? "nvidia, snd_hda_intel" : driver;
  std::replace(modules.begin(), modules.end(), '-', '_');  // vfio-pci is module vfio_pci
  std::string y =
      "kernel: 6.1.0-bench\ncmdline: intel_iommu=on\nmodules: [" + modules + "]\ndevices:\n";
  for (int i = 0; i < functions; ++i) {
    int pair = i / 2;
    char bdf[16];
    std::snprintf(bdf, sizeof bdf, "0000:%02x:%02x.%d", (pair / 32) % 256, pair % 32, i % 2);
    const bool gpu = i % 2 == 0;
    const std::string bound = !driver.empty() ? driver : gpu ? "nvidia" : "snd_hda_intel";
    y += std::string("  - {bdf: \"") + bdf + "\", id: \"10de:" + (gpu ? "2236" : "1aef") +
         "\", class: \"" + (gpu ? "030200" : "040300") + "\", driver: " + bound +
         ", group: " + std::to_string(pair) + "}\n";
  }
  return y;
}

// A distribution kernel's modules.alias: Debian 12's 6.1 has 26,223 lines (1.3 MB), mostly PCI,
// USB and ACPI aliases, one of them for vfio_pci. The plan and the status look each device's VFIO
// driver up in it (bestVfioModule).
std::string modulesAlias(int lines) {
  std::string t;
  char line[128];
  for (int i = 0; i < lines; ++i) {
    if (i == lines / 2) t += "alias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci\n";
    switch (i % 3) {
      case 0:
        std::snprintf(line, sizeof line, "alias pci:v%08Xd%08Xsv*sd*bc*sc*i* module%d\n",
                      0x8086 + i % 97, i, i % 1500);
        break;
      case 1:
        std::snprintf(line, sizeof line, "alias usb:v%04Xp%04Xd*dc*dsc*dp*ic*isc*ip*in* usb%d\n",
                      i % 65536, (i * 7) % 65536, i % 700);
        break;
      default:
        std::snprintf(line, sizeof line, "alias acpi*:PNP%04X:* acpi%d\n", i % 65536, i % 300);
        break;
    }
    t += line;
  }
  return t;
}

// A pci.ids of the size pciutils ships (some 37,000 lines, 1.3 MB): 2,400 vendors of 14 devices,
// NVIDIA's a tenth of the way in. The status names each device from it.
std::string pciIds() {
  std::string t;
  char line[128];
  for (int v = 0; v < 2400; ++v) {
    if (v == 240) t += "10de  NVIDIA Corporation\n\t2236  GA102GL [A10]\n";
    std::snprintf(line, sizeof line, "%04x  Vendor %d\n", v * 27 % 0xffff, v);
    t += line;
    for (int d = 0; d < 14; ++d) {
      std::snprintf(line, sizeof line, "\t%04x  Device %d of vendor %d\n", d, d, v);
      t += line;
    }
  }
  return t;
}

template <class F>
double medianMs(F&& f, int runs) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  std::printf("%-10s %14s %14s %16s\n", "functions", "snapshot ms", "+plan ms", "us per function");
  for (int n : {16, 256, 4096}) {
    test::Fixture fx;
    test::expandHostYaml(fx.root(), hostYaml(n));
    RootHost host(fx.root());
    const int runs = n >= 4096 ? 5 : 21;
    double snap = medianMs([&] { (void)readSnapshot(host); }, runs);
    double all = medianMs(
        [&] {
          auto s = readSnapshot(host);
          auto sel = selectDevices(*s, {});
          (void)makePlan(*s, *sel, {Mode::kVmPassthrough, "nvidia", ""});
        },
        runs);
    std::printf("%-10d %14.2f %14.2f %16.1f\n", n, snap, all, all * 1000.0 / n);
  }
  std::printf("\n%-18s %14s %14s %16s\n", "agent, one rebind", "vgpu full ms", "vgpu refresh ms",
              "refresh all ms");
  for (int n : {16, 256, 4096}) {
    test::Fixture fx;
    test::expandHostYaml(fx.root(), hostYaml(n));
    RootHost host(fx.root());
    const int runs = n >= 4096 ? 11 : 51;
    const auto before = readSnapshot(host);
    const VgpuHost vgpu = readVgpuHost(host, *before);
    const std::set<Bdf> changed{before->pci.at(1).bdf};  // the first audio companion
    double full = medianMs([&] { (void)readVgpuHost(host, *before); }, runs);
    double refresh = medianMs([&] { (void)refreshVgpuHost(host, *before, vgpu, changed); }, runs);
    double both = medianMs(
        [&] {
          auto s = refreshSnapshot(host, *before, changed);
          (void)refreshVgpuHost(host, *s, vgpu, changed);
        },
        runs);
    std::printf("refresh %-10d %14.2f %14.2f %16.2f\n", n, full, refresh, both);
  }
  // One device's VFIO driver: the lines that hold "vfio_pci:" found by a search (what the plan
  // and the status do), against every line split and filtered (what they did before).
  const std::string aliases = modulesAlias(26223);
  const std::string modalias = "pci:v000010DEd00002236sv000010DEsd00001482bc03sc02i00";
  double lookup = medianMs([&] { (void)bestVfioModule(aliases, modalias); }, 21);
  double everyLine = medianMs(
      [&] {
        size_t kept = 0;
        for (const auto& a : parseModulesAlias(aliases)) kept += a.pattern.starts_with("vfio_pci:");
        if (kept != 1) std::abort();
      },
      21);
  std::printf("\nvfio-lookup %d %.1f %.3f %.3f\n", 26223, static_cast<double>(aliases.size()) / 1e6,
              lookup, everyLine);
  // One device's name from pci.ids: read line by line as far as its vendor's section, against
  // splitting the whole file into lines first (what the status did before).
  const std::string ids = pciIds();
  double name = medianMs(
      [&] {
        if (!pciIdsDeviceName(ids, 0x10de, 0x2236)) std::abort();
      },
      21);
  double split = medianMs([&] { (void)splitLines(ids); }, 21);
  std::printf("pciids-lookup %zu %.1f %.3f %.3f\n", splitLines(ids).size(),
              static_cast<double>(ids.size()) / 1e6, name, split);
  // The agent's status document after an event on a passthrough node of 8 GPUs, each with its
  // audio function, all on vfio-pci, with that modules.alias and that pci.ids: what it rebuilds
  // from its snapshot at every event, besides re-reading the host (StatusInputs filled as the
  // agent's observe() fills them, the document built, its JSON text).
  {
    test::Fixture fx;
    test::expandHostYaml(fx.root(), hostYaml(16, "vfio-pci"));
    RootHost host(fx.root());
    const auto s = readSnapshot(host);
    const VgpuHost v = readVgpuHost(host, *s);
    size_t devices = 0;
    auto document = [&](const std::string& modulesAlias) {
      return medianMs(
          [&] {
            StatusInputs in;
            in.desiredMode = Mode::kVmPassthrough;
            in.desiredModeSource = "config";
            in.modulesAlias = modulesAlias;
            in.pciIds = ids;
            const StatusDocument d = buildStatus(*s, v, in);
            devices = d.devices.size();
            if (toJson(d).dump(2).empty()) std::abort();
          },
          21);
    };
    // The agent keeps modules.alias's vfio_pci: lines (once per kernel release); the baseline
    // looks every device up in the whole file, as it did before.
    const double lines = document(vfioAliasLines(aliases));
    const double whole = document(aliases);
    std::printf("status-doc %zu %.3f %.3f\n", devices, lines, whole);
  }
  // The journal of a plan that disables the VFs of 16 GPUs with 255 each (leaving vm-vgpu on the
  // largest SR-IOV host): one entry per VF, written once before the first step, read back by a
  // recovery. Its size, the text built and parsed (the write itself is one file and an fsync).
  Journal jr;
  jr.mode = Mode::kContainer;
  for (int g = 0; g < 16; ++g) {
    const Bdf pf{0, static_cast<uint8_t>(0x10 + g), 0, 0};
    jr.devices.push_back({pf, {std::string("nvidia"), std::nullopt}, std::nullopt});
    JournalSriov sv{pf, 255, false, {}};
    for (int v = 0; v < 255; ++v) {
      auto vf = vfAddress(pf, 4, 1, v);
      if (!vf) std::abort();
      sv.vfs.push_back({*vf, {std::string("nvidia"), std::nullopt}});
    }
    jr.sriov.push_back(std::move(sv));
  }
  std::string text;
  double build = medianMs([&] { text = toJson(jr); }, 11);
  double parse = medianMs(
      [&] {
        if (!parseJournal(text)) std::abort();
      },
      11);
  std::printf("journal-vfs %d %.1f %.2f %.2f\n", 16 * 255, static_cast<double>(text.size()) / 1e3,
              build, parse);
  return 0;
}

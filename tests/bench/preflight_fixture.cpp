// Writes a large host fixture for the preflight benchmark (tests/bench/run): the files of a
// scenario (default tests/fixtures/preflight-intel: an Intel host ready for vm-passthrough) plus
// a PCI tree of G GPUs (A10, on nvidia) with V SR-IOV VFs each, every function in its own IOMMU
// group. Each GPU owns a bus: the PF is bb:00.0, its VFs bb:00.1 ... (offset 1, stride 1).
// Not a test.
//   preflight_fixture SCENARIO_DIR OUT_DIR [GPUS=16] [VFS=255]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "tests/support/fixture.hpp"

namespace fs = std::filesystem;

namespace {

std::string bdf(int bus, int fn) {
  char b[16];
  std::snprintf(b, sizeof b, "0000:%02x:%02x.%d", bus, fn / 8, fn % 8);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::cerr << "usage: preflight_fixture SCENARIO_DIR OUT_DIR [GPUS=16] [VFS=255]\n";
    return 2;
  }
  const fs::path scenario = argv[1];
  const fs::path out = argv[2];
  const int gpus = argc > 3 ? std::atoi(argv[3]) : 16;
  const int vfs = argc > 4 ? std::atoi(argv[4]) : 255;
  if (gpus < 1 || gpus > 128 || vfs < 0 || vfs > 255) {
    std::cerr << "preflight_fixture: GPUS must be 1..128 and VFS 0..255\n";
    return 2;
  }
  std::ifstream in(scenario / "host.yaml");
  if (!in) {
    std::cerr << "preflight_fixture: cannot read " << (scenario / "host.yaml") << "\n";
    return 2;
  }
  fs::remove_all(out);
  fs::create_directories(out);
  for (const auto& e : fs::directory_iterator(scenario)) {
    if (e.path().filename() == "host.yaml") continue;
    fs::copy(e.path(), out / e.path().filename(),
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  // The scenario's host, its devices replaced: keep every line up to "devices:".
  std::string yaml, line;
  while (std::getline(in, line) && line.rfind("devices:", 0) != 0) yaml += line + "\n";
  yaml += "devices:\n";
  yaml +=
      "  - {bdf: \"0000:02:00.0\", id: \"1a03:2000\", class: \"030000\", driver: ast, group: 2, "
      "boot_vga: 1}\n";
  yaml +=
      "  - {bdf: \"0000:5e:00.0\", id: \"144d:a80a\", class: \"010802\", driver: nvme, group: "
      "40}\n";
  int group = 100;
  for (int g = 0; g < gpus; ++g) {
    const int bus = 0x80 + g;
    yaml += "  - {bdf: \"" + bdf(bus, 0) +
            "\", id: \"10de:2236\", subsystem: \"10de:1482\", class: \"030200\", "
            "driver: nvidia, group: " +
            std::to_string(group++) + ", sriov: {total: " + std::to_string(vfs) +
            ", num: " + std::to_string(vfs) + ", offset: 1, stride: 1}}\n";
    for (int v = 0; v < vfs; ++v) {
      yaml += "  - {bdf: \"" + bdf(bus, v + 1) +
              "\", id: \"10de:2236\", class: \"030200\", group: " + std::to_string(group++) +
              ", physfn: \"" + bdf(bus, 0) + "\", vf_index: " + std::to_string(v) + "}\n";
    }
  }
  hostprep::test::expandHostYaml(out, yaml);
  std::cout << out.string() << ": " << gpus * (vfs + 1) + 2 << " PCI functions\n";
  return 0;
}

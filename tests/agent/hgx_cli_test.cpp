// An HGX H100 board on the command line: prepare --nvswitch (dry runs only) and preflight with
// the config's cc-mode, on fixture roots.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using hostprep::test::Fixture;
using hostprep::test::runHostprep;

namespace {

// The devices a dry run would move, "bdf=role".
std::vector<std::string> planned(const Fixture& fx, std::vector<std::string> extra) {
  std::vector<std::string> args{"--root",  fx.root().string(), "--output",       "json",
                                "prepare", "--mode",           "vm-passthrough", "--dry-run"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = runHostprep(args);
  INFO(r.err);
  REQUIRE(r.exitCode == 0);
  std::vector<std::string> out;
  const auto plan = nlohmann::json::parse(r.out);
  for (const auto& d : plan["devices"])
    out.push_back(d["bdf"].get<std::string>() + "=" + d["role"].get<std::string>());
  return out;
}

const std::vector<std::string> kSwitches{"0000:c7:00.0=nvswitch", "0000:c8:00.0=nvswitch",
                                         "0000:c9:00.0=nvswitch", "0000:ca:00.0=nvswitch"};

bool hasAll(const std::vector<std::string>& plan, const std::vector<std::string>& want) {
  for (const auto& w : want) {
    if (std::find(plan.begin(), plan.end(), w) == plan.end()) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("prepare --nvswitch: auto follows FABRIC_MODE, with-gpus and leave override it",
          "[cli][fabric]") {
  Fixture fx("hgx-h100");
  const auto before = fx.deviceState();
  // FABRIC_MODE=0 (full passthrough): the four NVSwitches go with the eight GPUs.
  auto autoPlan = planned(fx, {});
  CHECK(autoPlan.size() == 12);
  CHECK(hasAll(autoPlan, kSwitches));
  CHECK(planned(fx, {"--nvswitch", "leave"}).size() == 8);
  // Shared NVSwitch: auto leaves them on nvidia; with-gpus still takes them.
  fx.write("usr/share/nvidia/nvswitch/fabricmanager.cfg", "FABRIC_MODE=1\n");
  CHECK(planned(fx, {"--nvswitch", "auto"}).size() == 8);
  CHECK(hasAll(planned(fx, {"--nvswitch", "with-gpus"}), kSwitches));
  // --devices narrows the GPUs; the fabric goes whole.
  auto one = planned(fx, {"--nvswitch", "with-gpus", "--devices", "0000:18:00.0"});
  CHECK(one.size() == 5);
  CHECK(fx.deviceState() == before);

  auto bad = runHostprep({"prepare", "--mode", "vm-passthrough", "--nvswitch", "all"});
  CHECK(bad.exitCode == 2);
  CHECK(bad.err ==
        "hostprep prepare: --nvswitch: 'all' is not an NVSwitch policy (choose one of auto, "
        "with-gpus, leave)\n");
}

TEST_CASE("preflight reads cc-mode from the config and checks the host's TDX", "[cli][cc]") {
  Fixture fx("hgx-h100");
  auto gpuCc = [&] {
    auto r = runHostprep({"--root", fx.root().string(), "--output", "json", "preflight", "--mode",
                          "vm-passthrough"});
    const auto report = nlohmann::json::parse(r.out);
    for (const auto& c : report["checks"]) {
      if (c["id"] == "gpu.cc") return c;
    }
    return nlohmann::json();
  };
  CHECK(gpuCc()["status"] == "skip");
  fx.write("etc/hostprep/config.yaml", "cc-mode: on\n");
  std::filesystem::permissions(
      fx.path("etc/hostprep/config.yaml"),
      std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
          std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  auto c = gpuCc();
  CHECK(c["status"] == "fail");
  CHECK(c["detail"] ==
        "cc-mode on, but the host runs no confidential VMs: neither kvm_intel's tdx nor kvm_amd's "
        "sev_snp parameter exists (module not loaded, or a kernel without them)");
}

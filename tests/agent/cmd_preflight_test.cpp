// hostprep preflight as users see it: exit codes, aligned text, colour rules, golden JSON.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "drivers/common/text.hpp"
#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using hostprep::test::Fixture;
using hostprep::test::runHostprep;
using hostprep::test::runHostprepOnTty;

namespace {

std::string readFile(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Golden files live beside the fixtures; HOSTPREP_UPDATE_GOLDEN=1 rewrites them.
std::filesystem::path golden(const std::string& name) {
  return std::filesystem::path(HOSTPREP_FIXTURES_DIR).parent_path() / "golden" / name;
}

}  // namespace

TEST_CASE("preflight: golden JSON for the ready Intel host", "[cli][preflight]") {
  Fixture fx("preflight-intel");
  auto r = runHostprep({"preflight", "--root", fx.root().string(), "--output", "json"});
  CHECK(r.exitCode == 0);
  CHECK(r.err.empty());
  const auto path = golden("preflight-intel-vm-passthrough.json");
  if (std::getenv("HOSTPREP_UPDATE_GOLDEN")) std::ofstream(path) << r.out;
  CHECK(r.out == readFile(path));
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["version"] == 2);
  CHECK(j["mode"] == "vm-passthrough");  // the default mode
  CHECK(j["target"] == "host");
  CHECK(j["summary"]["ok"] == true);
  CHECK(j["summary"]["fail"] == 0);
  CHECK(j["checks"].size() == 25);
  CHECK(j["split"] == nlohmann::json{{"vm-passthrough", 1}});
  // Keys come in the documented order (id, status, title, detail, remedy), not sorted.
  CHECK(
      r.out.find("\"id\": \"cpu.virtualization\",\n      \"status\": \"pass\",\n      \"title\"") !=
      std::string::npos);
}

TEST_CASE("preflight: golden JSON for an HGX H100 board (NVSwitches, 128 GiB BARs)",
          "[cli][preflight]") {
  Fixture fx("hgx-h100");
  auto r = runHostprep({"preflight", "--root", fx.root().string(), "--output", "json"});
  CHECK(r.exitCode == 0);
  CHECK(r.err.empty());
  const auto path = golden("preflight-hgx-h100-vm-passthrough.json");
  if (std::getenv("HOSTPREP_UPDATE_GOLDEN")) std::ofstream(path) << r.out;
  CHECK(r.out == readFile(path));
}

TEST_CASE("preflight: gpu.reset in JSON and text, a WARN with its remedy",
          "[cli][preflight][reset]") {
  Fixture fx("return-from-vm");
  auto r = runHostprep(
      {"preflight", "--root", fx.root().string(), "--mode", "vm-passthrough", "--output", "json"});
  INFO(r.out << r.err);
  const auto j = nlohmann::json::parse(r.out);
  nlohmann::json reset;
  for (const auto& c : j["checks"]) {
    if (c["id"] == "gpu.reset") reset = c;
  }
  REQUIRE(reset.is_object());
  CHECK(reset["status"] == "warn");
  CHECK(reset["title"] == "Reset on the way back from a VM");
  CHECK_THAT(reset["detail"].get<std::string>(), Catch::StartsWith("no way to reset 0000:af:00.0"));
  CHECK_THAT(reset["remedy"].get<std::string>(),
             Catch::StartsWith("keep bus 0000:af to the GPU's own functions"));
  auto t = runHostprep({"preflight", "--root", fx.root().string(), "--mode", "vm-passthrough"});
  CHECK_THAT(t.out, Catch::Contains("WARN  Reset on the way back from a VM"));
  CHECK_THAT(t.out, Catch::Contains("      remedy: keep bus 0000:af to the GPU's own functions: "
                                    "move 0000:af:00.1 (or the GPU) to another slot; otherwise "
                                    "plan a reboot of the node whenever it leaves VM mode\n"));
}

TEST_CASE("preflight: a FAIL exits 1 and prints the remedy under the line", "[cli][preflight]") {
  Fixture fx("preflight-intel-iommu-off");
  auto r = runHostprep({"--root", fx.root().string(), "preflight", "--mode", "vm-passthrough"});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.out, Catch::StartsWith("preflight for vm-passthrough on host " + fx.root().string() +
                                      "\n"));
  CHECK_THAT(
      r.out,
      Catch::Contains(
          "FAIL  IOMMU kernel argument            Intel host without intel_iommu=on on the kernel "
          "command line\n"
          "      remedy: add \"intel_iommu=on iommu=pt\" to GRUB_CMDLINE_LINUX in "
          "/etc/default/grub, "
          "then run update-grub (or grub2-mkconfig -o /boot/grub2/grub.cfg) and reboot\n"));
  CHECK_THAT(r.out,
             Catch::Contains(
                 "PASS  IOMMU in firmware (VT-d/AMD-Vi)  ACPI DMAR table present (Intel VT-d)\n"));
  CHECK_THAT(r.out, Catch::EndsWith(": NOT READY for vm-passthrough\n"));
  // Every line is aligned: the detail starts in the same column.
  size_t col = std::string::npos;
  for (auto line : hostprep::splitLines(r.out)) {
    if (!(hostprep::startsWith(line, "PASS ") || hostprep::startsWith(line, "FAIL ") ||
          hostprep::startsWith(line, "WARN ") || hostprep::startsWith(line, "SKIP "))) {
      continue;
    }
    size_t at = line.find("  ", 6 + 5);  // past status and the title's first word
    at = line.find_first_not_of(' ', at);
    if (col == std::string::npos) col = at;
    CHECK(at == col);
  }
  CHECK(r.out.find('\033') == std::string::npos);  // not a terminal: no colour
}

TEST_CASE("preflight: colour only on a terminal, and never with NO_COLOR", "[cli][preflight]") {
  Fixture fx("preflight-nouveau");
  const std::vector<std::string> args{"--root", fx.root().string(), "preflight"};
  auto tty = runHostprepOnTty(args, {"NO_COLOR", "TERM=xterm"});
  CHECK(tty.exitCode == 1);
  CHECK_THAT(tty.out, Catch::Contains("\033[1;31mFAIL\033[0m  nouveau"));
  auto no = runHostprepOnTty(args, {"NO_COLOR=1", "TERM=xterm"});
  CHECK(no.exitCode == 1);
  CHECK_THAT(no.out, Catch::Contains("FAIL  nouveau"));
  CHECK(no.out.find('\033') == std::string::npos);
  // An explicit --color wins over both.
  auto forced =
      runHostprep({"--root", fx.root().string(), "preflight", "--color", "always"}, {"NO_COLOR=1"});
  CHECK_THAT(forced.out, Catch::Contains("\033[32mPASS\033[0m"));
  auto never = runHostprepOnTty({"--root", fx.root().string(), "preflight", "--color", "never"},
                                {"NO_COLOR", "TERM=xterm"});
  CHECK(never.out.find('\033') == std::string::npos);
}

TEST_CASE("preflight: usage errors exit 2 naming the input", "[cli][preflight]") {
  auto r = runHostprep({"preflight", "--mode", "vm"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep preflight: --mode: 'vm' is not a mode (choose one of container, vm-passthrough, "
        "vm-vgpu)\n");
  r = runHostprep({"preflight", "--gpu-ids", "10de"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--gpu-ids: '10de' is not a vendor:device id"));
  r = runHostprep({"preflight", "--color", "rainbow"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--color: 'rainbow' is not a choice"));
  r = runHostprep({"preflight", "--image", "--devices", "0000:3b:00.0"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--devices: an image has no PCI devices"));
  Fixture fx("preflight-intel");
  r = runHostprep({"--root", fx.root().string(), "preflight", "--devices", "0000:99:00.0"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--devices: 0000:99:00.0: no such PCI function"));
  r = runHostprep({"preflight", "--help"});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out,
             Catch::Contains("Exit codes: 0 no check failed, 1 a check failed, 2 usage error."));
  // With --output json the error is a document on stdout too: a pipeline parses what it gets.
  r = runHostprep({"preflight", "--mode", "vm", "--output", "json"});
  CHECK(r.exitCode == 2);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["ok"] == false);
  CHECK(j["error"]["message"] == "--mode: 'vm' is not a mode");
}

TEST_CASE("preflight --image gates an image pipeline on the exit code", "[cli][preflight]") {
  Fixture bare("preflight-image-bare");
  auto r =
      runHostprep({"preflight", "--image", "--root", bare.root().string(), "--output", "json"});
  CHECK(r.exitCode == 1);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["target"] == "image");
  CHECK(j["summary"]["ok"] == false);
  Fixture ready("preflight-image-ready");
  r = runHostprep({"preflight", "--image", "--root", ready.root().string()});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::StartsWith("preflight for vm-passthrough on image " +
                                      ready.root().string() + "\n"));
  CHECK_THAT(r.out, Catch::Contains("SKIP  GPUs present"));
  // The image without --image: no sys/, so the host checks fail instead of crashing.
  r = runHostprep({"preflight", "--root", ready.root().string()});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.out, Catch::Contains("FAIL  GPUs present"));
  CHECK_THAT(r.out, Catch::Contains("use --image for an image"));
}

TEST_CASE("preflight on a busybox-like guest and an empty root reports, never crashes",
          "[cli][preflight]") {
  Fixture guest("preflight-guest");
  for (const char* mode : {"container", "vm-passthrough", "vm-vgpu"}) {
    auto r = runHostprep(
        {"preflight", "--root", guest.root().string(), "--mode", mode, "--output", "json"});
    INFO(mode << " " << r.err);
    CHECK(r.exitCode == 1);
    CHECK(nlohmann::json::parse(r.out)["checks"].size() == 25);
  }
  Fixture empty;
  auto r = runHostprep({"preflight", "--root", empty.root().string()});
  CHECK(r.exitCode == 1);
  CHECK(r.err.empty());
}

TEST_CASE("preflight JSON follows checks/preflight.schema.json", "[cli][preflight]") {
  const auto schema = nlohmann::json::parse(
      readFile(std::filesystem::path(HOSTPREP_FIXTURES_DIR).parent_path().parent_path() / "checks" /
               "preflight.schema.json"));
  const auto& item = schema["properties"]["checks"]["items"];
  std::set<std::string> schemaIds(item["properties"]["id"]["enum"].begin(),
                                  item["properties"]["id"]["enum"].end());
  std::set<std::string> statuses(item["properties"]["status"]["enum"].begin(),
                                 item["properties"]["status"]["enum"].end());
  std::set<std::string> modes(schema["properties"]["mode"]["enum"].begin(),
                              schema["properties"]["mode"]["enum"].end());
  std::set<std::string> seen;
  auto validate = [&](const std::vector<std::string>& args) {
    auto r = runHostprep(args);
    INFO(r.out << r.err);
    auto j = nlohmann::json::parse(r.out);
    for (const auto& k : schema["required"]) CHECK(j.contains(k.get<std::string>()));
    CHECK(j.size() == schema["properties"].size());
    CHECK(modes.count(j["mode"]));
    std::map<std::string, int> counts;
    for (const auto& c : j["checks"]) {
      CHECK(c.size() == 5);
      CHECK(schemaIds.count(c["id"]));
      CHECK(statuses.count(c["status"]));
      seen.insert(c["id"].get<std::string>());
      ++counts[c["status"]];
      if (c["status"] == "warn" || c["status"] == "fail") {
        CHECK(c["remedy"].is_string());
        CHECK_FALSE(c["remedy"].get<std::string>().empty());
      }
    }
    for (const auto& s : statuses) CHECK(j["summary"][s] == counts[s]);
    CHECK(j["summary"]["ok"] == (counts["fail"] == 0));
    CHECK(r.exitCode == (counts["fail"] == 0 ? 0 : 1));
  };
  Fixture host("preflight-no-ir"), image("preflight-image-bare");
  for (const char* mode : {"container", "vm-passthrough", "vm-vgpu"}) {
    validate({"preflight", "--output", "json", "--mode", mode, "--root", host.root().string()});
    validate({"preflight", "--output", "json", "--mode", mode, "--image", "--root",
              image.root().string()});
  }
  // Every id the schema names is produced, and nothing else.
  CHECK(seen == schemaIds);
}

TEST_CASE("preflight without --mode checks the config's split", "[cli][preflight][mixed]") {
  Fixture fx("preflight-mixed");
  fx.write("etc/hostprep/config.yaml",
           "mode: container\n"
           "devices:\n"
           "  - match: {bdf: \"0000:3b:00.0\"}\n"
           "    mode: vm-passthrough\n");
  SECTION("text: the header and the summary name the split") {
    auto r = runHostprep({"--root", fx.root().string(), "preflight"});
    INFO(r.out << r.err);
    CHECK(r.exitCode == 0);
    CHECK_THAT(r.out, Catch::StartsWith("preflight for mixed (container: 4, vm-passthrough: 1) on "
                                        "host " +
                                        fx.root().string() + "\n"));
    CHECK_THAT(r.out, Catch::Contains("PASS  GPU modes on one node "));
    CHECK_THAT(r.out, Catch::EndsWith(": ready for mixed (container: 4, vm-passthrough: 1)\n"));
  }
  SECTION("JSON: mode mixed, the split, one result per id") {
    auto r = runHostprep({"--root", fx.root().string(), "preflight", "--output", "json"});
    INFO(r.out << r.err);
    CHECK(r.exitCode == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["version"] == 2);
    CHECK(j["mode"] == "mixed");
    CHECK(j["split"] == nlohmann::json{{"container", 4}, {"vm-passthrough", 1}});
    CHECK(j["checks"].size() == 25);
    std::set<std::string> ids;
    for (const auto& c : j["checks"]) ids.insert(c["id"].get<std::string>());
    CHECK(ids.size() == 25);
    CHECK(j["checks"][15]["id"] == "gpu.mode-mix");
    CHECK(j["checks"][15]["status"] == "pass");
    CHECK(j["checks"][14]["id"] == "iommu.groups");
    CHECK(j["checks"][14]["detail"] == "vm-passthrough: 0000:3b:00.0: group 30 (2 functions)");
    // Key order: version, mode, split, target.
    CHECK(r.out.find("\"mode\": \"mixed\",\n  \"split\": {\n    \"container\": 4,") !=
          std::string::npos);
  }
  SECTION("--mode M keeps its meaning: every selected GPU in M") {
    auto r = runHostprep({"--root", fx.root().string(), "preflight", "--mode", "vm-passthrough",
                          "--output", "json"});
    CHECK(r.exitCode == 1);  // the L4 shares its group with a NIC
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["mode"] == "vm-passthrough");
    CHECK(j["split"] == nlohmann::json{{"vm-passthrough", 5}});
    CHECK(j["checks"][15]["status"] == "skip");
    CHECK(j["checks"][15]["detail"] ==
          "not a mixed node: every selected GPU in vm-passthrough mode");
    CHECK(j["checks"][14]["status"] == "fail");
  }
  SECTION("a refused mix exits 1 with the reason") {
    fx.write("etc/hostprep/config.yaml",
             "mode: container\n"
             "devices:\n"
             "  - match: {model: \"10de:26b9\"}\n"
             "    mode: vm-vgpu\n");
    auto r = runHostprep({"--root", fx.root().string(), "preflight"});
    CHECK(r.exitCode == 1);
    CHECK_THAT(r.out,
               Catch::Contains("FAIL  GPU modes on one node            devices: container and "
                               "vm-vgpu cannot share a node"));
    CHECK_THAT(r.out, Catch::Contains("      remedy: mix container with vm-passthrough, or "
                                      "vm-passthrough with vm-vgpu\n"));
  }
  SECTION("a config error in the rules exits 2") {
    fx.write("etc/hostprep/config.yaml",
             "mode: container\n"
             "devices:\n"
             "  - match: {slot: 3}\n"
             "    mode: vm-passthrough\n");
    auto r = runHostprep({"--root", fx.root().string(), "preflight"});
    CHECK(r.exitCode == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::Contains("slot"));
  }
}

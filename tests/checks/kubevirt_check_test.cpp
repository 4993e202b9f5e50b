// The KubeVirt check: permittedHostDevices entries, selectors and feature gates.
#include <catch2/catch.hpp>

#include "agent/status_writer.hpp"
#include "checks/check_node.hpp"
#include "drivers/published/status_formats.hpp"
#include "tests/checks/check_node_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("a permittedHostDevices entry without externalResourceProvider", "[check-node]") {
  auto in = cleanInput();
  in.workloads.clear();
  in.kubevirt = one("broken/kubevirt-not-external.yaml");
  auto r = check(in);
  const auto* f = find(r, "kubevirt-not-external", "gpu-b");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK(f->resource == "nvidia.com/GA102GL_A10");
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"kubevirt-not-external@gpu-b"});
}

TEST_CASE("KubeVirt: missing entries, wrong selectors, missing gate", "[check-node]") {
  auto in = cleanInput();
  in.workloads.clear();
  auto& kv = in.kubevirt->body["spec"]["configuration"];
  kv["permittedHostDevices"]["pciHostDevices"][0]["pciVendorSelector"] = "10DE:2235";
  kv["permittedHostDevices"]["mediatedDevices"][0]["mdevNameSelector"] = "NVIDIA A10-24Q";
  kv["developerConfiguration"]["featureGates"] = {"DisableMDEVConfiguration"};
  auto r = check(in);
  const auto* pci = find(r, "kubevirt-selector-mismatch", "gpu-b");
  REQUIRE(pci);
  CHECK(pci->message ==
        "pciVendorSelector '10DE:2235' of nvidia.com/GA102GL_A10 does not match the "
        "device 10DE:2236: KubeVirt will not hand this device to VMs");
  CHECK(find(r, "kubevirt-selector-mismatch", "gpu-c"));
  CHECK(find(r, "kubevirt-gpu-gate-missing", ""));

  kv["permittedHostDevices"].erase("mediatedDevices");
  auto r2 = check(in);
  CHECK(find(r2, "kubevirt-not-permitted", "gpu-c"));
}

TEST_CASE("KubeVirt's own mdev configuration on a cluster with vm-vgpu nodes", "[check-node]") {
  auto in = cleanInput();
  in.workloads.clear();
  in.kubevirt = one("broken/kubevirt-mdev-config.yaml");
  auto r = check(in);
  CHECK(ids(r, Severity::kWarning) ==
        std::vector<std::string>{"kubevirt-mdev-config-set@cluster",
                                 "kubevirt-mdev-gate-missing@cluster"});
  const auto* f = find(r, "kubevirt-mdev-config-set", "");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK(f->message ==
        "the KubeVirt CR sets spec.configuration.mediatedDevicesConfiguration "
        "(mediatedDeviceTypes, nodeMediatedDeviceTypes) while the vgpu-device-manager creates the "
        "vGPU devices of the vm-vgpu nodes (gpu-c): KubeVirt's virt-handler creates and removes "
        "mdevs of the types it lists, against the devices the vgpu-device-manager made");
  CHECK_THAT(f->fix, Catch::StartsWith("remove spec.configuration.mediatedDevicesConfiguration"));
  CHECK(find(r, "kubevirt-mdev-gate-missing", "")->message ==
        "vGPU nodes exist but the KubeVirt CR lacks the feature gate DisableMDEVConfiguration: "
        "KubeVirt may create or remove mdevs itself, against the vgpu-device-manager");

  SECTION("with the gate on, the field is only said") {
    in.kubevirt->body["spec"]["configuration"]["developerConfiguration"]["featureGates"].push_back(
        "DisableMDEVConfiguration");
    auto r2 = check(in);
    REQUIRE(find(r2, "kubevirt-mdev-config-set", ""));
    CHECK(find(r2, "kubevirt-mdev-config-set", "")->severity == Severity::kInfo);
    CHECK_FALSE(find(r2, "kubevirt-mdev-gate-missing", ""));
  }
  SECTION("a vm-vgpu node that advertises nothing yet still counts") {
    auto& items = in.nodes.front().body["items"];
    items[2]["status"]["capacity"].erase("nvidia.com/NVIDIA_A10-12Q");
    items[2]["status"]["allocatable"].erase("nvidia.com/NVIDIA_A10-12Q");
    auto r2 = check(in);
    CHECK(find(r2, "kubevirt-mdev-config-set", ""));
    CHECK(find(r2, "kubevirt-mdev-gate-missing", ""));
  }
  SECTION("no vm-vgpu node: KubeVirt may manage mdevs") {
    in.nodes.front().body["items"].erase(2);
    auto r2 = check(in);
    CHECK_FALSE(find(r2, "kubevirt-mdev-config-set", ""));
    CHECK_FALSE(find(r2, "kubevirt-mdev-gate-missing", ""));
  }
}

// Issue 45, item 4: the step people miss most, as one patch to apply.
TEST_CASE(
    "missing permittedHostDevices entries come as one merge patch that, applied to the CR, "
    "clears the findings",
    "[check-node][kubevirt-patch]") {
  auto in = cleanInput();
  in.workloads.clear();
  auto& phd = in.kubevirt->body["spec"]["configuration"]["permittedHostDevices"];
  phd.erase("mediatedDevices");
  phd["pciHostDevices"] = nlohmann::json::array();
  // An unrelated entry the CR keeps: a merge patch replaces the list whole, so it must carry it.
  phd["pciHostDevices"].push_back({{"pciVendorSelector", "8086:0D5C"},
                                   {"resourceName", "intel.com/qat"},
                                   {"externalResourceProvider", true}});
  auto r = check(in);
  REQUIRE(find(r, "kubevirt-not-permitted", "gpu-b"));
  REQUIRE(find(r, "kubevirt-not-permitted", "gpu-c"));
  const auto* p = find(r, "kubevirt-permit-patch", "");
  REQUIRE(p);
  CHECK(p->severity == Severity::kInfo);
  CHECK_THAT(p->message, Catch::StartsWith("one merge patch permits the 2 missing resource(s) "
                                           "(nvidia.com/GA102GL_A10, nvidia.com/NVIDIA_A10-12Q)"));
  const std::string prefix = "kubectl patch kubevirt kubevirt -n kubevirt --type merge -p '";
  REQUIRE_THAT(p->fix, Catch::StartsWith(prefix) && Catch::EndsWith("'"));
  auto patch =
      nlohmann::json::parse(p->fix.substr(prefix.size(), p->fix.size() - prefix.size() - 1));
  CHECK(patch["spec"]["configuration"]["permittedHostDevices"]["pciHostDevices"] ==
        nlohmann::json::parse(R"([
          {"pciVendorSelector": "8086:0D5C", "resourceName": "intel.com/qat",
           "externalResourceProvider": true},
          {"pciVendorSelector": "10DE:2236", "resourceName": "nvidia.com/GA102GL_A10",
           "externalResourceProvider": true}])"));
  CHECK(patch["spec"]["configuration"]["permittedHostDevices"]["mediatedDevices"] ==
        nlohmann::json::parse(R"([
          {"mdevNameSelector": "NVIDIA A10-12Q", "resourceName": "nvidia.com/NVIDIA_A10-12Q",
           "externalResourceProvider": true}])"));

  // Applied as kubectl applies a merge patch (RFC 7386), then checked again: nothing missing.
  in.kubevirt->body.merge_patch(patch);
  auto again = check(in);
  CHECK_FALSE(find(again, "kubevirt-not-permitted", "gpu-b"));
  CHECK_FALSE(find(again, "kubevirt-not-permitted", "gpu-c"));
  CHECK_FALSE(find(again, "kubevirt-permit-patch", ""));
  CHECK_FALSE(find(again, "kubevirt-selector-mismatch", "gpu-b"));
  CHECK_FALSE(find(again, "kubevirt-not-external", "gpu-b"));
}

namespace {

// A host's 'hostprep status --output json' document, as check-node reads it with --status: the
// host from `hostYaml` (tests/support/fixture.hpp), observed as `hostprep status` does.
Document statusDocumentOf(const std::string& hostYaml, const std::string& pciIds,
                          const std::string& nodeName) {
  hostprep::test::Fixture fx;
  hostprep::test::expandHostYaml(fx.root(), hostYaml);
  fx.write("usr/share/misc/pci.ids", pciIds);
  RootHost host(fx.root());
  StatusRequest req;
  req.now = 1714564800;
  auto o = observe(host, req);
  REQUIRE(o);
  auto body = nlohmann::json::parse(toJson((*o)->doc).dump());
  body["nodeName"] = nodeName;
  return Document{"status-" + nodeName + ".json", body};
}

}  // namespace

// Issue 45, item 4: the status document's own permittedHostDevices entries are the selectors the
// host saw; check-node's patch takes them before any guess from the resource name.
TEST_CASE(
    "with a status document that carries permittedHostDevices, the patch takes its selectors and, "
    "applied to the CR, clears the findings",
    "[check-node][kubevirt-patch]") {
  // gpu-b passes through two models: A10s (each with its audio function) and an A100. Neither
  // resource name holds the device id, and with two passthrough resources the node's GPUs do not
  // say which is which: only the host's own entries do.
  const auto status = statusDocumentOf(R"(kernel: 6.1.0-test-amd64
cmdline: intel_iommu=on
modules: [vfio_pci]
devices:
  - {bdf: "0000:3b:00.0", id: "10de:2236", class: "030200", driver: vfio-pci, group: 30}
  - {bdf: "0000:3b:00.1", id: "10de:1aef", class: "040300", driver: vfio-pci, group: 30}
  - {bdf: "0000:86:00.0", id: "10de:2236", class: "030200", driver: vfio-pci, group: 60}
  - {bdf: "0000:86:00.1", id: "10de:1aef", class: "040300", driver: vfio-pci, group: 60}
  - {bdf: "0000:ca:00.0", id: "10de:20b5", class: "030200", driver: vfio-pci, group: 90}
)",
                                       "10de  NVIDIA Corporation\n\t20b5  GA100 [A100 PCIe 80GB]\n"
                                       "\t2236  GA102GL [A10]\n",
                                       "gpu-b");
  REQUIRE(status.body["advertised"] ==
          nlohmann::json{{"nvidia.com/GA100_A100_PCIE_80GB", 1}, {"nvidia.com/GA102GL_A10", 2}});
  REQUIRE(status.body.contains("permittedHostDevices"));

  auto in = cleanInput();
  in.workloads.clear();
  in.statuses = {status};
  auto& gpuB = in.nodes.front().body["items"][1];
  REQUIRE(gpuB["metadata"]["name"] == "gpu-b");
  for (const char* field : {"capacity", "allocatable"}) {
    gpuB["status"][field].erase("nvidia.com/GA102GL_A10");
    gpuB["status"][field]["nvidia.com/GA102GL_A10"] = "2";
    gpuB["status"][field]["nvidia.com/GA100_A100_PCIE_80GB"] = "1";
  }
  auto& phd = in.kubevirt->body["spec"]["configuration"]["permittedHostDevices"];
  phd.erase("mediatedDevices");
  phd["pciHostDevices"] = nlohmann::json::array();

  SECTION("PCI: the device ids of the host's entries, where the names alone give none") {
    auto r = check(in);
    const auto* p = find(r, "kubevirt-permit-patch", "");
    REQUIRE(p);
    CHECK_THAT(p->message, !Catch::Contains("no --status document gives the device id"));
    const std::string prefix = "kubectl patch kubevirt kubevirt -n kubevirt --type merge -p '";
    REQUIRE_THAT(p->fix, Catch::StartsWith(prefix) && Catch::EndsWith("'"));
    auto patch =
        nlohmann::json::parse(p->fix.substr(prefix.size(), p->fix.size() - prefix.size() - 1));
    const auto& got = patch["spec"]["configuration"]["permittedHostDevices"];
    REQUIRE(got.contains("pciHostDevices"));
    CHECK(got["pciHostDevices"] == status.body["permittedHostDevices"]["pciHostDevices"]);
    CHECK(got["pciHostDevices"] == nlohmann::json::parse(R"([
          {"pciVendorSelector": "10DE:20B5", "resourceName": "nvidia.com/GA100_A100_PCIE_80GB",
           "externalResourceProvider": true},
          {"pciVendorSelector": "10DE:2236", "resourceName": "nvidia.com/GA102GL_A10",
           "externalResourceProvider": true}])"));
    CHECK(got["mediatedDevices"] == nlohmann::json::parse(R"([
          {"mdevNameSelector": "NVIDIA A10-12Q", "resourceName": "nvidia.com/NVIDIA_A10-12Q",
           "externalResourceProvider": true}])"));
    const auto* missing = find(r, "kubevirt-not-permitted", "gpu-b");
    REQUIRE(missing);
    CHECK_THAT(missing->fix, Catch::StartsWith("add {pciVendorSelector: \"10DE:"));

    // Applied as kubectl applies a merge patch (RFC 7386), then checked again: nothing missing,
    // and every selector verified against the host's entries.
    in.kubevirt->body.merge_patch(patch);
    auto again = check(in);
    CHECK_FALSE(find(again, "kubevirt-not-permitted", "gpu-b"));
    CHECK_FALSE(find(again, "kubevirt-not-permitted", "gpu-c"));
    CHECK_FALSE(find(again, "kubevirt-permit-patch", ""));
    CHECK_FALSE(find(again, "kubevirt-selector-mismatch", "gpu-b"));
    CHECK_FALSE(find(again, "kubevirt-selector-unverified", ""));

    // A selector the host's entries contradict is found, with the host's id as the fix.
    auto& pci =
        in.kubevirt->body["spec"]["configuration"]["permittedHostDevices"]["pciHostDevices"];
    for (auto& e : pci) {
      if (e["resourceName"] == "nvidia.com/GA100_A100_PCIE_80GB")
        e["pciVendorSelector"] = "10DE:20B2";
    }
    auto contradicted = check(in);
    const auto* wrong = find(contradicted, "kubevirt-selector-mismatch", "gpu-b");
    REQUIRE(wrong);
    CHECK(wrong->fix == "set pciVendorSelector: \"10DE:20B5\"");
  }
  SECTION("mdev: the type name exactly as the host's entry gives it") {
    // A type name whose whitespace the plugin's rule folds (runs to one '_'): the resource name
    // cannot give it back, the host's entry can.
    Document vgpu{"status-gpu-c.json",
                  {{"nodeName", "gpu-c"},
                   {"permittedHostDevices",
                    {{"mediatedDevices",
                      {{{"mdevNameSelector", "NVIDIA  A10-12Q"},
                        {"resourceName", "nvidia.com/NVIDIA_A10-12Q"},
                        {"externalResourceProvider", true}}}}}}}};
    in.statuses.push_back(vgpu);
    auto r = check(in);
    const auto* missing = find(r, "kubevirt-not-permitted", "gpu-c");
    REQUIRE(missing);
    CHECK_THAT(missing->fix, Catch::StartsWith("add {mdevNameSelector: \"NVIDIA  A10-12Q\""));
    const auto* p = find(r, "kubevirt-permit-patch", "");
    REQUIRE(p);
    CHECK_THAT(p->fix, Catch::Contains(R"({"externalResourceProvider":true,)"
                                       R"("mdevNameSelector":"NVIDIA  A10-12Q",)"
                                       R"("resourceName":"nvidia.com/NVIDIA_A10-12Q"})"));
  }
}

// The KubeVirt check: permittedHostDevices entries, selectors and feature gates.
#include <catch2/catch.hpp>

#include "checks/check_node.hpp"
#include "tests/checks/check_node_support.hpp"

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

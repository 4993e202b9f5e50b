// The checker on the seed's exercise: a clean three-node cluster, then nodes broken on purpose.
// Each broken node must be caught with the right id, on the right node, with the right severity.
#include "checks/check_node.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

using namespace hostprep;

namespace {

std::string fixture(const std::string& rel) {
  return std::string(HOSTPREP_FIXTURES_DIR) + "/cluster/" + rel;
}

std::vector<Document> load(const std::string& rel) {
  std::ifstream f(fixture(rel));
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  auto docs = parseDocuments(ss.str(), rel);
  REQUIRE(docs);
  return *docs;
}

std::string text(const std::string& rel) {
  std::ifstream f(fixture(rel));
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Document one(const std::string& rel) {
  auto d = load(rel);
  REQUIRE(d.size() == 1);
  return d.front();
}

CheckNodeReport check(const CheckNodeInput& in) {
  auto r = checkNodes(in);
  if (!r) FAIL(r.error().describe());
  return *r;
}

// Every finding, node ones and cluster ones.
std::vector<Finding> all(const CheckNodeReport& r) {
  std::vector<Finding> out;
  for (const auto& n : r.nodes) out.insert(out.end(), n.findings.begin(), n.findings.end());
  out.insert(out.end(), r.clusterFindings.begin(), r.clusterFindings.end());
  return out;
}

const Finding* find(const CheckNodeReport& r, std::string_view id, std::string_view node) {
  for (const auto& n : r.nodes) {
    for (const auto& f : n.findings) {
      if (f.id == id && f.node == node) return &f;
    }
  }
  for (const auto& f : r.clusterFindings) {
    if (f.id == id && f.node == node) return &f;
  }
  return nullptr;
}

std::vector<std::string> ids(const CheckNodeReport& r, Severity atLeast) {
  std::vector<std::string> out;
  for (const auto& f : all(r)) {
    if (f.severity >= atLeast) out.push_back(f.id + "@" + (f.node.empty() ? "cluster" : f.node));
  }
  return out;
}

CheckNodeInput cleanInput() {
  CheckNodeInput in;
  in.nodes = load("clean/nodes.json");
  in.clusterPolicy = one("clean/cluster-policy.yaml");
  in.kubevirt = one("clean/kubevirt.yaml");
  in.workloads = load("clean/workloads.yaml");
  in.statuses = load("clean/status-gpu-b.json");
  return in;
}

}  // namespace

TEST_CASE("the seed's clean cluster: container, vm-passthrough, vm-vgpu with matching resources",
          "[check-node]") {
  auto r = check(cleanInput());
  CHECK(ids(r, Severity::kInfo).empty());
  CHECK(r.exitCode() == 0);
  REQUIRE(r.nodes.size() == 3);
  CHECK(r.nodes[0].mode == Mode::kContainer);
  CHECK(r.nodes[1].mode == Mode::kVmPassthrough);
  CHECK(r.nodes[1].gpus == std::optional<int>(2));  // from the status document
  CHECK(r.nodes[2].mode == Mode::kVmVgpu);
  CHECK(summaryLine(r) == "3 nodes, 3 ok");
}

TEST_CASE("the clean cluster also passes against the vgpu-device-manager config", "[check-node]") {
  auto in = cleanInput();
  auto cfg = readVgpuConfigs(text("clean/vgpu-config.yaml"), "vgpu-config.yaml");
  REQUIRE(cfg);
  in.vgpuConfigs = *cfg;
  auto r = check(in);
  CHECK(ids(r, Severity::kInfo).empty());
}

TEST_CASE("a passthrough label with nvidia.com/gpu advertised", "[check-node]") {
  CheckNodeInput in;
  in.nodes = load("broken/passthrough-with-gpu.json");
  in.clusterPolicy = one("clean/cluster-policy.yaml");
  auto r = check(in);
  CHECK(r.exitCode() == 1);
  const auto* f = find(r, "resource-wrong-kind", "gpu-p");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK(f->resource == "nvidia.com/gpu");
  CHECK(f->message ==
        "advertises nvidia.com/gpu (2), a container resource, but the node's mode is "
        "vm-passthrough: a vm-passthrough node advertises PCI-name resources such as "
        "nvidia.com/GA102GL_A10 and never nvidia.com/gpu");
  REQUIRE(find(r, "mode-resource-missing", "gpu-p"));
  CHECK(find(r, "mode-resource-missing", "gpu-p")->severity == Severity::kError);
  CHECK(ids(r, Severity::kWarning) ==
        std::vector<std::string>{"resource-wrong-kind@gpu-p", "mode-resource-missing@gpu-p"});
  CHECK(summaryLine(r) == "1 node, 0 ok, 1 with errors");
}

TEST_CASE("vGPU A10-4Q on two cards advertising 4 instead of 12", "[check-node]") {
  CheckNodeInput in;
  in.nodes = load("broken/vgpu-a10-4q-four.yaml");  // YAML, unquoted allocatable count
  in.clusterPolicy = one("clean/cluster-policy.yaml");
  auto r = check(in);
  const auto* f = find(r, "vgpu-count-mismatch", "gpu-v");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK(f->message ==
        "advertises 4 × nvidia.com/NVIDIA_A10-4Q, but nvidia.com/vgpu.config=A10-4Q on 2 GPUs "
        "must give 12 (6 per GPU × 2 GPUs, built-in profile table)");
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"vgpu-count-mismatch@gpu-v"});

  SECTION("the same from --vgpu-config") {
    auto cfg = readVgpuConfigs(text("clean/vgpu-config.yaml"), "vgpu-config.yaml");
    REQUIRE(cfg);
    in.vgpuConfigs = *cfg;
    auto r2 = check(in);
    REQUIRE(find(r2, "vgpu-count-mismatch", "gpu-v"));
    CHECK_THAT(
        find(r2, "vgpu-count-mismatch", "gpu-v")->message,
        Catch::EndsWith("must give 12 (6 per GPU × 2 GPUs, config 'A10-4Q' in --vgpu-config)"));
  }
  SECTION("the GPU count from the host's status instead of the label") {
    in.nodes.front().body["metadata"]["labels"].erase("nvidia.com/gpu.count");
    auto r2 = check(in);
    CHECK_FALSE(find(r2, "vgpu-count-mismatch", "gpu-v"));
    CHECK(find(r2, "gpu-count-unknown", "gpu-v"));
    in.statuses = {
        {"st",
         {{"node", "gpu-v"},
          {"actual_mode", "vm-vgpu"},
          {"devices",
           {{{"bdf", "0000:3b:00.0"}, {"vendor", "10de"}, {"device", "2236"}, {"role", "gpu"}},
            {{"bdf", "0000:86:00.0"}, {"vendor", "10de"}, {"device", "2236"}, {"role", "gpu"}}}}}}};
    auto r3 = check(in);
    CHECK(find(r3, "vgpu-count-mismatch", "gpu-v"));
  }
  SECTION("a config asking for another type") {
    in.nodes.front().body["metadata"]["labels"]["nvidia.com/vgpu.config"] = "A10-12Q";
    auto r2 = check(in);
    const auto* t = find(r2, "vgpu-type-mismatch", "gpu-v");
    REQUIRE(t);
    CHECK(t->message ==
          "nvidia.com/vgpu.config=A10-12Q asks for A10-12Q, but the node advertises "
          "nvidia.com/NVIDIA_A10-4Q (4); A10-12Q not advertised");
  }
}

TEST_CASE("labels present while the ClusterPolicy disables sandbox workloads", "[check-node]") {
  CheckNodeInput in;
  in.nodes = load("broken/labels-ignored.json");
  in.clusterPolicy = one("broken/cluster-policy-disabled.yaml");
  auto r = check(in);
  const auto* f = find(r, "workload-label-ignored", "gpu-l");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK_THAT(f->message,
             Catch::StartsWith("label nvidia.com/gpu.workload.config=vm-passthrough is ignored: "
                               "the ClusterPolicy cluster-policy ("));
  CHECK_THAT(f->message,
             Catch::EndsWith("has sandboxWorkloads.enabled=false, so the operator prepares "
                             "every node for containers and never reads the label (no "
                             "event, no warning)"));
  // The node is judged as what it really is: a container node, and as such it is consistent.
  REQUIRE(r.nodes.size() == 2);
  CHECK(r.nodes[1].mode == Mode::kContainer);
  CHECK(r.nodes[1].modeSource == ModeSource::kSandboxDisabled);
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"workload-label-ignored@gpu-l"});

  SECTION("without --cluster-policy the assumption is said, and the mismatch points at it") {
    in.clusterPolicy.reset();
    auto r2 = check(in);
    const auto* a = find(r2, "cluster-policy-assumed", "");
    REQUIRE(a);
    CHECK(a->severity == Severity::kWarning);
    const auto* w = find(r2, "resource-wrong-kind", "gpu-l");
    REQUIRE(w);
    CHECK_THAT(w->fix, Catch::Contains("sandboxWorkloads.enabled=true"));
    CHECK(find(r2, "deploy-label-conflict", "gpu-l"));
    CHECK_FALSE(find(r2, "resource-wrong-kind", "gpu-a"));
  }
}

TEST_CASE("a VMI asking nvidia.com/GA102GL_A10 where no node has it", "[check-node]") {
  CheckNodeInput in;
  in.nodes = load("broken/nodes-no-a10.json");
  in.clusterPolicy = one("clean/cluster-policy.yaml");
  in.workloads = load("broken/vmi-a10.yaml");
  auto r = check(in);
  const auto* f = find(r, "request-unsatisfiable", "");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK(f->subject == "VirtualMachineInstance default/a10-vm");
  CHECK(f->message ==
        "VirtualMachineInstance default/a10-vm asks for nvidia.com/GA102GL_A10: will stay Pending "
        "forever: no node advertises nvidia.com/GA102GL_A10; nodes advertise "
        "nvidia.com/GH100_H100_PCIE (gpu-h), nvidia.com/NVIDIA_A10-12Q (gpu-c), nvidia.com/gpu "
        "(gpu-a)");
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"request-unsatisfiable@cluster"});
  CHECK(summaryLine(r) == "3 nodes, 3 ok; 1 cluster error");
}

TEST_CASE("a pod asking nvidia.com/gpu when only sandbox nodes have GPUs is named",
          "[check-node]") {
  CheckNodeInput in;
  auto nodes = load("clean/nodes.json");
  nodes.front().body["items"].erase(0);  // drop the container node
  in.nodes = nodes;
  in.clusterPolicy = one("clean/cluster-policy.yaml");
  in.workloads = load("clean/workloads.yaml");
  auto r = check(in);
  const auto* f = find(r, "request-gpu-only-sandbox", "");
  REQUIRE(f);
  CHECK(f->subject == "Pod default/cuda-job");
  CHECK_THAT(
      f->message,
      Catch::Contains("Pod default/cuda-job asks for nvidia.com/gpu: will stay Pending forever"));
  CHECK_THAT(f->message, Catch::Contains("sandbox nodes (gpu-b vm-passthrough, gpu-c vm-vgpu)"));
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"request-gpu-only-sandbox@cluster"});
}

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

TEST_CASE("the host's status against the node object", "[check-node]") {
  auto in = cleanInput();
  in.statuses.front().body["advertised"]["nvidia.com/GA102GL_A10"] = 1;
  in.statuses.front().body["actual_mode"] = "container";
  auto r = check(in);
  const auto* f = find(r, "status-advertised-mismatch", "gpu-b");
  REQUIRE(f);
  CHECK_THAT(f->message, Catch::StartsWith("the host expects 1 × nvidia.com/GA102GL_A10 ("));
  CHECK(find(r, "status-mode-mismatch", "gpu-b"));
  in.statuses.front().body["node"] = "gpu-z";
  auto r2 = check(in);
  CHECK(find(r2, "status-node-unknown", ""));
}

TEST_CASE("zero allocatable, capacity disagreement, mixed kinds, stale and invalid labels",
          "[check-node]") {
  CheckNodeInput in;
  in.clusterPolicy = one("clean/cluster-policy.yaml");
  auto nodes = load("clean/nodes.json");
  auto& items = nodes.front().body["items"];
  items[0]["status"]["allocatable"]["nvidia.com/gpu"] = "0";          // gpu-a
  items[1]["status"]["allocatable"]["nvidia.com/GA102GL_A10"] = "1";  // gpu-b
  items[1]["status"]["capacity"]["nvidia.com/NVIDIA_A10-12Q"] = "0";  // gpu-b stale
  items[2]["status"]["capacity"]["nvidia.com/GA102GL_A10"] = "1";     // gpu-c mixed
  items[2]["status"]["allocatable"]["nvidia.com/GA102GL_A10"] = "1";
  in.nodes = nodes;
  auto r = check(in);
  CHECK(find(r, "allocatable-zero", "gpu-a"));
  CHECK(find(r, "capacity-allocatable-mismatch", "gpu-b"));
  CHECK(find(r, "capacity-allocatable-mismatch", "gpu-b")->severity == Severity::kWarning);
  CHECK(find(r, "resource-stale", "gpu-b"));
  CHECK(find(r, "resource-stale", "gpu-b")->severity == Severity::kInfo);
  CHECK(find(r, "mixed-resource-kinds", "gpu-c"));
  CHECK(find(r, "resource-wrong-kind", "gpu-c"));

  items[0]["metadata"]["labels"]["nvidia.com/gpu.workload.config"] = "vm-passthru";
  items[0]["status"]["allocatable"]["nvidia.com/gpu"] = "2";
  in.nodes = nodes;
  auto r2 = check(in);
  CHECK(find(r2, "workload-label-invalid", "gpu-a"));
  CHECK(r2.nodes[0].mode == Mode::kContainer);
  CHECK(r2.nodes[0].modeSource == ModeSource::kInvalidLabel);
}

TEST_CASE("input documents of the wrong shape are usage errors", "[check-node]") {
  CheckNodeInput in;
  in.nodes = load("clean/workloads.yaml");
  auto r = checkNodes(in);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == Exit::kUsage);
  CHECK(r.error().message == "clean/workloads.yaml (document 1): a Pod, not a Node");
}

TEST_CASE("resource names are classified by the device plugins' naming rules", "[check-node]") {
  CHECK(classifyResource("nvidia.com/gpu") == ResourceKind::kContainer);
  CHECK(classifyResource("nvidia.com/mig-1g.10gb") == ResourceKind::kContainer);
  CHECK(classifyResource("nvidia.com/GA102GL_A10") == ResourceKind::kPassthrough);
  CHECK(classifyResource("nvidia.com/GH100_H100_PCIE") == ResourceKind::kPassthrough);
  CHECK(classifyResource("nvidia.com/2236") == ResourceKind::kPassthrough);
  CHECK(classifyResource("nvidia.com/NVIDIA_A10-12Q") == ResourceKind::kVgpu);
  CHECK(classifyResource("nvidia.com/GRID_T4-4Q") == ResourceKind::kVgpu);
  CHECK(classifyResource("nvidia.com/NVIDIA_A100-1-5CME") == ResourceKind::kVgpu);
  CHECK(classifyResource("nvidia.com/pgpu-thing") == ResourceKind::kOther);
  CHECK(classifyResource("amd.com/gpu") == ResourceKind::kOther);
  CHECK(vgpuTypeOf("nvidia.com/NVIDIA_A10-4Q") == std::optional<std::string>("A10-4Q"));
  CHECK(vgpuTypeOf("nvidia.com/NVIDIA_H200X-141C") == std::optional<std::string>("H200X-141C"));
  CHECK_FALSE(vgpuTypeOf("nvidia.com/GA102GL_A10"));
  CHECK(parseCount(nlohmann::json("4")) == std::optional<int64_t>(4));
  CHECK(parseCount(nlohmann::json(4)) == std::optional<int64_t>(4));
  CHECK_FALSE(parseCount(nlohmann::json("1.5")));
}

TEST_CASE("the JSON report follows its schema's shape", "[check-node]") {
  CheckNodeInput in;
  in.nodes = load("broken/passthrough-with-gpu.json");
  auto j = reportJson(check(in));
  CHECK(j["schema"] == "hostprep.check-node/v1");
  CHECK(j["ok"] == false);
  CHECK(j["policy"]["given"] == false);
  CHECK(j["summary"]["with_errors"] == 1);
  CHECK(j["nodes"][0]["resources"]["nvidia.com/gpu"]["kind"] == "container");
  bool seen = false;
  for (const auto& f : j["findings"]) {
    if (f["id"] == "resource-wrong-kind") {
      seen = true;
      CHECK(f["node"] == "gpu-p");
      CHECK(f["severity"] == "error");
    }
    if (f["id"] == "cluster-policy-assumed") CHECK(f["node"].is_null());
  }
  CHECK(seen);
}

TEST_CASE("every finding id the checker emits is listed in the JSON schema", "[check-node]") {
  std::ifstream f(std::string(HOSTPREP_FIXTURES_DIR) + "/../../checks/check-node.schema.json");
  REQUIRE(f);
  auto schema = nlohmann::json::parse(f);
  const auto& known = schema["$defs"]["findingId"]["enum"];
  auto in = cleanInput();
  in.clusterPolicy.reset();
  in.kubevirt = one("broken/kubevirt-not-external.yaml");
  auto more = load("broken/labels-ignored.json");
  in.nodes.insert(in.nodes.end(), more.begin(), more.end());
  in.nodes.push_back(load("broken/vgpu-a10-4q-four.yaml").front());
  in.nodes.push_back(load("broken/passthrough-with-gpu.json").front());
  auto vmi = load("broken/vmi-a10.yaml");
  vmi.front().body["spec"]["domain"]["devices"]["gpus"][0]["deviceName"] =
      "nvidia.com/GH100_H100_PCIE";
  in.workloads.insert(in.workloads.end(), vmi.begin(), vmi.end());
  auto r = check(in);
  std::set<std::string> seen;
  for (const auto& x : all(r)) seen.insert(x.id);
  CHECK(seen.size() >= 10);
  for (const auto& id : seen) {
    INFO(id);
    CHECK(std::find(known.begin(), known.end(), id) != known.end());
  }
}

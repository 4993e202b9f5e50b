// Benchmark (not a test): generates a List of N nodes like 'kubectl get nodes -o json' prints
// (labels, annotations, conditions, images), a third per mode and one in 50 broken on purpose,
// then times parsing + checking, as 'hostprep check-node' does them (parseNodeDocuments, then
// checkNodes). If jq is on PATH, times a jq filter doing the label/resource match and nothing else
// on the same file, and prints the ratio. With FILE, the List is also written there (for timing
// the hostprep binary on it).
//   check_node_bench [NODES=5000] [FILE]
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "checks/check_node.hpp"

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

json makeNode(int i) {
  const char* modes[] = {"container", "vm-passthrough", "vm-vgpu"};
  const std::string mode = modes[i % 3];
  const bool broken = i % 50 == 7;
  const std::string name = "gpu-node-" + std::to_string(i);
  json labels = {
      {"beta.kubernetes.io/arch", "amd64"},
      {"beta.kubernetes.io/os", "linux"},
      {"kubernetes.io/arch", "amd64"},
      {"kubernetes.io/hostname", name},
      {"kubernetes.io/os", "linux"},
      {"node.kubernetes.io/instance-type", "gpu.8xlarge"},
      {"topology.kubernetes.io/region", "eu-west-1"},
      {"topology.kubernetes.io/zone", "eu-west-1" + std::string(1, static_cast<char>('a' + i % 3))},
      {"feature.node.kubernetes.io/cpu-cpuid.AVX512F", "true"},
      {"feature.node.kubernetes.io/kernel-version.full", "6.1.0-18-amd64"},
      {"feature.node.kubernetes.io/pci-10de.present", "true"},
      {"feature.node.kubernetes.io/system-os_release.ID", "debian"},
      {"nvidia.com/gpu.present", "true"},
      {"nvidia.com/gpu.count", "2"},
      {"nvidia.com/gpu.workload.config", mode}};
  json cap = {{"cpu", "64"},
              {"ephemeral-storage", "936870628Ki"},
              {"hugepages-1Gi", "0"},
              {"hugepages-2Mi", "0"},
              {"memory", "528279508Ki"},
              {"pods", "110"}};
  json alloc = {{"cpu", "63500m"},         {"ephemeral-storage", "863423092961"},
                {"hugepages-1Gi", "0"},    {"hugepages-2Mi", "0"},
                {"memory", "527152084Ki"}, {"pods", "110"}};
  std::vector<std::string> deploy;
  if (mode == "container") {
    deploy = {"driver", "gpu-feature-discovery", "container-toolkit",    "device-plugin",
              "dcgm",   "dcgm-exporter",         "node-status-exporter", "operator-validator"};
    cap["nvidia.com/gpu"] = alloc["nvidia.com/gpu"] = "2";
  } else if (mode == "vm-passthrough") {
    deploy = {"sandbox-device-plugin", "sandbox-validator", "vfio-manager"};
    cap[broken ? "nvidia.com/gpu" : "nvidia.com/GA102GL_A10"] = "2";
    alloc[broken ? "nvidia.com/gpu" : "nvidia.com/GA102GL_A10"] = "2";
  } else {
    deploy = {"sandbox-device-plugin", "vgpu-manager", "vgpu-device-manager", "sandbox-validator"};
    labels["nvidia.com/vgpu.config"] = "A10-4Q";
    labels["nvidia.com/vgpu.config.state"] = "success";
    cap["nvidia.com/NVIDIA_A10-4Q"] = alloc["nvidia.com/NVIDIA_A10-4Q"] = broken ? "4" : "12";
  }
  for (const auto& d : deploy) labels["nvidia.com/gpu.deploy." + d] = "true";
  json conditions = json::array();
  for (const char* t : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}) {
    conditions.push_back({{"type", t},
                          {"status", std::string(t) == "Ready" ? "True" : "False"},
                          {"lastHeartbeatTime", "2024-05-01T10:00:00Z"},
                          {"lastTransitionTime", "2024-04-01T10:00:00Z"},
                          {"reason", std::string("Kubelet") + t},
                          {"message", "kubelet is posting ready status"}});
  }
  json images = json::array();
  for (int k = 0; k < 8; ++k) {
    images.push_back(
        {{"names",
          {"nvcr.io/nvidia/image-" + std::to_string(k) +
               "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
           "nvcr.io/nvidia/image-" + std::to_string(k) + ":v24.3.0"}},
         {"sizeBytes", 400000000 + k}});
  }
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name},
        {"uid", "6a1f7c9e-0000-4000-8000-" + std::to_string(100000000000 + i)},
        {"resourceVersion", std::to_string(123456 + i)},
        {"labels", labels},
        {"annotations",
         {{"node.alpha.kubernetes.io/ttl", "0"},
          {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}}}}},
      {"spec", {{"podCIDR", "10.244.0.0/24"}, {"providerID", "aws:///eu-west-1a/i-0123456789"}}},
      {"status",
       {{"capacity", cap},
        {"allocatable", alloc},
        {"conditions", conditions},
        {"images", images},
        {"nodeInfo",
         {{"kubeletVersion", "v1.30.2"},
          {"osImage", "Debian GNU/Linux 12 (bookworm)"},
          {"containerRuntimeVersion", "containerd://1.7.13"}}}}}};
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Runs argv (no shell) with stdout to /dev/null; returns the wall time, or a negative value.
double timeProgram(const std::vector<std::string>& argv) {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  auto t0 = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execvp(cargv[0], cargv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  auto t1 = Clock::now();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return seconds(t0, t1);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 5000;
  if (n <= 0) {
    std::cerr << "usage: check_node_bench [NODES]\n";
    return 2;
  }
  json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}};
  for (int i = 0; i < n; ++i) list["items"].push_back(makeNode(i));
  const std::string text = list.dump();
  list = nullptr;
  if (argc > 2) std::ofstream(argv[2]) << text;

  // Best of three runs of parse + check (the first warms the allocator and the caches), with
  // check-node's node reader (simdjson: validate the text, then read each node's few members
  // while checking it) and, for comparison, with the generic reader (an nlohmann-json tree).
  struct Timing {
    double total = 1e9, parse = 0, check = 0;
    size_t findings = 0;
    int exitCode = 0;
  };
  auto measure = [&](bool tree) -> std::optional<Timing> {
    Timing t;
    for (int run = 0; run < 3; ++run) {
      std::string copy;
      copy.reserve(text.size() + hostprep::kJsonPadding);
      copy = text;
      auto t0 = Clock::now();
      auto docs = tree ? hostprep::parseDocuments(copy, "bench.json")
                       : hostprep::parseNodeDocuments(std::move(copy), "bench.json");
      auto t1 = Clock::now();
      if (!docs) {
        std::cerr << docs.error().describe() << "\n";
        return std::nullopt;
      }
      hostprep::CheckNodeInput in;
      in.nodes = std::move(*docs);
      auto report = hostprep::checkNodes(in);
      auto out = hostprep::reportText(*report);
      auto t2 = Clock::now();
      if (seconds(t0, t2) < t.total) {
        t.total = seconds(t0, t2);
        t.parse = seconds(t0, t1);
        t.check = seconds(t1, t2);
        t.findings = 0;
        for (const auto& node : report->nodes) t.findings += node.findings.size();
        t.exitCode = report->exitCode();
      }
    }
    return t;
  };
  auto fast = measure(false);
  auto tree = measure(true);
  if (!fast || !tree) return 1;
  const double best = fast->total;
  std::printf(
      "check-node: %d nodes (%.1f MiB of JSON): %.3f s (validate %.3f s, read nodes + check + "
      "text %.3f s), %zu findings, exit %d\n",
      n, static_cast<double>(text.size()) / (1 << 20), best, fast->parse, fast->check,
      fast->findings, fast->exitCode);
  std::printf(
      "check-node with an nlohmann-json tree: %.3f s (parse %.3f s, check + text %.3f s), "
      "%zu findings, exit %d\n",
      tree->total, tree->parse, tree->check, tree->findings, tree->exitCode);

  // The label/resource match alone in jq: nodes whose workload label disagrees with the
  // nvidia.com/ resources they advertise.
  auto file = std::filesystem::temp_directory_path() /
              ("check_node_bench." + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << text;
  const std::string program = R"(
    .items[] | {n: .metadata.name,
                m: (.metadata.labels["nvidia.com/gpu.workload.config"] // "container"),
                r: ((.status.allocatable // {}) | to_entries
                    | map(select((.key | startswith("nvidia.com/")) and .value != "0"))
                    | map(.key))}
    | select((.m == "container" and (.r | any(. != "nvidia.com/gpu")))
             or (.m != "container" and (.r | any(. == "nvidia.com/gpu"))))
    | .n)";
  double jq = timeProgram({"jq", "-r", program, file.string()});
  std::filesystem::remove(file);
  if (jq < 0) {
    std::printf("jq: not installed or failed; no comparison\n");
  } else {
    std::printf("jq (label/resource match only): %.3f s; hostprep is %.1fx %s\n", jq,
                jq > best ? jq / best : best / jq, jq > best ? "faster" : "slower");
  }
  return best < 1.0 ? 0 : 1;
}

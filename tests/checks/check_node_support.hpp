// What the check-node tests share: the cluster fixtures (tests/fixtures/cluster/) loaded as
// documents, the checker run on them, and findings looked up by id and node.
#pragma once

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "checks/check_node.hpp"

namespace hostprep::test {

inline std::string fixture(const std::string& rel) {
  return std::string(HOSTPREP_FIXTURES_DIR) + "/cluster/" + rel;
}

inline std::vector<Document> load(const std::string& rel) {
  std::ifstream f(fixture(rel));
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  auto docs = parseDocuments(ss.str(), rel);
  REQUIRE(docs);
  return *docs;
}

inline std::string text(const std::string& rel) {
  std::ifstream f(fixture(rel));
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline Document one(const std::string& rel) {
  auto d = load(rel);
  REQUIRE(d.size() == 1);
  return d.front();
}

inline CheckNodeReport check(const CheckNodeInput& in) {
  auto r = checkNodes(in);
  if (!r) FAIL(r.error().describe());
  return *r;
}

// Every finding, node ones and cluster ones.
inline std::vector<Finding> all(const CheckNodeReport& r) {
  std::vector<Finding> out;
  for (const auto& n : r.nodes) out.insert(out.end(), n.findings.begin(), n.findings.end());
  out.insert(out.end(), r.clusterFindings.begin(), r.clusterFindings.end());
  return out;
}

inline const Finding* find(const CheckNodeReport& r, std::string_view id, std::string_view node) {
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

inline std::vector<std::string> ids(const CheckNodeReport& r, Severity atLeast) {
  std::vector<std::string> out;
  for (const auto& f : all(r)) {
    if (f.severity >= atLeast) out.push_back(f.id + "@" + (f.node.empty() ? "cluster" : f.node));
  }
  return out;
}

// The nodes of `rel` under the clean cluster's ClusterPolicy (sandbox workloads enabled).
inline CheckNodeInput withCleanPolicy(const std::string& rel) {
  CheckNodeInput in;
  in.nodes = load(rel);
  in.clusterPolicy = one("clean/cluster-policy.yaml");
  return in;
}

inline CheckNodeInput cleanInput() {
  CheckNodeInput in;
  in.nodes = load("clean/nodes.json");
  in.clusterPolicy = one("clean/cluster-policy.yaml");
  in.kubevirt = one("clean/kubevirt.yaml");
  in.workloads = load("clean/workloads.yaml");
  in.statuses = load("clean/status-gpu-b.json");
  return in;
}

}  // namespace hostprep::test

// The ConfigMap shipped with the mixed nodes' DaemonSet (systemd/kubernetes/hostprep-mixed.yaml)
// is a config the agent accepts, with the rules and the NFD features check-node reads.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "agent/config.hpp"
#include "checks/documents.hpp"

using namespace hostprep;

TEST_CASE("the mixed DaemonSet's ConfigMap is a valid config with devices rules", "[kubernetes]") {
  std::ifstream f(std::string(HOSTPREP_SOURCE_DIR) + "/systemd/kubernetes/hostprep-mixed.yaml");
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  auto docs = parseDocuments(ss.str(), "hostprep-mixed.yaml");
  REQUIRE(docs);
  const Document* cm = nullptr;
  for (const auto& d : *docs) {
    if (d.body.value("kind", "") == "ConfigMap") cm = &d;
  }
  REQUIRE(cm);
  auto cfg = parseConfig(cm->body["data"]["config.yaml"].get<std::string>(), "config.yaml");
  if (!cfg) FAIL(cfg.error().describe());
  CHECK(cfg->mode == Mode::kContainer);
  REQUIRE(cfg->rules.size() == 2);
  CHECK(cfg->rules[0].match.index == std::optional<int>(2));
  CHECK(cfg->rules[0].mode == Mode::kVmPassthrough);
  CHECK(cfg->rules[1].match.index == std::optional<int>(3));
  CHECK(cfg->nfdFeaturesPath == "/etc/kubernetes/node-feature-discovery/features.d/hostprep");
}

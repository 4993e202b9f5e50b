#include "checks/documents.hpp"

#include <catch2/catch.hpp>

#include "checks/operands.hpp"
#include "checks/vgpu_configs.hpp"

using namespace hostprep;

TEST_CASE("YAML scalars convert like kubectl's JSON would read them", "[documents]") {
  auto d = parseDocuments(
      "a: 2\nb: \"2\"\nc: true\nd: ~\ne: 10DE:2236\nf: 1.5\ng: -3\nh: [x, 'y']\n", "t.yaml");
  REQUIRE(d);
  REQUIRE(d->size() == 1);
  const auto& j = d->front().body;
  CHECK(j["a"] == 2);
  CHECK(j["b"] == "2");
  CHECK(j["c"] == true);
  CHECK(j["d"].is_null());
  CHECK(j["e"] == "10DE:2236");
  CHECK(j["f"] == 1.5);
  CHECK(j["g"] == -3);
  CHECK(j["h"] == nlohmann::json({"x", "y"}));
  CHECK(scalarText(j["a"]) == std::optional<std::string>("2"));
  CHECK(scalarText(j["c"]) == std::optional<std::string>("true"));
}

TEST_CASE("multi-document YAML gives one document each, empty ones skipped", "[documents]") {
  auto d = parseDocuments("kind: Pod\n---\n---\nkind: VirtualMachine\n", "vms.yaml");
  REQUIRE(d);
  REQUIRE(d->size() == 2);
  CHECK(d->at(0).source == "vms.yaml (document 1)");
  CHECK(d->at(1).source == "vms.yaml (document 3)");
  CHECK(kindOf(d->at(1).body) == "VirtualMachine");
}

TEST_CASE("malformed input names the file and the position", "[documents]") {
  auto j = parseDocuments("{\n  \"a\": 1,\n  \"b\": }\n", "nodes.json");
  REQUIRE_FALSE(j);
  CHECK(j.error().exit == Exit::kUsage);
  CHECK_THAT(j.error().message,
             Catch::StartsWith("nodes.json: malformed JSON at line 3, column 8 (byte 20): "));
  auto y = parseDocuments("a: [1, 2\nb: c\n", "nodes.yaml");
  REQUIRE_FALSE(y);
  CHECK_THAT(y.error().message, Catch::StartsWith("nodes.yaml: malformed YAML at line "));
  CHECK(parseDocuments("  \n", "empty")->empty());
  // A number too large for a double is an error too, not an exception (found by
  // fuzz_node_documents).
  auto big = parseDocuments("{\"a\": 5E051111111111111111}", "nodes.json");
  REQUIRE_FALSE(big);
  CHECK(big.error().exit == Exit::kUsage);
  CHECK_THAT(big.error().message, Catch::StartsWith("nodes.json: malformed JSON: "));
  CHECK_THAT(big.error().message, Catch::Contains("number overflow"));
}

TEST_CASE("streams that make yaml-cpp 0.7's LoadAll loop forever are errors", "[documents]") {
  // jbeder/yaml-cpp#1319: a document the parser cannot consume made LoadAll() push null
  // documents without end (found by fuzz_node_documents; the input is in its corpus).
  for (const char* text : {"\n,\n    ", "a: 1\n---\n,\n", "kind: Node\n---\n]\n"}) {
    INFO(text);
    auto d = parseDocuments(text, "nodes.yaml");
    REQUIRE_FALSE(d);
    CHECK_THAT(d.error().message, Catch::StartsWith("nodes.yaml: malformed YAML at line "));
  }
  // The line is counted in the whole stream, not in the document.
  auto d = parseDocuments("kind: Node\n---\nkind: Pod\nx: [1\n", "nodes.yaml");
  REQUIRE_FALSE(d);
  CHECK_THAT(d.error().message, Catch::Contains("line 4") || Catch::Contains("line 5"));
  // A document may start on its marker line.
  auto inline_ = parseDocuments("--- {kind: Node}\n--- {kind: Pod}\n", "x.yaml");
  REQUIRE(inline_);
  REQUIRE(inline_->size() == 2);
  CHECK(kindOf(inline_->at(1).body) == "Pod");
}

namespace {

// "Billion laughs": each level an alias list of ten of the level before, 10^(levels+1) strings.
std::string aliasBomb(int levels) {
  std::string y = "kind: List\nitems: []\nlol:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= levels; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    y += "  a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) y += (k ? ", " : "") + prev;
    y += "]\n";
  }
  return y;
}

}  // namespace

TEST_CASE("YAML aliases may repeat a value, not blow a small file up", "[documents]") {
  // Aliases as a person writes them are read (each use a copy of the anchored value).
  auto ok = parseDocuments("base: &b {cpu: 1, labels: [a, b]}\nx: *b\ny: *b\n", "vms.yaml");
  REQUIRE(ok);
  CHECK(ok->front().body["y"]["labels"] == nlohmann::json({"a", "b"}));
  // Four levels (10^5 strings from ~400 bytes) are too many for the file's size: an error at
  // once, naming the file. Nine levels, 10^10 strings, took 22 s and 3.6 GB to reach the fixed
  // bound of 50 million values that came before.
  for (int levels : {4, 9}) {
    const std::string bomb = aliasBomb(levels);
    INFO(levels << " levels, " << bomb.size() << " bytes");
    auto d = parseDocuments(bomb, "nodes.yaml");
    REQUIRE_FALSE(d);
    CHECK(d.error().exit == Exit::kUsage);
    CHECK(d.error().message ==
          "nodes.yaml: its YAML aliases expand it to more values than 16 per byte of the file");
  }
  // Three levels, 10^4 strings, are within the floor for a short file.
  CHECK(parseDocuments(aliasBomb(3), "nodes.yaml"));
}

TEST_CASE("Lists expand to their items", "[documents]") {
  auto d = parseDocuments(R"({"kind":"List","items":[{"kind":"Node"},{"kind":"Node"}]})", "n.json");
  REQUIRE(d);
  auto items = expandLists(*d);
  REQUIRE(items.size() == 2);
  CHECK(items[1].source == "n.json (item 2)");
}

TEST_CASE("check-node reads the vgpu-device-manager config with prepare's parser",
          "[vgpu-config]") {
  auto c = readVgpuConfigs(
      "version: v1\nvgpu-configs:\n  default:\n    - device-filter: [\"0x223610DE\", "
      "\"0x1EB810DE:0x12A210DE\"]\n"
      "      devices: all\n      vgpu-devices: {\"A10-12Q\": 2}\n  split:\n    - devices: [0]\n"
      "      vgpu-devices: {\"A10-4Q\": 6}\n",
      "cfg.yaml");
  REQUIRE(c);
  const auto& def = c->find("default")->front();
  REQUIRE(def.filters.size() == 2);
  CHECK(def.filters[0] == VgpuDeviceFilter{PciId{0x10de, 0x2236}, std::nullopt});
  // A subsystem-pinned filter (vgpu-device-manager's "0xDDDDVVVV:0xSSSSVVVV") is accepted, as
  // prepare accepts it; the reader this replaced refused it.
  CHECK(def.filters[1] == VgpuDeviceFilter{PciId{0x10de, 0x1eb8}, PciId{0x10de, 0x12a2}});
  CHECK_FALSE(def.devices);
  CHECK(def.vgpuDevices == std::vector<std::pair<std::string, int>>{{"A10-12Q", 2}});
  CHECK(c->find("split")->front().devices == std::vector<int>{0});

  // Errors name the file, the line and the key, as prepare's do.
  auto e = readVgpuConfigs(
      "version: v1\nvgpu-configs:\n  x:\n    - devices: all\n      vgpu-devices: {\"A10-4Q\": "
      "many}\n",
      "bad.yaml");
  REQUIRE_FALSE(e);
  CHECK(e.error().exit == Exit::kUsage);
  CHECK_THAT(e.error().message,
             Catch::StartsWith(
                 "bad.yaml:5: vgpu-configs.x[0].vgpu-devices.A10-4Q: 'many' is not a count"));
  auto two = readVgpuConfigs("version: v1\n---\nversion: v1\n", "two.yaml");
  REQUIRE_FALSE(two);
  CHECK_THAT(two.error().message, Catch::Contains("holds 2 documents"));

  // The ConfigMap the operator ships.
  auto c2 = readVgpuConfigs(
      "kind: ConfigMap\ndata:\n  config.yaml: |\n    version: v1\n    vgpu-configs:\n      "
      "A10-4Q:\n"
      "        - devices: all\n          vgpu-devices: {\"A10-4Q\": 6}\n",
      "cm.yaml");
  REQUIRE(c2);
  CHECK(c2->find("A10-4Q")->front().vgpuDevices.front().second == 6);
  auto cmBad =
      readVgpuConfigs("kind: ConfigMap\ndata:\n  config.yaml: |\n    version: v2\n", "cm.yaml");
  REQUIRE_FALSE(cmBad);
  CHECK_THAT(cmBad.error().message, Catch::StartsWith("cm.yaml (ConfigMap data):1: version"));
}

TEST_CASE("the operands table per mode", "[operands]") {
  auto names = [](Mode m, Need n) {
    std::vector<std::string> v;
    for (const auto& o : operandTable()) {
      if (o.in(m) == n) v.emplace_back(o.name);
    }
    return v;
  };
  CHECK(names(Mode::kContainer, Need::kYes) ==
        std::vector<std::string>{"driver", "container-toolkit", "device-plugin",
                                 "gpu-feature-discovery", "dcgm", "dcgm-exporter",
                                 "node-status-exporter", "operator-validator"});
  CHECK(names(Mode::kVmPassthrough, Need::kYes) ==
        std::vector<std::string>{"vfio-manager", "sandbox-device-plugin", "sandbox-validator"});
  CHECK(names(Mode::kVmVgpu, Need::kYes) ==
        std::vector<std::string>{"vgpu-manager", "vgpu-device-manager", "sandbox-device-plugin",
                                 "sandbox-validator"});
  CHECK(names(Mode::kVmPassthrough, Need::kOptional) ==
        std::vector<std::string>{"kata-manager", "cc-manager"});
  REQUIRE(findOperand("vfio-manager"));
  CHECK(deployLabel(*findOperand("vfio-manager")) == "nvidia.com/gpu.deploy.vfio-manager");
  CHECK_FALSE(findOperand("nope"));
  CHECK_THAT(formatOperandsTable(),
             Catch::Contains("vfio-manager           -          yes             -"));
}

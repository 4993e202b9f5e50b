// parseNodeDocuments (simdjson) against parseDocuments (nlohmann-json): the same error for the
// same bytes, the same report for the same nodes, and a List's items read one at a time.
#include <catch2/catch.hpp>
#include <filesystem>

#include "checks/documents.hpp"
#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

namespace {

// Both readers on text: both fail with the same message, or both give the same check-node report
// (as JSON text), which is returned.
std::string bothAgree(const std::string& text, bool lazy = false) {
  INFO(text);
  auto fast = parseNodeDocuments(text, "nodes.json");
  auto slow = parseDocuments(text, "nodes.json");
  REQUIRE(static_cast<bool>(fast) == static_cast<bool>(slow));
  if (!slow) {
    CHECK(fast.error().describe() == slow.error().describe());
    CHECK(fast.error().exit == Exit::kUsage);
    return fast.error().describe();
  }
  REQUIRE(fast->size() == slow->size());
  if (lazy) {
    REQUIRE(fast->front().items);
  }
  CheckNodeInput a, b;
  a.nodes = *fast;
  b.nodes = *slow;
  auto ra = checkNodes(a);
  auto rb = checkNodes(b);
  REQUIRE(static_cast<bool>(ra) == static_cast<bool>(rb));
  if (!ra) {
    CHECK(ra.error().describe() == rb.error().describe());
    return ra.error().describe();
  }
  const auto ja = reportJson(*ra).dump(2);
  CHECK(ja == reportJson(*rb).dump(2));
  return ja;
}

}  // namespace

TEST_CASE("parseNodeDocuments: every JSON node fixture gives the report parseDocuments gives",
          "[documents][check-node]") {
  size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           std::string(HOSTPREP_FIXTURES_DIR) + "/cluster")) {
    if (e.path().extension() != ".json") continue;
    ++files;
    std::ifstream f(e.path());
    std::stringstream ss;
    ss << f.rdbuf();
    bothAgree(ss.str());
  }
  CHECK(files >= 5);
}

TEST_CASE("parseNodeDocuments: a List's items stay text until read, one at a time",
          "[documents][check-node]") {
  const std::string list = text("clean/nodes.json");
  auto d = parseNodeDocuments(list, "nodes.json");
  REQUIRE(d);
  REQUIRE(d->size() == 1);
  REQUIRE(d->front().items);
  CHECK(d->front().items->size() == 3);
  CHECK(d->front().body == nlohmann::json({{"kind", "List"}}));
  std::vector<std::string> names;
  REQUIRE(d->front().items->forEach([&](size_t i, const nlohmann::json& node) {
    CHECK(names.size() == i);
    names.push_back(node["metadata"]["name"].get<std::string>());
    // Only what the checks read is kept.
    for (const auto& [k, v] : node.items()) {
      CHECK((k == "kind" || k == "metadata" || k == "spec" || k == "status"));
    }
    CHECK_FALSE(node["metadata"].contains("uid"));
  }));
  CHECK(names == std::vector<std::string>{"gpu-a", "gpu-b", "gpu-c"});
  CHECK(bothAgree(list, true).find("gpu-c") != std::string::npos);
}

TEST_CASE("parseNodeDocuments: malformed and hostile JSON fails exactly as parseDocuments does",
          "[documents][check-node]") {
  for (const char* t : {
           "{\"items\": [1, ]}",
           "{\"items\": []} x",
           "{\"items\": []}}",
           "{\"items\": []} {}",
           "{\"items\": [{\"a\": \"\x01\"}]}",            // a raw control character
           "{\"items\": [{\"a\": \"\\x\"}]}",             // an unknown escape
           "{\"items\": [{\"a\": \"\\ud800\"}]}",         // a lone high surrogate
           "{\"items\": [{\"a\": \"\\udc00\"}]}",         // a lone low surrogate
           "{\"items\": [{\"a\": \"\\ud800\\u0041\"}]}",  // a high surrogate, then not a low one
           "{\"items\": [{\"a\": \"\\u12\"}]}",
           "{\"items\": [{\"a\": 1e999}]}",  // nlohmann: number overflow
           "{\"items\": [{\"a\": 01}]}",
           "{\"items\": [{\"a\": -}]}",
           "{\"items\": [{\"a\": tru}]}",
           "{\"items\": [{\"a\": nul}]}",
           "{\"items\": [{\"a\": [1 2]}]}",
           "{\"items\": [{\"a\" 1}]}",
           "{\"items\": [{\"a\": 1,}]}",
           "{\"items\": [{\"a\": \"\xc3\x28\"}]}",      // invalid UTF-8
           "{\"items\": [{\"a\": \"\xed\xa0\x80\"}]}",  // a surrogate in UTF-8
           "{\"items\": [{\"a\": 1}",                   // truncated
           "{\"items\": [{\"a\": \"abc",
           "{\"kind\": \"List\", \"items\": [{\"kind\": \"Pod\", \"metadata\": {\"name\": "
           "\"p\"}}]}",
           "{\"items\": [{\"kind\": \"Node\", \"metadata\": {\"name\": \"\"}}]}",
           "{\"items\": [{\"kind\": \"Node\", \"metadata\": {\"name\": \"a\"}}, 7]}",
           "{\"items\": [{\"metadata\": {\"name\": \"a\"}, \"metadata\": {}}]}",
       }) {
    const auto message = bothAgree(t);
    CHECK_THAT(message, Catch::StartsWith("nodes.json"));
  }
}

TEST_CASE("parseNodeDocuments: deep nesting reads as nlohmann reads it and too deep is an error",
          "[documents][check-node]") {
  // 100,000 nested arrays crashed check-node (simdjson's On-Demand past its max_depth, then
  // nlohmann-json's recursive copy). Deep values go to nlohmann-json; past 512 levels from the
  // top, both readers say the same error. Here the top object, "items", the item and "spec" come
  // before the arrays.
  const std::string tooDeep =
      "nodes.json: values nested deeper than 512 levels (pass the output of 'kubectl get ... -o "
      "json' or '-o yaml' unchanged)";
  for (size_t arrays :
       {size_t{250}, size_t{300}, size_t{508}, size_t{509}, size_t{2000}, size_t{100'000}}) {
    INFO(arrays << " nested arrays");
    const std::string deep = std::string(arrays, '[') + std::string(arrays, ']');
    const std::string node =
        R"({"kind": "Node", "metadata": {"name": "n1"}, "spec": {"x": )" + deep + "}}";
    const std::string list = R"({"kind": "List", "items": [)" + node + "]}";
    if (arrays + 4 <= 512) {
      CHECK_THAT(bothAgree(list), Catch::Contains("\"n1\""));
    } else {
      CHECK(bothAgree(list) == tooDeep);
    }
  }
  // YAML: yaml-cpp stops at ~500 levels of brackets ("bad file", said as what it is) ...
  std::string yaml = "kind: Node\nmetadata: {name: n1}\nx: ";
  for (int i = 0; i < 600; ++i) yaml += "[";
  for (int i = 0; i < 600; ++i) yaml += "]";
  auto y = parseDocuments(yaml + "\n", "nodes.yaml");
  REQUIRE_FALSE(y);
  CHECK_THAT(y.error().message, Catch::EndsWith(": nested too deep"));
  // ... and a chain of aliases, one level each, nests deeper than the parser ever recursed: the
  // conversion counts the levels.
  std::string chain = "kind: Node\nmetadata: {name: n1}\na0: &a0 [x]\n";
  for (int i = 1; i < 600; ++i)
    chain += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [*a" + std::to_string(i - 1) +
             "]\n";
  auto c = parseDocuments(chain, "nodes.yaml");
  REQUIRE_FALSE(c);
  CHECK(c.error().message == "nodes.yaml: values nested deeper than 512 levels");
}

TEST_CASE("parseNodeDocuments: unusual but valid JSON reads as nlohmann reads it",
          "[documents][check-node]") {
  const std::string node =
      R"({"kind": "Node", "metadata": {"name": "n1", "labels": {
            "nvidia.com/gpu.workload.config": "vm-passthrough",
            "nvidia.com/gpu.deploy.vfio-manager": "true",
            "nvidia.com/gpu.deploy.sandbox-device-plugin": {"not": "a scalar"},
            "nvidia.com/gpu.count": 2, "nvidia.com/gpu.present": true}},
          "spec": {"unschedulable": true},
          "status": {"capacity": {"nvidia.com/GA102GL_A10": "2", "nvidia.com/gpu": {"x": [1]},
                                  "cpu": 64},
                     "allocatable": {"nvidia.com/GA102GL_A10": 2, "nvidia.com/gpu": -0,
                                     "nvidia.com/NVIDIA_A10-4Q": 1.5e0}}})";
  bothAgree(node);
  bothAgree("{\"items\": [" + node + "]}", true);
  for (
      const char* t : {
          // repeated keys: the last one counts
          R"({"items": [{"kind": "Pod", "kind": "Node", "metadata": {"name": "a"}}]})",
          R"({"items": [{"metadata": {"name": "a"}, "metadata": {"name": "b"}}]})",
          R"({"items": 3, "items": [{"metadata": {"name": "a"}}]})",
          R"({"items": [{"metadata": {"name": "a"}}], "items": {"kind": "Node"}})",
          // escaped keys and values
          R"({"items": [{"kin\u0064": "Node", "metadata": {"name": "\u00e9\ud83d\ude00\n\/"}}]})",
          R"({"items": [{"metadata": {"name": "a", "labels": {"nvidia.com/gpu.workload.con\u0066ig": "vm-vgpu"}}}]})",
          // numbers nlohmann reads as doubles: left to nlohmann
          R"({"items": [{"metadata": {"name": "a"}, "status": {"allocatable": {"nvidia.com/gpu": 123456789012345678901234567890}}}]})",
          R"({"items": [{"metadata": {"name": "a"}, "status": {"allocatable": {"nvidia.com/gpu": -9223372036854775809}}}]})",
          R"({"items": [{"metadata": {"name": "a"}, "status": {"allocatable": {"nvidia.com/gpu": 18446744073709551615}}}]})",
          R"({"kind": 7, "items": [], "extra": [{"deep": [[[]]]}, null, false, "\u0000"]})",
          R"({"metadata": {"name": "solo"}, "status": "not an object", "spec": [1]})",
          "{}",
          "  {\"items\": [ {\"metadata\" : {\"name\":\"a\"}} ]}\r\n\t ",
      }) {
    bothAgree(t);
  }
}

TEST_CASE("parseNodeDocuments: a quote, escape or control byte is found at every offset of a word",
          "[documents][check-node]") {
  // Strings are scanned 8 bytes at a time: put each byte that ends a plain run at each position
  // of the first words of a long label value, and of a node's name.
  for (size_t at = 0; at < 20; ++at) {
    const std::string before(at, 'a'), after(20 - at, 'b');
    for (const std::string special :
         {"\\\"", "\\n", "\\u00e9", "\\\\", "\x01", "\x1f", "\t", "\\q", "\xc3\xa9", "\x7f"}) {
      const std::string value = before + special + after;
      INFO("offset " << at);
      bothAgree(
          R"({"items": [{"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.workload.config": ")" +
          value + R"("}}}]})");
      bothAgree(R"({"items": [{"metadata": {"name": ")" + value + R"("}}]})");
    }
  }
}

TEST_CASE("parseNodeDocuments: YAML and JSON arrays go to parseDocuments", "[documents]") {
  auto y = parseNodeDocuments("kind: Node\nmetadata:\n  name: a\n", "nodes.yaml");
  REQUIRE(y);
  CHECK_FALSE(y->front().items);
  CHECK(y->front().body["metadata"]["name"] == "a");
  bothAgree("[{\"kind\": \"Node\"}]");
  CHECK(parseNodeDocuments(" \n", "nodes.json")->empty());
}

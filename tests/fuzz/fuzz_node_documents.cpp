// check-node's inputs: Node / NodeList / KubeVirt / VM / ResourceSlice documents in JSON or YAML.
// Whatever the bytes, loading either fails with a message naming the input, or yields documents
// the checker runs on without crashing. The node reader (parseNodeDocuments, simdjson) and the
// generic one (parseDocuments, nlohmann-json) agree: the same error for the same bytes, or the
// same report.
#include "checks/check_node.hpp"
#include "checks/documents.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  if (size > 64 * 1024) return 0;
  const auto text = fuzz::asText(data, size);
  auto nodes = parseNodeDocuments(std::string(text), "fuzz.yaml");
  auto docs = parseDocuments(text, "fuzz.yaml");
  FUZZ_CHECK(static_cast<bool>(nodes) == static_cast<bool>(docs));
  if (!docs) {
    FUZZ_CHECK(docs.error().message.find("fuzz.yaml") != std::string::npos);
    FUZZ_CHECK(nodes.error().describe() == docs.error().describe());
    return 0;
  }
  CheckNodeInput in;
  in.nodes = *nodes;
  auto fast = checkNodes(in);
  in.nodes = *docs;
  auto slow = checkNodes(in);
  FUZZ_CHECK(static_cast<bool>(fast) == static_cast<bool>(slow));
  if (fast) {
    FUZZ_CHECK(reportJson(*fast).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) ==
               reportJson(*slow).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    FUZZ_CHECK(fast.error().describe() == slow.error().describe());
  }
  in.resourceSlices = *docs;  // the same documents as DRA ResourceSlices (read before the nodes)
  (void)checkNodes(in);
  return 0;
}

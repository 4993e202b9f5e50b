// check-node's inputs: Node / NodeList / KubeVirt / VM / ResourceSlice documents in JSON or YAML.
// Whatever the bytes, loading either fails with a message naming the input, or yields documents
// the checker runs on without crashing.
#include "checks/check_node.hpp"
#include "checks/documents.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hostprep;
  if (size > 64 * 1024) return 0;
  auto docs = parseDocuments(fuzz::asText(data, size), "fuzz.yaml");
  if (!docs) {
    FUZZ_CHECK(docs.error().message.find("fuzz.yaml") != std::string::npos);
    return 0;
  }
  CheckNodeInput in;
  in.nodes = *docs;
  (void)checkNodes(in);
  in.resourceSlices = *docs;  // the same documents as DRA ResourceSlices (read before the nodes)
  (void)checkNodes(in);
  return 0;
}

// Writes a fixture host tree (tests/fixtures/<scenario>: its files plus host.yaml expanded into
// sysfs/procfs) to a directory that outlives the program, for tests that run hostprep outside
// the Catch2 binary: the container image test mounts it read-only as the container's /host.
//   fixture_tree SCENARIO_DIR OUT_DIR
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tests/support/fixture.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fixture_tree SCENARIO_DIR OUT_DIR\n";
    return 2;
  }
  const fs::path scenario = argv[1];
  const fs::path out = argv[2];
  std::ifstream in(scenario / "host.yaml");
  if (!in) {
    std::cerr << "fixture_tree: cannot read " << (scenario / "host.yaml") << "\n";
    return 2;
  }
  std::stringstream yaml;
  yaml << in.rdbuf();
  fs::create_directories(out);
  for (const auto& e : fs::directory_iterator(scenario)) {
    if (e.path().filename() == "host.yaml") continue;
    fs::copy(e.path(), out / e.path().filename(),
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  hostprep::test::expandHostYaml(out, yaml.str());
  return 0;
}

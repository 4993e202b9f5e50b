// No shell, ever: the product sources (agent/, drivers/, checks/) call no system(), no popen(),
// and exec no /bin/sh. Comments are ignored; everything else counts.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace fs = std::filesystem;

namespace {

std::string stripComments(const std::string& src) {
  std::string out;
  for (size_t i = 0; i < src.size(); ++i) {
    if (src.compare(i, 2, "//") == 0) {
      while (i < src.size() && src[i] != '\n') ++i;
      out += '\n';
    } else if (src.compare(i, 2, "/*") == 0) {
      size_t end = src.find("*/", i + 2);
      i = end == std::string::npos ? src.size() : end + 1;
    } else {
      out += src[i];
    }
  }
  return out;
}

// What the file does that a shell-free program must not: empty when nothing.
std::vector<std::string> shellUses(const std::string& source) {
  static const std::regex kSystem(R"((^|[^A-Za-z0-9_])system\s*\()");
  static const std::regex kPopen(R"((^|[^A-Za-z0-9_])popen\s*\()");
  static const std::regex kExec(
      R"((^|[^A-Za-z0-9_])(execl|execlp|execle|execv|execvp|execvpe|execve|posix_spawnp?)\s*\()");
  static const std::regex kShell(R"("(/usr)?/bin/(ba|da|z)?sh")");
  std::vector<std::string> found;
  const std::string code = stripComments(source);
  if (std::regex_search(code, kSystem)) found.push_back("system(");
  if (std::regex_search(code, kPopen)) found.push_back("popen(");
  if (std::regex_search(code, kShell)) found.push_back("a shell path");
  if (std::regex_search(code, kExec) && std::regex_search(code, kShell))
    found.push_back("exec of a shell");
  return found;
}

}  // namespace

TEST_CASE("the scanner finds what it looks for", "[shell]") {
  CHECK(shellUses("int f() { return std::system(cmd.c_str()); }") ==
        std::vector<std::string>{"system("});
  CHECK(shellUses("FILE* p = popen(\"lspci\", \"r\");") == std::vector<std::string>{"popen("});
  CHECK(shellUses("execl(\"/bin/sh\", \"sh\", \"-c\", cmd, nullptr);") ==
        std::vector<std::string>{"a shell path", "exec of a shell"});
  CHECK(shellUses("std::filesystem::path p; // system(x) in a comment\nsubsystem(1);").empty());
  CHECK(shellUses("/* popen( */ int x;").empty());
}

TEST_CASE("no product source invokes a shell", "[shell]") {
  size_t files = 0;
  for (const char* dir : {"agent", "drivers", "checks"}) {
    const fs::path root = fs::path(HOSTPREP_SOURCE_DIR) / dir;
    if (!fs::exists(root)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".cc"))
        continue;
      std::ifstream f(e.path());
      std::stringstream ss;
      ss << f.rdbuf();
      ++files;
      INFO(e.path().string());
      CHECK(shellUses(ss.str()).empty());
    }
  }
  CHECK(files > 20);
}

#include "drivers/common/parsers.hpp"

#include <catch2/catch.hpp>

using namespace hostprep;

TEST_CASE("parseCmdline splits words, values and quotes like the kernel", "[parsers]") {
  auto c = parseCmdline(
      "BOOT_IMAGE=/vmlinuz ro  intel_iommu=on iommu=pt quiet "
      "dyndbg=\"file x.c +p\" iommu=off\n");
  CHECK(c.has("ro"));
  CHECK(c.has("quiet"));
  CHECK_FALSE(c.value("ro"));
  CHECK(c.value("intel_iommu") == std::optional<std::string>("on"));
  CHECK(c.value("iommu") == std::optional<std::string>("off"));  // last one wins
  CHECK(c.value("dyndbg") == std::optional<std::string>("file x.c +p"));
  CHECK_FALSE(c.has("amd_iommu"));
  CHECK(parseCmdline("").params.empty());
}

TEST_CASE("parseProcModules reads the first column and normalises dashes", "[parsers]") {
  auto m = parseProcModules(
      "nvidia 56823808 2 nvidia_modeset, Live 0x0000000000000000 (POE)\n"
      "snd_hda_intel 57344 0 - Live 0x0\n"
      "vfio-pci 16384 0 - Live 0x0\n\n garbage/../x 1 2\n");
  CHECK(m == std::set<std::string>{"nvidia", "snd_hda_intel", "vfio_pci"});
}

TEST_CASE("isValidModuleName rejects path tricks", "[parsers]") {
  CHECK(isValidModuleName("vfio_pci"));
  CHECK(isValidModuleName("vfio-pci"));
  CHECK_FALSE(isValidModuleName("../nvidia"));
  CHECK_FALSE(isValidModuleName("a/b"));
  CHECK_FALSE(isValidModuleName(""));
  CHECK_FALSE(isValidModuleName(std::string(65, 'a')));
  CHECK_FALSE(isValidModuleName(std::string("nv\0idia", 7)));
}

TEST_CASE("modules.alias lines of one prefix are the lines a full parse keeps", "[parsers]") {
  // The prefix at the start of the text, in the middle of another word, twice on a line, after
  // a tab or leading blanks, on a line of four words, on the last line without its newline.
  const std::string text =
      "alias vfio_pci:v1d*sv*sd*bc*sc*i* first_vfio\n"
      "alias pci:vfio_pci:x not_this\n"
      "# alias vfio_pci:v2* commented\n"
      "alias vfio_pci:v3* vfio_pci:v3-named\n"
      "alias\tvfio_pci:v4* tabbed_vfio\n"
      "   alias vfio_pci:v5* indented_vfio\n"
      "alias vfio_pci:v6* two words\n"
      "alias usb:v*p* usb_thing\n"
      "alias vfio_pci:v7* last_vfio";
  std::vector<std::pair<std::string, std::string>> filtered, scanned;
  for (const auto& a : parseModulesAlias(text)) {
    if (a.pattern.rfind("vfio_pci:", 0) == 0) filtered.emplace_back(a.pattern, a.module);
  }
  for (const auto& a : parseModulesAlias(text, "vfio_pci:"))
    scanned.emplace_back(a.pattern, a.module);
  CHECK(scanned == filtered);
  CHECK(scanned.size() == 5);
  CHECK(parseModulesAlias("", "vfio_pci:").empty());
  CHECK(parseModulesAlias("vfio_pci:", "vfio_pci:").empty());
}

TEST_CASE("bestVfioModule picks the alias with the fewest wildcards", "[parsers]") {
  const char* aliases =
      "alias pci:v000010DEd*sv*sd*bc03sc*i* nvidia\n"
      "alias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci\n"
      "alias vfio_pci:v000010DEd00002342sv*sd*bc*sc*i* nvgrace_gpu_vfio_pci\n"
      "alias vfio_pci:v000010DEd*sv*sd*bc*sc*i* some_other_vfio\n";
  const char* gh200 = "pci:v000010DEd00002342sv000010DEsd000016EBbc03sc02i00";
  const char* a10 = "pci:v000010DEd00002236sv000010DEsd00001482bc03sc02i00";
  const char* nic = "pci:v00008086d00001521sv00008086sd00000001bc02sc00i00";
  CHECK(bestVfioModule(aliases, gh200) == "nvgrace_gpu_vfio_pci");
  CHECK(bestVfioModule(aliases, a10) == "some_other_vfio");
  CHECK(bestVfioModule(aliases, nic) == "vfio_pci");
  CHECK(bestVfioModule("", a10) == "vfio_pci");
  CHECK(bestVfioModule(aliases, "not-a-modalias") == "vfio_pci");
}

TEST_CASE("vfioAliasLines keeps the lines bestVfioModule reads and answers the same", "[parsers]") {
  // Noise, a tie between two aliases with as many wildcards (the first wins, so order must stay),
  // "vfio_pci:" elsewhere than the pattern, a hostile module, a last line without its newline.
  const std::string text =
      "# Aliases extracted from modules themselves.\n"
      "alias pci:v000010DEd*sv*sd*bc03sc*i* nvidia\n"
      "alias vfio_pci:v000010DEd*sv*sd*bc*sc*i* first_vfio\n"
      "alias usb:v0BDAp8153d*dc*dsc*dp*ic*isc*ip*in* r8152\n"
      "alias vfio_pci:v000010DEd*sv*sd*bc*sc*i* second_vfio\n"
      "alias acpi*:PNP0A03:* not_vfio_pci:at_all\n"
      "alias vfio_pci:v000010DEd00002342sv*sd*bc*sc*i* ../../escape\n"
      "alias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci";
  CHECK(vfioAliasLines(text) ==
        "alias vfio_pci:v000010DEd*sv*sd*bc*sc*i* first_vfio\n"
        "alias vfio_pci:v000010DEd*sv*sd*bc*sc*i* second_vfio\n"
        "alias acpi*:PNP0A03:* not_vfio_pci:at_all\n"
        "alias vfio_pci:v000010DEd00002342sv*sd*bc*sc*i* ../../escape\n"
        "alias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci\n");
  CHECK(vfioAliasLines("").empty());
  CHECK(vfioAliasLines("alias pci:v*d*sv*sd*bc*sc*i* nvidia\n").empty());

  const std::vector<std::string> modaliases = {
      "pci:v000010DEd00002342sv000010DEsd000016EBbc03sc02i00",
      "pci:v000010DEd00002236sv000010DEsd00001482bc03sc02i00",
      "pci:v00008086d00001521sv00008086sd00000001bc02sc00i00", "not-a-modalias", ""};
  for (const auto& m : modaliases) {
    CAPTURE(m);
    CHECK(bestVfioModule(vfioAliasLines(text), m) == bestVfioModule(text, m));
  }
  CHECK(bestVfioModule(vfioAliasLines(text), modaliases[1]) == "first_vfio");

  // Texts drawn from those lines and a few more, in every order a small generator gives.
  const std::vector<std::string> pool = {
      "alias vfio_pci:v000010DEd00002342sv*sd*bc*sc*i* nvgrace_gpu_vfio_pci",
      "alias vfio_pci:v000010DEd*sv*sd*bc*sc*i* some_other_vfio",
      "alias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci",
      "alias vfio_pci:v00008086d00001521sv*sd*bc*sc*i* igb_vfio",
      "alias vfio_pci:v*d*sv*sd*bc02sc*i* net_vfio",
      "alias pci:v00008086d00001521sv*sd*bc*sc*i* igb",
      "alias vfio_pci:v000010DE* too many words here",
      "",
      "   ",
      "alias\tvfio_pci:v000010DEd00002236sv*sd*bc*sc*i*\ta10_vfio"};
  uint32_t seed = 12345;
  auto next = [&seed] {
    seed = seed * 1103515245u + 12345u;
    return (seed >> 16) & 0x7fff;
  };
  for (int round = 0; round < 300; ++round) {
    std::string t;
    const int lines = static_cast<int>(next() % 8);
    for (int i = 0; i < lines; ++i) {
      t += pool[next() % pool.size()];
      if (i + 1 < lines || next() % 2) t += '\n';
    }
    for (const auto& m : modaliases) {
      CAPTURE(t, m);
      CHECK(bestVfioModule(vfioAliasLines(t), m) == bestVfioModule(t, m));
    }
  }
}

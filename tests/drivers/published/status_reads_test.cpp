// What the status reads from the host beside the snapshot: the node's name, pci.ids, and the
// last-mode file (written back and read as prepare and the status use it: tests/agent/).
#include "drivers/published/status_reads.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

TEST_CASE("the node name: the kernel's hostname, else /etc/hostname, else empty", "[status]") {
  Fixture fx;
  RootHost host(fx.root());
  CHECK(readNodeName(host).empty());
  fx.write("etc/hostname", "gpu-a\n");
  CHECK(readNodeName(host) == "gpu-a");
  fx.write("proc/sys/kernel/hostname", "\n");  // empty: not a name
  CHECK(readNodeName(host) == "gpu-a");
  fx.write("proc/sys/kernel/hostname", "gpu-b\n");
  CHECK(readNodeName(host) == "gpu-b");
}

TEST_CASE("pci.ids: Debian's usr/share/misc, else hwdata's, else none", "[status]") {
  Fixture fx;
  RootHost host(fx.root());
  CHECK_FALSE(readPciIds(host));
  fx.write("usr/share/hwdata/pci.ids", "10de  NVIDIA (hwdata)\n");
  CHECK(readPciIds(host) == std::optional<std::string>("10de  NVIDIA (hwdata)\n"));
  fx.write("usr/share/misc/pci.ids", "10de  NVIDIA (misc)\n");
  CHECK(readPciIds(host) == std::optional<std::string>("10de  NVIDIA (misc)\n"));
}

TEST_CASE("the last prepare's split: written, read back, rewritten only when it differs",
          "[status][mixed]") {
  Fixture fx;
  RootHost host(fx.root());
  const LastMode split{Mode::kContainer,
                       {{*parseBdf("0000:41:00.0"), Mode::kVmPassthrough},
                        {*parseBdf("0000:42:00.0"), Mode::kContainer}}};
  REQUIRE(writeLastMode(host, split));
  auto back = readLastMode(host);
  REQUIRE(back);
  CHECK(*back == split);
  CHECK(formatLastMode(split) ==
        "container\n0000:41:00.0 vm-passthrough\n0000:42:00.0 container\n");
  // The same again is no rewrite (the same inode); a text that differs replaces the file.
  const ino_t before = fx.inode("run/hostprep/last-mode");
  REQUIRE(writeLastMode(host, split));
  CHECK(fx.inode("run/hostprep/last-mode") == before);
  fx.write("run/hostprep/last-mode", "container\n");
  REQUIRE(writeLastMode(host, split));
  CHECK(*readLastMode(host) == split);
  // Its GPUs as devices rules over its mode, for the status.
  const auto rules = back->value().rules();
  REQUIRE(rules.size() == 2);
  CHECK(rules[0].match.bdf == parseBdf("0000:41:00.0"));
  CHECK(rules[0].mode == Mode::kVmPassthrough);
  CHECK(rules[1].mode == Mode::kContainer);
}

TEST_CASE("a last-mode file of one line (as before splits) still reads, and none is no error",
          "[status][mixed]") {
  Fixture fx;
  RootHost host(fx.root());
  auto none = readLastMode(host);  // no file: no last prepare, no error
  REQUIRE(none);
  CHECK_FALSE(*none);
  fx.write("run/hostprep/last-mode", "vm-passthrough\n");
  auto m = readLastMode(host);
  REQUIRE(m);
  CHECK(*m == LastMode{Mode::kVmPassthrough, {}});
  CHECK((*m)->rules().empty());
}

TEST_CASE("a corrupt last-mode file is an error naming the line and the fix", "[status][mixed]") {
  auto err = [](std::string_view text) {
    auto m = parseLastMode(text, "/run/hostprep/last-mode");
    REQUIRE_FALSE(m);
    return m.error().describe();
  };
  const std::string fix =
      " (remove the file; the next 'hostprep prepare' or 'hostprep agent' writes it again)";
  CHECK(err("vm\n") == "/run/hostprep/last-mode: line 1: 'vm' is not a mode" + fix);
  CHECK(err("") == "/run/hostprep/last-mode: empty, no mode" + fix);
  CHECK(err("container\n0000:41:00.0\n") ==
        "/run/hostprep/last-mode: line 2: '0000:41:00.0' is not 'PCI-ADDRESS MODE'" + fix);
  CHECK(err("container\n\n0000:41:00.0 gpu\n") ==
        "/run/hostprep/last-mode: line 3: '0000:41:00.0 gpu' is not 'PCI-ADDRESS MODE'" + fix);
  CHECK(err("container\n0000:41:00.0 container\n0000:41:00.0 vm-vgpu\n") ==
        "/run/hostprep/last-mode: line 3: 0000:41:00.0 is listed twice" + fix);
  CHECK_THAT(err(std::string("container\n\0\xff\n", 13)),
             Catch::StartsWith("/run/hostprep/last-mode: line 2: "));

  Fixture fx;
  RootHost host(fx.root());
  fx.write("run/hostprep/last-mode", "container\nnot an address\n");
  auto m = readLastMode(host);
  REQUIRE_FALSE(m);
  CHECK_THAT(m.error().describe(), Catch::StartsWith("/run/hostprep/last-mode: line 2: "));
}

// The shared validators, table-driven, and the promise they keep: a value means the same on the
// command line and in the config file, and is refused there with the same words.
#include "agent/option_values.hpp"

#include <catch2/catch.hpp>

#include "agent/config.hpp"
#include "agent/options.hpp"

using namespace hostprep;

TEST_CASE("option values: what each validator takes and refuses", "[options][config]") {
  CHECK(parseModeValue("w", "vm-vgpu").value() == Mode::kVmVgpu);
  CHECK(parsePciIdValue("w", "10de:2236").value() == PciId{0x10de, 0x2236});
  CHECK(parseBdfValue("w", "0000:3b:00.1").value().str() == "0000:3b:00.1");
  CHECK(parseDriverValue("w", "nvidia-vgpu_x").value() == "nvidia-vgpu_x");
  struct Case {
    const char* text;
    bool ok;
  };
  const Case holders[] = {
      {"/dev/nvidia*", true},    {"/dev/nvidia[0-9]", true}, {"/dev/", true},
      {"/proc/*", false},        {"dev/nvidia*", false},     {"/dev/../etc/*", false},
      {"/dev/nvidia..*", false}, {"/dev/a\nb", false},       {"", false},
  };
  for (const auto& c : holders) {
    INFO(c.text);
    CHECK(static_cast<bool>(parseHolderNodes("w", c.text)) == c.ok);
  }
  CHECK_FALSE(parseHolderNodes("w", "/dev/" + std::string(251, 'n')));
  CHECK(parseHolderNodes("w", "/dev/" + std::string(250, 'n')));
  const Case names[] = {
      {"default", true}, {"A10-4Q", true}, {"a.b_c-d", true}, {"x", true},    {"-x-", false},
      {"x-", false},     {"_x", false},    {"", false},       {"a/b", false}, {"a b", false},
  };
  for (const auto& c : names) {
    INFO(c.text);
    CHECK(static_cast<bool>(parseVgpuConfigName("w", c.text)) == c.ok);
  }
  CHECK(parseVgpuConfigName("w", std::string(63, 'a')));
  CHECK_FALSE(parseVgpuConfigName("w", std::string(64, 'a')));
  const Case paths[] = {
      {"/run/hostprep/status.json", true}, {"run/status.json", false}, {"/run/", false},
      {"/var/../etc/passwd", false},       {"/a\tb", false},           {"", false},
  };
  for (const auto& c : paths) {
    INFO(c.text);
    CHECK(static_cast<bool>(parseHostFilePath("w", c.text)) == c.ok);
  }
}

TEST_CASE("option values: errors read '<where>: <value> is not a <thing> (<fix>)', exit 2",
          "[options][config]") {
  auto e = parseVgpuConfigName("--vgpu-config-name", "-x-").error();
  CHECK(e.describe() ==
        "--vgpu-config-name: '-x-' is not a config name (use a label value: at most 63 letters, "
        "digits, '-', '_' and '.', beginning and ending with a letter or digit)");
  CHECK(e.exit == Exit::kUsage);
  // Untrusted text is quoted: a control byte does not reach the terminal.
  CHECK(parseHolderNodes("holder-nodes", "/dev/\x1b[2J").error().message ==
        "holder-nodes: '/dev/\\x1b[2J' is not a /dev pattern");
}

TEST_CASE("the default holder glob follows the host driver", "[options][config]") {
  CHECK(holderGlob("", "nvidia") == "/dev/nvidia*");
  CHECK(holderGlob("", "standin") == "/dev/standin*");
  CHECK(holderGlob("/dev/nvidia0", "nvidia") == "/dev/nvidia0");
}

namespace {

// The error a value gets on prepare's command line and in the config file, with the place
// each names cut off: what is left must be the same words.
struct Both {
  std::string cli;
  std::string config;
};

Both refuse(const std::vector<std::string>& args, const std::string& yaml, const std::string& flag,
            const std::string& key) {
  Both out;
  auto c = parsePrepareOptions(args);
  if (!c) out.cli = c.error().describe();
  auto f = parseConfig(yaml, "config.yaml");
  if (!f) out.config = f.error().describe();
  REQUIRE(out.cli.rfind(flag + ": ", 0) == 0);
  REQUIRE(out.config.rfind("config.yaml: " + key + ": ", 0) == 0);
  out.cli.erase(0, flag.size());
  out.config.erase(0, ("config.yaml: " + key).size());
  return out;
}

}  // namespace

TEST_CASE("the command line and the config file refuse the same values with the same words",
          "[options][config]") {
  const std::vector<std::string> vgpu{"--mode", "vm-vgpu"};
  auto add = [](std::vector<std::string> a, std::initializer_list<std::string> more) {
    a.insert(a.end(), more);
    return a;
  };
  // The config name: the command line's label rule (the config file took '-x-').
  auto n = refuse(add(vgpu, {"--vgpu-config-name", "-x-"}), "vgpu:\n  config-name: -x-\n",
                  "--vgpu-config-name", "vgpu.config-name");
  CHECK(n.cli == n.config);
  // The holder glob: the config file's rule against '..' anywhere (the command line took it
  // inside a name), and the command line's length and control-byte rules.
  auto h = refuse(add(vgpu, {"--holder-nodes", "/dev/nvidia..*"}), "holder-nodes: /dev/nvidia..*\n",
                  "--holder-nodes", "holder-nodes");
  CHECK(h.cli == h.config);
  const std::string longGlob = "/dev/" + std::string(260, 'n');
  h = refuse(add(vgpu, {"--holder-nodes", longGlob}), "holder-nodes: " + longGlob + "\n",
             "--holder-nodes", "holder-nodes");
  CHECK(h.cli == h.config);
  h = refuse(add(vgpu, {"--holder-nodes", "/proc/*"}), "holder-nodes: /proc/*\n", "--holder-nodes",
             "holder-nodes");
  CHECK(h.cli == h.config);
  // The host driver, the mode.
  auto d = refuse(add(vgpu, {"--host-driver", "../evil"}), "host-driver: ../evil\n",
                  "--host-driver", "host-driver");
  CHECK(d.cli == d.config);
  auto m = refuse({"--mode", "vm"}, "mode: vm\n", "--mode", "mode");
  CHECK(m.cli == m.config);
  // Lists: the same problem; the command line's fix adds that its value is one comma list.
  auto g = refuse(add(vgpu, {"--gpu-ids", "nope"}), "selection:\n  gpu-ids: [nope]\n", "--gpu-ids",
                  "selection.gpu-ids[0]");
  CHECK(g.cli ==
        ": 'nope' is not a vendor:device id (write VVVV:DDDD in hex, e.g. 10de:2236, "
        "comma-separated)");
  CHECK(g.config == ": 'nope' is not a vendor:device id (write VVVV:DDDD in hex, e.g. 10de:2236)");
  auto b =
      refuse(add(vgpu, {"--devices", "3b:00.0/../x"}),
             "selection:\n  devices: [\"3b:00.0/../x\"]\n", "--devices", "selection.devices[0]");
  CHECK(b.cli == b.config.substr(0, b.config.size() - 1) + ", comma-separated)");
  // And the values both take, both take.
  for (const char* name : {"default", "A10-4Q", "a.b_c"}) {
    INFO(name);
    auto c = parsePrepareOptions(add(vgpu, {"--vgpu-config-name", name}));
    REQUIRE(c);
    CHECK(std::get<PrepareOptions>(*c).converge.vgpuConfigName == name);
    auto f = parseConfig("vgpu:\n  config-name: " + std::string(name) + "\n", "config.yaml");
    REQUIRE(f);
    CHECK(f->vgpuConfigName == name);
  }
}

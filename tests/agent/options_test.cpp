// The command line's parsers: typed options, defaults, --help, and usage errors (exit 2).
#include "agent/options.hpp"

#include <catch2/catch.hpp>

using namespace hostprep;

namespace {

template <class T>
T options(const Result<CommandLine<T>>& r) {
  REQUIRE(r);
  REQUIRE(std::holds_alternative<T>(*r));
  return std::get<T>(*r);
}

template <class T>
std::string help(const Result<CommandLine<T>>& r) {
  REQUIRE(r);
  REQUIRE(std::holds_alternative<HelpText>(*r));
  return std::get<HelpText>(*r).text;
}

}  // namespace

TEST_CASE("prepare's options become one ConvergeOptions", "[options]") {
  const auto o = options(parsePrepareOptions(
      {"--mode", "vm-passthrough", "--dry-run", "--devices", "0000:3b:00.0, 86:00.0", "--gpu-ids",
       "10de:2236", "--lock-timeout", "1.5", "--holder-nodes", "/dev/nvidia0"}));
  CHECK(o.converge.mode == Mode::kVmPassthrough);
  CHECK(o.converge.dryRun);
  CHECK_FALSE(o.converge.force);
  REQUIRE(o.converge.selection.devices.size() == 2);
  CHECK(o.converge.selection.devices[1].str() == "0000:86:00.0");
  CHECK(o.converge.selection.gpuIds == std::vector<PciId>{{0x10de, 0x2236}});
  CHECK(o.converge.selection.hostDriver == "nvidia");
  CHECK(o.converge.lockTimeout == std::chrono::milliseconds(1500));
  CHECK(o.converge.unbindTimeout == std::chrono::milliseconds(30'000));
  CHECK(o.converge.holderNodes == "/dev/nvidia0");
  CHECK(o.converge.vgpuConfigName == "default");
  // Without --holder-nodes the glob follows the host driver (agent/converge: holderGlob).
  const auto d = options(parsePrepareOptions({"--mode", "container", "--host-driver", "standin"}));
  CHECK(d.converge.holderNodes.empty());
  CHECK(holderGlob(d.converge.holderNodes, d.converge.selection.hostDriver) == "/dev/standin*");
  CHECK_FALSE(o.fromConfig);
  // Without --mode: the config applies; only the flags given override it.
  const auto c = options(parsePrepareOptions({"--devices", "0000:3b:00.0", "--dry-run"}));
  CHECK(c.fromConfig);
  CHECK(c.config.path == "/etc/hostprep/config.yaml");
  CHECK(c.selection.devices == std::optional<std::vector<Bdf>>({*parseBdf("0000:3b:00.0")}));
  CHECK_FALSE(c.selection.hostDriver);  // the default does not override the config's
  CHECK_FALSE(c.holderNodesGiven);
  CHECK_FALSE(c.vgpuConfigGiven);
}

TEST_CASE("every command answers --help with its own text", "[options]") {
  CHECK_THAT(help(parsePrepareOptions({"--help"})),
             Catch::StartsWith("usage: hostprep prepare [--mode M] [options]\n"));
  CHECK_THAT(help(parsePreflightOptions({"-h"})),
             Catch::EndsWith("Exit codes: 0 no check failed, 1 a check failed, 2 usage error.\n"));
  CHECK_THAT(help(parseStatusOptions({"--help"})), Catch::Contains("/etc/hostprep/config.yaml)"));
  CHECK_THAT(help(parseAgentOptions({"--help"})), Catch::Contains("--unbind-timeout arg (=30)"));
  CHECK_THAT(help(parsePersistOptions({"--help"})),
             Catch::Contains("the config under --root: its selection, and without"));
  CHECK_THAT(help(parseCheckNodeOptions({"--help"})), Catch::Contains("--operands"));
  // --help wins over a missing --mode.
  CHECK_THAT(help(parsePersistOptions({"--help"})), Catch::Contains("persist options:"));
}

TEST_CASE("usage errors name the option and exit 2", "[options]") {
  struct Case {
    Result<CommandLine<PrepareOptions>> r;
    const char* message;
  };
  auto prepare = [](std::vector<std::string> a) { return parsePrepareOptions(a); };
  const Case cases[] = {
      {prepare({"--mode", "container", "--config", "/etc/x.yaml"}),
       "--config: prepare applies a config only without --mode"},
      {prepare({"--mode", "container", "--lock-timeout", "0"}),
       "--lock-timeout: '0' is not a number of seconds above 0 and at most 86400 (a day)"},
      {prepare({"--mode", "container", "--unbind-timeout", "86400.5"}),
       "--unbind-timeout: '86400.5' is not a number of seconds above 0 and at most 86400 (a day)"},
      {prepare({"--mode", "container", "--unbind-timeout", "5x"}),
       "--unbind-timeout: '5x' is not a number of seconds above 0 and at most 86400 (a day)"},
      {prepare({"--mode", "container", "--lock-timeout", ""}),
       "--lock-timeout: '' is not a number of seconds above 0 and at most 86400 (a day)"},
      {prepare({"--mode", "container", "--lock-timeout", "nan"}),
       "--lock-timeout: 'nan' is not a number of seconds above 0 and at most 86400 (a day)"},
      {prepare({"--mode", "container", "--lock-timeout", "3\x1b[2J"}),
       "--lock-timeout: '3\\x1b[2J' is not a number of seconds above 0 and at most 86400 (a day)"},
      {prepare({"--mode", "container", "--lock-timeout", "1e999"}),
       "--lock-timeout: '1e999' is not a number of seconds above 0 and at most 86400 (a day)"},
      {prepare({"--mode", "container", "--vgpu-config-name", "a10"}),
       "--vgpu-config and --vgpu-config-name need --mode vm-vgpu"},
      {prepare({"--mode", "vm-vgpu", "--vgpu-config", ""}), "--vgpu-config: empty path"},
      {prepare({"--mode", "container", "--no-such"}), "unrecognised option '--no-such'"},
      {prepare({"--mode", "container", "0000:3b:00.0"}), "unexpected argument '0000:3b:00.0'"},
      {prepare({"vm-passthrough"}), "unexpected argument 'vm-passthrough'"},
  };
  for (const auto& c : cases) {
    INFO(c.message);
    REQUIRE_FALSE(c.r);
    CHECK(c.r.error().message == c.message);
    CHECK(c.r.error().exit == Exit::kUsage);
  }
  // A stray word says what it may have meant; none is ever ignored.
  auto bdf = parsePrepareOptions({"--mode", "vm-passthrough", "0000:3b:00.0"});
  REQUIRE_FALSE(bdf);
  CHECK(bdf.error().advice == "to select that GPU, pass --devices 0000:3b:00.0");
  auto mode = parsePreflightOptions({"container"});
  REQUIRE_FALSE(mode);
  CHECK(mode.error().advice == "to choose that mode, pass --mode container");
  // A relative path's example is itself made absolute, not a path of another kind.
  auto rel = parseAgentOptions({"--config", "etc/hostprep/config.yaml"});
  REQUIRE_FALSE(rel);
  CHECK(rel.error().message == "--config: 'etc/hostprep/config.yaml' is not an absolute file path");
  CHECK(rel.error().advice ==
        "write a file's absolute path under --root, without '..', e.g. /etc/hostprep/config.yaml");
  auto word = parseStatusOptions({"--write", "/run/x.json", "now"});
  REQUIRE_FALSE(word);
  CHECK(word.error().message == "unexpected argument 'now'");
  CHECK(word.error().advice == "see 'hostprep status --help'");
  // persist without --mode: the config's mode and rules (cmdPersist fails when it names none).
  CHECK_FALSE(options(parsePersistOptions({"--dry-run"})).mode);
  auto f = parsePreflightOptions({"--image", "--devices", "nope"});
  REQUIRE_FALSE(f);
  CHECK(f.error().message == "--devices: an image has no PCI devices");
}

TEST_CASE("status, agent and persist: the config file and the selection flags", "[options]") {
  const auto s = options(parseStatusOptions({"--write", "--host-driver", "standin"}));
  CHECK(s.write == std::optional<std::string>(""));
  CHECK(s.config.path == "/etc/hostprep/config.yaml");
  CHECK_FALSE(s.config.given);
  CHECK(s.selection.hostDriver == std::optional<std::string>("standin"));
  CHECK_FALSE(s.selection.gpuIds);
  SelectionOptions sel;
  sel.gpuIds = {{0x10de, 0x2236}};
  s.selection.applyTo(sel);
  CHECK(sel.hostDriver == "standin");
  CHECK(sel.gpuIds.size() == 1);  // not named on the command line: kept

  const auto a = options(parseAgentOptions({"--config", "/etc/other.yaml", "--once"}));
  CHECK(a.config.path == "/etc/other.yaml");
  CHECK(a.config.given);
  CHECK(a.once);
  CHECK_FALSE(a.mode);
  auto bad = parseAgentOptions({"--config", "etc/other.yaml"});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "--config: 'etc/other.yaml' is not an absolute file path");

  const auto p = options(parsePersistOptions({"--mode", "vm-passthrough", "--gpu-ids", "10de:1"}));
  CHECK(p.mode == Mode::kVmPassthrough);
  CHECK(p.selection.gpuIds == std::optional<std::vector<PciId>>({{0x10de, 0x0001}}));
}

TEST_CASE("check-node: files, standard input at most once", "[options]") {
  const auto o = options(parseCheckNodeOptions({"nodes.json", "--vms", "a.yaml", "b.yaml"}));
  CHECK(o.nodes == std::vector<std::string>{"nodes.json"});
  CHECK(o.vms == std::vector<std::string>{"a.yaml", "b.yaml"});
  CHECK(options(parseCheckNodeOptions({"--operands"})).operands);
  auto twice = parseCheckNodeOptions({"-", "--kubevirt", "-"});
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message == "'-' (standard input) is given 2 times");
}

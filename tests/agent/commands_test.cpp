// The skeleton every command shares: how it starts (--help, a usage error) and how it fails.
#include "agent/commands.hpp"

#include <catch2/catch.hpp>
#include <sstream>

using namespace hostprep;

namespace {

struct Streams {
  std::ostringstream out, err;
  Context ctx(std::string_view command, OutputFormat format = OutputFormat::kText) {
    GlobalOptions g;
    g.output = format;
    return Context{g, out, err, command, std::nullopt};
  }
};

}  // namespace

TEST_CASE("fail prints 'hostprep <command>: <error>' and returns its exit code", "[commands]") {
  Streams s;
  auto ctx = s.ctx("persist");
  CHECK(fail(ctx, sysError("cannot read x", ENOENT, "check the path")) == 1);
  CHECK(s.err.str() ==
        "hostprep persist: cannot read x: No such file or directory (check the path)\n");
  CHECK(s.out.str().empty());
}

TEST_CASE("with --output json, a command's error document goes to stdout", "[commands]") {
  Streams s;
  auto ctx = s.ctx("check-node", OutputFormat::kJson);
  ctx.errorDocument = nlohmann::json{{"schema", "hostprep.check-node/v1"}};
  CHECK(fail(ctx, usageError("x: bad", "fix it")) == 2);
  CHECK(nlohmann::json::parse(s.out.str()) ==
        nlohmann::json::parse(R"({"schema": "hostprep.check-node/v1", "ok": false,
                                  "error": {"message": "x: bad", "errno": 0, "advice": "fix it"}})"));
  CHECK(s.err.str() == "hostprep check-node: x: bad (fix it)\n");

  // A document given to fail replaces the command's (prepare's plan with its error).
  Streams t;
  auto prepare = t.ctx("prepare", OutputFormat::kJson);
  prepare.errorDocument = nlohmann::json::object();
  CHECK(fail(prepare, refusal("in use"), nlohmann::json{{"mode", "vm-vgpu"}}) == 3);
  auto j = nlohmann::json::parse(t.out.str());
  CHECK(j["mode"] == "vm-vgpu");
  CHECK(j["ok"] == false);
  CHECK(j["error"]["message"] == "in use");

  // Without an error document (status, preflight, ...) stdout stays empty even in JSON mode.
  Streams u;
  auto status = u.ctx("status", OutputFormat::kJson);
  CHECK(fail(status, usageError("bad")) == 2);
  CHECK(u.out.str().empty());
}

TEST_CASE("exitEarly: --help exits 0 with the text, a usage error exits 2, else go on",
          "[commands]") {
  Streams s;
  auto ctx = s.ctx("agent");
  int opt = 0;
  CHECK(exitEarly(ctx, Result<CommandLine<int>>(CommandLine<int>(HelpText{"usage: x\n"})), opt) ==
        std::optional<int>(0));
  CHECK(s.out.str() == "usage: x\n");
  CHECK(exitEarly(ctx, Result<CommandLine<int>>(usageError("--once: bad")), opt) ==
        std::optional<int>(2));
  CHECK(s.err.str() == "hostprep agent: --once: bad\n");
  CHECK(exitEarly(ctx, Result<CommandLine<int>>(CommandLine<int>(7)), opt) == std::nullopt);
  CHECK(opt == 7);
}

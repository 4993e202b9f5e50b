#include "agent/commands.hpp"

namespace hostprep {

int fail(Context& ctx, const Error& e, nlohmann::json document) {
  if (ctx.json() && document.is_object()) {
    document["ok"] = false;
    document["error"] = {{"message", e.message}, {"errno", e.err}, {"advice", e.advice}};
    ctx.out << document.dump(2) << "\n";
  }
  ctx.err << "hostprep " << ctx.command << ": " << e.describe() << "\n";
  return static_cast<int>(e.exit);
}

int fail(Context& ctx, const Error& e) { return fail(ctx, e, ctx.errorDocument.value_or(nullptr)); }

}  // namespace hostprep

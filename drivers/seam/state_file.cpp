#include "drivers/seam/state_file.hpp"

namespace hostprep {

Status writeStateFile(Host& host, std::string_view path, std::string_view text) {
  if (host.read(path).value_or("") == text) return {};  // as the last run left it
  if (!host.exists(kStateDir)) {
    if (auto s = host.makeDirs(kStateDir, 0755); !s) return s;
  }
  return host.writeFileAtomic(path, text, 0644);
}

}  // namespace hostprep

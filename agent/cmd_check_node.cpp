// hostprep check-node: read the cluster's documents, run the pure checker, print the findings.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "agent/commands.hpp"
#include "agent/local_file.hpp"
#include "agent/options.hpp"
#include "checks/check_node.hpp"
#include "checks/operands.hpp"

namespace hostprep {
namespace {

using nlohmann::json;

constexpr size_t kMaxInput = size_t{1} << 30;  // 1 GiB: far above any cluster dump

std::string displayName(const std::string& path) { return localFileName(path); }

// Reads a whole file (or standard input for "-"); a missing or unreadable file is bad input.
Result<std::string> readInput(const std::string& path) {
  auto text = readLocalFile(path, kMaxInput);
  if (!text && text.error().err == EFBIG)
    return usageError(displayName(path) + ": larger than 1 GiB", "split the input");
  return text;
}

Result<std::vector<Document>> load(const std::string& path) {
  auto text = readInput(path);
  if (!text) return text.error();
  return parseDocuments(*text, displayName(path));
}

// Asks the kernel to back a large buffer with transparent huge pages (madvise(2) MADV_HUGEPAGE;
// Documentation/admin-guide/mm/transhuge.rst): filling 68 MB then takes a few dozen page faults
// instead of some 17,000, which on a virtual machine cost more than copying the bytes. Only the
// whole 4 KiB pages inside the buffer are advised; a kernel without THP ignores it (EINVAL).
void adviseHugePages(char* data, size_t size) {
  constexpr uintptr_t kPage = 4096;
  const auto begin = (reinterpret_cast<uintptr_t>(data) + kPage - 1) & ~(kPage - 1);
  const auto end = (reinterpret_cast<uintptr_t>(data) + size) & ~(kPage - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// A node input: a regular file is read in place into a buffer reserved once from its size, with
// room for simdjson's padding, so a NodeList of 68 MB is held once, not copied while it grows.
// Anything else, or a file that fails on the way, is read by readInput (which words the error).
Result<std::vector<Document>> loadNodes(const std::string& path) {
  struct stat st {};
  std::string text;
  bool read = false;
  if (path != "-" && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<size_t>(st.st_size) <= kMaxInput) {
    if (int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
      const auto size = static_cast<size_t>(st.st_size);
      text.reserve(size + kJsonPadding);
      adviseHugePages(text.data(), text.capacity());
      text.resize(size);  // read in place; what the file grew by since stat() is appended
      size_t have = 0;
      char buf[1 << 16];
      for (;;) {
        const bool inPlace = have < size;
        ssize_t n =
            inPlace ? ::read(fd, text.data() + have, size - have) : ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || have + static_cast<size_t>(n) > kMaxInput) {
          read = n == 0;
          break;
        }
        if (!inPlace) text.append(buf, static_cast<size_t>(n));
        have += static_cast<size_t>(n);
      }
      text.resize(have);
      ::close(fd);
    }
  }
  if (!read) {
    auto again = readInput(path);
    if (!again) return again.error();
    text = std::move(*again);
  }
  return parseNodeDocuments(std::move(text), displayName(path));
}

// Exactly one document (ClusterPolicy, KubeVirt).
Result<std::optional<Document>> loadOne(const std::optional<std::string>& path,
                                        const char* option) {
  if (!path) return std::optional<Document>();
  auto docs = load(*path);
  if (!docs) return docs.error();
  if (docs->size() != 1) {
    return usageError("--" + std::string(option) + ": " + displayName(*path) + " holds " +
                          std::to_string(docs->size()) + " documents, expected one",
                      "pass the single object (kubectl get ... -o json)");
  }
  return std::optional<Document>(std::move(docs->front()));
}

json operandsJson() {
  auto need = [](Need n) { return std::string(toString(n)); };
  json a = json::array();
  for (const auto& o : operandTable()) {
    a.push_back({{"operand", std::string(o.name)},
                 {"label", deployLabel(o)},
                 {"container", need(o.container)},
                 {"vm-passthrough", need(o.passthrough)},
                 {"vm-vgpu", need(o.vgpu)},
                 {"what", std::string(o.what)}});
  }
  return a;
}

}  // namespace

int cmdCheckNode(Context& ctx, const std::vector<std::string>& args) {
  ctx.errorDocument = json{{"schema", "hostprep.check-node/v1"}};
  CheckNodeOptions opt;
  if (auto rc = exitEarly(ctx, parseCheckNodeOptions(args), opt)) return *rc;
  if (opt.operands) {
    if (ctx.json()) {
      ctx.out << operandsJson().dump(2) << "\n";
    } else {
      ctx.out << formatOperandsTable();
    }
    return 0;
  }

  // 1. Read and parse every input; the first unreadable or malformed one stops the run (exit 2).
  //    A file that holds no document is a mistake (a command that failed into a redirect): no
  //    kubectl or hostprep output is empty (an empty list is still a List).
  CheckNodeInput in;
  auto empty = [](const std::string& option, const std::string& f, const char* advice) {
    return usageError(option + displayName(f) + " holds no document", advice);
  };
  for (const auto& f : opt.nodes) {
    auto docs = loadNodes(f);
    if (!docs) return fail(ctx, docs.error());
    if (docs->empty()) return fail(ctx, empty("", f, "pass 'kubectl get nodes -o json'"));
    for (auto& d : *docs) in.nodes.push_back(std::move(d));
  }
  struct Many {
    const std::vector<std::string>* files;
    std::vector<Document>* into;
    const char* option;
    const char* advice;
  };
  for (const Many& m :
       {Many{&opt.vms, &in.workloads, "--vms: ", "pass 'kubectl get vms,vmis,pods -A -o json'"},
        Many{&opt.status, &in.statuses,
             "--status: ", "pass what 'hostprep status --output json' printed on the node"},
        Many{&opt.resourceSlices, &in.resourceSlices,
             "--resource-slices: ", "pass 'kubectl get resourceslices -o json'"}}) {
    for (const auto& f : *m.files) {
      auto docs = load(f);
      if (!docs) return fail(ctx, docs.error());
      if (docs->empty()) return fail(ctx, empty(m.option, f, m.advice));
      for (auto& d : *docs) m.into->push_back(std::move(d));
    }
  }
  auto policy = loadOne(opt.clusterPolicy, "cluster-policy");
  if (!policy) return fail(ctx, policy.error());
  in.clusterPolicy = std::move(*policy);
  auto kubevirt = loadOne(opt.kubevirt, "kubevirt");
  if (!kubevirt) return fail(ctx, kubevirt.error());
  in.kubevirt = std::move(*kubevirt);
  if (opt.vgpuConfig) {
    auto text = readInput(*opt.vgpuConfig);
    if (!text) return fail(ctx, text.error());
    auto configs = readVgpuConfigs(*text, displayName(*opt.vgpuConfig));
    if (!configs) {
      Error e = configs.error();
      e.message = "--vgpu-config: " + e.message;
      return fail(ctx, e);
    }
    in.vgpuConfigs = std::move(*configs);
  }

  // 2. Check.
  auto report = checkNodes(in);
  if (!report) return fail(ctx, report.error());

  // 3. Print; the exit code says whether any finding is an error.
  if (ctx.json()) {
    ctx.out << reportJson(*report).dump(2) << "\n";
  } else {
    ctx.out << reportText(*report);
  }
  return report->exitCode();
}

}  // namespace hostprep

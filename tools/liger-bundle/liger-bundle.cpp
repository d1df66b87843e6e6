//===- liger-bundle.cpp - check a kernel bundle as the runtime opens it ---===//
//
// `liger-bundle DIR...` opens each bundle as the runtime does (every check
// of Bundle::open: its files, the manifest, each cubin's digest, structure
// and kernels against the manifest) and prints, per kernel, what its cubin
// confirmed: the arguments a launch passes, the block, the shared memory.
// It exits 1 with the runtime's message at the first bundle refused. It
// needs no GPU and no MLIR: it is built with the runtime, for the machines
// bundles are carried to.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/Cubin.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

using namespace liger::runtime;

namespace {
int fail(const std::string &what) {
  std::fprintf(stderr, "liger-bundle: %s\n", what.c_str());
  return 1;
}

/// "1 kernel", "5 kernels".
std::string kernels(size_t n) {
  return std::to_string(n) + (n == 1 ? " kernel" : " kernels");
}

std::string triple(const int64_t *v) {
  return "[" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " +
         std::to_string(v[2]) + "]";
}

/// One line per entry point (kernel, prepare and finish kernels, narrow
/// variant) of `module`, from its cubin `cubin`, which Bundle::open has
/// compared with it.
void describe(const ModuleSpec &module, const Cubin &cubin) {
  std::printf("  %s: %s, %s\n", module.cubinFile.c_str(),
              module.arch.c_str(), kernels(module.kernels.size()).c_str());
  for (const KernelSpec &k : module.kernels) {
    EntryPoint entries[kNumLaunchStages];
    for (int e = 0, n = k.entryPoints(entries); e < n; ++e) {
      const std::string &name = *entries[e].name;
      const CubinKernel &c = *cubin.find(name);
      const int64_t *block = entries[e].block;
      int64_t dynamic = entries[e].dynamicSharedMemoryBytes;
      std::printf("    %s: %zu arguments, %u bytes; block %s (%s); shared "
                  "memory %lld dynamic + %llu static\n",
                  name.c_str(), c.paramSizes.size(), c.paramBytes,
                  triple(block).c_str(),
                  c.requiredBlock[0] ? ".reqntid"
                  : c.maxBlock[0]    ? ".maxntid"
                                     : "not in the cubin",
                  static_cast<long long>(dynamic),
                  static_cast<unsigned long long>(c.staticSharedBytes));
    }
  }
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || std::string(argv[1]) == "--help")
    return fail("usage: liger-bundle DIR... (checks each bundle as the "
                "runtime opens it)");
  for (int i = 1; i < argc; ++i) {
    std::unique_ptr<Bundle> bundle;
    Status s = Bundle::open(argv[i], &bundle);
    if (!s.isOk())
      return fail(s.message());
    std::printf("%s: %s\n", argv[i], kernels(bundle->kernelCount()).c_str());
    for (const ModuleSpec &module : bundle->manifest().modules) {
      // Read again: Bundle::open checked this file and keeps no Cubin.
      std::ifstream in(std::string(argv[i]) + "/" + module.cubinFile,
                       std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
      Cubin cubin;
      s = readCubin(bytes.data(), bytes.size(), module.cubinFile, &cubin);
      if (!s.isOk() ||
          !(s = checkCubin(module, cubin, module.cubinFile)).isOk())
        return fail(s.message()); // changed since Bundle::open read it
      describe(module, cubin);
    }
  }
  return 0;
}

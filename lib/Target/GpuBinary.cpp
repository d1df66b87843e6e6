//===- GpuBinary.cpp - gpu.module -> PTX and cubin, kernel bundles --------===//
//
// The one translation unit of the target that includes the NVVM and GPU
// conversion headers.
//
//===----------------------------------------------------------------------===//

#include "liger/Target/GpuBinary.h"

#include "liger/Target/GpuTarget.h"

#include "liger/Dialect/Liger/IR/LigerKernelAttrs.h"
#include "liger/Runtime/Sha256.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::liger;

LogicalResult mlir::liger::lowerGpuModulesToNVVM(ModuleOp module) {
  PassManager pm(module.getContext());
  OpPassManager &gpu = pm.nest<gpu::GPUModuleOp>();
  // The matmul kernels' cp.async and ldmatrix (nvgpu) first.
  gpu.addPass(createConvertNVGPUToNVVMPass());
  gpu.addPass(createSCFToControlFlowPass());
  gpu.addPass(createConvertGpuOpsToNVVMOps());
  // NVVM ops emitted as inline PTX (the wgmma kernels' mbarrier waits and
  // wgmma.mma_async).
  gpu.addPass(createConvertNVVMToLLVMPass());
  gpu.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(module)))
    return failure();
  // A kernel that requires its block size (nvvm.reqntid, set by the
  // lowering) states no maximum too: the GPU lowering derives nvvm.maxntid
  // from the known block size, and ptxas refuses .maxntid with .reqntid.
  module.walk([](LLVM::LLVMFuncOp func) {
    if (func->hasAttr(NVVM::NVVMDialect::getReqntidAttrName()))
      func->removeAttr(NVVM::NVVMDialect::getMaxntidAttrName());
  });
  // TMA descriptors are passed by value in parameter space
  // (__grid_constant__): the last `liger.tensor_maps` arguments of a kernel.
  // gpu.func cannot carry these argument attributes through the lowering.
  module.walk([](LLVM::LLVMFuncOp func) {
    auto count = func->getAttrOfType<IntegerAttr>("liger.tensor_maps");
    if (!count)
      return;
    MLIRContext *ctx = func.getContext();
    Builder b(ctx);
    Type descriptor = LLVM::LLVMArrayType::get(b.getI64Type(), 16);
    unsigned n = func.getNumArguments();
    for (unsigned i = n - count.getInt(); i < n; ++i) {
      func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                      TypeAttr::get(descriptor));
      func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                      b.getI64IntegerAttr(64));
      func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                      b.getUnitAttr());
    }
  });
  // The dynamic shared memory fix (see the header).
  module.walk([](LLVM::GlobalOp global) {
    if (!global.getSymName().starts_with("__dynamic_shmem__"))
      return;
    global.setLinkage(LLVM::Linkage::External);
    global.setAlignment(1024);
  });
  return success();
}

/// The CUDA toolkit to use, or an error naming where ptxas was looked for.
static FailureOr<std::string> findToolkit(ModuleOp module,
                                          StringRef requested) {
  SmallVector<std::string> candidates;
  if (!requested.empty())
    candidates.push_back(requested.str());
  if (const char *home = std::getenv("CUDA_HOME"))
    candidates.push_back(home);
  candidates.push_back("/usr/local/cuda");
  for (const std::string &dir : candidates) {
    SmallString<256> ptxas(dir);
    llvm::sys::path::append(ptxas, "bin", "ptxas");
    if (llvm::sys::fs::can_execute(ptxas))
      return dir;
  }
  std::string where;
  for (const std::string &dir : candidates)
    where += (where.empty() ? "" : ", ") + dir + "/bin/ptxas";
  return module.emitError()
         << "cannot find ptxas (looked for " << where
         << "); install the CUDA toolkit or pass --cuda-toolkit=<dir>";
}

FailureOr<std::vector<GpuBinary>>
mlir::liger::serializeGpuModules(ModuleOp module, StringRef toolkitPath) {
  FailureOr<std::string> toolkit = findToolkit(module, toolkitPath);
  if (failed(toolkit))
    return failure();
  std::vector<GpuBinary> binaries;
  WalkResult walk = module.walk([&](gpu::GPUModuleOp gm) {
    ArrayAttr targets = gm.getTargetsAttr();
    auto nvvm = targets && targets.size() == 1
                    ? dyn_cast<NVVM::NVVMTargetAttr>(targets[0])
                    : NVVM::NVVMTargetAttr();
    if (!nvvm) {
      gm.emitError("expects exactly one #nvvm.target");
      return WalkResult::interrupt();
    }
    // LLVM aborts on a malformed target: check it first.
    std::string error;
    if (!validateGpuTarget(nvvm.getChip(), nvvm.getFeatures(), error)) {
      gm.emitError() << error;
      return WalkResult::interrupt();
    }
    GpuBinary binary;
    binary.moduleName = gm.getName().str();
    binary.chip = nvvm.getChip().str();
    // (getCmdOptions reads the flags without checking there are any.)
    if (std::optional<NamedAttribute> flags =
            nvvm.hasCmdOptions() ? nvvm.getCmdOptions() : std::nullopt) {
      if (auto list = dyn_cast<ArrayAttr>(flags->getValue())) {
        for (auto flag : list.getAsValueRange<StringAttr>())
          binary.ptxasOptions.push_back(flag.str());
      } else if (auto text = dyn_cast<StringAttr>(flags->getValue())) {
        SmallVector<StringRef> words;
        text.getValue().split(words, ' ', -1, /*KeepEmpty=*/false);
        for (StringRef word : words)
          binary.ptxasOptions.push_back(word.str());
      }
    }
    // The target's O where the flags give no level (as the NVVM target's
    // serialization does).
    if (llvm::none_of(binary.ptxasOptions, [](StringRef option) {
          return option.starts_with("-O") || option.starts_with("--opt-level");
        }))
      binary.ptxasOptions.insert(binary.ptxasOptions.begin(),
                                 "-O" + std::to_string(nvvm.getO()));
    // The options keep a function_ref to the callback: it must outlive them
    // (a lambda written in the call would be gone once they are built).
    auto keepPtx = [&](StringRef isa) { binary.ptx = isa.str(); };
    gpu::TargetOptions options(
        *toolkit, /*librariesToLink=*/{}, /*cmdOptions=*/"",
        /*elfSection=*/"", gpu::CompilationTarget::Binary,
        /*getSymbolTableCallback=*/{}, /*initialLlvmIRCallback=*/{},
        /*linkedLlvmIRCallback=*/{}, /*optimizedLlvmIRCallback=*/{},
        /*isaCallback=*/keepPtx);
    auto target = cast<gpu::TargetAttrInterface>(nvvm);
    std::optional<SmallVector<char, 0>> object =
        target.serializeToObject(gm, options);
    if (!object) {
      gm.emitError("serialization to a cubin failed (ptxas from ")
          << *toolkit << "/bin)";
      return WalkResult::interrupt();
    }
    binary.cubin.assign(object->begin(), object->end());
    binaries.push_back(std::move(binary));
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return binaries;
}

static LogicalResult writeFile(ModuleOp module, StringRef path,
                               StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return module.emitError()
           << "cannot write " << path << ": " << ec.message();
  out << bytes;
  return success();
}

FailureOr<llvm::StringMap<int64_t>>
mlir::liger::measureSpills(ModuleOp module, const GpuBinary &binary,
                           ArrayRef<std::string> kernels,
                           StringRef toolkitPath) {
  llvm::StringMap<int64_t> spilled;
  if (kernels.empty())
    return spilled;
  FailureOr<std::string> toolkit = findToolkit(module, toolkitPath);
  if (failed(toolkit))
    return failure();
  SmallString<256> ptxas(*toolkit);
  llvm::sys::path::append(ptxas, "bin", "ptxas");
  // The PTX in, the cubin and ptxas's report out, each a temporary file.
  SmallString<128> paths[3];
  std::optional<llvm::FileRemover> removers[3];
  const char *suffixes[3] = {"ptx", "cubin", "log"};
  for (int i = 0; i < 3; ++i) {
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
            "liger-spills", suffixes[i], paths[i]))
      return module.emitError()
             << "cannot create a temporary file for ptxas: " << ec.message();
    removers[i].emplace(paths[i]);
  }
  if (failed(writeFile(module, paths[0], binary.ptx)))
    return failure();
  // The serialization's options (its cubin embeds them: "-O 3 -arch
  // <chip>"), with -v and one -e per kernel.
  SmallVector<std::string> args = {ptxas.str().str()};
  llvm::append_range(args, binary.ptxasOptions);
  for (const char *arg : {"-arch", binary.chip.c_str(), "-v", "-o"})
    args.push_back(arg);
  args.push_back(paths[1].str().str());
  for (const std::string &kernel : kernels) {
    args.push_back("-e");
    args.push_back(kernel);
  }
  args.push_back(paths[0].str().str());
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::optional<StringRef> redirects[3] = {StringRef(), paths[2].str(),
                                           paths[2].str()};
  std::string error;
  int rc =
      llvm::sys::ExecuteAndWait(ptxas, argRefs, std::nullopt, redirects,
                                /*SecondsToWait=*/0, /*MemoryLimit=*/0, &error);
  auto log = llvm::MemoryBuffer::getFile(paths[2]);
  StringRef report = log ? (*log)->getBuffer() : StringRef();
  if (rc != 0)
    return module.emitError()
           << "ptxas from " << *toolkit << "/bin failed checking "
           << kernels.size() << " kernel(s) for spills"
           << (error.empty() ? "" : ": " + error) << "\n"
           << report;
  // "ptxas info    : Function properties for NAME", then
  // "    N bytes stack frame, S bytes spill stores, L bytes spill loads".
  SmallVector<StringRef> lines;
  report.split(lines, '\n');
  StringRef function;
  for (StringRef line : lines) {
    constexpr StringLiteral kProperties = "Function properties for ";
    if (size_t at = line.find(kProperties); at != StringRef::npos) {
      function = line.drop_front(at + kProperties.size()).trim();
      continue;
    }
    size_t stores = line.find(" bytes spill stores");
    size_t loads = line.find(" bytes spill loads");
    if (function.empty() || stores == StringRef::npos ||
        loads == StringRef::npos)
      continue;
    // The number before " bytes spill stores" (loads); -1 where there is
    // none, which fails the check rather than reading as no spill.
    auto lastNumber = [](StringRef text) -> int64_t {
      int64_t n = 0;
      text = text.rtrim();
      if (text.substr(text.find_last_of(' ') + 1).getAsInteger(10, n))
        return -1;
      return n;
    };
    int64_t storeBytes = lastNumber(line.take_front(stores));
    int64_t loadBytes = lastNumber(line.take_front(loads));
    if (storeBytes < 0 || loadBytes < 0)
      return module.emitError() << "cannot read ptxas's spill report of "
                                << function << ": " << line.trim();
    spilled[function] = storeBytes + loadBytes;
    function = StringRef();
  }
  for (const std::string &kernel : kernels)
    if (!spilled.count(kernel))
      return module.emitError() << "ptxas did not report on kernel " << kernel
                                << " when checking it for spills:\n"
                                << report;
  return spilled;
}

//===----------------------------------------------------------------------===//
// Bundles
//===----------------------------------------------------------------------===//

namespace rt = ::liger::runtime;

LogicalResult mlir::liger::writeBundle(ModuleOp module,
                                       ArrayRef<GpuBinary> binaries,
                                       StringRef dir, StringRef source,
                                       ArrayRef<rt::LossPlan> plans) {
  // The function of each kernel: the one holding the group that names it.
  llvm::StringMap<std::string> functionOf;
  module.walk([&](Operation *op) {
    auto ref = op->getAttrOfType<SymbolRefAttr>("liger.kernel");
    if (auto fn = ref ? op->getParentOfType<FunctionOpInterface>()
                      : FunctionOpInterface())
      functionOf[ref.getLeafReference().getValue()] = fn.getName().str();
  });
  rt::Manifest manifest;
  manifest.source = source.str();
  manifest.plans.assign(plans.begin(), plans.end());
  for (const GpuBinary &binary : binaries) {
    std::string stem = binary.moduleName + "." + binary.chip;
    rt::ModuleSpec &spec = manifest.modules.emplace_back();
    spec.name = binary.moduleName;
    spec.arch = binary.chip;
    spec.cubinFile = stem + ".cubin";
    spec.cubinSha256 = rt::sha256Hex(binary.cubin.data(), binary.cubin.size());
    spec.ptxFile = stem + ".ptx";
    auto gm = module.lookupSymbol<gpu::GPUModuleOp>(binary.moduleName);
    for (Operation &op : gm.getBody()->getOperations()) {
      auto info = op.getAttrOfType<KernelInfoAttr>(KernelInfoAttr::getAttrName());
      if (!info)
        continue;
      StringRef name = cast<SymbolOpInterface>(op).getName();
      auto function = functionOf.find(name);
      if (function == functionOf.end())
        return op.emitError() << "no fusion group names kernel @" << name
                              << " (liger.kernel): its function is unknown";
      spec.kernels.push_back(info.toKernelSpec(name, function->second));
    }
  }
  // Verified as the runtime verifies it, before anything is written.
  std::string text;
  rt::Status status = rt::writeManifest(manifest, dir.str(), &text);
  if (!status.isOk())
    return module.emitError() << "the bundle's manifest breaks the kernel "
                                 "ABI: "
                              << status.message();
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return module.emitError()
           << "cannot create bundle directory " << dir << ": " << ec.message();
  for (const GpuBinary &binary : binaries) {
    SmallString<256> cubinPath(dir), ptxPath(dir);
    llvm::sys::path::append(cubinPath,
                            binary.moduleName + "." + binary.chip + ".cubin");
    llvm::sys::path::append(ptxPath,
                            binary.moduleName + "." + binary.chip + ".ptx");
    if (failed(
            writeFile(module, cubinPath,
                      StringRef(binary.cubin.data(), binary.cubin.size()))) ||
        failed(writeFile(module, ptxPath, binary.ptx)))
      return failure();
  }
  SmallString<256> manifestPath(dir);
  llvm::sys::path::append(manifestPath, "manifest.json");
  return writeFile(module, manifestPath, text);
}

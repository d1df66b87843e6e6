//===- GpuBinary.cpp - gpu.module -> PTX and cubin, kernel bundles --------===//
//
// The one translation unit of the target that includes the NVVM and GPU
// conversion headers.
//
//===----------------------------------------------------------------------===//

#include "liger/Target/GpuBinary.h"

#include "liger/Target/GpuTarget.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::liger;

/// The manifest's grid: [symbol, 1, 1] for one CTA per row, token or
/// workspace row, else the template's three entries (numbers as numbers).
static llvm::json::Array gridOf(DictionaryAttr info) {
  if (auto symbol = info.getAs<StringAttr>("grid"))
    return llvm::json::Array{symbol.getValue(), 1, 1};
  llvm::json::Array grid;
  for (Attribute a : info.getAs<ArrayAttr>("grid")) {
    StringRef text = cast<StringAttr>(a).getValue();
    int64_t value = 0;
    if (!text.getAsInteger(10, value))
      grid.push_back(value);
    else
      grid.push_back(text);
  }
  return grid;
}

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

static std::string dtypeName(Type type) {
  if (type.isBF16())
    return "bf16";
  if (type.isF16())
    return "f16";
  if (type.isF32())
    return "f32";
  if (type.isSignlessInteger(64))
    return "i64";
  if (type.isSignlessInteger(32))
    return "i32";
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
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

LogicalResult mlir::liger::writeBundle(ModuleOp module,
                                       ArrayRef<GpuBinary> binaries,
                                       StringRef dir, StringRef source,
                                       llvm::json::Array plans) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return module.emitError()
           << "cannot create bundle directory " << dir << ": " << ec.message();
  llvm::json::Array modules;
  for (const GpuBinary &binary : binaries) {
    std::string stem = binary.moduleName + "." + binary.chip;
    SmallString<256> cubinPath(dir), ptxPath(dir);
    llvm::sys::path::append(cubinPath, stem + ".cubin");
    llvm::sys::path::append(ptxPath, stem + ".ptx");
    if (failed(
            writeFile(module, cubinPath,
                      StringRef(binary.cubin.data(), binary.cubin.size()))) ||
        failed(writeFile(module, ptxPath, binary.ptx)))
      return failure();
    auto gm = module.lookupSymbol<gpu::GPUModuleOp>(binary.moduleName);
    llvm::json::Array kernels;
    for (Operation &op : gm.getBody()->getOperations()) {
      auto info = op.getAttrOfType<DictionaryAttr>("liger.kernel_info");
      if (!info)
        continue;
      StringRef name = cast<SymbolOpInterface>(op).getName();
      auto integer = [&](StringRef key) {
        return info.getAs<IntegerAttr>(key).getInt();
      };
      llvm::json::Array params;
      for (Attribute a : info.getAs<ArrayAttr>("params")) {
        auto p = cast<DictionaryAttr>(a);
        StringRef kind = p.getAs<StringAttr>("kind").getValue();
        int64_t length = p.getAs<IntegerAttr>("length").getInt();
        llvm::json::Array shape;
        int64_t heads = p.getAs<IntegerAttr>("heads").getInt();
        if (kind == "heads")
          shape = llvm::json::Array{"batch", heads, "seq", length};
        else if (kind == "tables" && heads == 1)
          shape = llvm::json::Array{1, "seq", length};
        else if (kind == "tables")
          shape = llvm::json::Array{"table_batch", "seq", length};
        else if (kind == "rows")
          shape = llvm::json::Array{"rows", length};
        else if (kind == "row_scalars")
          shape = llvm::json::Array{"rows"};
        else if (kind == "feature")
          shape = llvm::json::Array{length};
        else if (kind == "partials")
          shape = llvm::json::Array{"ctas", length};
        else if (kind == "matrix")
          shape = llvm::json::Array{heads, length};
        params.push_back(llvm::json::Object{
            {"name", p.getAs<StringAttr>("name").getValue()},
            {"role", p.getAs<StringAttr>("role").getValue()},
            {"kind", kind},
            {"dtype", dtypeName(p.getAs<TypeAttr>("dtype").getValue())},
            {"shape", std::move(shape)},
        });
      }
      llvm::json::Object kernel{
          {"name", name},
          {"template", info.getAs<StringAttr>("template").getValue()},
          {"ops", info.getAs<StringAttr>("ops").getValue()},
          {"abi", "memref-descriptor"},
          {"grid", gridOf(info)},
          {"block", llvm::json::Array{integer("threads"), 1, 1}},
          {"dynamic_shared_memory_bytes", integer("shared_memory_bytes")},
          {"vector_width", integer("vector_width")},
          {"alignment_bytes", 16},
          {"params", std::move(params)},
      };
      // TMA descriptors the launcher encodes from tensor parameters and
      // passes by value after them.
      if (auto maps = info.getAs<ArrayAttr>("tensor_maps")) {
        llvm::json::Array list;
        for (Attribute a : maps) {
          auto m = cast<DictionaryAttr>(a);
          ArrayRef<int64_t> box =
              cast<DenseI64ArrayAttr>(m.get("box")).asArrayRef();
          auto index = m.getAs<IntegerAttr>("param").getInt();
          list.push_back(llvm::json::Object{
              {"param", cast<DictionaryAttr>(
                            info.getAs<ArrayAttr>("params")[index])
                            .getAs<StringAttr>("name")
                            .getValue()},
              {"box", llvm::json::Array{box[0], box[1]}},
              {"swizzle", m.getAs<IntegerAttr>("swizzle").getInt()},
              {"oob", "zero"},
          });
        }
        kernel["tensor_maps"] = std::move(list);
      }
      // A group reducing across rows: the finishing kernel, launched after
      // this one with the same arguments.
      if (auto finish = info.getAs<DictionaryAttr>("finish")) {
        auto get = [&](StringRef key) {
          return finish.getAs<IntegerAttr>(key).getInt();
        };
        kernel["ctas_per_sm"] = integer("ctas_per_sm");
        kernel["finish"] = llvm::json::Object{
            {"name", finish.getAs<StringAttr>("name").getValue()},
            {"grid", llvm::json::Array{get("grid"), 1, 1}},
            {"block", llvm::json::Array{get("threads"), 1, 1}},
            {"dynamic_shared_memory_bytes", get("shared_memory_bytes")},
        };
      }
      kernels.push_back(std::move(kernel));
    }
    modules.push_back(llvm::json::Object{
        {"name", binary.moduleName},
        {"arch", binary.chip},
        {"cubin", stem + ".cubin"},
        {"ptx", stem + ".ptx"},
        {"kernels", std::move(kernels)},
    });
  }
  llvm::json::Object manifest{
      {"format", "liger-bundle"},
      {"version", 1},
      {"source", source},
      {"modules", std::move(modules)},
  };
  if (!plans.empty())
    manifest["plans"] = std::move(plans);
  SmallString<256> manifestPath(dir);
  llvm::sys::path::append(manifestPath, "manifest.json");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  return writeFile(module, manifestPath, text);
}

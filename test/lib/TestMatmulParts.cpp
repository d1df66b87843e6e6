//===- TestMatmulParts.cpp - the matmul templates' parts, one at a time ---===//
//
// liger-test-matmul-plan prints what the analysis read from each matmul
// group (its MatmulPlan) and the shared-memory layout of its configuration.
// liger-test-matmul-part builds one part of each matmul group's kernel into
// a gpu.func of its own (`gpu.module @liger_test_parts`), so that a test
// pins what that part emits and an IR diff says which part moved.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulEmitters.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"

#include "llvm/ADT/StringSwitch.h"

#include "llvm/Support/raw_ostream.h"
#include <iterator>

using namespace mlir;
using namespace mlir::liger;

namespace {

/// The matmul groups of `module`, each with its plan and pinned
/// configuration; fails with a diagnostic on a group without one.
LogicalResult forEachMatmulGroup(
    ModuleOp module,
    function_ref<LogicalResult(const MatmulPlan &, const MatmulKernelConfig &)>
        fn) {
  SmallVector<FusionOp> groups;
  module.walk([&](FusionOp group) {
    if (group.getKind() == FusionKind::matmul)
      groups.push_back(group);
  });
  for (FusionOp group : groups) {
    FailureOr<MatmulPlan> plan = analyzeMatmulGroup(group);
    if (failed(plan))
      return failure();
    auto attr =
        group->getAttrOfType<KernelConfigAttr>(KernelConfigAttr::getAttrName());
    if (!attr || !attr.isMatmul())
      return group.emitOpError("needs a matmul 'liger.kernel_config' (run "
                               "liger-select-kernel-config first)");
    FailureOr<MatmulKernelConfig> config = readMatmulKernelConfig(group, attr);
    if (failed(config) || failed(fn(*plan, *config)))
      return failure();
  }
  return success();
}

/// The names the plan prints, in the enum's order (the bodies':
/// kMatmulBodyNames).
constexpr StringLiteral roleNames[] = {"x",
                                       "norm_weight",
                                       "weight",
                                       "bias",
                                       "lora_a",
                                       "lora_b",
                                       "cos",
                                       "sin",
                                       "accumulator",
                                       "epilogue_rows",
                                       "epilogue_feature",
                                       "unread",
                                       "unshaped"};
static_assert(std::size(roleNames) ==
                  static_cast<size_t>(MatmulOperandRole::Unshaped) + 1,
              "a name per operand role");

void printSize(raw_ostream &os, int64_t size) {
  if (ShapedType::isDynamic(size))
    os << "?";
  else
    os << size;
}

struct TestMatmulPlanPass
    : PassWrapper<TestMatmulPlanPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestMatmulPlanPass)
  StringRef getArgument() const final { return "liger-test-matmul-plan"; }
  StringRef getDescription() const final {
    return "Print each matmul group's plan and shared-memory layout (test)";
  }

  void runOnOperation() override {
    raw_ostream &os = llvm::outs();
    auto print = [&](const MatmulPlan &plan, const MatmulKernelConfig &config) {
      FusionOp group = plan.group;
      os << "matmul plan of @"
         << group->getParentOfType<FunctionOpInterface>().getName() << "\n";
      if (!plan.unsupported.empty())
        os << "unsupported: " << plan.unsupported << "\n";
      os << "body " << matmulBodyName(plan.body) << ", m ";
      printSize(os, plan.m);
      os << ", k ";
      printSize(os, plan.k);
      os << ", n " << plan.n << ", widths [";
      llvm::interleaveComma(plan.widths, os);
      os << "], element bytes " << plan.elementBytes;
      if (plan.paired())
        os << ", paired";
      if (plan.norm)
        os << ", rms_norm";
      if (plan.loraRank)
        os << ", lora rank " << plan.loraRank;
      if (plan.weightTranspose)
        os << ", weight transposed";
      if (plan.headDim)
        os << ", head_dim " << plan.headDim << ", nq " << plan.nq;
      if (plan.accumulateTile)
        os << ", accumulate tile";
      if (plan.numOutputs() > 1)
        os << ", " << plan.numOutputs() << " results";
      os << "\n";
      for (auto [i, operand] : llvm::enumerate(plan.operands)) {
        os << "input " << i << " "
           << roleNames[static_cast<size_t>(operand.role)];
        if (operand.role == MatmulOperandRole::Weight ||
            operand.role == MatmulOperandRole::Bias)
          os << " " << operand.projection;
        os << "\n";
      }
      for (Operation *op : plan.epilogueOps)
        os << "epilogue " << op->getName() << "\n";
      MatmulLayout layout(plan, config);
      os << "layout " << (config.wgmma ? "wgmma " : "mma_sync ") << config.tileM
         << "x" << config.tileN << "x" << config.tileK << ", " << config.stages
         << " stages";
      if (config.wgmma)
        os << ", stage " << layout.stageBytes() << " bytes"
           << (layout.storesWithTma() ? ", tma store" : "")
           << (layout.hasOldTile() ? ", old tile" : "");
      os << "\n";
      layout.regions().print(os);
      return success();
    };
    if (failed(forEachMatmulGroup(getOperation(), print)))
      signalPassFailure();
  }
};

/// The parts liger-test-matmul-part builds (each into `@<function>_<part>`,
/// for the groups it applies to).
enum class Part {
  Barriers,     ///< wgmma: the mbarriers' initialization
  Producer,     ///< wgmma: the producer warpgroup's TMA loads
  SliceLoad,    ///< mma.sync: the cp.async of slice 0 into stage 0
  NormPrologue, ///< the RMSNorm prologue on stage 0
  Epilogue,     ///< the store of one pair of zero accumulators at (m0, n0)
  TmaStore,     ///< wgmma: the TMA-store epilogue of one pair
  RoPE,         ///< the RoPE epilogue on zero accumulators
  Unknown,
};

struct TestMatmulPartPass
    : PassWrapper<TestMatmulPartPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestMatmulPartPass)
  TestMatmulPartPass() = default;
  TestMatmulPartPass(const TestMatmulPartPass &pass) : PassWrapper(pass) {}
  StringRef getArgument() const final { return "liger-test-matmul-part"; }
  StringRef getDescription() const final {
    return "Build one part of each matmul group's kernel (test)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, gpu::GPUDialect, linalg::LinalgDialect,
                    LLVM::LLVMDialect, math::MathDialect, memref::MemRefDialect,
                    NVVM::NVVMDialect, nvgpu::NVGPUDialect, scf::SCFDialect,
                    tensor::TensorDialect, vector::VectorDialect>();
  }

  Option<std::string> part{
      *this, "part",
      llvm::cl::desc("barriers, producer, slice-load, norm-prologue, "
                     "epilogue, tma-store or rope"),
      llvm::cl::init("epilogue")};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Part which = llvm::StringSwitch<Part>(part)
                     .Case("barriers", Part::Barriers)
                     .Case("producer", Part::Producer)
                     .Case("slice-load", Part::SliceLoad)
                     .Case("norm-prologue", Part::NormPrologue)
                     .Case("epilogue", Part::Epilogue)
                     .Case("tma-store", Part::TmaStore)
                     .Case("rope", Part::RoPE)
                     .Default(Part::Unknown);
    if (which == Part::Unknown) {
      module.emitError() << "liger-test-matmul-part: unknown part '" << part
                         << "' (barriers, producer, slice-load, "
                            "norm-prologue, epilogue, tma-store, rope)";
      return signalPassFailure();
    }
    OpBuilder b(&getContext());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    b.setInsertionPointToEnd(module.getBody());
    auto parts =
        gpu::GPUModuleOp::create(b, module.getLoc(), "liger_test_parts");
    auto build = [&](const MatmulPlan &plan, const MatmulKernelConfig &config) {
      // Groups the templates leave alone are warned about and skipped, as
      // the lowering does; so are the groups the part does not apply to.
      if (!applies(which, plan, config))
        return success();
      std::string name =
          (plan.group->getParentOfType<FunctionOpInterface>().getName() + "_" +
           part)
              .str();
      std::replace(name.begin(), name.end(), '-', '_');
      (void)buildMatmulKernel(plan, parts, name, config,
                              [&](GpuBuilder &b, MatmulKernel &k) {
                                return buildPart(b, k, which);
                              });
      return success();
    };
    if (failed(forEachMatmulGroup(module, build)))
      signalPassFailure();
  }

  /// Whether `which` is a part of `plan`'s kernel with `config`.
  static bool applies(Part which, const MatmulPlan &plan,
                      const MatmulKernelConfig &config) {
    switch (which) {
    case Part::Barriers:
    case Part::Producer:
      return config.wgmma;
    case Part::SliceLoad:
      return !config.wgmma;
    case Part::NormPrologue:
      return static_cast<bool>(plan.norm);
    case Part::Epilogue:
      return !plan.rope;
    case Part::TmaStore:
      return MatmulLayout(plan, config).storesWithTma();
    case Part::RoPE:
      return static_cast<bool>(plan.rope);
    case Part::Unknown:
      break;
    }
    return false;
  }

  /// `which` on the kernel begun in `k`, with what it reads from the parts
  /// before it made up: zero accumulators, stage 0, thread 0's flags.
  LogicalResult buildPart(GpuBuilder &b, MatmulKernel &k, Part which) {
    const MatmulPlan &plan = k.plan;
    bool wgmma = k.config.wgmma;
    if (wgmma)
      k.shared =
          b.externSharedBuffer(k.function->getParentOfType<gpu::GPUModuleOp>(),
                               "liger_matmul_smem", 1024);
    else
      k.shared = gpu::DynamicSharedMemoryOp::create(
          b,
          MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                          MemRefLayoutAttrInterface(),
                          gpu::AddressSpaceAttr::get(
                              b.getContext(), gpu::AddressSpace::Workgroup)));
    Type f32 = b.getF32Type();
    Value zeroPair = arith::ConstantOp::create(
        b, DenseElementsAttr::get(VectorType::get({2}, f32),
                                  b.getF32FloatAttr(0)));
    SmallVector<Value, 2> zeroPairs(plan.numBTiles(), zeroPair);
    switch (which) {
    case Part::Barriers:
      emitWgmmaBarrierInit(b, k, b.equal(k.tid, 0));
      return success();
    case Part::Producer:
      emitTmaProducer(b, k, b.equal(k.tid, 0));
      return success();
    case Part::SliceLoad:
      emitMmaSyncSliceLoad(b, k, getMmaSyncTiles(b, k), b.index(0), b.index(0));
      return success();
    case Part::NormPrologue: {
      if (wgmma) {
        emitWgmmaNormStage(b, k, getWgmmaConsumerThread(b, k), b.index(0),
                           b.index(0), {b.f32(0), b.f32(0)});
        return success();
      }
      MmaSyncTiles tiles = getMmaSyncTiles(b, k);
      emitMmaSyncNormInit(b, k, tiles);
      emitMmaSyncNormSlice(b, k, tiles, b.index(0), b.index(0));
      return success();
    }
    case Part::Epilogue:
      return storeMatmulPairs(b, k, {MatmulPairSite{k.m0, k.n0}},
                              [&](GpuBuilder &, size_t) { return zeroPairs; });
    case Part::TmaStore: {
      WgmmaConsumerThread thread = getWgmmaConsumerThread(b, k);
      TmaStoreTile tile = emitTmaStoreBegin(b, k, thread, Value());
      auto stage = [&](GpuBuilder &ob, size_t, size_t result, Value pair) {
        emitTmaStoreStage(ob, k, thread, tile, pair, 0, 0, result);
      };
      if (failed(storeMatmulPairs(
              b, k, {MatmulPairSite{k.m0, k.n0}},
              [&](GpuBuilder &, size_t) { return zeroPairs; }, stage)))
        return failure();
      emitTmaStoreEnd(b, k, thread, tile);
      return success();
    }
    case Part::RoPE: {
      if (wgmma) {
        auto accType = LLVM::LLVMStructType::getLiteral(
            b.getContext(), SmallVector<Type>(k.config.tileN / 2, f32));
        emitWgmmaRoPEEpilogue(b, k, LLVM::ZeroOp::create(b, accType),
                              {Value(), Value()}, k.m0, k.outputs[0], k.n0,
                              k.biases[0]);
        return success();
      }
      MmaSyncWarps warps(k.config);
      SmallVector<Value> accumulators(MmaSyncWarps::mTiles * warps.nTiles * 4,
                                      b.f32(0));
      emitMmaSyncRoPEEpilogue(b, k, getMmaSyncThread(b, k), accumulators, {},
                              k.outputs[0], k.n0, k.biases[0]);
      return success();
    }
    case Part::Unknown:
      break;
    }
    llvm_unreachable("unknown part");
  }
};

} // namespace

namespace mlir::liger::test {
void registerTestMatmulPartsPasses() {
  PassRegistration<TestMatmulPlanPass>();
  PassRegistration<TestMatmulPartPass>();
}
} // namespace mlir::liger::test

//===- CPURunner.cpp - run liger functions on the CPU ---------------------===//
//
// Implements liger/Target/CPURunner.h: shape specialization, the CPU
// pipeline, the JIT, and the memref-descriptor calling convention of the
// functions it produces.
//
//===----------------------------------------------------------------------===//

#include "liger/Target/CPURunner.h"

#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/Pipelines/Pipelines.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/TargetSelect.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>

using namespace mlir;
using namespace mlir::liger;
using namespace mlir::liger::cpu;

//===----------------------------------------------------------------------===//
// DType and HostTensor
//===----------------------------------------------------------------------===//

size_t cpu::getElementSize(DType dtype) {
  switch (dtype) {
  case DType::bf16:
  case DType::f16:
    return 2;
  case DType::f32:
  case DType::i32:
    return 4;
  case DType::f64:
  case DType::i64:
    return 8;
  case DType::i1:
    return 1;
  }
  llvm_unreachable("unknown dtype");
}

StringRef cpu::stringifyDType(DType dtype) {
  switch (dtype) {
  case DType::bf16:
    return "bf16";
  case DType::f16:
    return "f16";
  case DType::f32:
    return "f32";
  case DType::f64:
    return "f64";
  case DType::i1:
    return "i1";
  case DType::i32:
    return "i32";
  case DType::i64:
    return "i64";
  }
  llvm_unreachable("unknown dtype");
}

FailureOr<DType> cpu::getDType(Type type) {
  if (type.isBF16())
    return DType::bf16;
  if (type.isF16())
    return DType::f16;
  if (type.isF32())
    return DType::f32;
  if (type.isF64())
    return DType::f64;
  if (type.isSignlessInteger(1))
    return DType::i1;
  if (type.isSignlessInteger(32))
    return DType::i32;
  if (type.isSignlessInteger(64))
    return DType::i64;
  return failure();
}

int64_t HostTensor::getNumElements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

/// "[?, 8]"; "[]" for a scalar.
static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") +
         (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
  return s + "]";
}

std::string HostTensor::describe() const {
  std::string s;
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + stringifyDType(dtype).str();
}

//===----------------------------------------------------------------------===//
// Shape specialization
//===----------------------------------------------------------------------===//

/// One round of refinement: each liger op reads its operands through
/// tensor.cast ops that hide more static types, and its result types are
/// re-inferred (a cast back to the old type keeps other users unchanged).
/// Inference reports shapes that break an op's rules. An op that requires
/// operands of one type (AllTypesMatch, SameOperandsAndResultType) cannot
/// take a refined operand while its sibling is still dynamic: it waits for a
/// later round, and in the `final` round, once all its operands are static,
/// its verifier reports what does not match. Returns whether anything
/// changed.
static FailureOr<bool> refineLigerOps(FunctionOpInterface fn, bool final) {
  MLIRContext *ctx = fn->getContext();
  Dialect *liger = ctx->getLoadedDialect<LigerDialect>();
  SmallVector<Operation *> ligerOps;
  fn.getFunctionBody().walk([&](Operation *nested) {
    if (nested->getDialect() == liger)
      ligerOps.push_back(nested);
  });
  OpBuilder builder(ctx);
  bool changed = false;
  for (Operation *ligerOp : ligerOps) {
    auto infer = dyn_cast<InferTypeOpInterface>(ligerOp);
    if (!infer)
      continue;
    SmallVector<Value> oldOperands(ligerOp->getOperands());
    SmallVector<Type> oldTypes(ligerOp->getResultTypes());
    bool allStatic = true, refined = false;
    for (OpOperand &operand : ligerOp->getOpOperands()) {
      if (auto cast = operand.get().getDefiningOp<tensor::CastOp>()) {
        if (tensor::preservesStaticInformation(cast.getType(),
                                               cast.getSource().getType())) {
          operand.set(cast.getSource());
          refined = true;
        }
      }
      if (auto shaped = dyn_cast<ShapedType>(operand.get().getType()))
        allStatic &= shaped.hasStaticShape();
    }
    if (!refined)
      continue;
    SmallVector<Type> inferred;
    if (failed(infer.inferReturnTypes(
            ctx, ligerOp->getLoc(), ligerOp->getOperands(),
            ligerOp->getRawDictionaryAttrs(), ligerOp->getPropertiesStorage(),
            ligerOp->getRegions(), inferred)))
      return failure();
    for (auto [result, type] : llvm::zip(ligerOp->getResults(), inferred))
      result.setType(type);
    LogicalResult verified = success();
    if (final && allStatic) {
      verified = verify(ligerOp);
      if (failed(verified)) {
        InFlightDiagnostic diag =
            ligerOp->emitOpError("does not accept operands of these shapes: ");
        llvm::interleaveComma(ligerOp->getOperandTypes(), diag);
        return failure();
      }
    } else {
      ScopedDiagnosticHandler quiet(ctx,
                                    [](Diagnostic &) { return success(); });
      verified = verify(ligerOp);
    }
    if (failed(verified)) {
      // A sibling operand is still dynamic: try again in a later round.
      for (auto [operand, old] :
           llvm::zip(ligerOp->getOpOperands(), oldOperands))
        operand.set(old);
      for (auto [result, old] : llvm::zip(ligerOp->getResults(), oldTypes))
        result.setType(old);
      continue;
    }
    changed = true;
    builder.setInsertionPointAfter(ligerOp);
    for (auto [result, old] : llvm::zip(ligerOp->getResults(), oldTypes)) {
      if (result.getType() == old)
        continue;
      auto cast =
          tensor::CastOp::create(builder, ligerOp->getLoc(), old, result);
      result.replaceAllUsesExcept(cast, cast);
    }
  }
  return changed;
}

LogicalResult cpu::specializeToInputs(Operation *op,
                                      ArrayRef<HostTensor> inputs) {
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn || fn.isExternal())
    return op->emitError("expected a function with a body");
  ArrayRef<Type> argTypes = fn.getArgumentTypes();
  if (argTypes.size() != inputs.size())
    return fn.emitError() << "expects " << argTypes.size() << " input(s), got "
                          << inputs.size();
  SmallVector<Type> refined;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    auto type = dyn_cast<RankedTensorType>(argTypes[i]);
    if (!type)
      return fn.emitError() << "argument #" << i << " has type " << argTypes[i]
                            << "; only ranked tensors can be passed";
    FailureOr<DType> dtype = getDType(type.getElementType());
    if (failed(dtype))
      return fn.emitError()
             << "argument #" << i << " has element type "
             << type.getElementType() << ", which host tensors cannot hold";
    if (*dtype != input.dtype)
      return fn.emitError()
             << "input #" << i << ": expected " << stringifyDType(*dtype)
             << " elements for " << type << ", got " << input.describe();
    bool fits = type.getRank() == static_cast<int64_t>(input.shape.size());
    for (int64_t d = 0; fits && d < type.getRank(); ++d)
      fits = input.shape[d] >= 0 &&
             (type.isDynamicDim(d) || type.getDimSize(d) == input.shape[d]);
    if (!fits)
      return fn.emitError() << "input #" << i << ": expected shape "
                            << formatShape(type.getShape()) << " for " << type
                            << ", got " << input.describe();
    refined.push_back(type.clone(input.shape));
  }

  // Fusion groups mean their bodies: inline them, so that the shape rules
  // of the ops inside are checked like any others.
  SmallVector<FusionOp> groups;
  fn.getFunctionBody().walk([&](FusionOp group) { groups.push_back(group); });
  for (FusionOp group : groups) {
    Block &groupBody = group.getBody().front();
    for (auto [arg, input] :
         llvm::zip(groupBody.getArguments(), group.getInputs()))
      arg.replaceAllUsesWith(input);
    YieldOp yield = group.getYield();
    group.replaceAllUsesWith(yield.getValues());
    yield.erase();
    group->getBlock()->getOperations().splice(Block::iterator(group),
                                              groupBody.getOperations());
    group.erase();
  }

  // Refine the arguments; other dialects' users see the old type through a
  // tensor.cast.
  Block &body = fn.getFunctionBody().front();
  OpBuilder builder(op->getContext());
  builder.setInsertionPointToStart(&body);
  for (auto [arg, type] : llvm::zip(body.getArguments(), refined)) {
    Type old = arg.getType();
    if (old == type)
      continue;
    arg.setType(type);
    auto cast = tensor::CastOp::create(builder, arg.getLoc(), old, arg);
    arg.replaceAllUsesExcept(cast, cast);
  }
  fn.setFunctionTypeAttr(TypeAttr::get(
      FunctionType::get(op->getContext(), refined, fn.getResultTypes())));

  // Propagate the static shapes: re-infer the liger ops (reading through
  // the casts), let the canonicalizer carry shapes through the other ops
  // (tensor.dim folds, expand_shape and linalg ops absorb casts), and repeat
  // until nothing changes.
  RewritePatternSet patterns(op->getContext());
  for (Dialect *dialect : op->getContext()->getLoadedDialects())
    dialect->getCanonicalizationPatterns(patterns);
  for (RegisteredOperationName name :
       op->getContext()->getRegisteredOperations())
    name.getCanonicalizationPatterns(patterns, op->getContext());
  FrozenRewritePatternSet canonicalization(std::move(patterns));
  constexpr int kMaxRounds = 16;
  for (int round = 0; round < kMaxRounds; ++round) {
    FailureOr<bool> changed = refineLigerOps(fn, /*final=*/false);
    if (failed(changed))
      return failure();
    (void)applyPatternsGreedily(fn.getFunctionBody(), canonicalization);
    if (!*changed)
      break;
  }
  if (failed(refineLigerOps(fn, /*final=*/true)))
    return failure();
  return verify(op);
}

//===----------------------------------------------------------------------===//
// CPUExecutable
//===----------------------------------------------------------------------===//

CPUExecutable::~CPUExecutable() = default;

/// Erases the symbols of `module` that `entry` does not reach, so that
/// other functions (which may not lower to the CPU) cannot fail the build.
static void pruneToEntry(ModuleOp module, Operation *entry) {
  SymbolTable table(module);
  llvm::SmallPtrSet<Operation *, 8> reached = {entry};
  SmallVector<Operation *> worklist = {entry};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    op->walk([&](Operation *nested) {
      std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(nested);
      if (!uses)
        return;
      for (const SymbolTable::SymbolUse &use : *uses)
        if (Operation *target =
                table.lookup(use.getSymbolRef().getRootReference()))
          if (reached.insert(target).second)
            worklist.push_back(target);
    });
  }
  for (Operation &op :
       llvm::make_early_inc_range(module.getBody()->getOperations()))
    if (isa<SymbolOpInterface>(op) && !reached.contains(&op))
      op.erase();
}

FailureOr<std::unique_ptr<CPUExecutable>>
CPUExecutable::compile(ModuleOp module, StringRef entry,
                       ArrayRef<HostTensor> inputs,
                       const CPUCompileOptions &compileOptions) {
  static std::once_flag initTarget;
  std::call_once(initTarget, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  MLIRContext *ctx = module.getContext();
  registerBuiltinDialectTranslation(*ctx);
  registerLLVMDialectTranslation(*ctx);

  OwningOpRef<ModuleOp> clone(module.clone());
  auto fn = dyn_cast_or_null<FunctionOpInterface>(
      SymbolTable::lookupSymbolIn(*clone, entry));
  if (!fn)
    return module.emitError()
           << "no function named '@" << entry << "' in the module";
  pruneToEntry(*clone, fn);
  auto exe = std::unique_ptr<CPUExecutable>(new CPUExecutable());
  exe->entry = entry.str();
  for (const HostTensor &in : inputs)
    exe->inputSpecs.push_back({in.dtype, in.shape, {}});
  for (auto [i, type] : llvm::enumerate(fn.getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    FailureOr<DType> dtype = failure();
    if (tensor)
      dtype = getDType(tensor.getElementType());
    if (failed(dtype))
      return fn.emitError() << "result #" << i << " has type " << type
                            << "; the CPU runner returns ranked tensors of "
                               "bf16, f16, f32, f64, i1, i32 or i64";
    exe->resultDTypes.push_back(*dtype);
    exe->resultRanks.push_back(tensor.getRank());
  }
  // Check the shapes on a specialized copy (or specialize the module that
  // is compiled).
  OwningOpRef<ModuleOp> checked;
  if (!compileOptions.specializeShapes)
    checked = clone->clone();
  ModuleOp specialized = checked ? *checked : *clone;
  if (failed(specializeToInputs(SymbolTable::lookupSymbolIn(specialized, entry),
                                inputs)))
    return failure();

  PassManager pm(ctx);
  CPUPipelineOptions options;
  buildCPUPipeline(pm, options);
  if (failed(pm.run(*clone)))
    return fn.emitError() << "the CPU pipeline failed on '@" << entry << "'";

  // The options hold a function_ref: the transformer it refers to must
  // outlive ExecutionEngine::create (a temporary left it dangling).
  std::function<llvm::Error(llvm::Module *)> optimize =
      makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0,
                                /*targetMachine=*/nullptr);
  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = optimize;
  auto engine = ExecutionEngine::create(*clone, engineOptions);
  if (!engine)
    return module.emitError() << "could not JIT-compile '@" << entry
                              << "': " << llvm::toString(engine.takeError());
  exe->engine = std::move(*engine);
  return exe;
}

namespace {
/// The words of one memref descriptor as the lowered function takes it:
/// allocated pointer, aligned pointer, offset, sizes, strides.
struct Descriptor {
  std::vector<int64_t> words;

  static Descriptor forBuffer(void *data, ArrayRef<int64_t> shape) {
    Descriptor d;
    auto ptr = static_cast<int64_t>(reinterpret_cast<intptr_t>(data));
    d.words = {ptr, ptr, 0};
    d.words.insert(d.words.end(), shape.begin(), shape.end());
    SmallVector<int64_t> strides(shape.size(), 1);
    for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
      strides[i] = strides[i + 1] * shape[i + 1];
    d.words.insert(d.words.end(), strides.begin(), strides.end());
    return d;
  }
};
} // namespace

bool CPUExecutable::run(ArrayRef<HostTensor> inputs,
                        std::vector<HostTensor> &results,
                        std::string &error) const {
  if (inputs.size() != inputSpecs.size()) {
    error = "expected " + std::to_string(inputSpecs.size()) +
            " input(s), got " + std::to_string(inputs.size());
    return false;
  }
  // The function may write into its argument buffers: give it copies.
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<Descriptor> descriptors;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    const HostTensor &spec = inputSpecs[i];
    if (input.dtype != spec.dtype || input.shape != spec.shape) {
      error = "input #" + std::to_string(i) + ": compiled for " +
              spec.describe() + ", got " + input.describe();
      return false;
    }
    size_t bytes = input.getNumElements() * getElementSize(input.dtype);
    if (input.data.size() != bytes) {
      error = "input #" + std::to_string(i) + ": " + input.describe() +
              " needs " + std::to_string(bytes) + " bytes, got " +
              std::to_string(input.data.size());
      return false;
    }
    // At least one byte, so that empty tensors still have a distinct buffer.
    buffers.emplace_back(std::max<size_t>(bytes, 1));
    std::memcpy(buffers.back().data(), input.data.data(), bytes);
    descriptors.push_back(
        Descriptor::forBuffer(buffers.back().data(), input.shape));
  }
  size_t resultWords = 0;
  for (int64_t rank : resultRanks)
    resultWords += 3 + 2 * rank;
  std::vector<int64_t> resultStorage(std::max<size_t>(resultWords, 1));

  SmallVector<void *> args;
  for (Descriptor &d : descriptors)
    for (int64_t &word : d.words)
      args.push_back(&word);
  args.push_back(resultStorage.data());
  if (llvm::Error err = engine->invokePacked(entry, args)) {
    error =
        "running '@" + entry + "' failed: " + llvm::toString(std::move(err));
    return false;
  }

  // Copy the results out (they may be strided), then free the buffers the
  // function allocated (not our input copies, and each buffer once) when
  // every result is copied: two results may share a buffer (a function that
  // returns one value twice).
  llvm::SmallPtrSet<void *, 8> ours;
  llvm::SetVector<void *> allocations;
  for (std::vector<uint8_t> &buffer : buffers)
    ours.insert(buffer.data());
  size_t pos = 0;
  for (auto [dtype, rank] : llvm::zip(resultDTypes, resultRanks)) {
    void *allocated = reinterpret_cast<void *>(resultStorage[pos]);
    auto *aligned = reinterpret_cast<uint8_t *>(resultStorage[pos + 1]);
    int64_t offset = resultStorage[pos + 2];
    ArrayRef<int64_t> sizes(&resultStorage[pos + 3], rank);
    ArrayRef<int64_t> strides(&resultStorage[pos + 3 + rank], rank);
    pos += 3 + 2 * rank;
    HostTensor out;
    out.dtype = dtype;
    out.shape.assign(sizes.begin(), sizes.end());
    size_t elementSize = getElementSize(dtype);
    int64_t count = out.getNumElements();
    out.data.resize(count * elementSize);
    for (int64_t linear = 0; linear < count; ++linear) {
      int64_t rest = linear, source = offset;
      for (int64_t d = rank - 1; d >= 0; --d) {
        source += (rest % sizes[d]) * strides[d];
        rest /= sizes[d];
      }
      std::memcpy(&out.data[linear * elementSize],
                  aligned + source * elementSize, elementSize);
    }
    results.push_back(std::move(out));
    if (allocated && !ours.contains(allocated))
      allocations.insert(allocated);
  }
  for (void *allocated : allocations)
    std::free(allocated);
  return true;
}

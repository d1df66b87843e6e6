//===- MatmulEpilogue.cpp - the matmul kernels' elementwise epilogue ------===//
//
// Both templates add the bias in f32 and round the accumulators to the
// projections' dtype (as liger.linear does), then run the ops after the
// projections from their reference lowering (like the row program, on
// pairs of columns, reading [rows, N] and [N] inputs at the pair) and store
// each result's pair, masked at the row and column ends. A dW added into a
// buffer skips the rounding: buffer + product in f32, rounded once. The
// global loads (inputs, biases, a buffer's old values) are issued for a
// batch of pairs before the batch's first store.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulEmitters.h"
#include "liger/Conversion/LigerToGPU/ReferenceLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::liger;

FailureOr<MatmulEpilogue>
mlir::liger::lowerMatmulEpilogue(const MatmulPlan &plan) {
  FusionOp group = plan.group;
  MLIRContext *ctx = group.getContext();
  Location loc = group.getLoc();
  Block &body = group.getBody().front();
  MatmulEpilogue epilogue;
  OpBuilder b(ctx);
  epilogue.scratch = ModuleOp::create(loc);
  b.setInsertionPointToEnd(epilogue.scratch->getBody());
  SmallVector<Type> types;
  for (const MatmulProjection &proj : plan.projections)
    types.push_back(proj.result.getType());
  SmallVector<Value> others;
  for (BlockArgument arg : body.getArguments())
    if (plan.operandOf(arg).inEpilogue()) {
      types.push_back(arg.getType());
      others.push_back(arg);
    }
  ValueRange results = group.getYield().getValues();
  auto fn = func::FuncOp::create(
      b, loc, "epilogue",
      FunctionType::get(ctx, types, TypeRange(results.getTypes())));
  epilogue.function = fn;
  Block *entry = fn.addEntryBlock();
  IRMapping mapping;
  for (auto [proj, value] : llvm::zip(plan.projections, entry->getArguments()))
    mapping.map(proj.result, value);
  for (auto [arg, value] : llvm::zip(
           others, entry->getArguments().drop_front(plan.projections.size())))
    mapping.map(arg, value);
  b.setInsertionPointToEnd(entry);
  for (Operation *op : plan.epilogueOps) {
    if (!isMatmulElementwiseOp(op))
      return leaveForLaterTemplate(
          group, "'" + op->getName().getStringRef() +
                     "' after the projection is not an elementwise epilogue "
                     "op of the mma.sync template");
    b.clone(*op, mapping);
  }
  SmallVector<Value> returned;
  for (Value result : results)
    returned.push_back(mapping.lookupOrDefault(result));
  func::ReturnOp::create(b, loc, returned);
  if (failed(lowerToReference(fn)))
    return leaveForLaterTemplate(group,
                                 "its epilogue's reference lowering failed");
  unsigned rank = cast<RankedTensorType>(types.front()).getRank();
  WalkResult walk = fn.walk([&](linalg::GenericOp op) {
    if (op.getNumLoops() != rank || op.getNumReductionLoops() != 0)
      return WalkResult::interrupt();
    for (AffineMap map : op.getIndexingMapsArray())
      if (!map.isIdentity() &&
          !(map.getNumResults() == 1 &&
            map.getResult(0) == getAffineDimExpr(rank - 1, ctx)))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return leaveForLaterTemplate(
        group, "its epilogue is not elementwise over [rows, N] and [N] "
               "operands");
  return epilogue;
}

/// The epilogue's other inputs at row `r`, columns `c` and c + 1 (one pair
/// each, in the group's argument order): [rows, N] inputs at (r, c), [N]
/// ones at c.
static SmallVector<Value>
loadEpilogueInputs(GpuBuilder &b, const MatmulKernel &k, Value r, Value c) {
  SmallVector<Value> inputs;
  for (BlockArgument arg : k.plan.group.getBody().front().getArguments()) {
    auto it = k.epilogueInputs.find(arg);
    if (it == k.epilogueInputs.end())
      continue;
    Value param = it->second;
    auto type = VectorType::get(
        {2}, cast<MemRefType>(param.getType()).getElementType());
    SmallVector<Value> indices;
    if (k.plan.operandOf(arg).role == MatmulOperandRole::EpilogueRows)
      indices.push_back(r);
    indices.push_back(c);
    inputs.push_back(vector::LoadOp::create(
        b, type, param, indices, /*nontemporal=*/false,
        llvm::MaybeAlign(
            std::min<int64_t>(16, 2 * type.getElementTypeBitWidth() / 8))));
  }
  return inputs;
}

/// The epilogue on the rounded pairs of the projections and the pairs of
/// its other inputs (loadEpilogueInputs); returns each result's pair to
/// store.
static FailureOr<SmallVector<Value>> applyEpilogue(GpuBuilder &b,
                                                   const MatmulKernel &k,
                                                   ValueRange projected,
                                                   ValueRange inputs) {
  FusionOp group = k.plan.group;
  Block &entry = k.epilogue->function.getBody().front();
  DenseMap<Value, Value> pairs;
  for (auto [arg, value] : llvm::zip(entry.getArguments(), projected))
    pairs[arg] = value;
  for (auto [arg, value] :
       llvm::zip(entry.getArguments().drop_front(projected.size()), inputs))
    pairs[arg] = value;
  for (Operation &op : entry.without_terminator()) {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic)
      continue;
    SmallVector<Value> args;
    for (Value in : generic.getDpsInputs())
      args.push_back(pairs.lookup(in));
    for (Value init : generic.getDpsInits()) {
      Type t = getElementTypeOrSelf(init.getType());
      args.push_back(arith::ConstantOp::create(
          b,
          DenseElementsAttr::get(VectorType::get({2}, t), b.getZeroAttr(t))));
    }
    if (llvm::any_of(args, [](Value v) { return !v; }))
      return leaveForLaterTemplate(
          group, "its epilogue reads a value the kernel does not hold");
    std::string why;
    FailureOr<SmallVector<Value>> results =
        cloneElementwiseBody(b, b.getLoc(), *generic.getBlock(), args, 2, why);
    if (failed(results))
      return leaveForLaterTemplate(group, why);
    for (auto [result, v] : llvm::zip(generic->getResults(), *results))
      pairs[result] = v;
  }
  SmallVector<Value> outs;
  for (Value result : entry.getTerminator()->getOperands()) {
    outs.push_back(pairs.lookup(result));
    if (!outs.back())
      return leaveForLaterTemplate(
          group, "its epilogue's result is not computed per element");
  }
  return outs;
}

Value mlir::liger::loadBiasPair(GpuBuilder &b, Value bias, Value c) {
  if (!bias)
    return Value();
  auto type =
      VectorType::get({2}, cast<MemRefType>(bias.getType()).getElementType());
  return vector::LoadOp::create(
      b, type, bias, ValueRange{c}, false,
      llvm::MaybeAlign(2 * type.getElementTypeBitWidth() / 8));
}

Value mlir::liger::roundMatmulPair(GpuBuilder &b, const MatmulKernel &k,
                                   Value accPair, Value biasPair) {
  if (biasPair) {
    if (!cast<VectorType>(biasPair.getType()).getElementType().isF32())
      biasPair = arith::ExtFOp::create(b, VectorType::get({2}, b.getF32Type()),
                                       biasPair);
    accPair = arith::AddFOp::create(b, accPair, biasPair);
  }
  return arith::TruncFOp::create(b, VectorType::get({2}, k.elementType()),
                                 accPair);
}

/// A dW buffer's pair is aligned to its two elements.
static llvm::MaybeAlign accumulatorPairAlign(Type accElem) {
  return llvm::MaybeAlign(
      2 * std::max<unsigned>(1, accElem.getIntOrFloatBitWidth() / 8));
}

/// The buffer pair a dW kernel adds its product to (a 16-bit buffer's old
/// tile staged in shared memory is read by the sink instead).
static Value loadAccumulatorPair(GpuBuilder &b, const MatmulKernel &k, Value r,
                                 Value c) {
  Type accElem = cast<MemRefType>(k.accumulator.getType()).getElementType();
  return vector::LoadOp::create(b, VectorType::get({2}, accElem),
                                k.accumulator, ValueRange{r, c}, false,
                                accumulatorPairAlign(accElem));
}

LogicalResult mlir::liger::storeMatmulPairs(GpuBuilder &b,
                                            const MatmulKernel &k,
                                            ArrayRef<MatmulPairSite> sites,
                                            MatmulAccumulatorPairs accPairsAt,
                                            MatmulPairSink sink) {
  bool addsInShared = k.accumulator && sink;
  // Whether a pair reads global memory at all.
  bool loads = k.accumulator
                   ? !addsInShared
                   : !k.epilogueInputs.empty() ||
                         llvm::any_of(k.biases, [](Value v) { return v; });
  for (size_t first = 0; first < sites.size(); first += kMatmulEpilogueBatch) {
    ArrayRef<MatmulPairSite> batch = sites.slice(
        first, std::min(kMatmulEpilogueBatch, sites.size() - first));
    // Every global load of the batch first, at indices clamped into the
    // output (a launched matmul kernel has a row: it has no workspace, and
    // no grid is launched for 0 rows; N is even): a masked pair's values
    // are loaded and never used.
    SmallVector<SmallVector<Value>> loaded;
    for (const MatmulPairSite &site : batch) {
      if (!loads) {
        // (No bias either: a null bias pair per projection.)
        loaded.emplace_back(k.accumulator ? 0 : k.biases.size(), Value());
        continue;
      }
      Value r = b.min(site.r, b.sub(k.rows, 1));
      Value c = b.min(site.c, k.plan.n - 2);
      if (k.accumulator)
        loaded.push_back({loadAccumulatorPair(b, k, r, c)});
      else {
        // The epilogue's inputs, then each projection's bias pair.
        SmallVector<Value> values = loadEpilogueInputs(b, k, r, c);
        for (Value bias : k.biases)
          values.push_back(loadBiasPair(b, bias, c));
        loaded.push_back(std::move(values));
      }
    }
    for (auto [i, site] : llvm::enumerate(batch)) {
      Value r = site.r, c = site.c;
      // A sink's tile is stored through a tensor map, which clips the row
      // and column ends: no mask, and no branch to keep the compiler from
      // scheduling the batch's loads ahead.
      GpuBuilder tb = sink ? b
                           : b.ifThen(b.bitAnd(b.lessThan(r, k.rows),
                                               b.lessThan(c, k.plan.n)));
      size_t index = first + i;
      SmallVector<Value, 2> accPairs = accPairsAt(tb, index);
      if (addsInShared) {
        // A 16-bit buffer's old tile is in shared memory: the sink adds.
        sink(tb, index, 0, accPairs[0]);
        continue;
      }
      if (k.accumulator) {
        // dW into a buffer: buffer + the product in f32, rounded once to the
        // buffer's dtype (none for f32).
        Value old = loaded[i].front();
        auto type = cast<VectorType>(old.getType());
        if (!type.getElementType().isF32())
          old = arith::ExtFOp::create(tb, VectorType::get({2}, tb.getF32Type()),
                                      old);
        Value sum = arith::AddFOp::create(tb, old, accPairs[0]);
        if (!type.getElementType().isF32())
          sum = arith::TruncFOp::create(tb, type, sum);
        vector::StoreOp::create(tb, sum, k.outputs[0], ValueRange{r, c}, false,
                                accumulatorPairAlign(type.getElementType()));
        continue;
      }
      // liger.linear: round(x · Wᵀ + b), the bias added in f32.
      ArrayRef<Value> inputs = loaded[i];
      ArrayRef<Value> biasPairs = inputs.take_back(k.biases.size());
      SmallVector<Value> rounded;
      for (auto [accPair, biasPair] : llvm::zip_equal(accPairs, biasPairs))
        rounded.push_back(roundMatmulPair(tb, k, accPair, biasPair));
      FailureOr<SmallVector<Value>> outs =
          applyEpilogue(tb, k, rounded, inputs.drop_back(k.biases.size()));
      if (failed(outs))
        return failure();
      if (sink) {
        for (auto [result, out] : llvm::enumerate(*outs))
          sink(tb, index, result, out);
        continue;
      }
      for (auto [out, output] : llvm::zip_equal(*outs, k.outputs)) {
        auto outType = cast<VectorType>(out.getType());
        vector::StoreOp::create(
            tb, out, output, ValueRange{r, c}, /*nontemporal=*/false,
            llvm::MaybeAlign(2 * outType.getElementTypeBitWidth() / 8));
      }
    }
  }
  return success();
}

//===- RowKernel.cpp - rowwise fusion groups as GPU kernels ---------------===//
//
// Implements liger/Conversion/LigerToGPU/RowKernel.h. The group body is
// lowered to linalg on a scratch function; every linalg.generic is then one
// step of the row program that a CTA runs for its row:
//
//   elementwise  (all loops parallel, row-shaped result): per chunk, the
//                generic's body on vector<W x f32> values;
//   reduction    (last loop a reduction, one value per row): per chunk into a
//                vector accumulator, then vector.reduction, warp shuffles and
//                one shared-memory step across warps;
//   row scalar   (one loop fewer, one value per row): the body on scalars,
//                uniform across the CTA;
//   column reduction (every loop but the last a reduction, one value per
//                feature, e.g. RMSNorm's dW): per chunk into registers that
//                live across rows;
//   feature step (all parallel over the features, reading column
//                reductions): deferred to the finishing kernel.
//
// Row-shaped intermediates live in registers (the chunks of each thread);
// inputs are loaded where a step reads them, outputs stored where produced.
//
// A group with column reductions is two kernels. The first loops over rows
// with a stride of the grid (a few CTAs per SM) and writes its per-CTA
// partial sums into f32 workspaces [ctas, H]; the second, `<name>_finish`,
// takes the same parameters, reduces the partials of 32 features per CTA
// (8 warps over the CTA rows, then shared memory) and runs the feature
// steps. No atomics: the result does not depend on scheduling.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/RowKernel.h"
#include "liger/Conversion/LigerToLinalg/LigerToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::liger;

static int64_t elementBytes(Type elementType) {
  return std::max<int64_t>(1, elementType.getIntOrFloatBitWidth() / 8);
}

std::string mlir::liger::checkRowVectorWidth(RowTemplate tmpl, int64_t hidden,
                                             Type elementType, int64_t width) {
  std::string why;
  llvm::raw_string_ostream os(why);
  int64_t bytes = elementBytes(elementType);
  if (width < 1 || !llvm::isPowerOf2_64(width))
    os << "vector_width " << width << " is not a power of two";
  else if (width * bytes > 16)
    os << "vector_width " << width << " spans " << width * bytes
       << " bytes of " << elementType << ", more than one 16-byte load";
  else if (tmpl == RowTemplate::RowProgram && hidden % width != 0)
    os << "vector_width " << width << " does not divide the row length "
       << hidden << " (every row must start on a chunk boundary)";
  else if (tmpl == RowTemplate::CrossEntropy && hidden % width != 0)
    os << "vector_width " << width << " does not divide the " << hidden
       << " classes (every row must start on a chunk boundary)";
  return why;
}

int64_t mlir::liger::selectRowVectorWidth(RowTemplate tmpl, int64_t hidden,
                                          Type elementType) {
  int64_t width = 16 / elementBytes(elementType);
  while (width > 1 && !checkRowVectorWidth(tmpl, hidden, elementType, width)
                           .empty())
    width /= 2;
  return width;
}

RowKernelConfig mlir::liger::selectRowKernelConfig(int64_t hidden,
                                                   Type elementType) {
  RowKernelConfig config;
  config.vectorWidth =
      selectRowVectorWidth(RowTemplate::RowProgram, hidden, elementType);
  // 256 threads per row: on an H200 (bench/config_sweep.py, 16384 rows)
  // SwiGLU at 14336 bf16 ran at 100% of the copy floor with 256 threads and
  // 80% with 1024, RMSNorm at 4096 at 88-90% against 54%; fewer threads
  // only for rows too short to give each thread a chunk.
  int64_t chunks = (hidden + config.vectorWidth - 1) / config.vectorWidth;
  config.threads = std::clamp<int64_t>((chunks + 31) / 32 * 32, 32, 256);
  return config;
}

/// A cross-entropy loss and its gradient in one kernel over rows of at least
/// this many bytes runs 1024 threads, one CTA per SM: on an H200
/// (bench/cross_entropy.py, 8192 x 128256 bf16, mean) the 132 rows in flight
/// (32 MiB) stay in L2 between the softmax pass and the gradient pass, 1.75
/// ms against 2.15 with 256 threads and 4 CTAs per SM, whose 528 rows overrun
/// it.
constexpr int64_t kLongLossRowBytes = 64 * 1024;

namespace {
/// The row a group's configuration is about: the last dimension of its
/// first input of rank 2 or more with a static one, and the template that
/// reads the configuration (none for RoPE, whose template derives its own).
struct GroupRow {
  int64_t hidden = 0;
  Type elementType;
  std::optional<RowTemplate> tmpl;
};
} // namespace

static std::optional<GroupRow> getGroupRow(FusionOp group) {
  for (Value v : group.getInputs()) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || t.getRank() < 2 || t.isDynamicDim(t.getRank() - 1))
      continue;
    GroupRow row{t.getShape().back(), t.getElementType(), std::nullopt};
    Operation &first = group.getBody().front().front();
    if (isa<CrossEntropyOp, CrossEntropyGradOp>(first))
      row.tmpl = RowTemplate::CrossEntropy;
    else if (!isa<RoPEOp, RoPEGradOp>(first))
      row.tmpl = RowTemplate::RowProgram;
    return row;
  }
  return std::nullopt;
}

RowKernelConfig mlir::liger::selectRowKernelConfig(FusionOp group) {
  std::optional<GroupRow> row = getGroupRow(group);
  if (!row)
    return RowKernelConfig();
  RowKernelConfig config = selectRowKernelConfig(row->hidden, row->elementType);
  if (row->tmpl == RowTemplate::CrossEntropy)
    config.vectorWidth = selectRowVectorWidth(RowTemplate::CrossEntropy,
                                              row->hidden, row->elementType);
  Block &body = group.getBody().front();
  auto loss = llvm::find_if(body, [](Operation &op) {
    auto ce = dyn_cast<CrossEntropyOp>(op);
    return ce && ce.getReduction() != Reduction::none;
  });
  bool fusedGrad = llvm::any_of(
      body, [](Operation &op) { return isa<CrossEntropyGradOp>(op); });
  int64_t rowBytes = row->hidden * elementBytes(row->elementType);
  if (loss != body.end() && fusedGrad && rowBytes >= kLongLossRowBytes) {
    config.threads = 1024;
    config.ctasPerSm = 1;
  }
  return config;
}

DictionaryAttr
mlir::liger::getRowKernelConfigAttr(MLIRContext *ctx,
                                    const RowKernelConfig &config) {
  Builder b(ctx);
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr("threads", b.getI64IntegerAttr(config.threads)),
      b.getNamedAttr("vector_width", b.getI64IntegerAttr(config.vectorWidth))};
  if (!config.reuseLoads)
    entries.push_back(b.getNamedAttr("reuse_loads", b.getBoolAttr(false)));
  if (config.ctasPerSm)
    entries.push_back(
        b.getNamedAttr("ctas_per_sm", b.getI64IntegerAttr(config.ctasPerSm)));
  return b.getDictionaryAttr(entries);
}

FailureOr<RowKernelConfig> mlir::liger::getRowKernelConfig(FusionOp group) {
  auto dict = group->getAttrOfType<DictionaryAttr>("liger.kernel_config");
  RowKernelConfig config;
  if (!dict)
    return selectRowKernelConfig(group);
  auto threads = dict.getAs<IntegerAttr>("threads");
  auto width = dict.getAs<IntegerAttr>("vector_width");
  if (!threads || !width)
    return group.emitOpError("expects 'liger.kernel_config' to hold integer "
                             "'threads' and 'vector_width'");
  config.threads = threads.getInt();
  config.vectorWidth = width.getInt();
  if (Attribute reuse = dict.get("reuse_loads")) {
    auto flag = dyn_cast<BoolAttr>(reuse);
    if (!flag)
      return group.emitOpError(
          "expects 'reuse_loads' in 'liger.kernel_config' to be a bool");
    config.reuseLoads = flag.getValue();
  }
  if (Attribute ctas = dict.get("ctas_per_sm")) {
    auto value = dyn_cast<IntegerAttr>(ctas);
    if (!value || value.getInt() < 1 || value.getInt() > 64)
      return group.emitOpError("expects 'ctas_per_sm' in 'liger.kernel_config' "
                               "to be an integer in [1, 64]");
    config.ctasPerSm = value.getInt();
  }
  if (config.threads < 32 || config.threads > 1024 || config.threads % 32)
    return group.emitOpError("expects 'threads' to be a multiple of 32 in "
                             "[32, 1024], got ")
           << config.threads;
  std::optional<GroupRow> row = getGroupRow(group);
  if (row && row->tmpl) {
    std::string why = checkRowVectorWidth(*row->tmpl, row->hidden,
                                          row->elementType, config.vectorWidth);
    if (!why.empty())
      return group.emitOpError("has an invalid 'liger.kernel_config': ")
             << why;
  }
  return config;
}

namespace {

/// How the kernel holds a tensor of the row program.
struct Rep {
  enum Kind { Memory, Chunks, Uniform } kind = Memory;
  Value memref; // Memory
  RowParamKind paramKind = RowParamKind::Rows;
  SmallVector<Value> chunks; // Chunks: one vector per chunk
  Value uniform;             // Uniform: one scalar per row
};

/// The access kind of an indexing map over `rank` loops, or nullopt.
std::optional<RowParamKind> classifyMap(AffineMap map, unsigned rank) {
  if (map.getNumResults() == 0)
    return RowParamKind::Scalar;
  if (map.isIdentity() && map.getNumDims() == rank)
    return RowParamKind::Rows;
  if (map.getNumResults() == 1 &&
      map.getResult(0) == getAffineDimExpr(rank - 1, map.getContext()))
    return RowParamKind::Feature;
  if (map.getNumResults() == rank - 1 && map.isProjectedPermutation()) {
    for (unsigned i = 0; i + 1 < rank; ++i)
      if (map.getResult(i) != getAffineDimExpr(i, map.getContext()))
        return std::nullopt;
    return RowParamKind::RowScalars;
  }
  return std::nullopt;
}

class RowKernelBuilder {
public:
  RowKernelBuilder(FusionOp group, const RowKernelConfig &config)
      : group(group), config(config), ctx(group.getContext()),
        loc(group.getLoc()) {}

  FailureOr<RowKernelInfo> build(gpu::GPUModuleOp module, StringRef name);

private:
  LogicalResult lowerBodyToLinalg();
  LogicalResult analyze();
  LogicalResult emitGeneric(OpBuilder &b, linalg::GenericOp op);
  LogicalResult emitElementwise(OpBuilder &b, linalg::GenericOp op);
  LogicalResult emitReduction(OpBuilder &b, linalg::GenericOp op);
  LogicalResult emitRowScalar(OpBuilder &b, linalg::GenericOp op);
  LogicalResult emitColumnReduction(OpBuilder &b, linalg::GenericOp op);
  LogicalResult buildFinish(gpu::GPUModuleOp module, StringRef name,
                            ArrayRef<Type> paramTypes, RowKernelInfo &info);
  FailureOr<vector::CombiningKind> getCombiningKind(linalg::GenericOp op);
  FailureOr<Value> accumulateChunk(OpBuilder &b, linalg::GenericOp op,
                                   ArrayRef<RowParamKind> access, int64_t k,
                                   Value acc);
  FailureOr<SmallVector<Value>> vectorizeBody(OpBuilder &b, Block &body,
                                              ValueRange args, int64_t width);
  Value loadChunk(OpBuilder &b, Value tensor, RowParamKind access, int64_t k,
                  Value col);
  Value loadUniform(OpBuilder &b, Value tensor);
  Value hoistChunk(OpBuilder &b, Value tensor, RowParamKind access, int64_t k,
                   Value col, bool masked);
  SmallVector<Value> hoistChunks(OpBuilder &b, linalg::GenericOp op,
                                 ArrayRef<RowParamKind> access, int64_t k,
                                 Value col, bool masked);
  Value blockReduce(OpBuilder &b, Value scalar, vector::CombiningKind kind,
                    double neutral);
  Value combine(OpBuilder &b, vector::CombiningKind kind, Value x, Value y);
  void storeResultChunk(OpBuilder &b, Value tensor, Value chunk, Value col);
  LogicalResult fail(const Twine &why) {
    return group.emitOpError("cannot be lowered to a rowwise GPU kernel: ")
           << why;
  }
  VectorType vecOf(Type t) { return VectorType::get({config.vectorWidth}, t); }
  Value idx(OpBuilder &b, int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }

  FusionOp group;
  RowKernelConfig config;
  MLIRContext *ctx;
  Location loc;
  OwningOpRef<ModuleOp> scratch;
  func::FuncOp rowFn;
  unsigned rank = 0;  // loops of a row-shaped generic
  int64_t hidden = 0; // static row length
  Type rowType;       // the element type of the first row-shaped operand
  int64_t numChunks = 0;
  DenseMap<Value, Rep> reps;
  // Chunks of inputs loaded at the row program's top level, by (input,
  // chunk), for the steps after the first reader (reuse_loads).
  DenseMap<std::pair<Value, int64_t>, Value> loadedChunks;
  DenseMap<Value, double> fillValue;
  DenseMap<Value, SmallVector<unsigned>> resultIndex;
  SmallVector<RowParamKind> inputKinds;
  SmallVector<RowParamKind> outputKinds;
  SmallVector<Value> outputMemrefs;
  Value tid, row, dynSmem;
  int64_t smemBytes = 0;

  // Reductions across rows (column reductions) and the feature steps that
  // read them, in program order; a column reduction's per-chunk
  // accumulators (the row loop's iteration values) and their next values.
  SmallVector<linalg::GenericOp> columnReductions;
  DenseSet<Operation *> featureSteps;
  DenseSet<Value> featureValues;
  SmallVector<SmallVector<Value>> columnAcc, columnAccNext;
  SmallVector<Value> workspaceMemrefs;
  static constexpr int64_t kFinishThreads = 256;
  static constexpr int64_t kFinishColumns = 32;
};

/// Every loop but the last reduces, the last is parallel, and the one result
/// is indexed by the last loop: a reduction across rows.
bool isColumnReduction(linalg::GenericOp op, unsigned rank) {
  if (op.getNumLoops() != rank || rank < 2 || op.getNumDpsInits() != 1)
    return false;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (iterators.back() != utils::IteratorType::parallel ||
      !llvm::all_of(ArrayRef(iterators).drop_back(), [](utils::IteratorType t) {
        return t == utils::IteratorType::reduction;
      }))
    return false;
  AffineMap map = op.getMatchingIndexingMap(&op.getDpsInitsMutable()[0]);
  return map.getNumResults() == 1 &&
         map.getResult(0) == getAffineDimExpr(rank - 1, op.getContext());
}

LogicalResult RowKernelBuilder::lowerBodyToLinalg() {
  OpBuilder b(ctx);
  scratch = ModuleOp::create(loc);
  b.setInsertionPointToEnd(scratch->getBody());
  auto type = FunctionType::get(ctx, group.getInputs().getTypes(),
                                group.getResultTypes());
  rowFn = func::FuncOp::create(b, loc, "row", type);
  Block *entry = rowFn.addEntryBlock();
  IRMapping mapping;
  Block &body = group.getBody().front();
  mapping.map(body.getArguments(), entry->getArguments());
  b.setInsertionPointToEnd(entry);
  for (Operation &op : body.without_terminator())
    b.clone(op, mapping);
  SmallVector<Value> results;
  for (Value v : group.getYield().getValues())
    results.push_back(mapping.lookupOrDefault(v));
  func::ReturnOp::create(b, loc, results);

  RewritePatternSet patterns(ctx);
  populateLowerToLinalgPatterns(patterns);
  ConversionTarget target(*ctx);
  target.addIllegalDialect<LigerDialect>();
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
  if (failed(applyPartialConversion(rowFn, target, std::move(patterns))))
    return fail("its reference lowering failed");
  return success();
}

LogicalResult RowKernelBuilder::analyze() {
  // Gathers (computed indices) are outside the row program.
  if (rowFn
          .walk([](linalg::GenericOp op) {
            return op.hasIndexSemantics() ? WalkResult::interrupt()
                                          : WalkResult::advance();
          })
          .wasInterrupted())
    return fail("a step reads loop indices (a gather such as RoPE's or the "
                "cross-entropy target's), which the row program does not "
                "support yet");
  // The row rank and length: from the widest generic.
  rowFn.walk(
      [&](linalg::GenericOp op) { rank = std::max(rank, op.getNumLoops()); });
  if (rank == 0)
    return fail("its body computes nothing per row");
  WalkResult walk = rowFn.walk([&](linalg::GenericOp op) {
    if (op.getNumLoops() != rank)
      return WalkResult::advance();
    for (OpOperand &operand : op->getOpOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.get().getType());
      if (type && type.getRank() == rank) {
        if (type.isDynamicDim(rank - 1))
          return WalkResult::interrupt();
        hidden = type.getShape().back();
        if (!rowType)
          rowType = type.getElementType();
      }
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted() || hidden == 0)
    return fail("its rows need a static length");
  std::string why =
      checkRowVectorWidth(RowTemplate::RowProgram, hidden, rowType,
                          config.vectorWidth);
  if (!why.empty())
    return fail(why);
  numChunks =
      (hidden / config.vectorWidth + config.threads - 1) / config.threads;

  // Reductions across rows and the per-feature steps after them.
  for (auto op : rowFn.getBody().front().getOps<linalg::GenericOp>()) {
    if (isColumnReduction(op, rank)) {
      if (failed(getCombiningKind(op)))
        return failure();
      if (!op.getDpsInits()[0].getDefiningOp<linalg::FillOp>())
        return fail("a reduction across rows does not start from a constant");
      columnReductions.push_back(op);
      featureValues.insert(op->getResult(0));
      continue;
    }
    bool readsFeatureValue = llvm::any_of(op.getDpsInputs(), [&](Value v) {
      return featureValues.contains(v);
    });
    if (!readsFeatureValue)
      continue;
    if (op.getNumLoops() != 1 ||
        op.getNumReductionLoops() != 0)
      return fail("a step mixes rows with a value reduced across rows");
    for (Value in : op.getDpsInputs()) {
      auto type = cast<RankedTensorType>(in.getType());
      if (!featureValues.contains(in) && !isa<BlockArgument>(in) &&
          type.getRank() != 0)
        return fail("a per-feature step reads a value computed per row");
    }
    featureSteps.insert(op);
    for (Value r : op->getResults())
      featureValues.insert(r);
  }

  // Parameters: every input, classified by how the generics read it.
  for (BlockArgument arg : rowFn.getArguments()) {
    std::optional<RowParamKind> kind;
    for (OpOperand &use : arg.getUses()) {
      auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
      if (!generic)
        continue;
      AffineMap map = generic.getMatchingIndexingMap(&use);
      std::optional<RowParamKind> k;
      if (featureSteps.contains(generic))
        k = map.getNumResults() == 0 ? std::optional(RowParamKind::Scalar)
            : map.isIdentity()       ? std::optional(RowParamKind::Feature)
                                     : std::nullopt;
      else if (generic.getNumLoops() == rank)
        k = classifyMap(map, rank);
      else if (generic.getNumLoops() + 1 == rank)
        k = map.getNumResults() == 0 ? std::optional(RowParamKind::Scalar)
                                     : std::optional(RowParamKind::RowScalars);
      if (!k || (kind && *kind != *k))
        return fail("input #" + Twine(arg.getArgNumber()) +
                    " is read in a way a row kernel cannot index");
      kind = k;
    }
    auto type = cast<RankedTensorType>(arg.getType());
    if (!kind)
      kind = type.getRank() == rank ? RowParamKind::Rows
             : type.getRank() == 0  ? RowParamKind::Scalar
                                    : RowParamKind::RowScalars;
    inputKinds.push_back(*kind);
  }
  auto ret = cast<func::ReturnOp>(rowFn.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (isa<BlockArgument>(v))
      return fail("result #" + Twine(i) + " is an input passed through");
    resultIndex[v].push_back(i);
    auto type = cast<RankedTensorType>(v.getType());
    outputKinds.push_back(featureValues.contains(v) ? RowParamKind::Feature
                          : type.getRank() == rank  ? RowParamKind::Rows
                                                    : RowParamKind::RowScalars);
  }
  return success();
}

Value RowKernelBuilder::combine(OpBuilder &b, vector::CombiningKind kind,
                                Value x, Value y) {
  if (kind == vector::CombiningKind::ADD)
    return arith::AddFOp::create(b, loc, x, y);
  return arith::MaximumFOp::create(b, loc, x, y);
}

Value RowKernelBuilder::loadUniform(OpBuilder &b, Value tensor) {
  Rep &rep = reps[tensor];
  if (rep.kind == Rep::Uniform)
    return rep.uniform;
  if (rep.paramKind == RowParamKind::Scalar)
    return memref::LoadOp::create(b, loc, rep.memref, ValueRange{});
  return memref::LoadOp::create(b, loc, rep.memref, ValueRange{row});
}

Value RowKernelBuilder::loadChunk(OpBuilder &b, Value tensor,
                                  RowParamKind access, int64_t k, Value col) {
  Rep &rep = reps[tensor];
  Type elem = cast<RankedTensorType>(tensor.getType()).getElementType();
  if (rep.kind == Rep::Chunks)
    return rep.chunks[k];
  if (access == RowParamKind::RowScalars || access == RowParamKind::Scalar)
    return vector::BroadcastOp::create(b, loc, vecOf(elem),
                                       loadUniform(b, tensor));
  int64_t bytes = config.vectorWidth * (elem.getIntOrFloatBitWidth() / 8);
  llvm::MaybeAlign align(std::min<int64_t>(16, bytes));
  SmallVector<Value> indices;
  if (access == RowParamKind::Rows)
    indices.push_back(row);
  indices.push_back(col);
  return vector::LoadOp::create(b, loc, vecOf(elem), rep.memref, indices,
                                /*nontemporal=*/false, align);
}

Value RowKernelBuilder::hoistChunk(OpBuilder &b, Value tensor,
                                   RowParamKind access, int64_t k, Value col,
                                   bool masked) {
  Rep &rep = reps[tensor];
  if (rep.kind != Rep::Memory ||
      (access != RowParamKind::Rows && access != RowParamKind::Feature))
    return Value();
  auto key = std::make_pair(tensor, k);
  if (Value v = loadedChunks.lookup(key))
    return v;
  Value v;
  if (!masked) {
    v = loadChunk(b, tensor, access, k, col);
  } else {
    // Past the row's end: zeros (the steps mask what they store).
    Value inBounds = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           col, idx(b, hidden));
    auto type = vecOf(cast<RankedTensorType>(tensor.getType()).getElementType());
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{type}, inBounds, true);
    OpBuilder tb = ifOp.getThenBodyBuilder();
    scf::YieldOp::create(tb, loc,
                         ValueRange{loadChunk(tb, tensor, access, k, col)});
    OpBuilder eb = ifOp.getElseBodyBuilder();
    scf::YieldOp::create(
        eb, loc,
        ValueRange{arith::ConstantOp::create(
            eb, loc,
            DenseElementsAttr::get(type, eb.getZeroAttr(type.getElementType())))});
    v = ifOp.getResult(0);
  }
  loadedChunks[key] = v;
  return v;
}

SmallVector<Value> RowKernelBuilder::hoistChunks(OpBuilder &b,
                                                 linalg::GenericOp op,
                                                 ArrayRef<RowParamKind> access,
                                                 int64_t k, Value col,
                                                 bool masked) {
  SmallVector<Value> chunks;
  if (!config.reuseLoads)
    return chunks;
  for (auto [in, a] : llvm::zip(op.getDpsInputOperands(), access))
    chunks.push_back(hoistChunk(b, in->get(), a, k, col, masked));
  return chunks;
}

FailureOr<SmallVector<Value>> RowKernelBuilder::vectorizeBody(OpBuilder &b,
                                                              Block &body,
                                                              ValueRange args,
                                                              int64_t width) {
  std::string why;
  FailureOr<SmallVector<Value>> values =
      cloneElementwiseBody(b, loc, body, args, width, why);
  if (failed(values))
    return fail(why);
  return values;
}

void RowKernelBuilder::storeResultChunk(OpBuilder &b, Value tensor, Value chunk,
                                        Value col) {
  auto it = resultIndex.find(tensor);
  if (it == resultIndex.end())
    return;
  Type elem = cast<VectorType>(chunk.getType()).getElementType();
  int64_t bytes = config.vectorWidth * (elem.getIntOrFloatBitWidth() / 8);
  for (unsigned i : it->second)
    vector::StoreOp::create(b, loc, chunk, outputMemrefs[i],
                            ValueRange{row, col}, /*nontemporal=*/false,
                            llvm::MaybeAlign(std::min<int64_t>(16, bytes)));
}

LogicalResult RowKernelBuilder::emitElementwise(OpBuilder &b,
                                                linalg::GenericOp op) {
  SmallVector<RowParamKind> access;
  for (OpOperand *in : op.getDpsInputOperands()) {
    std::optional<RowParamKind> k =
        classifyMap(op.getMatchingIndexingMap(in), rank);
    if (!k)
      return fail("an elementwise step reads an operand it cannot index");
    access.push_back(*k);
  }
  for (OpOperand &out : op.getDpsInitsMutable())
    if (classifyMap(op.getMatchingIndexingMap(&out), rank) !=
        RowParamKind::Rows)
      return fail("an elementwise step writes a non-row result");
  int64_t w = config.vectorWidth;
  SmallVector<SmallVector<Value>> results(op->getNumResults());
  for (int64_t k = 0; k < numChunks; ++k) {
    // col = (k * threads + tid) * w
    Value chunk =
        arith::AddIOp::create(b, loc, idx(b, k * config.threads), tid);
    Value col = arith::MulIOp::create(b, loc, chunk, idx(b, w));
    bool masked = (k * config.threads + config.threads) * w > hidden;
    SmallVector<Value> hoisted = hoistChunks(b, op, access, k, col, masked);
    auto emitChunk = [&](OpBuilder &nb) -> FailureOr<SmallVector<Value>> {
      SmallVector<Value> args;
      for (auto [i, in, a] :
           llvm::enumerate(op.getDpsInputOperands(), access))
        args.push_back(!hoisted.empty() && hoisted[i]
                           ? hoisted[i]
                           : loadChunk(nb, in->get(), a, k, col));
      for (OpOperand &out : op.getDpsInitsMutable())
        args.push_back(arith::ConstantOp::create(
            nb, loc,
            DenseElementsAttr::get(
                vecOf(getElementTypeOrSelf(out.get().getType())),
                nb.getZeroAttr(getElementTypeOrSelf(out.get().getType())))));
      FailureOr<SmallVector<Value>> values =
          vectorizeBody(nb, *op.getBlock(), args, w);
      if (failed(values))
        return failure();
      for (auto [result, v] : llvm::zip(op->getResults(), *values))
        storeResultChunk(nb, result, v, col);
      return values;
    };
    if (!masked) {
      FailureOr<SmallVector<Value>> values = emitChunk(b);
      if (failed(values))
        return failure();
      for (auto [i, v] : llvm::enumerate(*values))
        results[i].push_back(v);
      continue;
    }
    Value inBounds = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           col, idx(b, hidden));
    SmallVector<Type> types;
    for (Value r : op->getResults())
      types.push_back(vecOf(getElementTypeOrSelf(r.getType())));
    auto ifOp = scf::IfOp::create(b, loc, types, inBounds,
                                  /*withElseRegion=*/true);
    OpBuilder thenB = ifOp.getThenBodyBuilder();
    FailureOr<SmallVector<Value>> values = emitChunk(thenB);
    if (failed(values))
      return failure();
    scf::YieldOp::create(thenB, loc, *values);
    OpBuilder elseB = ifOp.getElseBodyBuilder();
    SmallVector<Value> zeros;
    for (Type t : types)
      zeros.push_back(arith::ConstantOp::create(
          elseB, loc,
          DenseElementsAttr::get(
              cast<ShapedType>(t),
              elseB.getZeroAttr(cast<VectorType>(t).getElementType()))));
    scf::YieldOp::create(elseB, loc, zeros);
    for (auto [i, v] : llvm::enumerate(ifOp.getResults()))
      results[i].push_back(v);
  }
  for (auto [result, chunks] : llvm::zip(op->getResults(), results)) {
    Rep rep;
    rep.kind = Rep::Chunks;
    rep.chunks = chunks;
    reps[result] = rep;
  }
  return success();
}

Value RowKernelBuilder::blockReduce(OpBuilder &b, Value scalar,
                                    vector::CombiningKind kind,
                                    double neutral) {
  auto warpReduce = [&](OpBuilder &nb, Value v, int64_t width) {
    return warpAllReduce(nb, loc, v, width,
                         [&](OpBuilder &cb, ValueRange x, ValueRange y) {
                           return SmallVector<Value>{combine(cb, kind, x[0], y[0])};
                         })[0];
  };
  Value warpValue = warpReduce(b, scalar, 32);
  int64_t numWarps = config.threads / 32;
  if (numWarps == 1)
    return warpValue;
  // One shared-memory area per reduction: the warps' partials, then the
  // row's result.
  auto smemType = MemRefType::get(
      {numWarps + 1}, b.getF32Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  Value area = memref::ViewOp::create(b, loc, smemType, dynSmem,
                                      idx(b, smemBytes), ValueRange{});
  smemBytes += (numWarps + 1) * 4;
  Value lane = arith::RemUIOp::create(b, loc, tid, idx(b, 32));
  Value warp = arith::DivUIOp::create(b, loc, tid, idx(b, 32));
  Value isLane0 =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, idx(b, 0));
  auto storePartial = scf::IfOp::create(b, loc, isLane0, false);
  {
    OpBuilder nb = storePartial.getThenBodyBuilder();
    memref::StoreOp::create(nb, loc, warpValue, area, ValueRange{warp});
  }
  gpu::BarrierOp::create(b, loc);
  Value isWarp0 =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, warp, idx(b, 0));
  auto finish = scf::IfOp::create(b, loc, isWarp0, false);
  {
    OpBuilder nb = finish.getThenBodyBuilder();
    Value has = arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::ult, lane,
                                      idx(nb, numWarps));
    auto load =
        scf::IfOp::create(nb, loc, TypeRange{nb.getF32Type()}, has, true);
    OpBuilder tb = load.getThenBodyBuilder();
    scf::YieldOp::create(
        tb, loc,
        ValueRange{memref::LoadOp::create(tb, loc, area, ValueRange{lane})});
    OpBuilder eb = load.getElseBodyBuilder();
    scf::YieldOp::create(eb, loc,
                         ValueRange{arith::ConstantOp::create(
                             eb, loc, eb.getF32FloatAttr(neutral))});
    Value total =
        warpReduce(nb, load.getResult(0), llvm::PowerOf2Ceil(numWarps));
    auto publish = scf::IfOp::create(nb, loc, isLane0, false);
    OpBuilder pb = publish.getThenBodyBuilder();
    memref::StoreOp::create(pb, loc, total, area,
                            ValueRange{idx(pb, numWarps)});
  }
  gpu::BarrierOp::create(b, loc);
  return memref::LoadOp::create(b, loc, area, ValueRange{idx(b, numWarps)});
}

FailureOr<vector::CombiningKind>
RowKernelBuilder::getCombiningKind(linalg::GenericOp op) {
  // The combiner: the body yields add(acc, term) or maximumf(acc, term).
  Block &body = *op.getBlock();
  Value acc = body.getArguments().back();
  Operation *yielded = body.getTerminator()->getOperand(0).getDefiningOp();
  if (yielded && isa<arith::AddFOp>(yielded) &&
      llvm::is_contained(yielded->getOperands(), acc))
    return vector::CombiningKind::ADD;
  if (yielded && isa<arith::MaximumFOp>(yielded) &&
      llvm::is_contained(yielded->getOperands(), acc))
    return vector::CombiningKind::MAXIMUMF;
  return fail("a reduction step is neither a sum nor a maximum");
}

FailureOr<Value> RowKernelBuilder::accumulateChunk(
    OpBuilder &b, linalg::GenericOp op, ArrayRef<RowParamKind> access,
    int64_t k, Value acc) {
  int64_t w = config.vectorWidth;
  Value chunk = arith::AddIOp::create(b, loc, idx(b, k * config.threads), tid);
  Value col = arith::MulIOp::create(b, loc, chunk, idx(b, w));
  bool masked = (k * config.threads + config.threads) * w > hidden;
  SmallVector<Value> hoisted = hoistChunks(b, op, access, k, col, masked);
  auto emitChunk = [&](OpBuilder &nb) -> FailureOr<Value> {
    SmallVector<Value> args;
    for (auto [i, in, a] : llvm::enumerate(op.getDpsInputOperands(), access))
      args.push_back(!hoisted.empty() && hoisted[i]
                         ? hoisted[i]
                         : loadChunk(nb, in->get(), a, k, col));
    args.push_back(acc);
    FailureOr<SmallVector<Value>> values =
        vectorizeBody(nb, *op.getBlock(), args, w);
    if (failed(values))
      return failure();
    return (*values)[0];
  };
  if (!masked)
    return emitChunk(b);
  Value inBounds = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, col,
                                         idx(b, hidden));
  auto ifOp =
      scf::IfOp::create(b, loc, TypeRange{acc.getType()}, inBounds, true);
  OpBuilder tb = ifOp.getThenBodyBuilder();
  FailureOr<Value> next = emitChunk(tb);
  if (failed(next))
    return failure();
  scf::YieldOp::create(tb, loc, ValueRange{*next});
  OpBuilder eb = ifOp.getElseBodyBuilder();
  scf::YieldOp::create(eb, loc, ValueRange{acc});
  return ifOp.getResult(0);
}

/// The reads of a reduction step's inputs, classified.
static FailureOr<SmallVector<RowParamKind>> inputAccess(linalg::GenericOp op,
                                                        unsigned rank) {
  SmallVector<RowParamKind> access;
  for (OpOperand *in : op.getDpsInputOperands()) {
    std::optional<RowParamKind> k =
        classifyMap(op.getMatchingIndexingMap(in), rank);
    if (!k)
      return failure();
    access.push_back(*k);
  }
  return access;
}

LogicalResult RowKernelBuilder::emitReduction(OpBuilder &b,
                                              linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1)
    return fail("a reduction step has several results");
  auto fill = fillValue.find(op.getDpsInits()[0]);
  if (fill == fillValue.end())
    return fail("a reduction step does not start from a constant");
  FailureOr<vector::CombiningKind> kind = getCombiningKind(op);
  if (failed(kind))
    return failure();
  FailureOr<SmallVector<RowParamKind>> access = inputAccess(op, rank);
  if (failed(access))
    return fail("a reduction step reads an operand it cannot index");
  Value accVec = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(vecOf(b.getF32Type()),
                             b.getF32FloatAttr(fill->second)));
  for (int64_t k = 0; k < numChunks; ++k) {
    FailureOr<Value> next = accumulateChunk(b, op, *access, k, accVec);
    if (failed(next))
      return failure();
    accVec = *next;
  }
  Value partial = vector::ReductionOp::create(b, loc, *kind, accVec);
  Rep rep;
  rep.kind = Rep::Uniform;
  rep.uniform = blockReduce(b, partial, *kind, fill->second);
  reps[op->getResult(0)] = rep;
  return success();
}

LogicalResult RowKernelBuilder::emitColumnReduction(OpBuilder &b,
                                                    linalg::GenericOp op) {
  FailureOr<SmallVector<RowParamKind>> access = inputAccess(op, rank);
  if (failed(access))
    return fail("a reduction across rows reads an operand it cannot index");
  unsigned j = llvm::find(columnReductions, op) - columnReductions.begin();
  for (int64_t k = 0; k < numChunks; ++k) {
    FailureOr<Value> next =
        accumulateChunk(b, op, *access, k, columnAcc[j][k]);
    if (failed(next))
      return failure();
    columnAccNext[j][k] = *next;
  }
  return success();
}

LogicalResult RowKernelBuilder::emitRowScalar(OpBuilder &b,
                                              linalg::GenericOp op) {
  SmallVector<Value> args;
  for (OpOperand *in : op.getDpsInputOperands()) {
    Rep &rep = reps[in->get()];
    if (rep.kind == Rep::Chunks ||
        (rep.kind == Rep::Memory && (rep.paramKind == RowParamKind::Rows ||
                                     rep.paramKind == RowParamKind::Feature)))
      return fail("a step reduces across rows, which a row kernel cannot");
    args.push_back(loadUniform(b, in->get()));
  }
  for (OpOperand &out : op.getDpsInitsMutable())
    args.push_back(arith::ConstantOp::create(
        b, loc, b.getZeroAttr(getElementTypeOrSelf(out.get().getType()))));
  FailureOr<SmallVector<Value>> values =
      vectorizeBody(b, *op.getBlock(), args, /*width=*/0);
  if (failed(values))
    return failure();
  Value isThread0 =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, idx(b, 0));
  for (auto [result, v] : llvm::zip(op->getResults(), *values)) {
    Rep rep;
    rep.kind = Rep::Uniform;
    rep.uniform = v;
    reps[result] = rep;
    auto it = resultIndex.find(result);
    if (it == resultIndex.end())
      continue;
    auto store = scf::IfOp::create(b, loc, isThread0, false);
    OpBuilder sb = store.getThenBodyBuilder();
    for (unsigned i : it->second)
      memref::StoreOp::create(sb, loc, v, outputMemrefs[i], ValueRange{row});
  }
  return success();
}

LogicalResult RowKernelBuilder::emitGeneric(OpBuilder &b,
                                            linalg::GenericOp op) {
  if (op.hasIndexSemantics())
    return fail("a step reads loop indices (a gather such as RoPE's or the "
                "cross-entropy target's), which the row program does not "
                "support yet");
  if (isColumnReduction(op, rank))
    return emitColumnReduction(b, op);
  if (featureSteps.contains(op))
    return success(); // in the finishing kernel
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  unsigned loops = op.getNumLoops();
  if (loops == rank && llvm::all_of(iterators, [](utils::IteratorType t) {
        return t == utils::IteratorType::parallel;
      }))
    return emitElementwise(b, op);
  if (loops == rank && iterators.back() == utils::IteratorType::reduction &&
      llvm::all_of(ArrayRef(iterators).drop_back(), [](utils::IteratorType t) {
        return t == utils::IteratorType::parallel;
      }))
    return emitReduction(b, op);
  if (loops + 1 == rank && llvm::all_of(iterators, [](utils::IteratorType t) {
        return t == utils::IteratorType::parallel;
      }))
    return emitRowScalar(b, op);
  return fail("a step reduces across rows, which a row kernel cannot");
}

FailureOr<RowKernelInfo> RowKernelBuilder::build(gpu::GPUModuleOp module,
                                                 StringRef name) {
  if (failed(lowerBodyToLinalg()) || failed(analyze()))
    return failure();

  // The kernel signature: inputs then outputs, rows flattened.
  auto memrefFor = [&](Type tensorType, RowParamKind kind) -> MemRefType {
    Type elem = getElementTypeOrSelf(tensorType);
    switch (kind) {
    case RowParamKind::Rows:
      return MemRefType::get({ShapedType::kDynamic, hidden}, elem);
    case RowParamKind::RowScalars:
      return MemRefType::get({ShapedType::kDynamic}, elem);
    case RowParamKind::Feature:
      return MemRefType::get({hidden}, elem);
    case RowParamKind::Scalar:
      return MemRefType::get({}, elem);
    case RowParamKind::Partials:
      return MemRefType::get({ShapedType::kDynamic, hidden}, elem);
    case RowParamKind::Heads:
    case RowParamKind::Tables:
    case RowParamKind::Matrix:
      break; // other templates' kinds; the row program has none
    }
    llvm_unreachable("not a row-program parameter kind");
  };
  RowKernelInfo info;
  info.name = name.str();
  info.config = config;
  info.hidden = hidden;
  SmallVector<Type> paramTypes;
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(rowFn.getArgumentTypes(), inputKinds))) {
    auto [type, kind] = pair;
    paramTypes.push_back(memrefFor(type, kind));
    info.params.push_back(
        {"input" + std::to_string(i), false, false, kind,
         getElementTypeOrSelf(type),
         kind == RowParamKind::Rows || kind == RowParamKind::Feature ? hidden
                                                                     : 0});
  }
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(rowFn.getResultTypes(), outputKinds))) {
    auto [type, kind] = pair;
    paramTypes.push_back(memrefFor(type, kind));
    info.params.push_back({"output" + std::to_string(i), true, false, kind,
                           getElementTypeOrSelf(type),
                           kind == RowParamKind::Rows ||
                                   kind == RowParamKind::Feature
                               ? hidden
                               : 0});
  }
  Type f32 = Float32Type::get(ctx);
  for (size_t j = 0; j < columnReductions.size(); ++j) {
    paramTypes.push_back(memrefFor(f32, RowParamKind::Partials));
    info.params.push_back({"workspace" + std::to_string(j), false, true,
                           RowParamKind::Partials, f32, hidden});
  }
  for (Operation &op : group.getBody().front().without_terminator())
    info.opChain +=
        (info.opChain.empty() ? "" : ", ") + op.getName().getStringRef().str();

  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto kernel = gpu::GPUFuncOp::create(b, loc, name,
                                       FunctionType::get(ctx, paramTypes, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({static_cast<int32_t>(config.threads), 1, 1}));
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  row = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  dynSmem = gpu::DynamicSharedMemoryOp::create(
      b, loc,
      MemRefType::get(
          {ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(),
          gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup)));
  for (auto [arg, kind, param] :
       llvm::zip(rowFn.getArguments(), inputKinds,
                 entry.getArguments().take_front(inputKinds.size()))) {
    Rep rep;
    rep.memref = param;
    rep.paramKind = kind;
    reps[arg] = rep;
  }
  for (Value param : entry.getArguments()
                         .drop_front(inputKinds.size())
                         .take_front(outputKinds.size()))
    outputMemrefs.push_back(param);
  for (Value param :
       entry.getArguments().take_back(columnReductions.size()))
    workspaceMemrefs.push_back(param);

  // With reductions across rows: a loop over rows with a stride of the grid,
  // the column accumulators carried from row to row.
  scf::ForOp rowLoop;
  if (!columnReductions.empty()) {
    Value rowsMemref;
    for (auto [kind, param] : llvm::zip(inputKinds, entry.getArguments()))
      if (kind == RowParamKind::Rows && !rowsMemref)
        rowsMemref = param;
    if (!rowsMemref)
      return fail("it reduces across rows but has no row-shaped input to "
                  "count them");
    Value rows = memref::DimOp::create(b, loc, rowsMemref, 0);
    Value stride = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
    SmallVector<Value> inits;
    for (linalg::GenericOp op : columnReductions) {
      double neutral = *getCombiningKind(op) == vector::CombiningKind::ADD
                           ? 0.0
                           : -std::numeric_limits<double>::infinity();
      Value zero = arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(vecOf(f32), b.getF32FloatAttr(neutral)));
      inits.append(numChunks, zero);
    }
    rowLoop = scf::ForOp::create(b, loc, row, rows, stride, inits);
    b.setInsertionPointToStart(rowLoop.getBody());
    row = rowLoop.getInductionVar();
    for (size_t j = 0; j < columnReductions.size(); ++j) {
      auto args = rowLoop.getRegionIterArgs().slice(j * numChunks, numChunks);
      columnAcc.emplace_back(args.begin(), args.end());
      columnAccNext.emplace_back(args.begin(), args.end());
    }
  }

  for (Operation &op : rowFn.getBody().front()) {
    if (auto fill = dyn_cast<linalg::FillOp>(op)) {
      auto cst = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
      auto value = cst ? dyn_cast<FloatAttr>(cst.getValue()) : FloatAttr();
      if (!value)
        return fail("a reduction starts from a non-constant value");
      fillValue[fill.getResult(0)] = value.getValueAsDouble();
      continue;
    }
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      if (failed(emitGeneric(b, generic)))
        return failure();
      continue;
    }
    if (isa<tensor::EmptyOp, tensor::DimOp, arith::ConstantOp, func::ReturnOp>(
            op))
      continue;
    return fail("'" + op.getName().getStringRef() +
                "' between the steps is not supported by the row program");
  }
  if (rowLoop) {
    SmallVector<Value> next;
    for (auto &values : columnAccNext)
      next.append(values);
    scf::YieldOp::create(b, loc, next);
    b.setInsertionPointAfter(rowLoop);
    // This CTA's partials: one row of each workspace.
    Value cta = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
    int64_t w = config.vectorWidth;
    for (size_t j = 0; j < columnReductions.size(); ++j) {
      for (int64_t k = 0; k < numChunks; ++k) {
        Value chunk =
            arith::AddIOp::create(b, loc, idx(b, k * config.threads), tid);
        Value col = arith::MulIOp::create(b, loc, chunk, idx(b, w));
        OpBuilder sb = b;
        if ((k * config.threads + config.threads) * w > hidden) {
          Value inBounds = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::ult, col, idx(b, hidden));
          auto ifOp = scf::IfOp::create(b, loc, inBounds, false);
          sb = ifOp.getThenBodyBuilder();
        }
        vector::StoreOp::create(
            sb, loc, rowLoop.getResult(j * numChunks + k), workspaceMemrefs[j],
            ValueRange{cta, col}, /*nontemporal=*/false,
            llvm::MaybeAlign(std::min<int64_t>(16, w * 4)));
      }
    }
  }
  gpu::ReturnOp::create(b, loc);
  info.sharedMemoryBytes = smemBytes;
  if (!columnReductions.empty()) {
    info.grid = "ctas";
    // 4 CTAs of 256 threads per SM: 32 warps to keep loads in flight, few
    // enough partials (for 132 SMs and H = 4096, 8.6 MB) to cost ~2% of the
    // bytes the kernel moves at 16384 rows.
    info.ctasPerSm = 4;
    if (failed(buildFinish(module, name, paramTypes, info)))
      return failure();
  }
  return info;
}

LogicalResult RowKernelBuilder::buildFinish(gpu::GPUModuleOp module,
                                            StringRef name,
                                            ArrayRef<Type> paramTypes,
                                            RowKernelInfo &info) {
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  info.finishName = (name + "_finish").str();
  info.finishThreads = kFinishThreads;
  info.finishGrid = (hidden + kFinishColumns - 1) / kFinishColumns;
  auto kernel = gpu::GPUFuncOp::create(b, loc, info.finishName,
                                       FunctionType::get(ctx, paramTypes, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({static_cast<int32_t>(kFinishThreads), 1, 1}));
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  ValueRange params = entry.getArguments();
  Type f32 = b.getF32Type();
  Value t = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value block = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, loc, t, idx(b, kFinishColumns));
  Value slice = arith::DivUIOp::create(b, loc, t, idx(b, kFinishColumns));
  int64_t slices = kFinishThreads / kFinishColumns;
  Value col = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, block, idx(b, kFinishColumns)),
      lane);
  Value inBounds = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         col, idx(b, hidden));
  Value smem = gpu::DynamicSharedMemoryOp::create(
      b, loc,
      MemRefType::get(
          {ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(),
          gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup)));
  auto areaType = MemRefType::get(
      {slices * kFinishColumns}, f32, MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  Value slot = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, slice, idx(b, kFinishColumns)),
      lane);

  // Each slice of threads sums every `slices`-th partial of its column
  // (coalesced: a warp reads 32 consecutive features of one CTA's row).
  SmallVector<Value> areas;
  SmallVector<vector::CombiningKind> kinds;
  for (auto [j, op] : llvm::enumerate(columnReductions)) {
    vector::CombiningKind kind = *getCombiningKind(op);
    kinds.push_back(kind);
    double neutral = kind == vector::CombiningKind::ADD
                         ? 0.0
                         : -std::numeric_limits<double>::infinity();
    Value ws = params[params.size() - columnReductions.size() + j];
    Value ctas = memref::DimOp::create(b, loc, ws, 0);
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{f32}, inBounds, true);
    {
      OpBuilder tb = ifOp.getThenBodyBuilder();
      Value init = arith::ConstantOp::create(tb, loc, tb.getF32FloatAttr(neutral));
      auto loop = scf::ForOp::create(tb, loc, slice, ctas, idx(tb, slices),
                                     ValueRange{init});
      OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
      Value v = memref::LoadOp::create(lb, loc, ws,
                                       ValueRange{loop.getInductionVar(), col});
      scf::YieldOp::create(
          lb, loc, ValueRange{combine(lb, kind, loop.getRegionIterArgs()[0], v)});
      scf::YieldOp::create(tb, loc, loop.getResults());
      OpBuilder eb = ifOp.getElseBodyBuilder();
      scf::YieldOp::create(
          eb, loc,
          ValueRange{arith::ConstantOp::create(eb, loc, eb.getF32FloatAttr(neutral))});
    }
    Value area = memref::ViewOp::create(
        b, loc, areaType, smem,
        idx(b, static_cast<int64_t>(j) * slices * kFinishColumns * 4),
        ValueRange{});
    memref::StoreOp::create(b, loc, ifOp.getResult(0), area, ValueRange{slot});
    areas.push_back(area);
  }
  info.finishSharedMemoryBytes =
      static_cast<int64_t>(columnReductions.size()) * slices * kFinishColumns * 4;
  gpu::BarrierOp::create(b, loc);

  // The first slice finishes its column: the reduction from the group's
  // initial value, then the feature steps on scalars.
  Value first = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, slice, idx(b, 0)),
      inBounds);
  auto finish = scf::IfOp::create(b, loc, first, false);
  OpBuilder fb = finish.getThenBodyBuilder();
  DenseMap<Value, Value> scalars;
  auto storeIfResult = [&](Value tensor, Value v) {
    auto it = resultIndex.find(tensor);
    if (it == resultIndex.end())
      return;
    for (unsigned i : it->second) {
      memref::StoreOp::create(fb, loc, v, params[inputKinds.size() + i],
                              ValueRange{col});
    }
  };
  for (auto [j, op] : llvm::enumerate(columnReductions)) {
    Value total = arith::ConstantOp::create(
        fb, loc, fb.getF32FloatAttr(fillValue.lookup(op.getDpsInits()[0])));
    for (int64_t s = 0; s < slices; ++s)
      total = combine(fb, kinds[j], total,
                      memref::LoadOp::create(
                          fb, loc, areas[j],
                          ValueRange{arith::AddIOp::create(
                              fb, loc, idx(fb, s * kFinishColumns), lane)}));
    scalars[op->getResult(0)] = total;
    storeIfResult(op->getResult(0), total);
  }
  for (Operation &o : rowFn.getBody().front()) {
    auto op = dyn_cast<linalg::GenericOp>(o);
    if (!op || !featureSteps.contains(op))
      continue;
    SmallVector<Value> args;
    for (OpOperand *in : op.getDpsInputOperands()) {
      Value v = in->get();
      if (Value s = scalars.lookup(v)) {
        args.push_back(s);
        continue;
      }
      auto arg = cast<BlockArgument>(v);
      Value param = params[arg.getArgNumber()];
      args.push_back(
          inputKinds[arg.getArgNumber()] == RowParamKind::Scalar
              ? memref::LoadOp::create(fb, loc, param, ValueRange{}).getResult()
              : memref::LoadOp::create(fb, loc, param, ValueRange{col})
                    .getResult());
    }
    for (OpOperand &out : op.getDpsInitsMutable())
      args.push_back(arith::ConstantOp::create(
          fb, loc, fb.getZeroAttr(getElementTypeOrSelf(out.get().getType()))));
    FailureOr<SmallVector<Value>> values =
        vectorizeBody(fb, *op.getBlock(), args, /*width=*/0);
    if (failed(values))
      return failure();
    for (auto [result, v] : llvm::zip(op->getResults(), *values)) {
      scalars[result] = v;
      storeIfResult(result, v);
    }
  }
  gpu::ReturnOp::create(b, loc);
  return success();
}

} // namespace

FailureOr<SmallVector<Value>>
mlir::liger::cloneElementwiseBody(OpBuilder &b, Location loc, Block &body,
                                  ValueRange args, int64_t width,
                                  std::string &why) {
  IRMapping mapping;
  mapping.map(body.getArguments(), args);
  for (Operation &op : body.without_terminator()) {
    if (!isa<arith::ArithDialect, math::MathDialect>(op.getDialect()) ||
        op.getNumRegions() != 0) {
      why = ("'" + op.getName().getStringRef() +
             "' in a body is not elementwise arithmetic")
                .str();
      return failure();
    }
    if (width > 0) {
      if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
        auto type = VectorType::get({width}, cst.getType());
        mapping.map(cst.getResult(),
                    arith::ConstantOp::create(
                        b, loc, DenseElementsAttr::get(type, cst.getValue())));
        continue;
      }
    }
    OperationState state(loc, op.getName());
    for (Value operand : op.getOperands())
      state.addOperands(mapping.lookupOrDefault(operand));
    for (Type t : op.getResultTypes())
      state.addTypes(width > 0 ? Type(VectorType::get({width}, t)) : t);
    state.addAttributes(op.getAttrs());
    Operation *clone = b.create(state);
    mapping.map(op.getResults(), clone->getResults());
  }
  SmallVector<Value> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(mapping.lookupOrDefault(v));
  return results;
}

FailureOr<RowKernelInfo>
mlir::liger::buildRowKernel(FusionOp group, gpu::GPUModuleOp module,
                            StringRef name, const RowKernelConfig &config) {
  return RowKernelBuilder(group, config).build(module, name);
}

SmallVector<Value> mlir::liger::warpAllReduce(OpBuilder &b, Location loc,
                                             ValueRange values, int64_t lanes,
                                             CombineValues combine) {
  auto i32c = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  SmallVector<Value> acc(values.begin(), values.end());
  for (int64_t off = lanes / 2; off >= 1; off /= 2) {
    SmallVector<Value> other;
    for (Value v : acc)
      other.push_back(gpu::ShuffleOp::create(b, loc, v, i32c(off), i32c(32),
                                             gpu::ShuffleMode::XOR)
                          .getShuffleResult());
    acc = combine(b, acc, other);
  }
  return acc;
}

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
// (32 warps over the CTA rows, then shared memory) and runs the feature
// steps. No atomics: the result does not depend on scheduling.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/RowKernel.h"
#include "liger/Conversion/LigerToGPU/GpuBuilder.h"
#include "liger/Conversion/LigerToGPU/ReferenceLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::liger;
namespace rt = ::liger::runtime;

static int64_t elementBytes(Type elementType) {
  return std::max<int64_t>(1, elementType.getIntOrFloatBitWidth() / 8);
}

/// The register form of the row program unrolls each thread's
/// ceil(H / (T W)) chunks and keeps the chunks of every row value a later
/// step reads past a block reduction (x of RMSNorm, between its sum of
/// squares and its normalization) in registers, with the accumulators of
/// each reduction across rows. It does while a thread unrolls at most 64
/// chunks (compile time) and holds at most min(128, 32768 / T) such
/// elements (half of its share of the SM's 64K registers, at most 128: at
/// 256 threads LayerNorm's backward over 8192 bf16 holds 128 and ptxas
/// gives it 218 registers without spills). Past it the program loops over
/// its chunks (emitLooped). `held` counts the values held, each chunk of
/// a thread one element per lane.
///
/// A program that holds nothing reads each chunk once and uses it at once,
/// in either form: there the register form saves no load, and its
/// unrolled code past a few chunks runs slower than the loop's batched
/// loads. On an H100 (bench/config_sweep.py, 8192 rows of 128256 bf16)
/// KL's loss per token unrolled over 63 chunks ran at 60% of the copy
/// floor and looped at 102%, the JSD's loss at 23% and 53%. Such a
/// program unrolls at most kMaxStreamingChunks chunks (SwiGLU over 14336
/// bf16 at 256 threads: 7).
constexpr int64_t kMaxUnrolledChunks = 64;
constexpr int64_t kMaxStreamingChunks = 8;
constexpr int64_t kMaxHeldElements = 128;
static bool rowFitsInRegisters(int64_t hidden, int64_t threads, int64_t width,
                               int64_t held) {
  int64_t chunks = (hidden / width + threads - 1) / threads;
  if (held == 0)
    return chunks <= kMaxStreamingChunks;
  return chunks <= kMaxUnrolledChunks &&
         chunks * width * held <= std::min(kMaxHeldElements, 32768 / threads);
}
/// The loop form: its default threads per row, and the chunks U of each
/// stream (row input or workspace) a thread loads in one iteration of a
/// pass over `streams`: 16-byte chunks keep 64 bytes of f32 or 32 of bf16 in
/// flight a stream (U = 16 / W), at most 8 loads a stream and 32 elements
/// in all (at 16 loads a one-element GeGLU backward over f32 spilled, and
/// LayerNorm's backward over five streams on sm_80 at 8).
///
/// A looped program over rows (no reduction across rows) takes 512
/// threads: at two CTAs an SM, 32 warps keep more loads and transcendentals
/// in flight than 16 (the fused linear JSD's row kernel over 2 x 128256
/// bf16 ran 6.9% faster on an H100 than at 256 on a 1024-row chunk,
/// docs/benchmarks.md, stop 58). There ptxas caps a thread at 64 registers,
/// which a program holding many streams or accumulators spills past: such a
/// group carries kLoopFallbackThreads as its spill fallback, and liger-compile
/// compiles it again at 256 threads (up to 128 registers) where ptxas
/// reports a spill. A program reducing across rows keeps 256: its grid is
/// four CTAs an SM, which 512 threads would run in two waves.
constexpr int64_t kLoopThreads = 512;
constexpr int64_t kLoopFallbackThreads = 256;
/// The CTAs an SM the loop form aims at by default (its register bound and
/// its staging's share).
constexpr int64_t kLoopCtasPerSm = 2;
/// The least part of a row the loop form's staging takes on (emitLooped):
/// one in kMinStagedFraction of its elements.
constexpr int64_t kMinStagedFraction = 8;
static int64_t loopUnroll(int64_t width, int64_t streams) {
  return std::clamp<int64_t>(
      std::min(16 / width, 32 / (width * std::max<int64_t>(1, streams))), 1, 8);
}

std::string mlir::liger::checkRowVectorWidth(RowTemplate tmpl, int64_t hidden,
                                             Type elementType, int64_t width) {
  std::string why;
  llvm::raw_string_ostream os(why);
  int64_t bytes = elementBytes(elementType);
  if (width < 1 || !llvm::isPowerOf2_64(width))
    os << "vector_width " << width << " is not a power of two";
  else if (width * bytes > 16)
    os << "vector_width " << width << " spans " << width * bytes << " bytes of "
       << elementType << ", more than one 16-byte load";
  return why;
}

int64_t mlir::liger::rowPeelBody(int64_t hidden, int64_t width) {
  return std::max<int64_t>(0, (hidden - (width - 1)) / width) * width;
}

std::string mlir::liger::checkRowPeel(int64_t hidden, int64_t width,
                                      int64_t cluster, bool readsByColumn) {
  if (hidden % width == 0)
    return "";
  std::string what =
      ("vector_width " + Twine(width) + " does not divide the row length " +
       Twine(hidden) + ", so each row is peeled to its first chunk boundary, ")
          .str();
  if (cluster > 1)
    return what + "and a peeled row is not split over a cluster";
  if (readsByColumn)
    return what + "where an operand indexed by column alone would be read "
                  "unaligned";
  return "";
}

int64_t mlir::liger::rowClusterSlice(int64_t hidden, int64_t width,
                                     int64_t cluster) {
  int64_t chunks = (hidden + width - 1) / width;
  return (chunks + cluster - 1) / cluster * width;
}

std::string mlir::liger::checkRowCluster(int64_t hidden, int64_t width,
                                         int64_t cluster) {
  if (cluster <= 1)
    return "";
  int64_t slice = rowClusterSlice(hidden, width, cluster);
  if ((cluster - 1) * slice < hidden)
    return "";
  return ("a cluster of " + Twine(cluster) + " CTAs splits a row of " +
          Twine(hidden) + " into parts of " + Twine(slice) +
          " columns, which leaves its last CTA none")
      .str();
}

int64_t mlir::liger::widestRowVectorWidth(Type elementType) {
  return 16 / elementBytes(elementType);
}

int64_t mlir::liger::selectRowVectorWidth(RowTemplate tmpl, int64_t hidden,
                                          Type elementType) {
  int64_t width = widestRowVectorWidth(elementType);
  while (width > 1 &&
         (!checkRowVectorWidth(tmpl, hidden, elementType, width).empty() ||
          (tmpl == RowTemplate::RowProgram && hidden % width != 0)))
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

KernelTemplate mlir::liger::rowKernelTemplate(FusionOp group) {
  Operation &first = group.getBody().front().front();
  if (isa<RoPEOp, RoPEGradOp>(first))
    return KernelTemplate::rope;
  if (isa<CrossEntropyOp, CrossEntropyGradOp>(first))
    return KernelTemplate::cross_entropy;
  return KernelTemplate::rowwise;
}

static std::optional<GroupRow> getGroupRow(FusionOp group) {
  for (Value v : group.getInputs()) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || t.getRank() < 2 || t.isDynamicDim(t.getRank() - 1))
      continue;
    GroupRow row{t.getShape().back(), t.getElementType(), std::nullopt};
    switch (rowKernelTemplate(group)) {
    case KernelTemplate::cross_entropy:
      row.tmpl = RowTemplate::CrossEntropy;
      break;
    case KernelTemplate::rowwise:
      row.tmpl = RowTemplate::RowProgram;
      break;
    default: // RoPE's half head is checked by its template
      break;
    }
    return row;
  }
  return std::nullopt;
}

namespace {
/// What the default configuration of a row program depends on (analyze).
struct RowProgramNeeds {
  int64_t held = 0; ///< values a thread holds (rowFitsInRegisters)
  bool reducesAcrossRows = false; ///< a grid of CTAs, not of rows
  /// An operand indexed by column alone (a weight, a reduction across
  /// rows): checkRowPeel.
  bool readsByColumn = false;
  /// The element type the program's vector width is checked against (its
  /// first row operand's, which may differ from the group's first input's).
  Type rowType;
};
} // namespace
static std::optional<RowProgramNeeds>
analyzeRowProgram(FusionOp group, const RowKernelConfig &config);

RowKernelConfig mlir::liger::selectRowKernelConfig(FusionOp group) {
  std::optional<GroupRow> row = getGroupRow(group);
  if (!row)
    return RowKernelConfig();
  RowKernelConfig config = selectRowKernelConfig(row->hidden, row->elementType);
  if (row->tmpl == RowTemplate::RowProgram) {
    // More threads where the row does not fit the register form at 256
    // (more chunks than it unrolls), else the loop form's threads.
    std::optional<RowProgramNeeds> needs = analyzeRowProgram(group, config);
    if (needs && !rowFitsInRegisters(row->hidden, config.threads,
                                     config.vectorWidth, needs->held)) {
      const int64_t more[] = {512, 1024};
      const int64_t *fits = llvm::find_if(more, [&](int64_t threads) {
        return rowFitsInRegisters(row->hidden, threads, config.vectorWidth,
                                  needs->held);
      });
      if (fits != std::end(more)) {
        config.threads = *fits;
      } else if (needs->reducesAcrossRows) {
        config.threads = kLoopFallbackThreads;
      } else {
        config.threads = kLoopThreads;
        config.spillFallbackThreads = kLoopFallbackThreads;
        // A looped row its 16-byte chunks do not divide is peeled to its
        // first chunk boundary (rowPeelBody) where the program can peel,
        // rather than read in the narrower chunks that divide it: on an
        // H100 (bench/config_sweep.py, 8192 x 50257 bf16, GPT-2's
        // vocabulary) the divergences' kernels in one-element chunks ran
        // at 77-90% of the copy floor, peeled to 16 bytes at 95-100%.
        // (16 bytes of both the group's first input and the program's first
        // row operand, which the lowering checks the width against.)
        int64_t widest = std::min(widestRowVectorWidth(needs->rowType),
                                  widestRowVectorWidth(row->elementType));
        if (config.vectorWidth < widest && row->hidden % widest != 0 &&
            checkRowPeel(row->hidden, widest, /*cluster=*/1,
                         needs->readsByColumn)
                .empty())
          config.vectorWidth = widest;
      }
    }
  }
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

KernelConfigAttr
mlir::liger::getRowKernelConfigAttr(MLIRContext *ctx,
                                    KernelTemplate kernelTemplate,
                                    const RowKernelConfig &config) {
  return KernelConfigAttr::get(
      ctx, kernelTemplate, config.threads, config.vectorWidth,
      config.reuseLoads ? std::nullopt : std::optional<bool>(false),
      config.ctasPerSm ? std::optional<int64_t>(config.ctasPerSm)
                       : std::nullopt,
      std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
      config.cluster > 1 ? std::optional<int64_t>(config.cluster)
                         : std::nullopt);
}

rt::KernelParam mlir::liger::abiParam(std::string name, rt::ParamRole role,
                                      rt::ParamKind kind, Type elementType,
                                      int64_t length, int64_t outer) {
  std::optional<rt::DType> dtype = abiDTypeOf(elementType);
  assert(dtype && "the dialect's element types are the kernel ABI's");
  rt::KernelParam p;
  p.name = std::move(name);
  p.role = role;
  p.kind = kind;
  p.dtype = dtype.value_or(rt::DType::f32);
  p.length = length;
  p.outer = outer;
  return p;
}

FailureOr<RowKernelConfig>
mlir::liger::getRowKernelConfig(FusionOp group, KernelConfigAttr attr) {
  // The attribute's verifier established that a row template has both.
  RowKernelConfig config;
  config.threads = attr.getThreads().value_or(config.threads);
  config.vectorWidth = attr.getVectorWidth().value_or(config.vectorWidth);
  config.reuseLoads = attr.getReuseLoads().value_or(true);
  config.ctasPerSm = attr.getCtasPerSm().value_or(0);
  config.cluster = attr.getCluster().value_or(1);
  std::optional<GroupRow> row = getGroupRow(group);
  if (row && row->tmpl) {
    std::string why = checkRowVectorWidth(*row->tmpl, row->hidden,
                                          row->elementType, config.vectorWidth);
    if (why.empty() && *row->tmpl == RowTemplate::RowProgram)
      why = checkRowCluster(row->hidden, config.vectorWidth, config.cluster);
    // A peeled row: whether an operand is indexed by column alone needs
    // the analysis, which a cluster (refused either way) skips; a program
    // the row kernel cannot take at all is left to the lowering, which
    // says why.
    if (why.empty() && *row->tmpl == RowTemplate::RowProgram &&
        row->hidden % config.vectorWidth != 0) {
      std::optional<RowProgramNeeds> needs;
      if (config.cluster <= 1)
        needs = analyzeRowProgram(group, config);
      why = checkRowPeel(row->hidden, config.vectorWidth, config.cluster,
                         needs && needs->readsByColumn);
    }
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
  rt::ParamKind paramKind = rt::ParamKind::Rows;
  SmallVector<Value> chunks; // Chunks: one vector per chunk
  Value uniform;             // Uniform: one scalar per row
};

/// The access kind of an indexing map over `rank` loops, or nullopt.
std::optional<rt::ParamKind> classifyMap(AffineMap map, unsigned rank) {
  if (map.getNumResults() == 0)
    return rt::ParamKind::Scalar;
  if (map.isIdentity() && map.getNumDims() == rank)
    return rt::ParamKind::Rows;
  if (map.getNumResults() == 1 &&
      map.getResult(0) == getAffineDimExpr(rank - 1, map.getContext()))
    return rt::ParamKind::Feature;
  if (map.getNumResults() == rank - 1 && map.isProjectedPermutation()) {
    for (unsigned i = 0; i + 1 < rank; ++i)
      if (map.getResult(i) != getAffineDimExpr(i, map.getContext()))
        return std::nullopt;
    return rt::ParamKind::RowScalars;
  }
  return std::nullopt;
}

/// What a step of the row program does, from its loops.
enum class StepKind {
  Elementwise,     ///< all loops parallel over the row
  RowReduction,    ///< the last loop reduces: one value per row
  RowScalar,       ///< one loop fewer, all parallel: per-row scalars
  ColumnReduction, ///< every loop but the last reduces: one value per feature
  Other,
};

bool isColumnReduction(linalg::GenericOp op, unsigned rank);

StepKind classifyStep(linalg::GenericOp op, unsigned rank) {
  if (isColumnReduction(op, rank))
    return StepKind::ColumnReduction;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  auto parallel = [](utils::IteratorType t) {
    return t == utils::IteratorType::parallel;
  };
  unsigned loops = op.getNumLoops();
  if (loops == rank && llvm::all_of(iterators, parallel))
    return StepKind::Elementwise;
  if (loops == rank && iterators.back() == utils::IteratorType::reduction &&
      llvm::all_of(ArrayRef(iterators).drop_back(), parallel))
    return StepKind::RowReduction;
  if (loops + 1 == rank && llvm::all_of(iterators, parallel))
    return StepKind::RowScalar;
  return StepKind::Other;
}

/// A row reduction whose block step waits for the reductions after it that
/// do not read it (RowKernelBuilder::emitPendingReductions), so that
/// independent reductions share one block reduction, its two barriers and one
/// round of shuffles (LayerNorm's backward: the sums of g and of g x_hat): a
/// sum or a maximum of one value, or an online softmax's running maximum and
/// sum.
struct PendingReduction {
  SmallVector<Value> results;  ///< the reduced tensors, one per value
  SmallVector<Value> partials; ///< this thread's values
  SmallVector<double> neutral; ///< their identities
  /// The combiner of a sum or a maximum; none for an online (max, sum) pair.
  std::optional<vector::CombiningKind> kind;
};

class RowKernelBuilder {
public:
  RowKernelBuilder(FusionOp group, const RowKernelConfig &config,
                   int64_t maxSharedMemoryBytes = 0)
      : group(group), config(config), ctx(group.getContext()),
        loc(group.getLoc()), maxSharedMemoryBytes(maxSharedMemoryBytes) {}

  FailureOr<rt::KernelSpec> build(gpu::GPUModuleOp module, StringRef name);
  /// The analysis alone: what the default configuration depends on
  /// (RowProgramNeeds), or failure with a diagnostic on the group.
  FailureOr<RowProgramNeeds> analyzeNeeds() {
    if (failed(lowerBodyToLinalg()) || failed(analyze()))
      return failure();
    return RowProgramNeeds{heldValues, !columnReductions.empty(), readsByColumn,
                           rowType};
  }

private:
  LogicalResult lowerBodyToLinalg();
  LogicalResult analyze();
  LogicalResult emitLooped(OpBuilder &b);
  /// The loop form's passes over the row: `steps`, `passOf`, the online
  /// (max, sum) pairs and `passes`.
  LogicalResult assignPasses();
  /// What pass p does, in program order: its reductions, online (max, sum)
  /// pairs, column reductions and stores, and the row inputs it reads
  /// (loaded first in each chunk). `splats` (with a builder) receives the
  /// uniform values it reads, broadcast once before its loop.
  struct PassWork {
    SmallVector<linalg::GenericOp> reductions, columns, stores;
    SmallVector<std::pair<linalg::GenericOp, linalg::GenericOp>> online;
    SetVector<Value> rowInputs;
  };
  PassWork passWork(unsigned p, OpBuilder *sb, DenseMap<Value, Value> *splats);
  /// The row inputs (row-shaped parameters) more than one pass reads, in
  /// the order first read; `firstReader` receives the pass that first
  /// reads each row input.
  SetVector<Value> rereadInputs(DenseMap<Value, unsigned> *firstReader);
  LogicalResult emitGeneric(OpBuilder &b, linalg::GenericOp op);
  LogicalResult emitElementwise(OpBuilder &b, linalg::GenericOp op);
  LogicalResult emitReduction(OpBuilder &b, linalg::GenericOp op);
  LogicalResult emitRowScalar(OpBuilder &b, linalg::GenericOp op);
  void setUniform(OpBuilder &b, Value result, Value v);
  LogicalResult emitColumnReduction(OpBuilder &b, linalg::GenericOp op);
  LogicalResult buildFinish(gpu::GPUModuleOp module, StringRef name,
                            ArrayRef<Type> paramTypes, rt::KernelSpec &info);
  FailureOr<vector::CombiningKind> getCombiningKind(linalg::GenericOp op);
  FailureOr<Value> accumulateChunk(OpBuilder &b, linalg::GenericOp op,
                                   ArrayRef<rt::ParamKind> access, int64_t k,
                                   Value acc);
  FailureOr<SmallVector<Value>> vectorizeBody(OpBuilder &b, Block &body,
                                              ValueRange args, int64_t width);
  Value loadChunk(OpBuilder &b, Value tensor, rt::ParamKind access, int64_t k,
                  Value col);
  Value loadUniform(OpBuilder &b, Value tensor);
  Value hoistChunk(OpBuilder &b, Value tensor, rt::ParamKind access, int64_t k,
                   Value col, bool masked);
  SmallVector<Value> hoistChunks(OpBuilder &b, linalg::GenericOp op,
                                 ArrayRef<rt::ParamKind> access, int64_t k,
                                 Value col, bool masked);
  bool readsPendingReduction(linalg::GenericOp op);
  void emitPendingReductions(OpBuilder &b);
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
  // Row values the register form holds across block reductions
  // (rowFitsInRegisters); past the budget the program loops (emitLooped).
  int64_t heldValues = 0;
  bool looped = false;
  // Whether rows are peeled (the vector width does not divide them), and
  // the elements of their full chunks (rowPeelBody).
  bool peeled = false;
  int64_t peelBody = 0;
  /// Whether an operand is indexed by column alone (a Feature input or
  /// output, a reduction across rows).
  bool readsByColumn = false;
  DenseMap<Value, Rep> reps;
  // Chunks of inputs loaded at the row program's top level, by (input,
  // chunk), for the steps after the first reader (reuse_loads).
  DenseMap<std::pair<Value, int64_t>, Value> loadedChunks;
  DenseMap<Value, double> fillValue;
  DenseMap<Value, SmallVector<unsigned>> resultIndex;
  SmallVector<rt::ParamKind> inputKinds;
  SmallVector<rt::ParamKind> outputKinds;
  SmallVector<Value> outputMemrefs;
  Value tid, row, dynSmem;
  // In a cluster (config.cluster > 1): the CTA's rank in it and the first
  // column of its part of the row (rowClusterSlice); of a peeled row, its
  // head (its full chunks' first column); null otherwise.
  Value clusterRank, colBase;
  /// Column `col` of the CTA's part of the row as a column of the row.
  Value globalCol(OpBuilder &b, Value col) {
    return colBase ? arith::AddIOp::create(b, loc, colBase, col).getResult()
                   : col;
  }
  int64_t smemBytes = 0;
  // The end of the loop form's staging area (emitLooped), 0 without one.
  int64_t stageBytes = 0;
  int64_t maxSharedMemoryBytes = 0; // the target's, per CTA
  /// The CTAs an SM the loop form's register bound aims at (ptxas's
  /// .minnctapersm): ctas_per_sm, else two (at four a 256-thread kernel is
  /// capped at 64 registers, and LayerNorm's backward spilled).
  int64_t loopRegisterCtas() const {
    return config.ctasPerSm ? config.ctasPerSm : kLoopCtasPerSm;
  }
  /// The CTAs an SM its staging's share is sized for: ctas_per_sm, else
  /// those of its grid (four for a grid of CTAs, a reduction across rows)
  /// or of its register bound.
  int64_t loopStagingCtas() const {
    if (config.ctasPerSm)
      return config.ctasPerSm;
    return columnReductions.empty() ? loopRegisterCtas() : 4;
  }
  // Row reductions whose block step is still to come, in program order.
  SmallVector<PendingReduction> pendingReductions;
  // The loop form's steps (those not deferred to the finishing kernel), in
  // program order, and its passes (assignPasses).
  SmallVector<linalg::GenericOp> steps;
  DenseMap<Operation *, unsigned> passOf;
  DenseMap<Operation *, linalg::GenericOp> onlineMaxOf; // sum -> max
  DenseSet<Operation *> onlineMax;
  unsigned passes = 0;

  // Reductions across rows (column reductions) and the feature steps that
  // read them, in program order; a column reduction's per-chunk
  // accumulators (the row loop's iteration values) and their next values.
  SmallVector<linalg::GenericOp> columnReductions;
  DenseSet<Operation *> featureSteps;
  DenseSet<Value> featureValues;
  SmallVector<SmallVector<Value>> columnAcc, columnAccNext;
  SmallVector<Value> workspaceMemrefs;
  // 32 warps a CTA, one CTA per 32 features: with a few partial rows per
  // warp, the loads of a whole SM's warps in flight (8 warps left the
  // finish of LayerNorm's two weight gradients at 1.1 TB/s on the H200).
  static constexpr int64_t kFinishThreads = 1024;
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

/// One step for each value, however many of the group's ops form it (a
/// loss and its gradient each take the same log-softmax of their rows, and
/// a looped row program would carry both reductions): an op of the
/// function's block equal to an earlier one, operands and body alike, is
/// replaced by it. Only the block's own ops: a step's body keeps its
/// constants, which the row program clones with it.
static void mergeRepeatedSteps(func::FuncOp fn) {
  SmallVector<Operation *> kept;
  for (Operation &op : llvm::make_early_inc_range(fn.getBody().front())) {
    if (op.getNumResults() == 0 || !isMemoryEffectFree(&op)) {
      kept.push_back(&op);
      continue;
    }
    auto same = llvm::find_if(kept, [&](Operation *earlier) {
      return OperationEquivalence::isEquivalentTo(
          earlier, &op, OperationEquivalence::IgnoreLocations);
    });
    if (same == kept.end()) {
      kept.push_back(&op);
      continue;
    }
    op.replaceAllUsesWith(*same);
    op.erase();
  }
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
  if (failed(lowerToReference(rowFn)))
    return fail("its reference lowering failed");
  mergeRepeatedSteps(rowFn);
  return success();
}

LogicalResult RowKernelBuilder::analyze() {
  // The constants reductions start from.
  for (auto fill : rowFn.getBody().front().getOps<linalg::FillOp>()) {
    auto cst = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
    auto value = cst ? dyn_cast<FloatAttr>(cst.getValue()) : FloatAttr();
    if (!value)
      return fail("a reduction starts from a non-constant value");
    fillValue[fill.getResult(0)] = value.getValueAsDouble();
  }
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
    std::optional<rt::ParamKind> kind;
    for (OpOperand &use : arg.getUses()) {
      auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
      if (!generic)
        continue;
      AffineMap map = generic.getMatchingIndexingMap(&use);
      std::optional<rt::ParamKind> k;
      if (featureSteps.contains(generic))
        k = map.getNumResults() == 0 ? std::optional(rt::ParamKind::Scalar)
            : map.isIdentity()       ? std::optional(rt::ParamKind::Feature)
                                     : std::nullopt;
      else if (generic.getNumLoops() == rank)
        k = classifyMap(map, rank);
      else if (generic.getNumLoops() + 1 == rank)
        k = map.getNumResults() == 0 ? std::optional(rt::ParamKind::Scalar)
                                     : std::optional(rt::ParamKind::RowScalars);
      if (!k || (kind && *kind != *k))
        return fail("input #" + Twine(arg.getArgNumber()) +
                    " is read in a way a row kernel cannot index");
      kind = k;
    }
    auto type = cast<RankedTensorType>(arg.getType());
    if (!kind)
      kind = type.getRank() == rank ? rt::ParamKind::Rows
             : type.getRank() == 0  ? rt::ParamKind::Scalar
                                    : rt::ParamKind::RowScalars;
    inputKinds.push_back(*kind);
  }
  // The row values the register form holds: it runs the steps one after
  // another, each over all of a thread's chunks, so a row input read by
  // more than one step (its chunks loaded once, reuse_loads) or an
  // elementwise result read by a later step is held whole between them;
  // and each reduction across rows' accumulators.
  SmallVector<linalg::GenericOp> steps =
      llvm::to_vector(rowFn.getBody().front().getOps<linalg::GenericOp>());
  DenseMap<Value, std::pair<int64_t, int64_t>> span; // first, last step
  auto touch = [&](Value v, int64_t i) {
    auto [it, fresh] = span.try_emplace(v, i, i);
    if (!fresh)
      it->second.second = std::max(it->second.second, i);
  };
  for (auto [i, op] : llvm::enumerate(steps)) {
    for (Value in : op.getDpsInputs()) {
      auto arg = dyn_cast<BlockArgument>(in);
      if ((arg && inputKinds[arg.getArgNumber()] == rt::ParamKind::Rows) ||
          span.count(in))
        touch(in, i);
    }
    if (classifyStep(op, rank) == StepKind::Elementwise)
      for (Value r : op->getResults())
        touch(r, i);
  }
  heldValues = llvm::count_if(span, [](auto &entry) {
    return entry.second.second > entry.second.first;
  });
  heldValues += columnReductions.size();
  // An operand indexed by column alone: a weight, or a value reduced across
  // rows (checkRowPeel).
  readsByColumn = !columnReductions.empty() || !featureValues.empty() ||
                  llvm::is_contained(inputKinds, rt::ParamKind::Feature);
  peeled = hidden % config.vectorWidth != 0;
  if (peeled)
    peelBody = rowPeelBody(hidden, config.vectorWidth);
  // A cluster splits the rows of the loop form, which a peeled row takes
  // too (its single elements after each pass's chunks).
  looped = peeled || config.cluster > 1 ||
           !rowFitsInRegisters(hidden, config.threads, config.vectorWidth,
                               heldValues);

  auto ret = cast<func::ReturnOp>(rowFn.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (isa<BlockArgument>(v))
      return fail("result #" + Twine(i) + " is an input passed through");
    resultIndex[v].push_back(i);
    auto type = cast<RankedTensorType>(v.getType());
    outputKinds.push_back(featureValues.contains(v) ? rt::ParamKind::Feature
                          : type.getRank() == rank  ? rt::ParamKind::Rows
                                                    : rt::ParamKind::RowScalars);
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
  if (rep.paramKind == rt::ParamKind::Scalar)
    return memref::LoadOp::create(b, loc, rep.memref, ValueRange{});
  return memref::LoadOp::create(b, loc, rep.memref, ValueRange{row});
}

Value RowKernelBuilder::loadChunk(OpBuilder &b, Value tensor,
                                  rt::ParamKind access, int64_t k, Value col) {
  Rep &rep = reps[tensor];
  Type elem = cast<RankedTensorType>(tensor.getType()).getElementType();
  if (rep.kind == Rep::Chunks)
    return rep.chunks[k];
  if (access == rt::ParamKind::RowScalars || access == rt::ParamKind::Scalar)
    return vector::BroadcastOp::create(b, loc, vecOf(elem),
                                       loadUniform(b, tensor));
  int64_t bytes = config.vectorWidth * (elem.getIntOrFloatBitWidth() / 8);
  llvm::MaybeAlign align(std::min<int64_t>(16, bytes));
  SmallVector<Value> indices;
  if (access == rt::ParamKind::Rows)
    indices.push_back(row);
  indices.push_back(globalCol(b, col));
  return vector::LoadOp::create(b, loc, vecOf(elem), rep.memref, indices,
                                /*nontemporal=*/false, align);
}

Value RowKernelBuilder::hoistChunk(OpBuilder &b, Value tensor,
                                   rt::ParamKind access, int64_t k, Value col,
                                   bool masked) {
  Rep &rep = reps[tensor];
  if (rep.kind != Rep::Memory ||
      (access != rt::ParamKind::Rows && access != rt::ParamKind::Feature))
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
                                                 ArrayRef<rt::ParamKind> access,
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
    vector::StoreOp::create(
        b, loc, chunk, outputMemrefs[i], ValueRange{row, globalCol(b, col)},
        /*nontemporal=*/false, llvm::MaybeAlign(std::min<int64_t>(16, bytes)));
}

LogicalResult RowKernelBuilder::emitElementwise(OpBuilder &b,
                                                linalg::GenericOp op) {
  SmallVector<rt::ParamKind> access;
  for (OpOperand *in : op.getDpsInputOperands()) {
    std::optional<rt::ParamKind> k =
        classifyMap(op.getMatchingIndexingMap(in), rank);
    if (!k)
      return fail("an elementwise step reads an operand it cannot index");
    access.push_back(*k);
  }
  for (OpOperand &out : op.getDpsInitsMutable())
    if (classifyMap(op.getMatchingIndexingMap(&out), rank) !=
        rt::ParamKind::Rows)
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

bool RowKernelBuilder::readsPendingReduction(linalg::GenericOp op) {
  return llvm::any_of(op.getDpsInputs(), [&](Value in) {
    return llvm::any_of(pendingReductions, [&](const PendingReduction &r) {
      return llvm::is_contained(r.results, in);
    });
  });
}

void RowKernelBuilder::emitPendingReductions(OpBuilder &b) {
  if (pendingReductions.empty())
    return;
  SmallVector<Value> values;
  SmallVector<double> neutral;
  for (const PendingReduction &r : pendingReductions) {
    values.append(r.partials);
    neutral.append(r.neutral);
  }
  // Each reduction combines its own slice of the tuples.
  auto combineAll = [&](OpBuilder &nb, ValueRange x,
                        ValueRange y) -> SmallVector<Value> {
    SmallVector<Value> out;
    for (const PendingReduction &r : pendingReductions) {
      size_t at = out.size();
      if (r.kind) {
        out.push_back(combine(nb, *r.kind, x[at], y[at]));
        continue;
      }
      // Online softmax: m = max(m1, m2), s = s1 e^(m1 - m) + s2 e^(m2 - m).
      Value m = arith::MaximumFOp::create(nb, loc, x[at], y[at]);
      auto scaled = [&](Value mi, Value si) -> Value {
        return arith::MulFOp::create(
            nb, loc, si,
            math::ExpOp::create(nb, loc,
                                arith::SubFOp::create(nb, loc, mi, m)));
      };
      out.push_back(m);
      out.push_back(arith::AddFOp::create(nb, loc, scaled(x[at], x[at + 1]),
                                          scaled(y[at], y[at + 1])));
    }
    return out;
  };
  // One shared-memory area per block reduction.
  int64_t offset = smemBytes;
  if (config.threads > 32)
    smemBytes += GpuBuilder::blockReduceSlots(config.threads, values.size(),
                                              values.size()) *
                 4;
  SmallVector<Value> totals = GpuBuilder(loc, b).blockAllReduce(
      dynSmem, offset, values.size(), tid, config.threads, values, neutral,
      combineAll);
  if (config.cluster > 1) {
    // Then across the cluster's parts of the row, in slots of their own.
    int64_t slots = smemBytes;
    smemBytes += values.size() * 4;
    totals = GpuBuilder(loc, b).clusterAllReduce(dynSmem, slots, config.cluster,
                                                 tid, totals, combineAll);
  }
  size_t at = 0;
  for (const PendingReduction &r : pendingReductions)
    for (Value result : r.results)
      setUniform(b, result, totals[at++]);
  pendingReductions.clear();
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
    OpBuilder &b, linalg::GenericOp op, ArrayRef<rt::ParamKind> access,
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
static FailureOr<SmallVector<rt::ParamKind>> inputAccess(linalg::GenericOp op,
                                                        unsigned rank) {
  SmallVector<rt::ParamKind> access;
  for (OpOperand *in : op.getDpsInputOperands()) {
    std::optional<rt::ParamKind> k =
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
  FailureOr<SmallVector<rt::ParamKind>> access = inputAccess(op, rank);
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
  pendingReductions.push_back(
      {{op->getResult(0)}, {partial}, {fill->second}, *kind});
  return success();
}

LogicalResult RowKernelBuilder::emitColumnReduction(OpBuilder &b,
                                                    linalg::GenericOp op) {
  FailureOr<SmallVector<rt::ParamKind>> access = inputAccess(op, rank);
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
        (rep.kind == Rep::Memory && (rep.paramKind == rt::ParamKind::Rows ||
                                     rep.paramKind == rt::ParamKind::Feature)))
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
  for (auto [result, v] : llvm::zip(op->getResults(), *values))
    setUniform(b, result, v);
  return success();
}

/// `v`, the value of `result` for the row (uniform across the CTA): kept
/// for the later steps, and stored by thread 0 where the group yields it (a
/// per-row scalar, or a row reduction such as a loss per token).
void RowKernelBuilder::setUniform(OpBuilder &b, Value result, Value v) {
  Rep rep;
  rep.kind = Rep::Uniform;
  rep.uniform = v;
  reps[result] = rep;
  auto it = resultIndex.find(result);
  if (it == resultIndex.end())
    return;
  // (In a cluster every CTA has the value; the first stores it.)
  Value isThread0 =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, idx(b, 0));
  if (clusterRank)
    isThread0 = arith::AndIOp::create(
        b, loc, isThread0,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, clusterRank,
                              idx(b, 0)));
  auto store = scf::IfOp::create(b, loc, isThread0, false);
  OpBuilder sb = store.getThenBodyBuilder();
  for (unsigned i : it->second)
    memref::StoreOp::create(sb, loc, v, outputMemrefs[i], ValueRange{row});
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
  switch (classifyStep(op, rank)) {
  case StepKind::Elementwise:
    return emitElementwise(b, op);
  case StepKind::RowReduction:
    return emitReduction(b, op);
  case StepKind::RowScalar:
    return emitRowScalar(b, op);
  case StepKind::ColumnReduction:
  case StepKind::Other:
    break;
  }
  return fail("a step reduces across rows, which a row kernel cannot");
}

/// The reduction `sum` adds exp(a - m) over the row, where m is the result
/// of `max`, a maximum of the same a (softmax's denominator): in the loop
/// form both run in one pass as an online softmax (running max and a sum
/// rescaled when it grows), so softmax reads its row twice, not three times.
static bool isOnlineSum(linalg::GenericOp sum, linalg::GenericOp max,
                        unsigned rank) {
  if (classifyStep(sum, rank) != StepKind::RowReduction ||
      classifyStep(max, rank) != StepKind::RowReduction ||
      max.getNumDpsInputs() != 1 || sum.getNumDpsInputs() != 2)
    return false;
  Block &maxBody = *max.getBlock(), &sumBody = *sum.getBlock();
  // The block's first argument, widened to f32 or not.
  auto isInput = [](Value v, Block &body) {
    if (auto ext = v.getDefiningOp<arith::ExtFOp>())
      v = ext.getIn();
    return v == body.getArgument(0);
  };
  auto maxOp = dyn_cast_or_null<arith::MaximumFOp>(
      maxBody.getTerminator()->getOperand(0).getDefiningOp());
  if (!maxOp || maxOp.getLhs() != maxBody.getArgument(1) ||
      !isInput(maxOp.getRhs(), maxBody))
    return false;
  // sum's body: add(acc, exp(sub(in0, in1))) with in0 = max's input and
  // in1 = max's result, each read at its place in the row.
  if (sum.getDpsInputs()[0] != max.getDpsInputs()[0] ||
      sum.getDpsInputs()[1] != max->getResult(0) ||
      sum.getIndexingMapsArray()[0] != max.getIndexingMapsArray()[0])
    return false;
  auto add = dyn_cast_or_null<arith::AddFOp>(
      sumBody.getTerminator()->getOperand(0).getDefiningOp());
  if (!add || !llvm::is_contained(add->getOperands(), sumBody.getArgument(2)))
    return false;
  Value term =
      add.getLhs() == sumBody.getArgument(2) ? add.getRhs() : add.getLhs();
  auto exp = term.getDefiningOp<math::ExpOp>();
  auto sub =
      exp ? exp.getOperand().getDefiningOp<arith::SubFOp>() : arith::SubFOp();
  // Nothing else in the body: [extf,] sub, exp, add, yield.
  return sub && isInput(sub.getLhs(), sumBody) &&
         sub.getRhs() == sumBody.getArgument(1) &&
         sumBody.getOperations().size() ==
             (sub.getLhs() == sumBody.getArgument(0) ? 4u : 5u);
}

/// The fast-math flags of the exponential in an online sum's body
/// (isOnlineSum's exp(a - m)), which the loop's running sum takes too, as
/// the register form does by cloning the body: the JSD's afn, the
/// cross-entropy's none.
static arith::FastMathFlags onlineExpFlags(linalg::GenericOp sum) {
  for (Operation &op : *sum.getBlock())
    if (auto exp = dyn_cast<math::ExpOp>(op))
      return exp.getFastmath();
  return arith::FastMathFlags::none;
}

LogicalResult RowKernelBuilder::assignPasses() {
  // Phases: a step runs in the first pass over the row in which every
  // value it reads is known. Row inputs are known in pass 0, a reduction
  // run in pass p is known from pass p + 1, elementwise values and per-row
  // scalars when their operands are. Each pass is one loop over the
  // thread's chunks that accumulates the pass's reductions, adds into the
  // column reductions and stores the results computed in it; elementwise
  // values are recomputed from the inputs wherever a pass reads them, not
  // kept. The reductions' block steps follow the loop, the per-row scalars
  // come between passes.
  steps.clear();
  passOf.clear();
  onlineMaxOf.clear();
  onlineMax.clear();
  passes = 0;
  for (auto op : rowFn.getBody().front().getOps<linalg::GenericOp>())
    if (!featureSteps.contains(op))
      steps.push_back(op);
  DenseMap<Value, unsigned> known; // unlisted (inputs): pass 0
  for (linalg::GenericOp op : steps) {
    unsigned p = 0;
    for (Value in : op.getDpsInputs())
      p = std::max(p, known.lookup(in));
    StepKind kind = classifyStep(op, rank);
    if (kind == StepKind::Other)
      return fail("a step reduces across rows, which a row kernel cannot");
    if (kind == StepKind::Elementwise)
      for (OpOperand &out : op.getDpsInitsMutable())
        if (classifyMap(op.getMatchingIndexingMap(&out), rank) !=
            rt::ParamKind::Rows)
          return fail("an elementwise step writes a non-row result");
    if (kind == StepKind::RowReduction || kind == StepKind::ColumnReduction) {
      if (failed(getCombiningKind(op)))
        return failure();
      if (failed(inputAccess(op, rank)))
        return fail("a reduction step reads an operand it cannot index");
      if (!fillValue.count(op.getDpsInits()[0]))
        return fail("a reduction step does not start from a constant");
    }
    if (kind == StepKind::RowReduction) {
      if (auto max = dyn_cast_or_null<linalg::GenericOp>(
              op.getDpsInputs().back().getDefiningOp());
          max && isOnlineSum(op, max, rank) && !onlineMax.contains(max) &&
          known.lookup(op.getDpsInputs()[0]) <= passOf.lookup(max)) {
        p = passOf.lookup(max);
        onlineMaxOf[op] = max;
        onlineMax.insert(max);
      }
      known[op->getResult(0)] = p + 1;
    } else {
      for (Value r : op->getResults())
        known[r] = p;
    }
    passOf[op] = p;
    if (kind != StepKind::RowScalar)
      passes = std::max(passes, p + 1);
  }
  return success();
}

RowKernelBuilder::PassWork
RowKernelBuilder::passWork(unsigned p, OpBuilder *sb,
                           DenseMap<Value, Value> *splats) {
  PassWork work;
  for (linalg::GenericOp op : steps) {
    if (passOf[op] != p)
      continue;
    switch (classifyStep(op, rank)) {
    case StepKind::RowReduction:
      if (!onlineMax.contains(op) && !onlineMaxOf.count(op))
        work.reductions.push_back(op);
      break;
    case StepKind::ColumnReduction:
      work.columns.push_back(op);
      break;
    case StepKind::Elementwise:
      if (llvm::any_of(op->getResults(),
                       [&](Value r) { return resultIndex.count(r); }))
        work.stores.push_back(op);
      break;
    default:
      break;
    }
  }
  auto splat = [&](Value v, function_ref<Value()> scalar) {
    if (sb && !splats->count(v))
      (*splats)[v] = vector::BroadcastOp::create(
          *sb, loc, vecOf(getElementTypeOrSelf(v.getType())), scalar());
  };
  std::function<void(Value)> collect = [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      rt::ParamKind kind = inputKinds[arg.getArgNumber()];
      if (kind == rt::ParamKind::Rows || kind == rt::ParamKind::Feature)
        work.rowInputs.insert(v);
      else
        splat(v, [&] { return loadUniform(*sb, v); });
      return;
    }
    auto producer = v.getDefiningOp<linalg::GenericOp>();
    if (classifyStep(producer, rank) == StepKind::Elementwise) {
      // A result an earlier pass stored is read back (by the thread that
      // wrote it), one stream where recomputing it may take several.
      if (resultIndex.count(v) && passOf[producer] < p) {
        work.rowInputs.insert(v);
        return;
      }
      for (Value in : producer.getDpsInputs())
        collect(in);
      return;
    }
    splat(v, [&] { return reps[v].uniform; });
  };
  for (auto list : {work.reductions, work.columns, work.stores})
    for (linalg::GenericOp op : list)
      for (Value in : op.getDpsInputs())
        collect(in);
  for (linalg::GenericOp op : work.stores)
    for (Value r : op->getResults())
      collect(r);
  // (In program order: the map's order is its keys' addresses, which
  // would order the loads differently from one compile to the next.)
  for (linalg::GenericOp op : steps)
    if (auto it = onlineMaxOf.find(op);
        it != onlineMaxOf.end() && passOf[op] == p) {
      collect(it->second.getDpsInputs()[0]);
      work.online.push_back({it->second, op});
    }
  return work;
}

SetVector<Value>
RowKernelBuilder::rereadInputs(DenseMap<Value, unsigned> *firstReader) {
  SetVector<Value> reread;
  DenseMap<Value, unsigned> readers;
  for (unsigned p = 0; p < passes; ++p)
    for (Value in : passWork(p, nullptr, nullptr).rowInputs)
      if (auto arg = dyn_cast<BlockArgument>(in);
          arg && inputKinds[arg.getArgNumber()] == rt::ParamKind::Rows) {
        if (firstReader)
          firstReader->try_emplace(in, p);
        if (++readers[in] == 2)
          reread.insert(in);
      }
  return reread;
}

LogicalResult RowKernelBuilder::emitLooped(OpBuilder &b) {
  if (failed(assignPasses()))
    return failure();
  int64_t w = config.vectorWidth, threads = config.threads;
  // The CTA's part of the row: all of it, or in a cluster `slice` columns
  // from colBase, the last CTA's `lastChunks` chunks (the fewest).
  // A peeled row's part is its full chunks (rowPeelBody), its single
  // elements after them in each pass (emitSingles).
  int64_t rowEnd = peeled ? peelBody : hidden;
  int64_t slice =
      config.cluster > 1 ? rowClusterSlice(hidden, w, config.cluster) : rowEnd;
  int64_t totalChunks = slice / w;
  int64_t lastChunks = (rowEnd - (config.cluster - 1) * slice) / w;
  // The end of a cluster CTA's part, which its last chunks are masked to.
  Value partEnd;
  if (clusterRank)
    partEnd = arith::MinSIOp::create(
        b, loc, idx(b, slice),
        arith::SubIOp::create(b, loc, idx(b, hidden), colBase));
  Type f32 = b.getF32Type();
  DenseSet<Operation *> emittedScalars;
  auto emitScalarsUpTo = [&](unsigned p) -> LogicalResult {
    for (linalg::GenericOp op : steps)
      if (classifyStep(op, rank) == StepKind::RowScalar && passOf[op] <= p &&
          emittedScalars.insert(op).second && failed(emitRowScalar(b, op)))
        return failure();
    return success();
  };

  // Staging: a row input that several passes read is kept in shared memory
  // by the first, as far as the CTA's share holds it (the row's first
  // stagedChunks T W elements of each such input, each thread reading back
  // only the chunks it stored), and the later passes read that part from
  // there. The area follows the passes' block-reduction areas.
  DenseMap<Value, unsigned> firstReader;
  SetVector<Value> stagedInputs = rereadInputs(&firstReader);
  int64_t reductionBytes = 0;
  {
    for (unsigned p = 0; p < passes; ++p) {
      PassWork work = passWork(p, nullptr, nullptr);
      int64_t values = work.reductions.size() + 2 * work.online.size();
      if (values && threads > 32)
        reductionBytes +=
            GpuBuilder::blockReduceSlots(threads, values, values) * 4;
      if (values && config.cluster > 1) // emitPendingReductions' slots
        reductionBytes += values * 4;
    }
  }
  int64_t stageOffset = (smemBytes + reductionBytes + 15) / 16 * 16;
  int64_t stagedChunks = 0;
  SmallVector<Value> stageViews;
  if (config.reuseLoads && !stagedInputs.empty()) {
    int64_t chunkBytes = 0; // one chunk of every staged input
    for (Value in : stagedInputs)
      chunkBytes += w * elementBytes(getElementTypeOrSelf(in.getType()));
    int64_t share = sharedMemoryShare(maxSharedMemoryBytes, loopStagingCtas());
    stagedChunks =
        std::clamp<int64_t>((share - stageOffset) / (threads * chunkBytes), 0,
                            (totalChunks + threads - 1) / threads);
    // A stage holding less than kMinStagedFraction of the row saves little
    // of the later passes' reads while its share may cost the kernel CTAs
    // an SM (a softmax over 2^20 f32 would stage 2.7% of its row at two
    // CTAs an SM where its registers allow four): none then. (Not measured:
    // the JSD row kernel, staged at 21%, is the one measured case.)
    if (stagedChunks * threads * w * kMinStagedFraction < slice)
      stagedChunks = 0;
  }
  int64_t stagedElements = stagedChunks * threads * w;
  if (stagedChunks) {
    int64_t at = stageOffset;
    for (Value in : stagedInputs) {
      Type elem = getElementTypeOrSelf(in.getType());
      stageViews.push_back(
          GpuBuilder(loc, b).sharedView(dynSmem, at, {stagedElements}, elem));
      at += stagedElements * elementBytes(elem);
    }
    stageBytes = at;
  }
  // The chunk of row input `in` at `col` in pass p: from its stage where a
  // pass before staged it, else from memory (and into its stage, in the
  // first pass that reads it). `known`: whether the chunk is staged, where
  // the caller knows it at compile time.
  auto loadRowChunk = [&](OpBuilder &cb, Value in, unsigned p, Value col,
                          std::optional<bool> known) -> Value {
    auto arg = cast<BlockArgument>(in);
    auto *staged = llvm::find(stagedInputs, in);
    if (!stagedChunks || staged == stagedInputs.end() || known == false)
      return loadChunk(cb, in, inputKinds[arg.getArgNumber()], 0, col);
    Value view = stageViews[staged - stagedInputs.begin()];
    Type elem = getElementTypeOrSelf(in.getType());
    llvm::MaybeAlign align(std::min<int64_t>(16, w * elementBytes(elem)));
    auto isStaged = [&] {
      return arith::CmpIOp::create(cb, loc, arith::CmpIPredicate::ult, col,
                                   idx(cb, stagedElements));
    };
    auto fromStage = [&](OpBuilder &sb) -> Value {
      return vector::LoadOp::create(sb, loc, vecOf(elem), view, ValueRange{col},
                                    false, align);
    };
    if (p == firstReader.lookup(in)) {
      Value v = loadChunk(cb, in, rt::ParamKind::Rows, 0, col);
      OpBuilder sb = cb;
      if (!known)
        sb = GpuBuilder(loc, cb).ifThen(isStaged());
      vector::StoreOp::create(sb, loc, v, view, ValueRange{col},
                              /*nontemporal=*/false, align);
      return v;
    }
    if (known)
      return fromStage(cb);
    auto pick = scf::IfOp::create(cb, loc, TypeRange{vecOf(elem)}, isStaged(),
                                  /*withElseRegion=*/true);
    OpBuilder tb = pick.getThenBodyBuilder(), eb = pick.getElseBodyBuilder();
    scf::YieldOp::create(tb, loc, fromStage(tb));
    scf::YieldOp::create(eb, loc,
                         loadChunk(eb, in, rt::ParamKind::Rows, 0, col));
    return pick.getResult(0);
  };

  for (unsigned p = 0; p < passes; ++p) {
    if (failed(emitScalarsUpTo(p)))
      return failure();
    DenseMap<Value, Value> splats;
    PassWork work = passWork(p, &b, &splats);
    SmallVector<linalg::GenericOp> &reductions = work.reductions,
                                   &columns = work.columns,
                                   &stores = work.stores;
    auto &online = work.online;
    SetVector<Value> &rowInputs = work.rowInputs;

    int64_t unroll = loopUnroll(w, rowInputs.size() + columns.size());
    // (Groups every CTA of a cluster has all of: unmasked.)
    int64_t fullGroups = lastChunks / (unroll * threads);
    int64_t step = unroll * threads * w;
    // Every other pass runs backwards over the row, so that it starts with
    // the chunks the pass before read last, which L2 may still hold.
    bool backwards = p % 2 == 1;

    // The carried values: a vector accumulator per reduction, then the
    // running max and sum of each online pair.
    double lowest = std::numeric_limits<float>::lowest();
    SmallVector<Value> inits;
    for (linalg::GenericOp op : reductions)
      inits.push_back(arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(vecOf(f32), b.getF32FloatAttr(fillValue.lookup(
                                                 op.getDpsInits()[0])))));
    for (size_t i = 0; i < online.size(); ++i) {
      inits.push_back(
          arith::ConstantOp::create(b, loc, b.getF32FloatAttr(lowest)));
      inits.push_back(
          arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0)));
    }
    Value cta = columns.empty()
                    ? Value()
                    : gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);

    // One group of chunks at `cols`: every row input's chunks loaded first,
    // then the values, accumulations and stores.
    // `chunk`: the thread's chunk index of a lone chunk (the rest), which
    // tells at compile time whether it is staged; every chunk is where the
    // stage holds the whole of the CTA's part (a cluster's, as a rule).
    bool allStaged = stagedChunks && stagedChunks * threads >= totalChunks;
    // `single`: cols holds one column of the row (not of its chunks), a
    // single element of a peeled row, read and written alone and held in
    // every lane of a chunk; only lane 0 goes into the reductions.
    auto emitChunks =
        [&](OpBuilder &cb, ArrayRef<Value> cols, ValueRange carried,
            std::optional<int64_t> chunk = std::nullopt,
            bool single = false) -> FailureOr<SmallVector<Value>> {
      SmallVector<DenseMap<Value, Value>> chunkValues(cols.size());
      Value lane0;
      if (single) {
        SmallVector<bool> mask(w, false);
        mask[0] = true;
        lane0 = arith::ConstantOp::create(
            cb, loc,
            DenseElementsAttr::get(VectorType::get({w}, cb.getI1Type()),
                                   ArrayRef<bool>(mask)));
      }
      auto onLane0 = [&](Value v, Value otherwise) -> Value {
        return single ? arith::SelectOp::create(cb, loc, lane0, v, otherwise)
                            .getResult()
                      : v;
      };
      for (auto [u, col] : llvm::enumerate(cols))
        for (Value in : rowInputs) {
          if (single) {
            Value memref = isa<BlockArgument>(in)
                               ? reps[in].memref
                               : outputMemrefs[resultIndex.lookup(in)[0]];
            chunkValues[u][in] = vector::BroadcastOp::create(
                cb, loc, vecOf(getElementTypeOrSelf(in.getType())),
                memref::LoadOp::create(cb, loc, memref, ValueRange{row, col}));
            continue;
          }
          if (isa<BlockArgument>(in)) {
            chunkValues[u][in] =
                loadRowChunk(cb, in, p, col,
                             chunk ? std::optional<bool>(*chunk < stagedChunks)
                             : allStaged ? std::optional<bool>(true)
                                         : std::nullopt);
            continue;
          }
          Type elem = getElementTypeOrSelf(in.getType());
          chunkValues[u][in] = vector::LoadOp::create(
              cb, loc, vecOf(elem), outputMemrefs[resultIndex.lookup(in)[0]],
              ValueRange{row, globalCol(cb, col)}, /*nontemporal=*/false,
              llvm::MaybeAlign(std::min<int64_t>(16, w * elementBytes(elem))));
        }
      std::function<FailureOr<Value>(size_t, Value)> valueAt;
      // The values of `op`'s inputs at chunk u.
      auto inputsAt = [&](linalg::GenericOp op,
                          size_t u) -> FailureOr<SmallVector<Value>> {
        SmallVector<Value> args;
        for (Value in : op.getDpsInputs()) {
          FailureOr<Value> a = valueAt(u, in);
          if (failed(a))
            return failure();
          args.push_back(*a);
        }
        return args;
      };
      valueAt = [&](size_t u, Value v) -> FailureOr<Value> {
        if (Value known = chunkValues[u].lookup(v))
          return known;
        if (Value s = splats.lookup(v))
          return s;
        auto producer = v.getDefiningOp<linalg::GenericOp>();
        FailureOr<SmallVector<Value>> inputs = inputsAt(producer, u);
        if (failed(inputs))
          return failure();
        SmallVector<Value> args = *inputs;
        for (Value init : producer.getDpsInits())
          args.push_back(arith::ConstantOp::create(
              cb, loc,
              DenseElementsAttr::get(
                  vecOf(getElementTypeOrSelf(init.getType())),
                  cb.getZeroAttr(getElementTypeOrSelf(init.getType())))));
        FailureOr<SmallVector<Value>> results =
            vectorizeBody(cb, *producer.getBlock(), args, w);
        if (failed(results))
          return failure();
        for (auto [r, value] : llvm::zip(producer->getResults(), *results))
          chunkValues[u][r] = value;
        return chunkValues[u].lookup(v);
      };
      // The inputs of a reduction's body at chunk u, then `acc`.
      auto accumulate = [&](linalg::GenericOp op, size_t u,
                            Value acc) -> FailureOr<Value> {
        FailureOr<SmallVector<Value>> inputs = inputsAt(op, u);
        if (failed(inputs))
          return failure();
        SmallVector<Value> args = *inputs;
        args.push_back(acc);
        FailureOr<SmallVector<Value>> next =
            vectorizeBody(cb, *op.getBlock(), args, w);
        if (failed(next))
          return failure();
        return (*next)[0];
      };
      SmallVector<Value> next(carried.begin(), carried.end());
      for (auto [i, op] : llvm::enumerate(reductions))
        for (size_t u = 0; u < cols.size(); ++u) {
          FailureOr<Value> acc = accumulate(op, u, next[i]);
          if (failed(acc))
            return failure();
          next[i] = onLane0(*acc, next[i]);
        }
      for (auto [i, pair] : llvm::enumerate(online)) {
        // m' = max(m, max of the chunks), s' = s e^(m - m') + sum e^(a - m').
        SmallVector<Value> terms;
        Value groupMax;
        for (size_t u = 0; u < cols.size(); ++u) {
          FailureOr<Value> a = valueAt(u, pair.first.getDpsInputs()[0]);
          if (failed(a))
            return failure();
          Value af = *a;
          if (!getElementTypeOrSelf(af.getType()).isF32())
            af = arith::ExtFOp::create(cb, loc, vecOf(f32), af);
          terms.push_back(af);
          Value mx = vector::ReductionOp::create(
              cb, loc, vector::CombiningKind::MAXIMUMF, af);
          groupMax =
              groupMax ? arith::MaximumFOp::create(cb, loc, groupMax, mx) : mx;
        }
        unsigned at = reductions.size() + 2 * i;
        Value m = next[at], sum = next[at + 1];
        Value grown = arith::MaximumFOp::create(cb, loc, m, groupMax);
        arith::FastMathFlags flags = onlineExpFlags(pair.second);
        sum = arith::MulFOp::create(
            cb, loc, sum,
            math::ExpOp::create(
                cb, loc, arith::SubFOp::create(cb, loc, m, grown), flags));
        Value splat = vector::BroadcastOp::create(cb, loc, vecOf(f32), grown);
        // (A single element's lanes past the first add nothing.)
        Value zeros =
            single
                ? arith::ConstantOp::create(
                      cb, loc,
                      DenseElementsAttr::get(vecOf(f32), cb.getF32FloatAttr(0)))
                      .getResult()
                : Value();
        for (Value t : terms)
          sum = arith::AddFOp::create(
              cb, loc, sum,
              vector::ReductionOp::create(
                  cb, loc, vector::CombiningKind::ADD,
                  onLane0(math::ExpOp::create(
                              cb, loc, arith::SubFOp::create(cb, loc, t, splat),
                              flags),
                          zeros)));
        next[at] = grown;
        next[at + 1] = sum;
      }
      for (linalg::GenericOp op : columns) {
        Value workspace = workspaceMemrefs[llvm::find(columnReductions, op) -
                                           columnReductions.begin()];
        for (auto [u, col] : llvm::enumerate(cols)) {
          llvm::MaybeAlign align(std::min<int64_t>(16, w * 4));
          Value acc = vector::LoadOp::create(cb, loc, vecOf(f32), workspace,
                                             ValueRange{cta, col},
                                             /*nontemporal=*/false, align);
          FailureOr<Value> sumNext = accumulate(op, u, acc);
          if (failed(sumNext))
            return failure();
          vector::StoreOp::create(cb, loc, *sumNext, workspace,
                                  ValueRange{cta, col}, /*nontemporal=*/false,
                                  align);
        }
      }
      for (linalg::GenericOp op : stores)
        for (auto [u, col] : llvm::enumerate(cols))
          for (Value r : op->getResults()) {
            if (!resultIndex.count(r))
              continue;
            FailureOr<Value> v = valueAt(u, r);
            if (failed(v))
              return failure();
            if (!single) {
              storeResultChunk(cb, r, *v, col);
              continue;
            }
            Value element = vector::ExtractOp::create(cb, loc, *v, 0);
            for (unsigned i : resultIndex.lookup(r))
              memref::StoreOp::create(cb, loc, element, outputMemrefs[i],
                                      ValueRange{row, col});
          }
      return next;
    };

    // The full groups: unroll chunks a thread, every one in the row.
    SmallVector<Value> carried = inits;
    Value start = arith::MulIOp::create(b, loc, tid, idx(b, w));
    auto emitFullGroups = [&]() -> LogicalResult {
      if (fullGroups == 0)
        return success();
      auto loop = scf::ForOp::create(
          b, loc, start,
          arith::AddIOp::create(b, loc, start, idx(b, fullGroups * step)),
          idx(b, step), carried);
      OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
      // Backwards: group fullGroups - 1 - g at iteration g.
      Value first = loop.getInductionVar();
      if (backwards)
        first = arith::SubIOp::create(
            lb, loc,
            arith::AddIOp::create(
                lb, loc, arith::MulIOp::create(lb, loc, start, idx(lb, 2)),
                idx(lb, (fullGroups - 1) * step)),
            first);
      SmallVector<Value> cols;
      for (int64_t u = 0; u < unroll; ++u)
        cols.push_back(u == 0 ? first
                              : arith::AddIOp::create(lb, loc, first,
                                                      idx(lb, u * threads * w))
                                    .getResult());
      FailureOr<SmallVector<Value>> next =
          emitChunks(lb, cols, loop.getRegionIterArgs());
      if (failed(next))
        return failure();
      if (!carried.empty()) // else the loop has its yield already
        scf::YieldOp::create(lb, loc, *next);
      carried.assign(loop.getResults().begin(), loop.getResults().end());
      return success();
    };
    // The rest, a chunk at a time; the last may lie past the row's end
    // for some threads.
    auto emitRest = [&](int64_t i) -> LogicalResult {
      Value col = arith::MulIOp::create(
          b, loc, arith::AddIOp::create(b, loc, tid, idx(b, i * threads)),
          idx(b, w));
      if ((i + 1) * threads <= lastChunks) {
        FailureOr<SmallVector<Value>> next = emitChunks(b, {col}, carried, i);
        if (failed(next))
          return failure();
        carried = *next;
        return success();
      }
      Value inRow =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, col,
                                partEnd ? partEnd : idx(b, rowEnd));
      auto ifOp = scf::IfOp::create(b, loc, ValueRange(carried).getTypes(),
                                    inRow, /*withElseRegion=*/!carried.empty());
      OpBuilder tb = ifOp.getThenBodyBuilder();
      FailureOr<SmallVector<Value>> next = emitChunks(tb, {col}, carried, i);
      if (failed(next))
        return failure();
      if (carried.empty())
        return success(); // the then-block has its yield
      scf::YieldOp::create(tb, loc, *next);
      OpBuilder eb = ifOp.getElseBodyBuilder();
      scf::YieldOp::create(eb, loc, carried);
      carried.assign(ifOp.getResults().begin(), ifOp.getResults().end());
      return success();
    };
    int64_t restBegin = fullGroups * unroll;
    int64_t restEnd = (totalChunks + threads - 1) / threads;
    if (!backwards && failed(emitFullGroups()))
      return failure();
    for (int64_t k = 0; k < restEnd - restBegin; ++k)
      if (failed(emitRest(backwards ? restEnd - 1 - k : restBegin + k)))
        return failure();
    if (backwards && failed(emitFullGroups()))
      return failure();
    // A peeled row's single elements, one a thread: its head (columns
    // below colBase) and the elements after its full chunks.
    if (peeled) {
      Value inHead = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           tid, colBase);
      Value col = arith::SelectOp::create(
          b, loc, inHead, tid,
          arith::AddIOp::create(b, loc, tid, idx(b, peelBody)));
      Value mine = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tid,
                                         idx(b, hidden - peelBody));
      auto ifOp = scf::IfOp::create(b, loc, ValueRange(carried).getTypes(),
                                    mine, /*withElseRegion=*/!carried.empty());
      OpBuilder tb = ifOp.getThenBodyBuilder();
      FailureOr<SmallVector<Value>> next =
          emitChunks(tb, {col}, carried, std::nullopt, /*single=*/true);
      if (failed(next))
        return failure();
      if (!carried.empty()) {
        scf::YieldOp::create(tb, loc, *next);
        OpBuilder eb = ifOp.getElseBodyBuilder();
        scf::YieldOp::create(eb, loc, carried);
        carried.assign(ifOp.getResults().begin(), ifOp.getResults().end());
      }
    }

    // The block steps of the pass's reductions, all in one block reduction
    // (none reads another: each is known only after the pass).
    for (linalg::GenericOp op : steps) {
      if (passOf[op] != p || classifyStep(op, rank) != StepKind::RowReduction)
        continue;
      if (auto *it = llvm::find(reductions, op); it != reductions.end()) {
        vector::CombiningKind kind = *getCombiningKind(op);
        Value partial = vector::ReductionOp::create(
            b, loc, kind, carried[it - reductions.begin()]);
        pendingReductions.push_back({{op->getResult(0)},
                                     {partial},
                                     {fillValue.lookup(op.getDpsInits()[0])},
                                     kind});
        continue;
      }
      auto pairIt =
          llvm::find_if(online, [&](auto &pr) { return pr.second == op; });
      if (pairIt == online.end())
        continue; // the max of an online pair: with its sum
      unsigned at = reductions.size() + 2 * (pairIt - online.begin());
      pendingReductions.push_back(
          {{pairIt->first->getResult(0), op->getResult(0)},
           {carried[at], carried[at + 1]},
           {lowest, 0.0},
           std::nullopt});
    }
    emitPendingReductions(b);
  }
  if (stagedChunks && smemBytes > stageOffset)
    return fail("its block reductions took " + Twine(smemBytes) +
                " bytes of shared memory where the staging area starts at " +
                Twine(stageOffset));
  return emitScalarsUpTo(std::numeric_limits<unsigned>::max());
}

namespace {
/// Operations compared by what they compute: name, operands, attributes and
/// result types.
struct ComputedValueInfo : DenseMapInfo<Operation *> {
  static unsigned getHashValue(const Operation *op) {
    return OperationEquivalence::computeHash(
        const_cast<Operation *>(op), OperationEquivalence::directHashValue,
        OperationEquivalence::ignoreHashValue,
        OperationEquivalence::IgnoreLocations);
  }
  static bool isEqual(const Operation *a, const Operation *b) {
    if (a == b)
      return true;
    if (a == getEmptyKey() || a == getTombstoneKey() || b == getEmptyKey() ||
        b == getTombstoneKey())
      return false;
    return OperationEquivalence::isEquivalentTo(
        const_cast<Operation *>(a), const_cast<Operation *>(b),
        OperationEquivalence::IgnoreLocations);
  }
};
} // namespace

/// Steps that compute the same value from the same operands share it: the
/// JSD's loss and the sum of its gradient each take the log of the same
/// mixture in one pass, which LLVM, given both, canonicalizes apart before
/// it could merge them (two lg2 an element where one does). Only pure ops
/// (no memory access), each replaced by an identical one before it in its
/// block: a load is never merged, so reuse_loads = false still reads again.
static void mergeIdenticalPureOps(gpu::GPUFuncOp kernel) {
  kernel.walk([](Block *block) {
    DenseMap<Operation *, Operation *, ComputedValueInfo> first;
    for (Operation &op : llvm::make_early_inc_range(*block)) {
      if (op.getNumRegions() || op.getNumResults() == 0 || !isPure(&op))
        continue;
      auto [it, fresh] = first.try_emplace(&op, &op);
      if (fresh)
        continue;
      op.replaceAllUsesWith(it->second);
      op.erase();
    }
  });
}

/// The row programs' fast exponentials (`math.exp` with `afn` on f32: the
/// losses' per-element terms) as `ex2.approx.ftz` of x · log2 e, one
/// MUFU.EX2 each. The form without ftz that the default lowering takes
/// (__nv_fast_expf) is wrapped by ptxas in a compare and two predicated
/// multiplies for subnormal results: three more instructions an
/// exponential in kernels bound by their instructions (the fused linear
/// JSD's row kernel takes six an element over its three passes). A result
/// below 2^-126 becomes 0, an absolute error under 1.2e-38, within what
/// `afn` allows. Logarithms keep their form: an input below 2^-126 flushed
/// would be -inf.
static void lowerFastExps(gpu::GPUFuncOp kernel) {
  kernel.walk([](math::ExpOp exp) {
    Type type = exp.getType();
    if (!getElementTypeOrSelf(type).isF32() ||
        !arith::bitEnumContainsAll(exp.getFastmath(),
                                   arith::FastMathFlags::afn))
      return;
    OpBuilder b(exp);
    Location loc = exp.getLoc();
    Type f32 = b.getF32Type();
    FloatAttr log2e = b.getF32FloatAttr(1.4426950408889634);
    auto ex2 = [&](Value x) {
      Value scaled = arith::MulFOp::create(
          b, loc, x, arith::ConstantOp::create(b, loc, log2e));
      return LLVM::CallIntrinsicOp::create(
                 b, loc, f32, b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"),
                 ValueRange{scaled})
          .getResult(0);
    };
    auto vec = dyn_cast<VectorType>(type);
    if (vec && (vec.getRank() != 1 || vec.isScalable()))
      return; // (a row kernel's chunks are vector<W x f32>)
    Value result;
    if (vec) {
      result = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(vec, b.getF32FloatAttr(0.0)));
      for (int64_t i = 0, e = vec.getNumElements(); i < e; ++i) {
        Value x = vector::ExtractOp::create(b, loc, exp.getOperand(), i);
        result = vector::InsertOp::create(b, loc, ex2(x), result, i);
      }
    } else {
      result = ex2(exp.getOperand());
    }
    exp.replaceAllUsesWith(result);
    exp.erase();
  });
}

/// A row kernel's f32 products, sums and differences may contract into
/// FMAs (`fastmath<contract>`: LLVM fuses a product into the sum that
/// reads it, and ptxas those left), as nvcc's and Triton's kernels do by
/// default: one rounding where there were two, one instruction where
/// there were two. Without the flag LLVM writes `mul.rn` and `add.rn`,
/// which ptxas may not fuse either.
static void allowContraction(gpu::GPUFuncOp kernel) {
  kernel.walk([](Operation *op) {
    if (!isa<arith::MulFOp, arith::AddFOp, arith::SubFOp>(op))
      return;
    auto math = cast<arith::ArithFastMathInterface>(op);
    math->setAttr(math.getFastMathAttrName(),
                  arith::FastMathFlagsAttr::get(
                      op->getContext(), math.getFastMathFlagsAttr().getValue() |
                                            arith::FastMathFlags::contract));
  });
}

/// The operands of a group that only scales rows (one liger.scale of two
/// group inputs, its result the group's one output): {input, factor} as
/// group input indices, or nullopt. Its kernel leaves a row alone where the
/// output is the input's buffer and the row's factor is 1 (ScaleOp).
static std::optional<std::pair<unsigned, unsigned>>
getInPlaceScale(FusionOp group) {
  Block &body = group.getBody().front();
  auto ops = body.without_terminator();
  if (std::distance(ops.begin(), ops.end()) != 1)
    return std::nullopt;
  auto scale = dyn_cast<ScaleOp>(*ops.begin());
  if (!scale)
    return std::nullopt;
  ValueRange yielded = group.getYield().getValues();
  auto input = dyn_cast<BlockArgument>(scale.getInput());
  auto factor = dyn_cast<BlockArgument>(scale.getFactor());
  if (!input || !factor || input.getOwner() != &body ||
      factor.getOwner() != &body || yielded.size() != 1 ||
      yielded[0] != scale.getResult())
    return std::nullopt;
  return std::make_pair(input.getArgNumber(), factor.getArgNumber());
}

FailureOr<rt::KernelSpec> RowKernelBuilder::build(gpu::GPUModuleOp module,
                                                 StringRef name) {
  if (failed(lowerBodyToLinalg()) || failed(analyze()))
    return failure();
  // (getRowKernelConfig refuses such a configuration first.)
  if (std::string why = checkRowPeel(hidden, config.vectorWidth, config.cluster,
                                     readsByColumn);
      !why.empty())
    return fail(why);
  if (config.cluster > 1) {
    if (std::string why =
            checkRowCluster(hidden, config.vectorWidth, config.cluster);
        !why.empty())
      return fail(why);
    // (Besides its grid: the row loop such a kernel runs would reuse the
    // cluster's reduction slots from row to row with no barrier, and its
    // workspaces are indexed by the CTA's own columns.)
    if (!columnReductions.empty())
      return fail("a cluster of " + Twine(config.cluster) +
                  " CTAs splits each row, and the program reduces across "
                  "rows, whose grid is of CTAs, not of rows");
  }

  // The kernel signature: inputs then outputs, rows flattened.
  auto memrefFor = [&](Type tensorType, rt::ParamKind kind) -> MemRefType {
    Type elem = getElementTypeOrSelf(tensorType);
    switch (kind) {
    case rt::ParamKind::Rows:
      return MemRefType::get({ShapedType::kDynamic, hidden}, elem);
    case rt::ParamKind::RowScalars:
      return MemRefType::get({ShapedType::kDynamic}, elem);
    case rt::ParamKind::Feature:
      return MemRefType::get({hidden}, elem);
    case rt::ParamKind::Scalar:
      return MemRefType::get({}, elem);
    case rt::ParamKind::Partials:
      return MemRefType::get({ShapedType::kDynamic, hidden}, elem);
    case rt::ParamKind::Heads:
    case rt::ParamKind::Tables:
    case rt::ParamKind::Matrix:
    case rt::ParamKind::HeadScalars:
      break; // other templates' kinds; the row program has none
    }
    llvm_unreachable("not a row-program parameter kind");
  };
  rt::KernelSpec info;
  info.name = name.str();
  info.block[0] = config.threads;
  info.vectorWidth = config.vectorWidth;
  SmallVector<Type> paramTypes;
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(rowFn.getArgumentTypes(), inputKinds))) {
    auto [type, kind] = pair;
    paramTypes.push_back(memrefFor(type, kind));
    info.params.push_back(abiParam(
        "input" + std::to_string(i), rt::ParamRole::Input, kind,
        getElementTypeOrSelf(type),
        kind == rt::ParamKind::Rows || kind == rt::ParamKind::Feature ? hidden
                                                                      : 0));
  }
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(rowFn.getResultTypes(), outputKinds))) {
    auto [type, kind] = pair;
    paramTypes.push_back(memrefFor(type, kind));
    info.params.push_back(abiParam(
        "output" + std::to_string(i), rt::ParamRole::Output, kind,
        getElementTypeOrSelf(type),
        kind == rt::ParamKind::Rows || kind == rt::ParamKind::Feature ? hidden
                                                                      : 0));
  }
  Type f32 = Float32Type::get(ctx);
  for (size_t j = 0; j < columnReductions.size(); ++j) {
    paramTypes.push_back(memrefFor(f32, rt::ParamKind::Partials));
    info.params.push_back(abiParam("workspace" + std::to_string(j),
                                   rt::ParamRole::Workspace,
                                   rt::ParamKind::Partials, f32, hidden));
  }
  for (Operation &op : group.getBody().front().without_terminator())
    info.ops +=
        (info.ops.empty() ? "" : ", ") + op.getName().getStringRef().str();

  GpuBuilder b(loc, OpBuilder(ctx));
  gpu::GPUFuncOp kernel =
      b.beginKernel(module, name, paramTypes, config.threads);
  Block &entry = kernel.getBody().front();
  tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  row = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  if (config.cluster > 1) {
    // A grid of [rows, cluster] in clusters of 1 x cluster: CTA y of row x
    // (its rank in the cluster) takes part y of the row.
    clusterRank = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
    colBase = arith::MulIOp::create(
        b, loc, clusterRank,
        idx(b, rowClusterSlice(hidden, config.vectorWidth, config.cluster)));
    kernel->setAttr(
        NVVM::NVVMDialect::getClusterDimAttrName(),
        b.getDenseI32ArrayAttr({1, static_cast<int32_t>(config.cluster), 1}));
    info.grid[1] = {rt::GridDim::Const, config.cluster};
  }
  if (peeled) {
    // Row r starts at element r H of 16-byte aligned memory: its first
    // chunk boundary is head = (W - r (H mod W) mod W) mod W elements in,
    // the base of its full chunks (globalCol).
    Value w = idx(b, config.vectorWidth);
    Value misalign = arith::RemUIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, row, idx(b, hidden % config.vectorWidth)),
        w);
    colBase = arith::RemUIOp::create(
        b, loc, arith::SubIOp::create(b, loc, w, misalign), w);
  }
  dynSmem = b.dynamicSharedMemory();
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

  // A row scaled in place by a factor of exactly 1 is left as it is: the
  // CTA reads the factor, compares the output's buffer with the input's,
  // and skips the row (neither loads nor stores).
  scf::IfOp unitGuard;
  if (std::optional<std::pair<unsigned, unsigned>> scale =
          getInPlaceScale(group);
      scale && columnReductions.empty()) {
    Value input = entry.getArgument(scale->first);
    Value output = outputMemrefs.front();
    Value factor = loadUniform(b, rowFn.getArgument(scale->second));
    Value isOne = arith::CmpFOp::create(
        b, loc, arith::CmpFPredicate::OEQ, factor,
        arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f)));
    Value sameBuffer = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, input),
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, output));
    Value skip = arith::AndIOp::create(b, loc, isOne, sameBuffer);
    Value work = arith::XOrIOp::create(
        b, loc, skip, arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
    unitGuard = scf::IfOp::create(b, loc, work, /*withElseRegion=*/false);
    b.setInsertionPointToStart(unitGuard.thenBlock());
  }

  // With reductions across rows: a loop over rows with a stride of the grid,
  // the column accumulators carried from row to row.
  scf::ForOp rowLoop;
  if (!columnReductions.empty()) {
    Value rowsMemref;
    for (auto [kind, param] : llvm::zip(inputKinds, entry.getArguments()))
      if (kind == rt::ParamKind::Rows && !rowsMemref)
        rowsMemref = param;
    if (!rowsMemref)
      return fail("it reduces across rows but has no row-shaped input to "
                  "count them");
    Value rows = memref::DimOp::create(b, loc, rowsMemref, 0);
    Value stride = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
    SmallVector<Value> inits;
    if (looped) {
      // The loop form keeps the column accumulators in this CTA's row of
      // each workspace (each thread its own columns, the same in every
      // row): they start at the reduction's identity.
      int64_t w = config.vectorWidth;
      Value cta = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
      auto init = scf::ForOp::create(
          b, loc, arith::MulIOp::create(b, loc, tid, idx(b, w)), idx(b, hidden),
          idx(b, config.threads * w));
      OpBuilder ib = OpBuilder::atBlockBegin(init.getBody());
      for (auto [op, ws] : llvm::zip(columnReductions, workspaceMemrefs)) {
        double neutral = *getCombiningKind(op) == vector::CombiningKind::ADD
                             ? 0.0
                             : -std::numeric_limits<double>::infinity();
        vector::StoreOp::create(
            ib, loc,
            arith::ConstantOp::create(
                ib, loc,
                DenseElementsAttr::get(vecOf(f32),
                                       ib.getF32FloatAttr(neutral))),
            ws, ValueRange{cta, init.getInductionVar()}, /*nontemporal=*/false,
            llvm::MaybeAlign(std::min<int64_t>(16, w * 4)));
      }
    }
    for (linalg::GenericOp op :
         looped ? ArrayRef<linalg::GenericOp>() : ArrayRef(columnReductions)) {
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
    for (size_t j = 0; j < (looped ? 0 : columnReductions.size()); ++j) {
      auto args = rowLoop.getRegionIterArgs().slice(j * numChunks, numChunks);
      columnAcc.emplace_back(args.begin(), args.end());
      columnAccNext.emplace_back(args.begin(), args.end());
    }
  }

  for (Operation &op : rowFn.getBody().front()) {
    if (isa<linalg::FillOp>(op)) // (analyze took its constant)
      continue;
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      if (looped)
        continue;
      // The waiting block steps go just before the first step that reads
      // one of them.
      if (readsPendingReduction(generic))
        emitPendingReductions(b);
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
  emitPendingReductions(b); // those no step reads (results only)
  if (looped) {
    if (failed(emitLooped(b)))
      return failure();
    // Two CTAs an SM by default: without the bound ptxas aimed a loop-form
    // kernel at four or six (40 or 64 registers) and spilled; with it the
    // kernels take up to 128 without spills.
    kernel->setAttr("nvvm.minctasm", b.getI32IntegerAttr(loopRegisterCtas()));
  }
  if (rowLoop && looped) {
    b.setInsertionPointAfter(rowLoop); // its partials are in the workspaces
  } else if (rowLoop) {
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
  if (unitGuard)
    b.setInsertionPointAfter(unitGuard);
  // No CTA of a cluster leaves while another may read its reductions' slots.
  if (clusterRank)
    b.clusterBarrier();
  gpu::ReturnOp::create(b, loc);
  mergeIdenticalPureOps(kernel);
  lowerFastExps(kernel);
  allowContraction(kernel);
  info.dynamicSharedMemoryBytes = std::max(smemBytes, stageBytes);
  if (!columnReductions.empty()) {
    info.grid[0] = {rt::GridDim::Ctas, 1};
    // 4 CTAs of 256 threads per SM by default: 32 warps to keep loads in
    // flight, few enough partials (for 132 SMs and H = 4096, 8.6 MB) to
    // cost ~2% of the bytes the kernel moves at 16384 rows.
    info.ctasPerSm = config.ctasPerSm ? config.ctasPerSm : 4;
    if (failed(buildFinish(module, name, paramTypes, info)))
      return failure();
  }
  return info;
}

LogicalResult RowKernelBuilder::buildFinish(gpu::GPUModuleOp module,
                                            StringRef name,
                                            ArrayRef<Type> paramTypes,
                                            rt::KernelSpec &info) {
  info.finish.name = (name + "_finish").str();
  info.finish.block[0] = kFinishThreads;
  info.finish.grid = (hidden + kFinishColumns - 1) / kFinishColumns;
  GpuBuilder b(loc, OpBuilder(ctx));
  gpu::GPUFuncOp kernel =
      b.beginKernel(module, info.finish.name, paramTypes, kFinishThreads);
  Block &entry = kernel.getBody().front();
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
  Value smem = b.dynamicSharedMemory();
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
    Value area = b.sharedView(
        smem, static_cast<int64_t>(j) * slices * kFinishColumns * 4,
        {slices * kFinishColumns}, f32);
    memref::StoreOp::create(b, loc, ifOp.getResult(0), area, ValueRange{slot});
    areas.push_back(area);
  }
  info.finish.dynamicSharedMemoryBytes =
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
          inputKinds[arg.getArgNumber()] == rt::ParamKind::Scalar
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

/// What `group`'s row program needs at `config` (its analysis, diagnostics
/// dropped): the row values its register form holds, and whether it
/// reduces across rows; none when the row program does not take the group
/// (the lowering then says why).
static std::optional<RowProgramNeeds>
analyzeRowProgram(FusionOp group, const RowKernelConfig &config) {
  ScopedDiagnosticHandler quiet(group.getContext(),
                                [](Diagnostic &) { return success(); });
  FailureOr<RowProgramNeeds> needs =
      RowKernelBuilder(group, config).analyzeNeeds();
  if (failed(needs))
    return std::nullopt;
  return *needs;
}

FailureOr<rt::KernelSpec>
mlir::liger::buildRowKernel(FusionOp group, gpu::GPUModuleOp module,
                            StringRef name, const RowKernelConfig &config,
                            int64_t maxSharedMemoryBytes) {
  return RowKernelBuilder(group, config, maxSharedMemoryBytes)
      .build(module, name);
}

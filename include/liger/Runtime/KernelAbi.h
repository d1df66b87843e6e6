//===- KernelAbi.h - what a bundle tells the runtime ------------*- C++ -*-===//
//
// The one contract between the compiler and the runtime
// (docs/Design/Kernel-ABI.md): a bundle's manifest as typed structs, written
// by the bundle writer (lib/Target/GpuBinary.cpp) and read by the runtime
// through the same code, verified once (verifyManifest, on both sides) and
// trusted after. It also holds the rules every launcher shares: which
// tensors a kernel takes (checkArgs), the shapes of its outputs and
// workspaces (inferOutputShapes, outputShapeRules, inferWorkspaceShapes),
// how each parameter is passed (packDescriptor) and what its TMA
// descriptors describe (tensorMapGeometry), and which GPUs run an arch
// (archRunsOn). No MLIR, LLVM, CUDA or JSON header here: the JSON library
// stays inside the runtime's sources.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_RUNTIME_KERNELABI_H
#define LIGER_RUNTIME_KERNELABI_H

#include "liger/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace liger::runtime {

/// The manifest's "format" and the one "version" this runtime reads and
/// writes. The version changes whenever a field is added, removed or
/// changes meaning (docs/Design/Kernel-ABI.md lists the versions).
inline constexpr const char *kManifestFormat = "liger-bundle";
inline constexpr int64_t kManifestVersion = 3;
/// What parseManifest reads at most: arrays and objects nested this deep
/// (a manifest nests 8 deep), and this many JSON values (about 80 per
/// kernel).
inline constexpr size_t kMaxManifestDepth = 32;
inline constexpr size_t kMaxManifestValues = size_t(1) << 20;

//===----------------------------------------------------------------------===//
// Enumerations, each with its manifest spelling
//===----------------------------------------------------------------------===//

/// Element types of kernel parameters.
enum class DType { bf16, f16, f32, i32, i64 };
/// Which tensors a kernel reads, writes, or uses as scratch.
enum class ParamRole { Input, Output, Workspace };

/// How a kernel indexes a parameter: the shape it takes, in shape symbols
/// (`rows` is the product of the leading dimensions; every other letter is
/// static):
enum class ParamKind {
  Rows,       ///< [rows..., H]
  RowScalars, ///< [rows...] (e.g. RMSNorm's rstd)
  Feature,    ///< [H] (a weight)
  Scalar,     ///< rank 0 (a reduced loss)
  Heads,      ///< [batch, heads, seq, D]; the grid counts batch * seq tokens
  Tables,     ///< [1 or batch, seq, D] (RoPE's cos and sin)
  Partials,   ///< [ctas, H] f32 workspace, one partial reduction per CTA
  Matrix,     ///< [N, K], static (a projection's weight or its gradient)
  /// [batch, heads, seq]: one scalar per (batch, head, position), with the
  /// batch and sequence of the kernel's heads tensors (attention's
  /// log-sum-exp, saved by the forward for the backward). Kinds added later
  /// go last, so that the values of the others stay.
  HeadScalars,
};

/// The kernel template a kernel was built from (informational). New
/// templates go last, so that the values of the others stay.
enum class KernelTemplate { Rowwise, RoPE, CrossEntropy, Matmul, Attention };

/// Shared-memory swizzle of a TMA tile (the span of one swizzle atom).
enum class TensorMapSwizzle { None = 0, B32 = 1, B64 = 2, B128 = 3 };

/// The kernels of one chunk of a planned loss group (docs/Design/Bundle.md).
enum class LossStage { Logits, CE, DX, DW0, DW };
inline constexpr int kNumLossStages = 5;

/// What a plan computes; the only kind so far.
enum class LossPlanKind { FusedLinearCrossEntropy };

const char *dtypeName(DType dtype);
const char *roleName(ParamRole role);
const char *kindName(ParamKind kind);
const char *templateName(KernelTemplate kernelTemplate);
const char *lossStageName(LossStage stage);
const char *lossPlanKindName(LossPlanKind kind);
/// Each parses the manifest spelling; false when the name is unknown.
bool parseDType(std::string_view name, DType *dtype);
bool parseRole(std::string_view name, ParamRole *role);
bool parseKind(std::string_view name, ParamKind *kind);
bool parseTemplate(std::string_view name, KernelTemplate *kernelTemplate);
bool parseLossStage(std::string_view name, LossStage *stage);
bool parseLossPlanKind(std::string_view name, LossPlanKind *kind);

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// 32, 64 or 128 (0 for None); parseSwizzleBytes is its inverse for 32, 64
/// and 128.
int64_t swizzleBytes(TensorMapSwizzle swizzle);
bool parseSwizzleBytes(int64_t bytes, TensorMapSwizzle *swizzle);

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

/// The largest tensor rank a launch takes.
inline constexpr size_t kMaxRank = 8;

/// A tensor's sizes, outermost first, held inline (no allocation on the
/// launch path). Holds at most kMaxRank sizes: assign() refuses more.
class Shape {
public:
  Shape() = default;
  /// At most kMaxRank sizes (for literals in code and tests).
  Shape(std::initializer_list<int64_t> sizes);
  /// Copies `rank` sizes; false (and an empty shape) when rank > kMaxRank.
  bool assign(const int64_t *sizes, size_t rank);
  /// Appends a size; false when the shape already has kMaxRank sizes.
  bool push_back(int64_t size);

  size_t size() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  int64_t operator[](size_t i) const { return sizes_[i]; }
  int64_t back() const { return sizes_[rank_ - 1]; }
  const int64_t *data() const { return sizes_; }
  const int64_t *begin() const { return sizes_; }
  const int64_t *end() const { return sizes_ + rank_; }
  /// The product of the sizes (1 for rank 0; INT64_MAX where it would
  /// overflow).
  int64_t elements() const;

  bool operator==(const Shape &other) const;
  bool operator!=(const Shape &other) const { return !(*this == other); }

private:
  int64_t sizes_[kMaxRank] = {};
  size_t rank_ = 0;
};

/// "[2, 3, 4096]".
std::string shapeString(const Shape &shape);

//===----------------------------------------------------------------------===//
// The kernel spec
//===----------------------------------------------------------------------===//

/// One parameter of a kernel, in launch order (inputs, outputs, then
/// workspaces). Its shape is its kind's, with these static sizes
/// (manifestShape gives it in manifest form).
struct KernelParam {
  std::string name;
  ParamRole role = ParamRole::Input;
  ParamKind kind = ParamKind::Rows;
  DType dtype = DType::f32;
  /// The static innermost size: H (rows, feature, partials), K (matrix) or
  /// D (heads, tables); 0 for row_scalars, scalar and head_scalars.
  int64_t length = 0;
  /// The static outer size: N (matrix) or the head count (heads,
  /// head_scalars); for a table 1 when it was compiled for a batch of 1
  /// (broadcast), else 0; 0 for the other kinds.
  int64_t outer = 0;

  bool isInput() const { return role == ParamRole::Input; }
  bool isOutput() const { return role == ParamRole::Output; }
  bool isWorkspace() const { return role == ParamRole::Workspace; }
};

/// One entry of a parameter's manifest shape: a static size, or a shape
/// symbol ("rows", "ctas", "batch", "seq", "table_batch").
struct ShapeEntry {
  int64_t size = 0; ///< when `symbol` is null
  const char *symbol = nullptr;
  bool operator==(const ShapeEntry &other) const;
};

/// The manifest's "shape" of `param`: its kind's pattern with its static
/// sizes, e.g. ["rows", 4096] or ["batch", 8, "seq", 128].
std::vector<ShapeEntry> manifestShape(const KernelParam &param);

/// The manifest shape of `kind` in letters, for messages:
/// ["rows", H], ["batch", heads, "seq", D], [N, K], ...
std::string shapePattern(ParamKind kind);

/// Reads `length` and `outer` of a parameter of `kind` from its manifest
/// shape; false when the shape does not have the kind's pattern.
bool paramSizesFromShape(ParamKind kind, const std::vector<ShapeEntry> &shape,
                         int64_t *length, int64_t *outer);

/// One dimension of a kernel's grid: a constant, the row (or token) count
/// divided by `value` and rounded up ("rows", "tokens", "rows/128"), the
/// workspaces' leading size ("ctas"), or the device's SM count ("sms": a
/// persistent kernel's CTAs, which loop over its tiles).
struct GridDim {
  enum Kind { Const, Rows, Tokens, Ctas, Sms } kind = Const;
  int64_t value = 1; ///< Const: the size; Rows: the divisor; else 1
  bool operator==(const GridDim &other) const;
};

/// Parses a grid entry given as text: "rows", "tokens", "ctas", "sms",
/// "rows/N" (N >= 1) or a positive integer. False when it is none of these.
bool parseGridDim(std::string_view text, GridDim *dim);
/// The manifest spelling of a symbolic entry ("rows/128"); a Const entry
/// is written as a number, this gives its digits.
std::string gridDimText(const GridDim &dim);

/// A kernel launched with the main kernel's arguments, on its stream,
/// over a constant grid of `grid` x 1 x 1 CTAs: before it (`prepare`: what
/// the kernel reads from its workspaces, computed once) or after it
/// (`finish`: a group that reduces across rows finishes there).
struct SideKernelSpec {
  std::string name; ///< empty: none
  int64_t grid = 1;
  int64_t block[3] = {1, 1, 1};
  int64_t dynamicSharedMemoryBytes = 0;
};

/// The entry points of one launch, in the order they run; a launch runs
/// Main or, where it chose it (chooseNarrow), Narrow.
enum class LaunchStage { Prepare, Main, Narrow, Finish };
inline constexpr int kNumLaunchStages = 4;

/// One entry point a launch runs: its name, CTA shape and dynamic shared
/// memory (views of its KernelSpec).
struct EntryPoint {
  LaunchStage stage = LaunchStage::Main;
  const std::string *name = nullptr;
  const int64_t *block = nullptr;
  int64_t dynamicSharedMemoryBytes = 0;
};

/// A TMA descriptor the launcher encodes from a rows, matrix or heads
/// parameter (tensorMapGeometry says which tensor and box) and passes by
/// value after the parameters: `box` rows x cols per copy, swizzled,
/// out-of-bounds elements zero (or, with zeroFill false, a NaN that FMAs
/// turn into zero).
struct KernelTensorMap {
  size_t param = 0; ///< index into KernelSpec::params
  int64_t boxRows = 0, boxCols = 0;
  TensorMapSwizzle swizzle = TensorMapSwizzle::B128;
  bool zeroFill = true;
};

/// How one entry point is launched: its name, grid, CTA shape, dynamic
/// shared memory and TMA descriptors. A KernelSpec is one; a matmul
/// kernel's narrow-tile variant (docs/Design/Kernel-ABI.md, "Narrow
/// variants") is another, with the kernel's parameters and arguments: a
/// launch runs the one or the other (chooseNarrow), and reads both alike.
struct LaunchShape {
  std::string name; ///< the cubin's entry point (a variant's: empty, none)
  GridDim grid[3] = {{GridDim::Rows, 1}, {}, {}};
  int64_t block[3] = {1, 1, 1};
  int64_t dynamicSharedMemoryBytes = 0;
  std::vector<KernelTensorMap> tensorMaps;
};

/// Whether a launch of `rows` rows on a device of `sms` SMs runs a kernel's
/// narrow variant, whose grid of `narrowCtas` CTAs replaces the kernel's
/// `ctas`: a tile's time is taken as its area (the output over the CTAs),
/// a launch's as its waves (ceil(CTAs / SMs)) of tiles, and the narrow
/// tile's main loop as 1.5 times slower per element (its measured 1.4 at
/// equal waves, rounded up so that a near tie keeps the kernel). So it
/// runs where 3 · waves(narrow) · ctas < 2 · waves(kernel) · narrowCtas:
/// where the kernel's grid leaves most SMs idle. False for counts outside
/// [1, kMaxNarrowCtas] (the launcher saturates larger grids, which it then
/// refuses).
inline constexpr int64_t kMaxNarrowCtas = int64_t(1) << 30;
bool chooseNarrow(int64_t ctas, int64_t narrowCtas, int64_t sms);

/// Everything the runtime knows about one kernel: its launch shape (the
/// LaunchShape it is) and its ABI.
struct KernelSpec : LaunchShape {
  std::string function; ///< the function whose fusion group it implements
  std::string ops;      ///< the liger ops it came from, "liger.add_rms_norm"
  KernelTemplate kernelTemplate = KernelTemplate::Rowwise;
  int64_t vectorWidth = 1;     ///< elements per vector access (informational)
  int64_t alignmentBytes = 16; ///< every tensor's pointer must be aligned so
  std::vector<KernelParam> params;
  /// With a finishing kernel: an optional kernel run first, after the
  /// workspaces are zero-filled.
  SideKernelSpec prepare;
  /// The kernel run after this one, reading its `partials` or `heads`
  /// workspaces (a kernel whose only workspaces are `rows` or
  /// `row_scalars` scratch has none).
  SideKernelSpec finish;
  /// With a finishing kernel: the CTAs per SM to size `partials`
  /// workspaces for (workspaceCtas).
  int64_t ctasPerSm = 0;
  /// A matmul kernel without workspaces: its narrow-tile variant, if any
  /// (the same parameters; its own shape).
  LaunchShape narrow;

  /// Whether a parameter is a workspace (the launch zero-fills them).
  bool hasWorkspaces() const;
  bool hasFinish() const { return !finish.name.empty(); }
  bool hasPrepare() const { return !prepare.name.empty(); }
  bool hasNarrow() const { return !narrow.name.empty(); }
  /// The entry points a launch may run, in order (prepare, the kernel, its
  /// narrow variant, finish; those it has): their count, written to `out`.
  int entryPoints(EntryPoint (&out)[kNumLaunchStages]) const;
  size_t numInputs() const;
  size_t numOutputs() const;
};

/// The kernels of one gpu.module, compiled for one arch.
struct ModuleSpec {
  std::string name;
  std::string arch;      ///< "sm_90a"
  std::string cubinFile; ///< a file name in the bundle
  /// The cubin's SHA-256 (sha256Hex, Sha256.h): 64 lowercase hexadecimal
  /// digits, checked when the bundle is opened.
  std::string cubinSha256;
  std::string ptxFile; ///< a file name in the bundle
  std::vector<KernelSpec> kernels;
};

/// A planned loss group: the kernels of one chunk of tokens and how the
/// caller loops over the chunks (docs/Design/Bundle.md, "Plans").
struct LossPlan {
  std::string function; ///< the function holding the loss group
  LossPlanKind kind = LossPlanKind::FusedLinearCrossEntropy;
  int64_t chunkTokens = 0;
  int64_t memoryBudget = 0;
  bool mean = false;
  int64_t ignoreIndex = -100;
  bool classWeight = false;
  bool dwF32 = false;
  /// The kernel of each stage, indexed by LossStage; empty where the plan
  /// has no such stage.
  std::string kernels[kNumLossStages];

  bool hasGradient() const;
};

/// A bundle's manifest.json.
struct Manifest {
  int64_t version = kManifestVersion;
  std::string source; ///< the input the bundle was compiled from
  std::vector<ModuleSpec> modules;
  std::vector<LossPlan> plans;
};

/// Checks every rule of the kernel ABI that the structs do not enforce by
/// their types: ranges, names (non-empty, valid UTF-8, no NUL, unique),
/// parameter order and kinds, workspaces and side kernels, tensor
/// maps, grids, archs, plans. `origin` names the manifest in messages,
/// which then name the field ("modules[0].kernels[1].params[2]: ...").
Status verifyManifest(const Manifest &manifest, const std::string &origin);

/// verifyManifest's rules for one kernel alone: its names, parameters,
/// grid, block, shared memory, vector width, alignment, tensor maps and
/// side kernels (not the rules across kernels: unique names, plans).
/// For a compiler that checks a kernel it describes before any manifest
/// holds it; messages read "<origin>: <path>[.<field>]: <rule>".
Status verifyKernel(const KernelSpec &kernel, const std::string &origin,
                    const std::string &path);

/// Parses manifest text (JSON: duplicate and unknown keys rejected, every
/// field's type checked), then verifyManifest. `origin` names it.
Status parseManifest(const std::string &text, const std::string &origin,
                     Manifest *manifest);

/// verifyManifest, then the JSON text of `manifest` (keys sorted, two-space
/// indentation, UTF-8), ending with a newline.
Status writeManifest(const Manifest &manifest, const std::string &origin,
                     std::string *text);

/// A GPU arch of a module, "sm_<major><minor>[a]".
struct Arch {
  int major = 0, minor = 0;
  bool archSpecific = false; ///< the "a" suffix: this exact GPU only
};
/// False when `name` is not "sm_" + two or three digits + an optional "a".
bool parseArch(std::string_view name, Arch *arch);
/// Whether a cubin for `arch` runs on a GPU of compute capability
/// major.minor: an "a" arch on exactly its own; another on the same major
/// and a minor at least its own (as the driver loads cubins).
bool archRunsOn(const Arch &arch, int major, int minor);

//===----------------------------------------------------------------------===//
// Launching: argument checks, shapes, parameter passing
//===----------------------------------------------------------------------===//

/// A tensor passed to a kernel: device pointer, dtype and shape.
struct TensorArg {
  void *data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
};

/// Makes a TensorArg from a caller's rank and sizes, refusing a rank above
/// kMaxRank or a negative one, or a negative size; a message names the
/// tensor "<what> #<index>" (built only then).
Status makeTensorArg(void *data, DType dtype, const int64_t *sizes,
                     int64_t rank, const char *what, size_t index,
                     TensorArg *arg);

/// The sizes a launch binds from its tensors.
struct LaunchDims {
  int64_t rows = 0;  ///< rows (or tokens: batch * seq) the grid counts
  /// The partials workspaces' leading size, -1 without any.
  int64_t ctas = -1;
};

/// Checks `args` (inputs, outputs, then workspaces, in parameter order)
/// against `kernel`: the count, each dtype, pointer (non-null unless
/// empty, aligned), and shape against its kind (static sizes, and one row
/// count, batch, sequence and CTA count for all). Fills `dims`. Allocates
/// nothing unless it fails.
Status checkArgs(const KernelSpec &kernel, const TensorArg *args,
                 size_t numArgs, LaunchDims *dims);
inline Status checkArgs(const KernelSpec &kernel,
                        const std::vector<TensorArg> &args, LaunchDims *dims) {
  return checkArgs(kernel, args.data(), args.size(), dims);
}

/// The shapes of the outputs of `kernel` for inputs of shapes `inputs`
/// (checked as checkArgs checks them): rows outputs take the leading
/// dimensions of the first rows input, [B, H, T, D] and [B, H, T] outputs
/// the batch and sequence of the [B, H, T, D] and [B, H, T] inputs (or,
/// without any, B and T of [B, T, K] rows: a projection's head split),
/// feature, matrix and scalar outputs their static shape.
Status inferOutputShapes(const KernelSpec &kernel, const Shape *inputs,
                         size_t numInputs, std::vector<Shape> *outputs);

/// Where one size of an output comes from: a static size, or size `dim` of
/// input `input`.
struct DimSource {
  int64_t size = 0; ///< when input < 0
  int input = -1;
  int dim = -1;
};
/// inferOutputShapes as rules over the inputs' ranks alone, for callers
/// whose sizes are symbolic (torch.compile's fake tensors): output i's
/// size j is (*rules)[i][j]. Checks only what ranks tell.
Status outputShapeRules(const KernelSpec &kernel, const size_t *inputRanks,
                        size_t numInputs,
                        std::vector<std::vector<DimSource>> *rules);

/// The leading size `ctas` of the partials workspaces of `kernel` for `rows`
/// rows on a device with `smCount` SMs: min(rows, smCount * ctasPerSm), at
/// least 1.
int64_t workspaceCtas(const KernelSpec &kernel, int64_t rows, int smCount);

/// The shapes of the workspaces of `kernel` (none for a kernel without) for
/// inputs of shapes `inputs` on a device with `smCount` SMs: each its
/// manifest shape with the symbols bound, [ctas, H] for partials (ctas from
/// workspaceCtas), [B, heads, T, D] for heads (B and T as a heads output's),
/// [rows, H] and [rows] for rows and row_scalars.
/// A launch zero-fills them before its first kernel (Bundle::launch).
Status inferWorkspaceShapes(const KernelSpec &kernel, const Shape *inputs,
                            size_t numInputs, int smCount,
                            std::vector<Shape> *workspaces);

/// The number of 64-bit words `param` is passed as: MLIR's memref
/// descriptor (allocated pointer, aligned pointer, offset 0, the sizes,
/// then the row-major strides), 3 + 2 * rank.
size_t descriptorWords(const KernelParam &param);

/// Writes the descriptor of `param` passed `arg` (checked by checkArgs,
/// which gave `dims`) at `out`; returns the end of what it wrote.
int64_t *packDescriptor(const KernelParam &param, const TensorArg &arg,
                        const LaunchDims &dims, int64_t *out);

/// The sizes of the memref `param` is passed as for `arg` (its kind's
/// shape with the rows, CTAs and static sizes filled in; batch and
/// sequence from `arg`).
Shape memrefSizes(const KernelParam &param, const TensorArg &arg,
                  const LaunchDims &dims);

/// The tensor a tensor map `map` of `param` describes for `arg` and the box
/// it copies, both outermost first (a TensorMapSpec's shape and box): a rows
/// or matrix parameter's 2-D [rows, K] or [N, K] in [boxRows, boxCols]
/// boxes; a heads parameter's 3-D [batch * heads, seq, D] in [1, boxRows,
/// boxCols] boxes, so that a box never reaches from one (batch, head) into
/// the next: its rows past `seq` are out of bounds, as a 2-D box's past the
/// last row. `arg` was checked by checkArgs, which gave `dims`. An empty
/// tensor gives a size of 0, which no map can have (validateTensorMap);
/// a launch without rows launches nothing unless it has workspaces.
void tensorMapGeometry(const KernelParam &param, const KernelTensorMap &map,
                       const TensorArg &arg, const LaunchDims &dims,
                       Shape *shape, Shape *box);

/// The rule a TMA box's innermost extent (`boxCols` elements of `dtype`)
/// obeys: a multiple of 16 bytes, within the swizzle span. Empty when it
/// does, else what is wrong. Checked at load for the manifest's tensor
/// maps and again by validateTensorMap (TensorMap.h).
std::string tensorMapBoxProblem(DType dtype, int64_t boxCols,
                                TensorMapSwizzle swizzle);

} // namespace liger::runtime

#endif // LIGER_RUNTIME_KERNELABI_H

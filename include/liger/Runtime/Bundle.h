//===- Bundle.h - load kernel bundles and launch their kernels --*- C++ -*-===//
//
// A bundle is a directory written by liger-compile (docs/Design/Bundle.md):
// a manifest and, per GPU module, a cubin. Bundle::open reads and validates
// the manifest and the cubins; launch() checks every argument against the
// kernel's parameters (dtype, shape, alignment), loads the module once per
// CUDA context (thread-safe), and launches on the given stream. Nothing
// here throws; every failure is a Status that says what and where.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_RUNTIME_BUNDLE_H
#define LIGER_RUNTIME_BUNDLE_H

#include "liger/Runtime/CudaDriver.h"
#include "liger/Runtime/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace liger::runtime {

/// Element types of kernel parameters.
enum class DType { bf16, f16, f32, i32, i64 };

/// "bf16" -> DType; false when unknown.
bool parseDType(const std::string &name, DType *dtype);
const char *dtypeName(DType dtype);
size_t dtypeSize(DType dtype);

/// How a kernel indexes a parameter (see the manifest's "kind").
enum class ParamKind {
  Rows,       ///< [rows..., H]
  RowScalars, ///< [rows...]
  Feature,    ///< [H]
  Scalar,     ///< rank 0
  Heads,      ///< [B, heads, T, D]; the grid is B*T tokens
  Tables,     ///< [B or 1, T, D]
  Partials,   ///< [ctas, H] f32 workspace; the grid is `ctas` CTAs
  Matrix,     ///< [N, K], static (a projection's weight)
};

/// One dimension of a kernel's grid: a constant, the row (or token) count
/// divided by `value` and rounded up ("rows", "tokens", "rows/128"), or the
/// workspaces' leading size ("ctas").
struct GridDim {
  enum Kind { Const, Rows, Ctas } kind = Const;
  int64_t value = 1;
};

struct KernelParam {
  std::string name;
  bool isOutput = false;
  bool isWorkspace = false; // scratch the caller allocates (role "workspace")
  ParamKind kind = ParamKind::Rows;
  DType dtype = DType::f32;
  int64_t length = 0; // the static row/feature length (D for heads/tables)
  int64_t heads = 0;  // Heads: the static head count; Tables: 1 when the
                      // table batch is statically 1 (broadcast), else 0
};

/// A second kernel launched after the first with the same arguments (a
/// group that reduces across rows finishes there).
struct FinishSpec {
  std::string name; // empty: none
  int grid = 1;
  int block[3] = {1, 1, 1};
  int dynamicSharedMemoryBytes = 0;
};

/// A TMA descriptor the launcher encodes from a tensor parameter (a [rows,
/// K] or [N, K] matrix) and passes by value after the parameters: `box`
/// rows x cols per copy, swizzled in spans of `swizzleBytes` (32, 64 or
/// 128), out-of-bounds elements zero.
struct KernelTensorMap {
  size_t param = 0; // index into KernelSpec::params
  int64_t boxRows = 0, boxCols = 0;
  int swizzleBytes = 128;
};

struct KernelSpec {
  std::string name;
  std::string ops;
  GridDim grid[3] = {{GridDim::Rows, 1}, {}, {}};
  int block[3] = {1, 1, 1};
  int dynamicSharedMemoryBytes = 0;
  int alignmentBytes = 16;
  std::vector<KernelParam> params;
  std::vector<KernelTensorMap> tensorMaps;
  FinishSpec finish;
  int ctasPerSm = 0; // with workspaces: the CTAs per SM to size them for

  bool hasWorkspaces() const { return !finish.name.empty(); }
};

/// The leading size `ctas` of the workspaces of `kernel` for `rows` rows on
/// a device with `smCount` SMs: min(rows, smCount * ctasPerSm), at least 1.
int64_t workspaceCtas(const KernelSpec &kernel, int64_t rows, int smCount);

struct ModuleSpec {
  std::string name;
  std::string arch; // "sm_90a"
  std::string cubinFile;
  std::vector<KernelSpec> kernels;
};

struct Manifest {
  int version = 0;
  std::vector<ModuleSpec> modules;
};

/// Parses and validates manifest text; `origin` names it in messages.
Status parseManifest(const std::string &text, const std::string &origin,
                     Manifest *manifest);

/// A tensor passed to a kernel: device pointer, dtype and shape.
struct TensorArg {
  void *data = nullptr;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};

/// An opened bundle. Thread-safe; modules are loaded per CUDA context on
/// first launch and unloaded never (they live as long as the process).
class Bundle {
public:
  /// Reads `dir`/manifest.json and the cubins it names.
  static Status open(const std::string &dir, std::unique_ptr<Bundle> *bundle);

  const Manifest &manifest() const { return manifest_; }

  /// The kernel named `name`, or null.
  const KernelSpec *findKernel(const std::string &name) const;

  /// Checks `args` (inputs, outputs, then workspaces, in the kernel's
  /// parameter order) against the kernel and launches it on `stream` in the
  /// context of `device`: the current CUDA context when it is that device's,
  /// else the device's primary context (PyTorch's), made current for the
  /// launch alone; modules load once per context. The row count is the product of the leading dimensions of the
  /// first row-shaped argument. A kernel with workspaces (f32 [ctas, H],
  /// sized with workspaceCtas) runs on `ctas` CTAs, then its finishing
  /// kernel runs on the same stream; it runs even for zero rows, so that its
  /// per-feature outputs are written.
  Status launch(const std::string &kernel, const std::vector<TensorArg> &args,
                CUstream stream, int device = 0);

  /// Only the argument checks of launch(), without a GPU.
  /// `ctas` (optional) receives the workspaces' leading size, -1 if none.
  Status checkArgs(const KernelSpec &kernel, const std::vector<TensorArg> &args,
                   int64_t *rows, int64_t *ctas = nullptr) const;

private:
  Bundle() = default;
  Status getFunction(const ModuleSpec &module, const std::string &name,
                     int dynamicSharedMemoryBytes, const CudaDriver &driver,
                     CUcontext context, CUfunction *function);

  std::string dir_;
  Manifest manifest_;
  std::map<std::string, std::vector<char>> cubins_; // by module name
  std::mutex mutex_;
  std::map<std::pair<CUcontext, std::string>, CUmodule> modules_;
  // Functions by (context, kernel name): looked up once, not per launch.
  std::map<std::pair<CUcontext, std::string>, CUfunction> functions_;
};

} // namespace liger::runtime

#endif // LIGER_RUNTIME_BUNDLE_H

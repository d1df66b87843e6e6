//===- Bundle.h - load kernel bundles and launch their kernels --*- C++ -*-===//
//
// A bundle is a directory written by liger-compile (docs/Design/Bundle.md):
// a manifest and, per GPU module, a cubin. Bundle::open reads the manifest
// through the kernel ABI (KernelAbi.h: verified once, trusted after) and
// the cubins, and precomputes what a launch needs; checkDevice compares
// every kernel with a device (its arch, its shared memory) before the first
// launch there; launch() checks the arguments (checkArgs), loads the
// module once per CUDA context (thread-safe, lock-free once loaded) and
// launches on the given stream. Nothing here throws; every failure is a
// Status that says what and where.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_RUNTIME_BUNDLE_H
#define LIGER_RUNTIME_BUNDLE_H

#include "liger/Runtime/CudaDriver.h"
#include "liger/Runtime/KernelAbi.h"
#include "liger/Runtime/Status.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace liger::runtime {

/// The most bytes Bundle::open reads of a bundle's manifest.json and of
/// each of its cubins: a larger file is refused before it is read. The
/// manifests and cubins liger-compile writes are far smaller (a Llama layer:
/// 11 KiB and 170 KiB).
inline constexpr size_t kMaxManifestBytes = size_t(16) << 20;
inline constexpr size_t kMaxCubinBytes = size_t(64) << 20;

/// An opened bundle. Thread-safe; modules are loaded per CUDA context on
/// first launch and unloaded never (they live as long as the process).
class Bundle {
public:
  /// Reads `dir`/manifest.json and the cubins it names: regular files in
  /// `dir` (not symbolic links, FIFOs or devices) of at most
  /// kMaxManifestBytes and kMaxCubinBytes. `dir` itself may be a symbolic
  /// link.
  static Status open(const std::string &dir, std::unique_ptr<Bundle> *bundle);
  ~Bundle();

  const std::string &dir() const { return dir_; }
  const Manifest &manifest() const { return manifest_; }

  /// The kernels of every module, in manifest order: kernel handles are
  /// indices in [0, kernelCount()), valid as long as the bundle.
  size_t kernelCount() const { return numKernels_; }
  const KernelSpec &kernel(size_t index) const { return *entries_[index].spec; }
  const ModuleSpec &moduleOf(size_t index) const {
    return manifest_.modules[entries_[index].module];
  }
  /// The handle of the kernel named `name`, or -1.
  int kernelIndex(std::string_view name) const;
  /// The kernel named `name`, or null.
  const KernelSpec *findKernel(std::string_view name) const;

  /// Whether `device` runs every kernel: each module's arch against its
  /// compute capability (archRunsOn), each kernel's dynamic shared memory
  /// (and its side kernels') against its opt-in maximum per block.
  /// Fails naming the first kernel that does not run, and why. A device
  /// that passed is not asked again; launch() calls this first.
  Status checkDevice(int device);

  /// Checks `args` (inputs, outputs, then workspaces, in the kernel's
  /// parameter order: checkArgs) and launches kernel `kernel` on `stream`
  /// in the context of `device`: the current CUDA context when it is that
  /// device's, else the device's primary context (PyTorch's), made current
  /// for the launch alone. A kernel with workspaces (f32, sized by
  /// inferWorkspaceShapes) has them zero-filled on `stream` (one
  /// cuMemsetD32Async each), then its prepare kernel (if any), itself and
  /// its finishing kernel run on the same stream, in that order; it runs even
  /// for zero rows, so that its per-feature outputs are written. The usual
  /// launch (no workspaces) allocates nothing, takes no lock and makes two
  /// driver calls (the current context, the launch).
  Status launch(size_t kernel, const TensorArg *args, size_t numArgs,
                CUstream stream, int device = 0);
  /// The same, with the kernel named.
  Status launch(std::string_view kernel, const std::vector<TensorArg> &args,
                CUstream stream, int device = 0);

private:
  /// The driver's functions of a launch's entry points, by LaunchStage
  /// (null where the kernel has none).
  using Functions = std::array<CUfunction, kNumLaunchStages>;
  /// A kernel's functions in one context.
  struct ContextFunctions {
    std::atomic<CUcontext> context{nullptr}; ///< published last
    Functions functions = {};
  };
  static constexpr size_t kContextSlots = 8;
  static constexpr int kCachedDevices = 64;

  /// What a launch of one kernel needs, precomputed at open.
  struct KernelEntry {
    const KernelSpec *spec = nullptr;
    size_t module = 0;
    size_t words = 0; ///< the 64-bit words of all its descriptors
    /// The static shared memory of its entry points, by LaunchStage (the
    /// cubin's).
    int64_t staticSharedBytes[kNumLaunchStages] = {};
    ContextFunctions contexts[kContextSlots];
  };

  Bundle() = default;
  // The bodies of open, checkDevice and launch, which run them through
  // catchExceptions.
  static Status read(const std::string &dir, std::unique_ptr<Bundle> *bundle);
  Status compareDevice(int device);
  /// The SM count of `device` (a persistent kernel's grid).
  Status smCount(const CudaDriver &driver, int device, int *sms);
  Status launchChecked(size_t kernel, const TensorArg *args, size_t numArgs,
                       CUstream stream, int device);
  Status functionsFor(size_t kernel, const CudaDriver &driver,
                      CUcontext context, Functions *functions);
  Status loadFunctions(size_t kernel, const CudaDriver &driver,
                       CUcontext context, Functions *functions);

  std::string dir_;
  Manifest manifest_;
  std::vector<std::vector<char>> cubins_; // by module index
  std::unique_ptr<KernelEntry[]> entries_;
  size_t numKernels_ = 0;
  std::unordered_map<std::string_view, int> byName_; // views of manifest_
  std::atomic<bool> deviceChecked_[kCachedDevices] = {};
  /// The SM count of each checked device (written before deviceChecked_).
  std::atomic<int> deviceSms_[kCachedDevices] = {};

  std::mutex mutex_; // guards what follows (the slow paths)
  std::map<std::pair<CUcontext, size_t>, CUmodule> modules_;
  std::map<std::pair<CUcontext, size_t>, Functions>
      overflowFunctions_;        // contexts past kContextSlots
  std::set<int> checkedDevices_; // devices past kCachedDevices
};

} // namespace liger::runtime

#endif // LIGER_RUNTIME_BUNDLE_H

//===- Bundle.cpp - load kernel bundles and launch their kernels ----------===//

#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/Cubin.h"
#include "liger/Runtime/Sha256.h"
#include "liger/Runtime/TensorMap.h"

#include "BundleFiles.h"

#include <algorithm>
#include <tuple>

using namespace liger::runtime;

Bundle::~Bundle() = default;

Status Bundle::open(const std::string &dir, std::unique_ptr<Bundle> *out) {
  return catchExceptions(
      [&] { return read(dir, out); },
      [&](const char *why) { return exceptionStatus(dir.c_str(), why); });
}

Status Bundle::read(const std::string &dir, std::unique_ptr<Bundle> *out) {
  std::unique_ptr<Bundle> bundle(new Bundle());
  bundle->dir_ = dir;
  BundleDirectory files;
  LIGER_RETURN_IF_ERROR(files.open(dir));
  std::string text;
  LIGER_RETURN_IF_ERROR(
      files.read("manifest.json", "manifest", kMaxManifestBytes, &text));
  LIGER_RETURN_IF_ERROR(
      parseManifest(text, dir + "/manifest.json", &bundle->manifest_));
  const Manifest &manifest = bundle->manifest_;
  // The static shared memory of each kernel's entry points, in kernel
  // order.
  std::vector<std::array<int64_t, kNumLaunchStages>> staticShared;
  for (const ModuleSpec &module : manifest.modules) {
    std::string bytes;
    LIGER_RETURN_IF_ERROR(
        files.read(module.cubinFile, "cubin", kMaxCubinBytes, &bytes));
    // The cubin the manifest was written with, before the driver sees it.
    std::string digest = sha256Hex(bytes.data(), bytes.size());
    if (digest != module.cubinSha256)
      return LIGER_MAKE_STATUS(
          StatusCode::kInvalidArgument,
          dir + "/" + module.cubinFile +
              " is not the cubin the manifest names: its SHA-256 is " + digest +
              " (" + std::to_string(bytes.size()) +
              " bytes), the manifest's cubin_sha256 is " + module.cubinSha256 +
              "; the bundle is truncated, damaged or mixed with another "
              "build (rebuild it with liger-compile)");
    // A well-formed cubin that has the kernels the manifest says.
    Cubin cubin;
    std::string origin = dir + "/" + module.cubinFile;
    LIGER_RETURN_IF_ERROR(
        readCubin(bytes.data(), bytes.size(), origin, &cubin));
    LIGER_RETURN_IF_ERROR(checkCubin(module, cubin, origin));
    for (const KernelSpec &k : module.kernels) {
      std::array<int64_t, kNumLaunchStages> bytes = {};
      EntryPoint entries[kNumLaunchStages];
      for (int e = 0, n = k.entryPoints(entries); e < n; ++e)
        bytes[static_cast<int>(entries[e].stage)] = static_cast<int64_t>(
            cubin.find(*entries[e].name)->staticSharedBytes); // checked
      staticShared.push_back(bytes);
    }
    bundle->cubins_.emplace_back(bytes.begin(), bytes.end());
    bundle->numKernels_ += module.kernels.size();
  }
  // What each launch needs, once.
  bundle->entries_.reset(new KernelEntry[bundle->numKernels_]);
  size_t index = 0;
  for (size_t m = 0; m < manifest.modules.size(); ++m)
    for (const KernelSpec &kernel : manifest.modules[m].kernels) {
      KernelEntry &entry = bundle->entries_[index];
      entry.spec = &kernel;
      entry.module = m;
      std::copy(staticShared[index].begin(), staticShared[index].end(),
                entry.staticSharedBytes);
      for (const KernelParam &p : kernel.params)
        entry.words += descriptorWords(p);
      bundle->byName_.emplace(kernel.name, static_cast<int>(index++));
    }
  *out = std::move(bundle);
  return Status::ok();
}

int Bundle::kernelIndex(std::string_view name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? -1 : it->second;
}

const KernelSpec *Bundle::findKernel(std::string_view name) const {
  int index = kernelIndex(name);
  return index < 0 ? nullptr : &kernel(index);
}

//===----------------------------------------------------------------------===//
// The device
//===----------------------------------------------------------------------===//

Status Bundle::checkDevice(int device) {
  return catchExceptions(
      [&] { return compareDevice(device); },
      [&](const char *why) { return exceptionStatus(dir_.c_str(), why); });
}

Status Bundle::compareDevice(int device) {
  if (device >= 0 && device < kCachedDevices &&
      deviceChecked_[device].load(std::memory_order_acquire))
    return Status::ok();
  const CudaDriver *driver = nullptr;
  LIGER_RETURN_IF_ERROR(CudaDriver::get(&driver));
  CUdevice dev;
  LIGER_CUDA_RETURN_IF_ERROR(*driver, cuDeviceGet(&dev, device));
  int major = 0, minor = 0, sharedMemory = 0;
  LIGER_CUDA_RETURN_IF_ERROR(
      *driver, cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, dev));
  LIGER_CUDA_RETURN_IF_ERROR(
      *driver, cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, dev));
  LIGER_CUDA_RETURN_IF_ERROR(
      *driver, cuDeviceGetAttribute(&sharedMemory,
                                    kAttrMaxSharedMemoryPerBlockOptin, dev));
  std::string where = "device " + std::to_string(device);
  auto refuse = [&](const std::string &what) {
    return LIGER_MAKE_STATUS(StatusCode::kFailedPrecondition,
                             dir_ + ": " + what +
                                 "; rebuild the bundle for this GPU "
                                 "(liger-compile --target)");
  };
  size_t index = 0; // of the kernel, over all modules
  for (const ModuleSpec &module : manifest_.modules) {
    Arch arch;
    (void)parseArch(module.arch, &arch); // verified at open
    if (!module.kernels.empty() && !archRunsOn(arch, major, minor))
      return refuse(
          "kernel '" + module.kernels.front().name + "' of module '" +
          module.name + "' is compiled for " + module.arch + ", but " + where +
          " has compute capability " + std::to_string(major) + "." +
          std::to_string(minor) + " (" + module.arch + " runs on " +
          std::to_string(arch.major) + "." + std::to_string(arch.minor) +
          (arch.archSpecific ? " only"
                             : " to " + std::to_string(arch.major) + ".x") +
          ")");
    for (const KernelSpec &k : module.kernels) {
      const KernelEntry &entry = entries_[index++];
      // The manifest's dynamic shared memory and the cubin's static.
      EntryPoint entries[kNumLaunchStages];
      for (int e = 0, n = k.entryPoints(entries); e < n; ++e) {
        const std::string &name = *entries[e].name;
        int64_t dynamic = entries[e].dynamicSharedMemoryBytes;
        int64_t fixed =
            entry.staticSharedBytes[static_cast<int>(entries[e].stage)];
        if (dynamic + fixed > sharedMemory)
          return refuse(
              "kernel '" + name + "' needs " + std::to_string(dynamic + fixed) +
              " bytes of shared memory per block (" + std::to_string(dynamic) +
              " dynamic and " + std::to_string(fixed) + " static), but " +
              where + " allows at most " + std::to_string(sharedMemory));
      }
    }
  }
  if (device >= 0 && device < kCachedDevices) {
    int sms = 0;
    LIGER_CUDA_RETURN_IF_ERROR(
        *driver, cuDeviceGetAttribute(&sms, kAttrMultiprocessorCount, dev));
    deviceSms_[device].store(sms, std::memory_order_relaxed);
    deviceChecked_[device].store(true, std::memory_order_release);
  } else {
    std::lock_guard<std::mutex> lock(mutex_);
    checkedDevices_.insert(device);
  }
  return Status::ok();
}

namespace {
/// Makes the context of `device` current for its lifetime where the
/// thread's current context is another device's (or none): a process that
/// drives several GPUs launches each kernel in its tensors' device's
/// context whatever device is current.
class DeviceContextScope {
public:
  explicit DeviceContextScope(const CudaDriver &driver) : driver_(driver) {}
  ~DeviceContextScope() {
    if (pushed_) {
      CUcontext popped = nullptr;
      // Restores the caller's context; a destructor has no Status to return,
      // and popping what this scope pushed fails only if the caller's
      // context was destroyed meanwhile.
      LIGER_CUDA_IGNORE_ERROR(driver_, cuCtxPopCurrent_v2(&popped));
    }
  }

  /// Makes the context of `device` current if it is not; context() is then
  /// the context the launch runs in.
  Status enter(int device) {
    LIGER_CUDA_RETURN_IF_ERROR(driver_, cuCtxGetCurrent(&context_));
    CUcontext primary = nullptr;
    LIGER_RETURN_IF_ERROR(primaryContext(device, &primary));
    if (context_ == primary) // the usual case: PyTorch's current device
      return Status::ok();
    if (context_) {
      // Another context of the same device (the caller's own) serves too.
      CUdevice have, want;
      LIGER_CUDA_RETURN_IF_ERROR(driver_, cuCtxGetDevice(&have));
      LIGER_CUDA_RETURN_IF_ERROR(driver_, cuDeviceGet(&want, device));
      if (have == want)
        return Status::ok();
    }
    LIGER_CUDA_RETURN_IF_ERROR(driver_, cuCtxPushCurrent_v2(primary));
    pushed_ = true;
    context_ = primary;
    return Status::ok();
  }

  CUcontext context() const { return context_; }

private:
  /// The primary context of `device` (PyTorch's), retained once per process
  /// and kept; read without a lock once retained.
  Status primaryContext(int device, CUcontext *context) {
    static constexpr int kCached = 64;
    static std::atomic<CUcontext> cached[kCached];
    if (device >= 0 && device < kCached) {
      *context = cached[device].load(std::memory_order_acquire);
      if (*context)
        return Status::ok();
    }
    static std::mutex mutex;
    static std::map<int, CUcontext> primaries;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = primaries.find(device); it != primaries.end()) {
      *context = it->second;
      return Status::ok();
    }
    CUdevice dev;
    LIGER_CUDA_RETURN_IF_ERROR(driver_, cuDeviceGet(&dev, device));
    LIGER_CUDA_RETURN_IF_ERROR(driver_, cuDevicePrimaryCtxRetain(context, dev));
    primaries.emplace(device, *context);
    if (device >= 0 && device < kCached)
      cached[device].store(*context, std::memory_order_release);
    return Status::ok();
  }

  const CudaDriver &driver_;
  CUcontext context_ = nullptr;
  bool pushed_ = false;
};
} // namespace

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

Status Bundle::functionsFor(size_t kernel, const CudaDriver &driver,
                            CUcontext context, Functions *functions) {
  // The usual case: this context has them already (published with release
  // after the functions were written).
  for (ContextFunctions &slot : entries_[kernel].contexts) {
    CUcontext c = slot.context.load(std::memory_order_acquire);
    if (c == context) {
      *functions = slot.functions;
      return Status::ok();
    }
    if (!c)
      break;
  }
  return loadFunctions(kernel, driver, context, functions);
}

Status Bundle::loadFunctions(size_t kernel, const CudaDriver &driver,
                             CUcontext context, Functions *functions) {
  // `context` is current: the launch's device's (DeviceContextScope).
  std::lock_guard<std::mutex> lock(mutex_);
  KernelEntry &entry = entries_[kernel];
  ContextFunctions *free = nullptr;
  for (ContextFunctions &slot : entry.contexts) {
    CUcontext c = slot.context.load(std::memory_order_relaxed);
    if (c == context) { // loaded by another thread meanwhile
      *functions = slot.functions;
      return Status::ok();
    }
    if (!c) {
      free = &slot;
      break;
    }
  }
  auto key = std::make_pair(context, kernel);
  if (auto it = overflowFunctions_.find(key); it != overflowFunctions_.end()) {
    *functions = it->second;
    return Status::ok();
  }
  auto moduleKey = std::make_pair(context, entry.module);
  auto it = modules_.find(moduleKey);
  if (it == modules_.end()) {
    CUmodule loaded = nullptr;
    LIGER_CUDA_RETURN_IF_ERROR(
        driver, cuModuleLoadData(&loaded, cubins_[entry.module].data()));
    it = modules_.emplace(moduleKey, loaded).first;
  }
  Functions loaded = {};
  EntryPoint entries[kNumLaunchStages];
  for (int e = 0, n = entry.spec->entryPoints(entries); e < n; ++e) {
    int stage = static_cast<int>(entries[e].stage);
    int64_t bytes = entries[e].dynamicSharedMemoryBytes;
    LIGER_CUDA_RETURN_IF_ERROR(driver,
                               cuModuleGetFunction(&loaded[stage], it->second,
                                                   entries[e].name->c_str()));
    // Past 48 KiB in all, a block's dynamic shared memory must be opted in.
    if (bytes + entry.staticSharedBytes[stage] > 48 * 1024)
      LIGER_CUDA_RETURN_IF_ERROR(
          driver,
          cuFuncSetAttribute(loaded[stage], kFuncAttrMaxDynamicSharedMemory,
                             static_cast<int>(bytes)));
  }
  *functions = loaded;
  if (free) {
    free->functions = loaded;
    free->context.store(context, std::memory_order_release);
  } else {
    overflowFunctions_.emplace(key, loaded);
  }
  return Status::ok();
}

Status Bundle::smCount(const CudaDriver &driver, int device, int *sms) {
  if (device >= 0 && device < kCachedDevices &&
      deviceChecked_[device].load(std::memory_order_acquire)) {
    *sms = deviceSms_[device].load(std::memory_order_relaxed);
    return Status::ok();
  }
  CUdevice dev;
  LIGER_CUDA_RETURN_IF_ERROR(driver, cuDeviceGet(&dev, device));
  LIGER_CUDA_RETURN_IF_ERROR(
      driver, cuDeviceGetAttribute(sms, kAttrMultiprocessorCount, dev));
  return Status::ok();
}

namespace {
/// Up to this many descriptor words and tensor maps, a launch keeps its
/// parameters on the stack.
constexpr size_t kInlineWords = 192;
constexpr size_t kInlineMaps = 8;

/// Zero-fills the workspaces among `args` (f32: 4-byte words) on `stream`,
/// before the kernel that may accumulate into them (the attention
/// backward's dq, with f32 atomics); in the launch's context.
Status zeroWorkspaces(const CudaDriver &driver, const KernelSpec &kernel,
                      const TensorArg *args, CUstream stream) {
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    size_t words = static_cast<size_t>(args[i].shape.elements());
    if (!kernel.params[i].isWorkspace() || words == 0)
      continue;
    auto pointer = static_cast<unsigned long long>(
        reinterpret_cast<uintptr_t>(args[i].data));
    LIGER_CUDA_RETURN_IF_ERROR(driver,
                               cuMemsetD32Async(pointer, 0u, words, stream));
  }
  return Status::ok();
}

/// The grid size of `dim` for a launch with `dims` on a device of `sms`
/// SMs.
int64_t gridSize(const GridDim &dim, const LaunchDims &dims, int sms) {
  switch (dim.kind) {
  case GridDim::Const:
    return dim.value;
  case GridDim::Rows:
  case GridDim::Tokens:
    return (dims.rows + dim.value - 1) / dim.value;
  case GridDim::Ctas:
    return dims.ctas;
  case GridDim::Sms:
    return sms;
  }
  return 0;
}
} // namespace

Status Bundle::launch(size_t index, const TensorArg *args, size_t numArgs,
                      CUstream stream, int device) {
  return catchExceptions(
      [&] { return launchChecked(index, args, numArgs, stream, device); },
      [&](const char *why) { return exceptionStatus(dir_.c_str(), why); });
}

Status Bundle::launchChecked(size_t index, const TensorArg *args,
                             size_t numArgs, CUstream stream, int device) {
  if (index >= numKernels_)
    return LIGER_MAKE_STATUS(StatusCode::kNotFound,
                             dir_ + " has no kernel #" + std::to_string(index) +
                                 " (it has " + std::to_string(numKernels_) +
                                 ")");
  const KernelEntry &entry = entries_[index];
  const KernelSpec &kernel = *entry.spec;
  LaunchDims dims;
  LIGER_RETURN_IF_ERROR(checkArgs(kernel, args, numArgs, &dims));
  if (dims.rows == 0 && !kernel.hasFinish())
    return Status::ok(); // nothing to do: an empty grid is not launched
  const CudaDriver *driver = nullptr;
  LIGER_RETURN_IF_ERROR(CudaDriver::get(&driver));
  LIGER_RETURN_IF_ERROR(checkDevice(device));
  int sms = 0;
  if (kernel.hasNarrow() ||
      std::any_of(std::begin(kernel.grid), std::end(kernel.grid),
                  [](const GridDim &g) { return g.kind == GridDim::Sms; }))
    LIGER_RETURN_IF_ERROR(smCount(*driver, device, &sms));
  // The entry point this launch runs: the kernel, or its narrow variant
  // where that fills the device better (chooseNarrow).
  auto ctasOf = [&](const GridDim(&dims3)[3]) {
    // Saturated at kMaxNarrowCtas (a larger grid is refused below).
    int64_t ctas = 1;
    for (const GridDim &g : dims3)
      ctas = std::min(ctas * std::min(gridSize(g, dims, sms), kMaxNarrowCtas),
                      kMaxNarrowCtas);
    return ctas;
  };
  bool narrow =
      kernel.hasNarrow() && dims.rows > 0 &&
      chooseNarrow(ctasOf(kernel.grid), ctasOf(kernel.narrow.grid), sms);
  const LaunchShape &shape =
      narrow ? kernel.narrow : static_cast<const LaunchShape &>(kernel);
  unsigned grid[3];
  for (int i = 0; i < 3; ++i) {
    int64_t size = gridSize(shape.grid[i], dims, sms);
    if (size < 1 || size > (i ? 65535 : 0x7fffffff))
      return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                               "kernel '" + shape.name + "': grid size " +
                                   std::to_string(size) + " in dimension " +
                                   std::to_string(i) + " is out of range");
    grid[i] = static_cast<unsigned>(size);
  }
  DeviceContextScope scope(*driver);
  LIGER_RETURN_IF_ERROR(scope.enter(device));
  Functions functions = {};
  LIGER_RETURN_IF_ERROR(
      functionsFor(index, *driver, scope.context(), &functions));

  // Memref descriptors, then TMA descriptors by value; on the stack for
  // any kernel of the usual size.
  size_t numMaps = shape.tensorMaps.size();
  size_t numParams = entry.words + numMaps;
  int64_t inlineWords[kInlineWords];
  void *inlineParams[kInlineWords + kInlineMaps];
  TensorMap inlineMaps[kInlineMaps];
  std::vector<int64_t> heapWords;
  std::vector<void *> heapParams;
  std::vector<TensorMap> heapMaps;
  int64_t *words = inlineWords;
  void **params = inlineParams;
  TensorMap *maps = inlineMaps;
  if (entry.words > kInlineWords || numMaps > kInlineMaps) {
    words = (heapWords.resize(entry.words), heapWords.data());
    params = (heapParams.resize(numParams), heapParams.data());
    maps = (heapMaps.resize(numMaps), heapMaps.data());
  }
  int64_t *end = words;
  for (size_t i = 0; i < numArgs; ++i)
    end = packDescriptor(kernel.params[i], args[i], dims, end);
  for (size_t w = 0; w < entry.words; ++w)
    params[w] = &words[w];
  for (size_t t = 0; t < numMaps; ++t) {
    const KernelTensorMap &m = shape.tensorMaps[t];
    const KernelParam &p = kernel.params[m.param];
    TensorMapSpec spec;
    spec.globalAddress = args[m.param].data;
    spec.dtype = p.dtype;
    tensorMapGeometry(p, m, args[m.param], dims, &spec.shape, &spec.box);
    spec.swizzle = m.swizzle;
    spec.zeroFill = m.zeroFill;
    Status s = encodeTensorMap(spec, &maps[t]);
    if (!s.isOk())
      return LIGER_MAKE_STATUS(s.code(), "kernel '" + shape.name +
                                             "', tensor map of '" + p.name +
                                             "': " + s.message());
    params[entry.words + t] = &maps[t];
  }
  LIGER_RETURN_IF_ERROR(zeroWorkspaces(*driver, kernel, args, stream));
  // The side kernels' grids are constants, [grid, 1, 1].
  auto launchSide = [&](LaunchStage stage,
                        const SideKernelSpec &side) -> Status {
    LIGER_CUDA_RETURN_IF_ERROR(
        *driver,
        cuLaunchKernel(functions[static_cast<int>(stage)],
                       static_cast<unsigned>(side.grid), 1, 1,
                       static_cast<unsigned>(side.block[0]),
                       static_cast<unsigned>(side.block[1]),
                       static_cast<unsigned>(side.block[2]),
                       static_cast<unsigned>(side.dynamicSharedMemoryBytes),
                       stream, params, nullptr));
    return Status::ok();
  };
  if (kernel.hasPrepare())
    LIGER_RETURN_IF_ERROR(launchSide(LaunchStage::Prepare, kernel.prepare));
  LIGER_CUDA_RETURN_IF_ERROR(
      *driver,
      cuLaunchKernel(functions[static_cast<int>(narrow ? LaunchStage::Narrow
                                                       : LaunchStage::Main)],
                     grid[0], grid[1], grid[2],
                     static_cast<unsigned>(shape.block[0]),
                     static_cast<unsigned>(shape.block[1]),
                     static_cast<unsigned>(shape.block[2]),
                     static_cast<unsigned>(shape.dynamicSharedMemoryBytes),
                     stream, params, nullptr));
  if (kernel.hasFinish())
    LIGER_RETURN_IF_ERROR(launchSide(LaunchStage::Finish, kernel.finish));
  return Status::ok();
}

Status Bundle::launch(std::string_view name, const std::vector<TensorArg> &args,
                      CUstream stream, int device) {
  int index = kernelIndex(name);
  if (index < 0)
    return catchExceptions(
        [&] {
          return LIGER_MAKE_STATUS(StatusCode::kNotFound,
                                   dir_ + " has no kernel '" +
                                       std::string(name) + "'");
        },
        [&](const char *why) { return exceptionStatus(dir_.c_str(), why); });
  return launch(static_cast<size_t>(index), args.data(), args.size(), stream,
                device);
}

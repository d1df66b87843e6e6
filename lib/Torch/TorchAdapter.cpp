//===- TorchAdapter.cpp - liger kernels on LibTorch tensors ---------------===//

#include "liger/Torch/TorchAdapter.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/util/Exception.h>

#include <map>
#include <mutex>

using namespace liger;
using runtime::DType;

namespace {
/// Fails with "liger: <message>". Messages are built as std::strings
/// (std::to_string, Device::str) and handed to TORCH_CHECK whole: streaming
/// an integer through TORCH_CHECK's ostream from this library crashed inside
/// libstdc++'s number formatting on the GPU machine's toolchain (an
/// ostream of one C++ runtime with the locale of another).
[[noreturn]] void fail(const std::string &message) {
  TORCH_CHECK(false, "liger: ", message);
  __builtin_unreachable();
}

/// "input #2".
std::string argName(const char *what, size_t index) {
  return std::string(what) + " #" + std::to_string(index);
}

DType toDType(at::ScalarType type, const char *what, size_t index) {
  switch (type) {
  case at::kBFloat16:
    return DType::bf16;
  case at::kHalf:
    return DType::f16;
  case at::kFloat:
    return DType::f32;
  case at::kInt:
    return DType::i32;
  case at::kLong:
    return DType::i64;
  default:
    fail(argName(what, index) + " has dtype " + c10::toString(type) +
         "; liger kernels take bf16, f16, f32, i32 or i64");
  }
}

at::ScalarType toScalarType(DType dtype) {
  switch (dtype) {
  case DType::bf16:
    return at::kBFloat16;
  case DType::f16:
    return at::kHalf;
  case DType::f32:
    return at::kFloat;
  case DType::i32:
    return at::kInt;
  case DType::i64:
    return at::kLong;
  }
  return at::kFloat;
}

void check(const runtime::Status &status) {
  TORCH_CHECK(status.isOk(), "liger: ", status.message());
}

/// Tensors as the runtime takes them, on the stack for the usual kernel.
class TensorArgs {
public:
  explicit TensorArgs(size_t n)
      : list_(n <= kInline ? inline_ : (heap_.resize(n), heap_.data())) {}
  void add(const runtime::KernelSpec &kernel, const at::Tensor &t,
           at::Device device, const char *what, size_t index) {
    if (!t.defined())
      fail("kernel '" + kernel.name + "': " + argName(what, index) +
           " is an undefined tensor");
    if (t.device() != device)
      fail("kernel '" + kernel.name + "': " + argName(what, index) +
           " is on " + t.device().str() + ", the first input on " +
           device.str());
    if (!t.is_contiguous())
      fail("kernel '" + kernel.name + "': " + argName(what, index) +
           " must be contiguous");
    check(runtime::makeTensorArg(
        t.data_ptr(), toDType(t.scalar_type(), what, index), t.sizes().data(),
        t.dim(), what, index, &list_[size_++]));
  }
  const runtime::TensorArg *data() const { return list_; }
  size_t size() const { return size_; }

private:
  static constexpr size_t kInline = 16;
  runtime::TensorArg inline_[kInline];
  std::vector<runtime::TensorArg> heap_;
  runtime::TensorArg *list_;
  size_t size_ = 0;
};

/// The shapes of `inputs` (concrete sizes).
std::vector<runtime::Shape> shapesOf(const std::vector<at::Tensor> &inputs) {
  std::vector<runtime::Shape> shapes(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    runtime::TensorArg arg;
    check(runtime::makeTensorArg(nullptr, DType::f32, inputs[i].sizes().data(),
                                 inputs[i].dim(), "input", i, &arg));
    shapes[i] = arg.shape;
  }
  return shapes;
}
} // namespace

runtime::Bundle &liger::libtorch::openBundle(const std::string &path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<runtime::Bundle>> bundles;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = bundles.find(path);
  if (it != bundles.end())
    return *it->second;
  std::unique_ptr<runtime::Bundle> bundle;
  check(runtime::Bundle::open(path, &bundle));
  // A bundle the GPU cannot run is refused here, before its first launch.
  if (at::cuda::is_available())
    check(bundle->checkDevice(at::cuda::current_device()));
  return *bundles.emplace(path, std::move(bundle)).first->second;
}

libtorch::KernelRef liger::libtorch::resolve(const std::string &path,
                                             const std::string &kernel) {
  thread_local std::string lastPath, lastKernel;
  thread_local KernelRef last;
  if (last.bundle && kernel == lastKernel && path == lastPath)
    return last;
  runtime::Bundle &bundle = openBundle(path);
  int index = bundle.kernelIndex(kernel);
  TORCH_CHECK(index >= 0, "liger: ", path, " has no kernel '", kernel, "'");
  lastPath = path;
  lastKernel = kernel;
  last = {&bundle, static_cast<size_t>(index)};
  return last;
}

std::vector<at::Tensor>
liger::libtorch::allocateOutputs(const runtime::KernelSpec &kernel,
                                 const std::vector<at::Tensor> &inputs) {
  TORCH_CHECK(!inputs.empty(), "liger: kernel '", kernel.name,
              "' needs at least one input");
  at::TensorOptions options = inputs.front().options();
  std::vector<at::Tensor> outputs;
  size_t o = 0;
  bool symbolic = false;
  for (const at::Tensor &t : inputs)
    symbolic |= t.unsafeGetTensorImpl()->has_symbolic_sizes_strides();
  if (!symbolic) {
    std::vector<runtime::Shape> shapes = shapesOf(inputs), out;
    check(
        runtime::inferOutputShapes(kernel, shapes.data(), shapes.size(), &out));
    for (const runtime::KernelParam &p : kernel.params)
      if (p.isOutput()) {
        const runtime::Shape &s = out[o++];
        outputs.push_back(at::empty(at::IntArrayRef(s.data(), s.size()),
                                    options.dtype(toScalarType(p.dtype))));
      }
    return outputs;
  }
  // Symbolic sizes (torch.compile's tracing): each output size is a static
  // size or an input's, as the runtime's rule says.
  std::vector<size_t> ranks;
  for (const at::Tensor &t : inputs)
    ranks.push_back(static_cast<size_t>(t.dim()));
  std::vector<std::vector<runtime::DimSource>> rules;
  check(runtime::outputShapeRules(kernel, ranks.data(), ranks.size(), &rules));
  for (const runtime::KernelParam &p : kernel.params)
    if (p.isOutput()) {
      std::vector<c10::SymInt> sizes;
      for (const runtime::DimSource &d : rules[o])
        sizes.push_back(d.input < 0 ? c10::SymInt(d.size)
                                    : inputs[d.input].sym_size(d.dim));
      ++o;
      outputs.push_back(
          at::empty_symint(sizes, options.dtype(toScalarType(p.dtype))));
    }
  return outputs;
}

void liger::libtorch::launch(KernelRef kernel,
                             const std::vector<at::Tensor> &inputs,
                             const std::vector<at::Tensor> &outputs) {
  const runtime::KernelSpec &spec = kernel.spec();
  TORCH_CHECK(!inputs.empty(), "liger: kernel '", spec.name,
              "' needs at least one input");
  at::Device device = inputs.front().device();
  if (!device.is_cuda())
    fail("kernel '" + spec.name + "': tensors must be on a CUDA device, got " +
         device.str());
  size_t numWorkspaces =
      spec.params.size() - spec.numInputs() - spec.numOutputs();
  TensorArgs args(inputs.size() + outputs.size() + numWorkspaces);
  for (size_t i = 0; i < inputs.size(); ++i)
    args.add(spec, inputs[i], device, "input", i);
  for (size_t i = 0; i < outputs.size(); ++i)
    args.add(spec, outputs[i], device, "output", i);
  // The f32 workspaces of a kernel (per-CTA partials, an accumulator, values
  // its CTAs hand each other), from
  // PyTorch's caching allocator (stream-ordered: freeing them after the
  // launch is safe), in the shapes the runtime gives; uninitialized, since
  // the launch zero-fills every workspace on the stream first.
  std::vector<at::Tensor> workspaces;
  if (spec.hasWorkspaces()) {
    std::vector<runtime::Shape> shapes = shapesOf(inputs), sizes;
    check(runtime::inferWorkspaceShapes(
        spec, shapes.data(), shapes.size(),
        at::cuda::getDeviceProperties(device.index())->multiProcessorCount,
        &sizes));
    for (size_t w = 0; w < sizes.size(); ++w) {
      workspaces.push_back(
          at::empty(at::IntArrayRef(sizes[w].data(), sizes[w].size()),
                    inputs.front().options().dtype(at::kFloat)));
      args.add(spec, workspaces.back(), device, "workspace", w);
    }
  }
  auto stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  check(kernel.bundle->launch(kernel.index, args.data(), args.size(),
                              reinterpret_cast<runtime::CUstream>(stream),
                              device.index()));
}

void liger::libtorch::launch(runtime::Bundle &bundle, const std::string &kernel,
                             const std::vector<at::Tensor> &inputs,
                             const std::vector<at::Tensor> &outputs) {
  int index = bundle.kernelIndex(kernel);
  TORCH_CHECK(index >= 0, "liger: ", bundle.dir(), " has no kernel '", kernel,
              "'");
  launch(KernelRef{&bundle, static_cast<size_t>(index)}, inputs, outputs);
}

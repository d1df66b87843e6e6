//===- TorchAdapter.cpp - liger kernels on LibTorch tensors ---------------===//

#include "liger/Torch/TorchAdapter.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/util/Exception.h>

#include <map>
#include <mutex>

using namespace liger;
using runtime::DType;

namespace {
DType toDType(at::ScalarType type, const std::string &what) {
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
    TORCH_CHECK(false, "liger: ", what, " has dtype ", type,
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
} // namespace

runtime::Bundle &liger::libtorch::openBundle(const std::string &path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<runtime::Bundle>> bundles;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = bundles.find(path);
  if (it != bundles.end())
    return *it->second;
  std::unique_ptr<runtime::Bundle> bundle;
  runtime::Status status = runtime::Bundle::open(path, &bundle);
  TORCH_CHECK(status.isOk(), "liger: ", status.message());
  return *bundles.emplace(path, std::move(bundle)).first->second;
}

std::vector<at::Tensor>
liger::libtorch::allocateOutputs(const runtime::KernelSpec &kernel,
                                 const std::vector<at::Tensor> &inputs) {
  std::vector<int64_t> leading;
  bool found = false;
  size_t i = 0;
  for (const runtime::KernelParam &p : kernel.params) {
    if (p.isOutput || p.isWorkspace)
      continue;
    TORCH_CHECK(i < inputs.size(), "liger: kernel '", kernel.name,
                "' takes more inputs than the ", inputs.size(), " given");
    if (p.kind == runtime::ParamKind::Rows && !found) {
      auto sizes = inputs[i].sizes();
      leading.assign(sizes.begin(), sizes.end() - 1);
      found = true;
    }
    ++i;
  }
  // [B, H, T, D] outputs take the shapes of the [B, H, T, D] inputs, in order.
  std::vector<std::vector<int64_t>> headShapes;
  i = 0;
  for (const runtime::KernelParam &p : kernel.params) {
    if (p.isOutput || p.isWorkspace)
      continue;
    if (p.kind == runtime::ParamKind::Heads && i < inputs.size())
      headShapes.emplace_back(inputs[i].sizes().begin(),
                              inputs[i].sizes().end());
    ++i;
  }
  TORCH_CHECK(found || !headShapes.empty(), "liger: kernel '", kernel.name,
              "' has no row-shaped input to size its outputs");
  std::vector<at::Tensor> outputs;
  size_t nextHeads = 0;
  for (const runtime::KernelParam &p : kernel.params) {
    if (!p.isOutput)
      continue;
    std::vector<int64_t> shape = leading;
    if (p.kind == runtime::ParamKind::Heads && headShapes.empty()) {
      // A projection's head split (q/k with RoPE): rows [B, T, K] give
      // [B, H, T, D].
      TORCH_CHECK(leading.size() == 2, "liger: kernel '", kernel.name,
                  "' writes [B, H, T, D] from [B, T, K] rows, got rows of "
                  "rank ", leading.size() + 1);
      shape = {leading[0], p.heads, leading[1], p.length};
    } else if (p.kind == runtime::ParamKind::Heads) {
      TORCH_CHECK(nextHeads < headShapes.size(), "liger: kernel '", kernel.name,
                  "' has more [B, H, T, D] outputs than inputs");
      shape = headShapes[nextHeads++];
    } else if (p.kind == runtime::ParamKind::Rows) {
      shape.push_back(p.length);
    } else if (p.kind == runtime::ParamKind::Feature) {
      shape = {p.length};
    } else if (p.kind == runtime::ParamKind::Matrix) {
      shape = {p.heads, p.length}; // a weight gradient [N, K]
    } else if (p.kind == runtime::ParamKind::Scalar) {
      shape = {}; // a reduced loss
    }
    outputs.push_back(at::empty(
        shape, inputs.front().options().dtype(toScalarType(p.dtype))));
  }
  return outputs;
}

void liger::libtorch::launch(runtime::Bundle &bundle, const std::string &kernel,
                             const std::vector<at::Tensor> &inputs,
                             const std::vector<at::Tensor> &outputs) {
  TORCH_CHECK(!inputs.empty(), "liger: kernel '", kernel,
              "' needs at least one input");
  at::Device device = inputs.front().device();
  TORCH_CHECK(device.is_cuda(), "liger: kernel '", kernel,
              "': tensors must be on a CUDA device, got ", device);
  std::vector<runtime::TensorArg> args;
  auto add = [&](const at::Tensor &t, const std::string &what) {
    TORCH_CHECK(t.device() == device, "liger: kernel '", kernel, "': ", what,
                " is on ", t.device(), ", the first input on ", device);
    TORCH_CHECK(t.is_contiguous(), "liger: kernel '", kernel, "': ", what,
                " must be contiguous");
    runtime::TensorArg a;
    a.data = t.data_ptr();
    a.dtype = toDType(t.scalar_type(), what);
    a.shape.assign(t.sizes().begin(), t.sizes().end());
    args.push_back(std::move(a));
  };
  for (size_t i = 0; i < inputs.size(); ++i)
    add(inputs[i], "input #" + std::to_string(i));
  for (size_t i = 0; i < outputs.size(); ++i)
    add(outputs[i], "output #" + std::to_string(i));
  // The f32 workspaces of a kernel that reduces across rows, from PyTorch's
  // caching allocator (stream-ordered: freeing them after the launch is
  // safe). The first row-shaped input counts the rows.
  std::vector<at::Tensor> workspaces;
  const runtime::KernelSpec *spec = bundle.findKernel(kernel);
  if (spec && spec->hasWorkspaces()) {
    int64_t rows = 1;
    for (size_t i = 0; i < spec->params.size() && i < inputs.size(); ++i)
      if (spec->params[i].kind == runtime::ParamKind::Rows) {
        for (int64_t d = 0; d + 1 < inputs[i].dim(); ++d)
          rows *= inputs[i].size(d);
        break;
      }
    int64_t ctas = runtime::workspaceCtas(
        *spec, rows,
        at::cuda::getDeviceProperties(device.index())->multiProcessorCount);
    for (const runtime::KernelParam &p : spec->params)
      if (p.isWorkspace) {
        workspaces.push_back(at::empty(
            {ctas, p.length}, inputs.front().options().dtype(at::kFloat)));
        add(workspaces.back(), "workspace '" + p.name + "'");
      }
  }
  auto stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  runtime::Status status =
      bundle.launch(kernel, args, reinterpret_cast<runtime::CUstream>(stream),
                    device.index());
  TORCH_CHECK(status.isOk(), "liger: ", status.message());
}

//===- TorchOps.cpp - torch.ops.liger.* -----------------------------------===//
//
// Registers the LibTorch operators of liger:
//
//   liger::launch(str bundle, str kernel, Tensor[] inputs,
//                 Tensor(a!)[] outputs) -> ()
//   liger::call(str bundle, str kernel, Tensor[] inputs) -> Tensor[]
//
// `launch` writes preallocated outputs (the lowest-overhead path: the
// kernel is resolved once per thread for a repeated bundle and kernel, the
// arguments checked and packed without allocating); `call` allocates them
// in the shapes the runtime gives. Both check every tensor with TORCH_CHECK
// and launch on the current CUDA stream. Meta implementations let
// torch.compile trace them, symbolic sizes included.
//
//===----------------------------------------------------------------------===//

#include "liger/Torch/TorchAdapter.h"

#include <torch/library.h>

namespace {
void launchOp(const std::string &bundle, const std::string &kernel,
              const std::vector<at::Tensor> &inputs,
              const std::vector<at::Tensor> &outputs) {
  liger::libtorch::launch(liger::libtorch::resolve(bundle, kernel), inputs,
                          outputs);
}

std::vector<at::Tensor> callOp(const std::string &bundle,
                               const std::string &kernel,
                               const std::vector<at::Tensor> &inputs) {
  liger::libtorch::KernelRef ref = liger::libtorch::resolve(bundle, kernel);
  std::vector<at::Tensor> outputs =
      liger::libtorch::allocateOutputs(ref.spec(), inputs);
  liger::libtorch::launch(ref, inputs, outputs);
  return outputs;
}

void launchMeta(const std::string &, const std::string &,
                const std::vector<at::Tensor> &,
                const std::vector<at::Tensor> &) {}

std::vector<at::Tensor> callMeta(const std::string &bundle,
                                 const std::string &kernel,
                                 const std::vector<at::Tensor> &inputs) {
  return liger::libtorch::allocateOutputs(
      liger::libtorch::resolve(bundle, kernel).spec(), inputs);
}
} // namespace

TORCH_LIBRARY(liger, m) {
  m.def("launch(str bundle, str kernel, Tensor[] inputs, Tensor(a!)[] outputs) "
        "-> ()");
  m.def("call(str bundle, str kernel, Tensor[] inputs) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(liger, CUDA, m) {
  m.impl("launch", &launchOp);
  m.impl("call", &callOp);
}

TORCH_LIBRARY_IMPL(liger, Meta, m) {
  m.impl("launch", &launchMeta);
  m.impl("call", &callMeta);
}

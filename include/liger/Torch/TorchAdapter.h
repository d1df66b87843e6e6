//===- TorchAdapter.h - liger kernels on LibTorch tensors -------*- C++ -*-===//
//
// The LibTorch side of the runtime: launches a bundle's kernel on
// at::Tensors on PyTorch's current CUDA stream, turning every runtime Status
// and every tensor mismatch (device, contiguity, and through the runtime's
// kernel ABI dtype and shape) into a TORCH_CHECK error that says what and
// where. Output and workspace shapes are the runtime's (inferOutputShapes,
// inferWorkspaceShapes), not re-derived here. The same code backs the
// `torch.ops.liger.*` operators (TorchOps.cpp) and C++ programs
// (examples/libtorch/).
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TORCH_TORCHADAPTER_H
#define LIGER_TORCH_TORCHADAPTER_H

#include "liger/Runtime/Bundle.h"

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace liger::libtorch {

/// A kernel of an opened bundle, resolved once: what a launch takes.
struct KernelRef {
  runtime::Bundle *bundle = nullptr;
  size_t index = 0; ///< the runtime's kernel handle
  const runtime::KernelSpec &spec() const { return bundle->kernel(index); }
};

/// Opens the bundle at `path`, or returns the one opened before (a
/// process-wide, thread-safe cache keyed by path); where there is a GPU,
/// checks that the current one runs it (Bundle::checkDevice). Fails with
/// TORCH_CHECK.
runtime::Bundle &openBundle(const std::string &path);

/// The kernel `kernel` of the bundle at `path` (openBundle). The last pair
/// asked on a thread is remembered, so that an operator called again and
/// again with the same strings compares them and looks nothing up.
KernelRef resolve(const std::string &path, const std::string &kernel);

/// Allocates the outputs of `kernel` for `inputs` on the inputs' device, in
/// the shapes the runtime gives (checking the inputs' shapes); for inputs
/// of symbolic sizes (tracing), in the runtime's rule over their ranks.
std::vector<at::Tensor> allocateOutputs(const runtime::KernelSpec &kernel,
                                        const std::vector<at::Tensor> &inputs);

/// Launches `kernel` on `inputs` then `outputs` (in the kernel's parameter
/// order) on the current CUDA stream of their device, with the f32
/// workspaces of a kernel (partial reductions, values its CTAs hand each
/// other) from PyTorch's allocator.
void launch(KernelRef kernel, const std::vector<at::Tensor> &inputs,
            const std::vector<at::Tensor> &outputs);
/// The same, with the kernel named.
void launch(runtime::Bundle &bundle, const std::string &kernel,
            const std::vector<at::Tensor> &inputs,
            const std::vector<at::Tensor> &outputs);

} // namespace liger::libtorch

#endif // LIGER_TORCH_TORCHADAPTER_H

//===- TorchAdapter.h - liger kernels on LibTorch tensors -------*- C++ -*-===//
//
// The LibTorch side of the runtime: launches a bundle's kernel on
// at::Tensors on PyTorch's current CUDA stream, turning every runtime Status
// and every tensor mismatch (device, dtype, contiguity, shape) into a
// TORCH_CHECK error that says what and where. The same code backs the
// `torch.ops.liger.launch` operator (TorchOps.cpp) and C++ programs
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

/// Opens the bundle at `path`, or returns the one opened before (a
/// process-wide, thread-safe cache keyed by path). Fails with TORCH_CHECK.
runtime::Bundle &openBundle(const std::string &path);

/// Allocates the outputs of `kernel` for `inputs` (shapes from the
/// manifest, on the inputs' device).
std::vector<at::Tensor> allocateOutputs(const runtime::KernelSpec &kernel,
                                        const std::vector<at::Tensor> &inputs);

/// Launches `kernel` of `bundle` on `inputs` then `outputs` (in the
/// kernel's parameter order) on the current CUDA stream of their device.
void launch(runtime::Bundle &bundle, const std::string &kernel,
            const std::vector<at::Tensor> &inputs,
            const std::vector<at::Tensor> &outputs);

} // namespace liger::libtorch

#endif // LIGER_TORCH_TORCHADAPTER_H

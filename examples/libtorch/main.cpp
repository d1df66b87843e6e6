//===- main.cpp - a LibTorch program calling a liger kernel ---------------===//
//
// Loads a bundle written by liger-compile and runs its RMSNorm kernel on
// LibTorch tensors, on the current CUDA stream, then checks the result
// against the same formula in LibTorch.
//
//   liger-libtorch-example gpu-bundles/h4096_bf16
//
// (the bundle of scripts/build-gpu-bundles.sh for hidden 4096, bf16; its
// kernel rms_llama_rowwise_0 is liger.rms_norm with rstd, eps 1e-6).
//
//===----------------------------------------------------------------------===//

#include "liger/Torch/TorchAdapter.h"

#include <torch/torch.h>

#include <iostream>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " <bundle directory>\n";
    return 2;
  }
  if (!torch::cuda::is_available()) {
    std::cerr << "liger-libtorch-example: no CUDA device\n";
    return 1;
  }
  try {
    liger::runtime::Bundle &bundle = liger::libtorch::openBundle(argv[1]);
    const std::string kernel = "rms_llama_rowwise_0";
    const liger::runtime::KernelSpec *spec = bundle.findKernel(kernel);
    TORCH_CHECK(spec, argv[1], " has no kernel ", kernel);
    int64_t hidden = spec->params.front().length;

    auto options =
        torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
    torch::Tensor x = torch::randn({16, hidden}, options);
    torch::Tensor w = torch::randn({hidden}, options);
    std::vector<at::Tensor> outputs =
        liger::libtorch::allocateOutputs(*spec, {x, w});
    liger::libtorch::launch(bundle, kernel, {x, w}, outputs);

    torch::Tensor xf = x.to(torch::kFloat);
    torch::Tensor rstd = torch::rsqrt(xf.pow(2).mean(-1, true) + 1e-6);
    torch::Tensor expected =
        (xf * rstd).to(torch::kBFloat16).to(torch::kFloat) *
        w.to(torch::kFloat);
    double err =
        (outputs[0].to(torch::kFloat) - expected).abs().max().item<double>() /
        expected.abs().max().item<double>();
    std::cout << "liger-libtorch-example: " << kernel << " on " << x.sizes()
              << ", max error " << err << " relative to max |y|\n";
    return err <= 1e-2 ? 0 : 1;
  } catch (const c10::Error &e) {
    std::cerr << "liger-libtorch-example: " << e.what_without_backtrace()
              << "\n";
    return 1;
  }
}

//===- TestManifests.h - manifests for the runtime tests --------*- C++ -*-===//
//
// What the runtime's tests (and liger-launch-bench) open: a manifest as JSON
// text with one kernel of each shape the JSON reader must handle, and
// builders of the kernel ABI's structs for tests that write their bundles
// with writeManifest.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TEST_UNIT_RUNTIME_TESTMANIFESTS_H
#define LIGER_TEST_UNIT_RUNTIME_TESTMANIFESTS_H

#include "liger/Runtime/KernelAbi.h"

#include <string>
#include <utility>
#include <vector>

namespace liger::runtime::testing {

/// The cubin_sha256 of the tests' manifests: writeTestBundle replaces it
/// by the digest of the cubin it writes.
inline const std::string kUnsetCubinSha256(64, '0');

/// An RMSNorm kernel "norm" (H = 4096, with rstd), its weight gradient
/// "grad" (H = 1000: a workspace, a finishing kernel and a tensor map) and
/// a loss plan naming both; every field of the JSON form.
inline const char *kTestManifest = R"({
  "format": "liger-bundle", "version": 3, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a",
    "cubin": "k.cubin",
    "cubin_sha256": "0000000000000000000000000000000000000000000000000000000000000000", "ptx": "k.ptx",
    "kernels": [{"name": "norm", "function": "layer", "template": "rowwise", "ops": "liger.rms_norm",
      "abi": "memref-descriptor", "grid": ["rows", 1, 1], "block": [256, 1, 1],
      "dynamic_shared_memory_bytes": 36, "vector_width": 8, "alignment_bytes": 16,
      "params": [
        {"name": "input0", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 4096]},
        {"name": "input1", "role": "input", "kind": "feature", "dtype": "bf16", "shape": [4096]},
        {"name": "output0", "role": "output", "kind": "rows", "dtype": "bf16", "shape": ["rows", 4096]},
        {"name": "output1", "role": "output", "kind": "row_scalars", "dtype": "f32", "shape": ["rows"]}
      ]},
     {"name": "grad", "function": "layer", "template": "rowwise", "ops": "liger.rms_norm_grad",
      "abi": "memref-descriptor", "grid": ["ctas", 1, 1], "block": [128, 1, 1],
      "dynamic_shared_memory_bytes": 20, "vector_width": 8, "alignment_bytes": 16,
      "ctas_per_sm": 4,
      "finish": {"name": "grad_finish", "grid": [32, 1, 1], "block": [256, 1, 1],
                 "dynamic_shared_memory_bytes": 1024},
      "tensor_maps": [{"param": "input0", "box": [128, 64], "swizzle": 128, "oob": "zero"}],
      "params": [
        {"name": "input0", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 1000]},
        {"name": "output0", "role": "output", "kind": "feature", "dtype": "bf16", "shape": [1000]},
        {"name": "workspace0", "role": "workspace", "kind": "partials", "dtype": "f32", "shape": ["ctas", 1000]}
      ]}]}],
  "plans": [{"function": "step", "kind": "fused_linear_cross_entropy",
    "chunk_tokens": 128, "memory_budget": 256000, "mean": true, "ignore_index": -100,
    "class_weight": false, "dw_f32": false,
    "kernels": {"logits": "grad", "ce": "norm"}}]})";

/// A kernel of function "layer" with one CTA of 256 threads per row, 36
/// bytes of shared memory and 8-wide vectors, taking `params`.
inline KernelSpec rowwiseKernel(std::string name, std::string ops,
                                std::vector<KernelParam> params) {
  KernelSpec k;
  k.name = std::move(name);
  k.function = "layer";
  k.ops = std::move(ops);
  k.block[0] = 256;
  k.dynamicSharedMemoryBytes = 36;
  k.vectorWidth = 8;
  k.params = std::move(params);
  return k;
}

/// A manifest of one module "liger_kernels" for `arch` (k.cubin, k.ptx).
inline Manifest moduleManifest(std::string arch,
                               std::vector<KernelSpec> kernels) {
  Manifest m;
  m.source = "t.mlir";
  ModuleSpec &module = m.modules.emplace_back();
  module.name = "liger_kernels";
  module.arch = std::move(arch);
  module.cubinFile = "k.cubin";
  module.cubinSha256 = kUnsetCubinSha256;
  module.ptxFile = "k.ptx";
  module.kernels = std::move(kernels);
  return m;
}

} // namespace liger::runtime::testing

#endif // LIGER_TEST_UNIT_RUNTIME_TESTMANIFESTS_H

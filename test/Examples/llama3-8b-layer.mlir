// The bundled Llama-3-8B decoder layer parses, verifies, canonicalizes and
// reports the expected op mix, weights (218,112,000 parameters: 7 projections
// and 2 norms) and projection FLOPs.
// RUN: liger-opt %liger_src_root/examples/llama3_8b_decoder_layer.mlir --canonicalize --liger-print-summary -o /dev/null | FileCheck %s
// RUN: liger-opt %liger_src_root/examples/llama3_8b_decoder_layer.mlir | liger-opt --verify-each | FileCheck %s --check-prefix=ROUNDTRIP

// CHECK:      liger summary of @llama3_8b_decoder_layer
// CHECK-NEXT:   kernels: 13 (one per liger op; no fusion groups)
// CHECK-NEXT:   liger ops: 13
// CHECK-NEXT:     liger.add                      1
// CHECK-NEXT:     liger.add_rms_norm             1   weights 4,096 elements
// CHECK-NEXT:     liger.attention                1
// CHECK-NEXT:     liger.linear                   7   weights 218,103,808 elements   FLOP/token 436,207,616
// CHECK-NEXT:     liger.rms_norm                 1   weights 4,096 elements
// CHECK-NEXT:     liger.rope                     1
// CHECK-NEXT:     liger.swiglu                   1
// CHECK-NEXT:   other ops: 15 (arith.constant x2, linalg.transpose x4, tensor.collapse_shape x1, tensor.dim x2, tensor.empty x3, tensor.expand_shape x3)
// CHECK-NEXT:   weights: 218,112,000 elements, 416.02 MiB
// CHECK-NEXT:   projection FLOP/token: 436,207,616

// ROUNDTRIP-LABEL: func.func @llama3_8b_decoder_layer
// ROUNDTRIP: liger.rope
// ROUNDTRIP: liger.attention {{.*}} causal
// ROUNDTRIP: liger.add_rms_norm {{.*}} eps = 9.99999974E-6

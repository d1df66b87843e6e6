// The bundled Llama-3-8B layer through liger-fuse: the expected groups, the
// report, and the kernel count before (13) and after (8; 7 with the input
// norm folded into its projections, norm-prologue=true).
// RUN: liger-opt %liger_src_root/examples/llama3_8b_decoder_layer.mlir --canonicalize --liger-fuse | FileCheck %s --check-prefix=DEFAULT
// RUN: liger-opt %liger_src_root/examples/llama3_8b_decoder_layer.mlir --canonicalize --liger-fuse=report=true -o /dev/null | FileCheck %s --check-prefix=DEFAULT-REPORT
// RUN: liger-opt %liger_src_root/examples/llama3_8b_decoder_layer.mlir --canonicalize --liger-fuse --liger-print-summary -o /dev/null | FileCheck %s --check-prefix=DEFAULT-SUMMARY
// RUN: liger-opt %liger_src_root/examples/llama3_8b_decoder_layer.mlir --canonicalize --liger-fuse=norm-prologue=true | FileCheck %s
// RUN: liger-opt %liger_src_root/examples/llama3_8b_decoder_layer.mlir --canonicalize '--liger-fuse=norm-prologue=true report=true' -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: liger-opt %liger_src_root/examples/llama3_8b_decoder_layer.mlir --canonicalize --liger-fuse=norm-prologue=true --liger-print-summary -o /dev/null | FileCheck %s --check-prefix=SUMMARY

// By default the input norm stays a rowwise kernel: the v projection alone,
// the q/k group without a norm.
// DEFAULT: %[[N:.*]] = liger.rms_norm
// DEFAULT-NEXT: liger.linear %[[N]]
// DEFAULT: liger.fusion matmul(%[[N]],
// DEFAULT-NOT: liger.rms_norm
// DEFAULT:   liger.rope
// DEFAULT: liger.attention
// DEFAULT: liger.fusion rowwise
// DEFAULT:   liger.add_rms_norm
// DEFAULT: liger.fusion matmul
// DEFAULT:   liger.swiglu
// DEFAULT: liger.fusion matmul
// DEFAULT:   liger.add
// DEFAULT: return

// DEFAULT-REPORT: [liger-fuse-qkv-rope] fused liger.linear, liger.linear, tensor.expand_shape, tensor.expand_shape, linalg.transpose, linalg.transpose, liger.rope into a matmul group
// DEFAULT-REPORT: [liger-fuse-norm-linear] left alone liger.rms_norm at llama3_8b_decoder_layer.mlir:{{[0-9]+}}:{{[0-9]+}}: kept as a rowwise kernel before its projections (fold=false; liger-fuse folds it with norm-prologue=true, liger-compile with --norm-prologue)
// DEFAULT-REPORT-NOT: [liger-fuse-norm-linear] fused

// DEFAULT-SUMMARY: kernels: 8 (fusion groups: 3 matmul, 1 rowwise; liger ops outside groups: 4)

// With norm-prologue=true:
// v projection with the input norm as its prologue.
// CHECK: liger.fusion matmul
// CHECK:   liger.rms_norm
// CHECK:   liger.linear
// CHECK:   liger.yield {{.*}} : tensor<?x?x1024xbf16>
// q and k projections, head split and RoPE, with the input norm.
// CHECK: liger.fusion matmul
// CHECK:   liger.rms_norm
// CHECK:   liger.linear
// CHECK:   liger.linear
// CHECK:   liger.rope
// CHECK:   liger.yield {{.*}} : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>
// CHECK: liger.attention
// CHECK: liger.linear
// Residual add + post-attention norm.
// CHECK: liger.fusion rowwise
// CHECK:   liger.add_rms_norm
// Gate/up projections and SwiGLU.
// CHECK: liger.fusion matmul
// CHECK:   liger.linear
// CHECK:   liger.linear
// CHECK:   liger.swiglu
// Down projection with the residual add in its epilogue.
// CHECK: liger.fusion matmul
// CHECK:   liger.linear
// CHECK:   liger.add
// CHECK: return

// REPORT: [liger-fuse-add-rms-norm] fused liger.add_rms_norm into a rowwise group
// REPORT: [liger-fuse-qkv-rope] fused liger.linear, liger.linear, tensor.expand_shape, tensor.expand_shape, linalg.transpose, linalg.transpose, liger.rope into a matmul group
// REPORT: [liger-fuse-gated-mlp] fused liger.linear, liger.linear, liger.swiglu into a matmul group
// REPORT: [liger-fuse-norm-linear] fused liger.rms_norm, liger.fusion matmul into a matmul group
// REPORT: [liger-fuse-norm-linear] fused liger.rms_norm, liger.linear into a matmul group
// REPORT: [liger-fuse-norm-linear] left alone liger.add_rms_norm at llama3_8b_decoder_layer.mlir:{{[0-9]+}}:{{[0-9]+}}: an add + RMSNorm also writes the new residual, so it stays a rowwise kernel before the projections
// REPORT: [liger-fuse-elementwise] left alone liger.linear at llama3_8b_decoder_layer.mlir:{{[0-9]+}}:{{[0-9]+}}: its reader is a rowwise group (liger.add_rms_norm), which a matmul epilogue does not take
// REPORT: [liger-fuse-elementwise] fused liger.linear, liger.add into a matmul group

// SUMMARY: kernels: 7 (fusion groups: 4 matmul, 1 rowwise; liger ops outside groups: 2)
// SUMMARY: weights: 218,112,000 elements, 416.02 MiB

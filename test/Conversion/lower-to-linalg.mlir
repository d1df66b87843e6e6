// RUN: liger-opt %s --liger-lower-to-linalg --split-input-file | FileCheck %s --implicit-check-not="liger."

// llama casting: x * rstd is rounded to bf16 before the weight multiply, and
// offset + weight is rounded in the weight's dtype.
// CHECK-LABEL: func.func @rms_norm_llama
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x8xbf16>, %[[W:.+]]: tensor<8xbf16>)
//       CHECK:   %[[DIM:.+]] = tensor.dim %[[X]], %{{.+}} : tensor<?x8xbf16>
//       CHECK:   %[[SUMSQ:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[X]] : tensor<?x8xbf16>)
//       CHECK:   %[[RSTD:.+]] = linalg.generic
//       CHECK:     math.rsqrt
//       CHECK:   %[[INIT:.+]] = tensor.empty(%[[DIM]]) : tensor<?x8xbf16>
//       CHECK:   linalg.generic {{.*}} ins(%[[X]], %[[W]], %[[RSTD]] : tensor<?x8xbf16>, tensor<8xbf16>, tensor<?xf32>) outs(%[[INIT]] : tensor<?x8xbf16>)
//       CHECK:     %[[N:.+]] = arith.mulf %{{.+}}, %{{.+}} : f32
//  CHECK-NEXT:     %[[NR:.+]] = arith.truncf %[[N]] : f32 to bf16
//  CHECK-NEXT:     arith.extf %[[NR]] : bf16 to f32
func.func @rms_norm_llama(%x: tensor<?x8xbf16>, %w: tensor<8xbf16>) -> tensor<?x8xbf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-5 : tensor<?x8xbf16>, tensor<8xbf16>
  return %y : tensor<?x8xbf16>
}

// -----

// gemma casting: everything in f32, one rounding at the end.
// CHECK-LABEL: func.func @rms_norm_gemma
//       CHECK:   math.rsqrt
//       CHECK:   linalg.generic
//   CHECK-NOT:     arith.truncf
//       CHECK:     arith.truncf %{{.+}} : f32 to bf16
//  CHECK-NEXT:     linalg.yield
func.func @rms_norm_gemma(%x: tensor<?x8xbf16>, %w: tensor<8xf32>) -> tensor<?x8xbf16> {
  %y = liger.rms_norm %x, %w offset = 1.0 casting = gemma : tensor<?x8xbf16>, tensor<8xf32>
  return %y : tensor<?x8xbf16>
}

// -----

// The rstd result is the row statistic itself.
// CHECK-LABEL: func.func @rms_norm_rstd
//       CHECK:   linalg.generic
//       CHECK:   %[[RSTD:.+]] = linalg.generic
//       CHECK:     math.rsqrt
//       CHECK:   %[[Y:.+]] = linalg.generic
//       CHECK:   return %[[Y]], %[[RSTD]] : tensor<2x?x16xf32>, tensor<2x?xf32>
func.func @rms_norm_rstd(%x: tensor<2x?x16xf32>, %w: tensor<16xf32>) -> (tensor<2x?x16xf32>, tensor<2x?xf32>) {
  %y, %r = liger.rms_norm %x, %w rstd : tensor<2x?x16xf32>, tensor<16xf32>
  return %y, %r : tensor<2x?x16xf32>, tensor<2x?xf32>
}

// -----

// LayerNorm's statistics: the mean (the row sum over H) and rstd (from the
// two-pass variance) are per-row scalars that y reads and, with `stats`,
// the op returns.
// CHECK-LABEL: func.func @layer_norm_stats
//  CHECK-SAME:   (%[[X:.+]]: tensor<2x?x16xbf16>, %[[W:.+]]: tensor<16xbf16>, %[[B:.+]]: tensor<16xbf16>)
//       CHECK:   %[[SUM:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[X]] : tensor<2x?x16xbf16>)
//       CHECK:   %[[MEAN:.+]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<2x?xf32>)
//       CHECK:     arith.divf
//       CHECK:   %[[SQDEV:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[X]], %[[MEAN]] : tensor<2x?x16xbf16>, tensor<2x?xf32>)
//       CHECK:   %[[RSTD:.+]] = linalg.generic {{.*}} ins(%[[SQDEV]] : tensor<2x?xf32>)
//       CHECK:     math.rsqrt
//       CHECK:   %[[Y:.+]] = linalg.generic {{.*}} ins(%[[X]], %[[MEAN]], %[[RSTD]], %[[W]], %[[B]] :
//   CHECK-NOT:     math.rsqrt
//       CHECK:   return %[[Y]], %[[MEAN]], %[[RSTD]] : tensor<2x?x16xbf16>, tensor<2x?xf32>, tensor<2x?xf32>
func.func @layer_norm_stats(%x: tensor<2x?x16xbf16>, %w: tensor<16xbf16>, %b: tensor<16xbf16>) -> (tensor<2x?x16xbf16>, tensor<2x?xf32>, tensor<2x?xf32>) {
  %y, %m, %r = liger.layer_norm %x, %w, %b stats : tensor<2x?x16xbf16>, tensor<16xbf16>, tensor<16xbf16>
  return %y, %m, %r : tensor<2x?x16xbf16>, tensor<2x?xf32>, tensor<2x?xf32>
}

// -----

// Its backward reads the statistics and recomputes none: its only row
// reductions are the sums of g and of g x_hat (both from the inputs alone),
// then dx and the reductions across rows dW and db.
// CHECK-LABEL: func.func @layer_norm_grad
//  CHECK-SAME:   (%[[DY:.+]]: tensor<?x16xbf16>, %[[X:.+]]: tensor<?x16xbf16>, %[[W:.+]]: tensor<16xf32>, %[[M:.+]]: tensor<?xf32>, %[[R:.+]]: tensor<?xf32>)
//       CHECK:   %[[SG:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[DY]], %[[X]], %[[W]], %[[M]], %[[R]] :
//       CHECK:   %[[SGX:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[DY]], %[[X]], %[[W]], %[[M]], %[[R]] :
//       CHECK:   %[[DX:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} ins(%[[DY]], %[[X]], %[[W]], %[[M]], %[[R]], %[[SG]], %[[SGX]] :
//   CHECK-NOT:   iterator_types = ["parallel", "reduction"]
//       CHECK:   iterator_types = ["reduction", "parallel"]{{.*}} ins(%[[DY]], %[[X]], %[[M]], %[[R]] :
//       CHECK:   iterator_types = ["reduction", "parallel"]{{.*}} ins(%[[DY]] :
//   CHECK-NOT:   iterator_types = ["parallel", "reduction"]
//       CHECK:   return %[[DX]]
func.func @layer_norm_grad(%dy: tensor<?x16xbf16>, %x: tensor<?x16xbf16>, %w: tensor<16xf32>, %m: tensor<?xf32>, %r: tensor<?xf32>) -> (tensor<?x16xbf16>, tensor<16xf32>, tensor<16xf32>) {
  %dx, %dw, %db = liger.layer_norm_grad %dy, %x, %w, %m, %r : tensor<?x16xbf16>, tensor<16xf32>, tensor<?xf32>
  return %dx, %dw, %db : tensor<?x16xbf16>, tensor<16xf32>, tensor<16xf32>
}

// -----

// x · Wᵀ: one contraction with k innermost, accumulated in f32, then a
// rounding pass that adds the bias.
// CHECK-DAG: #{{.+}} = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #{{.+}} = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #{{.+}} = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @linear_bias
//       CHECK:   %[[ACC:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<?x32xf32>)
//       CHECK:   linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
//  CHECK-SAME:     outs(%[[ACC]] : tensor<?x32xf32>)
//       CHECK:   arith.addf
//       CHECK:   arith.truncf %{{.+}} : f32 to bf16
func.func @linear_bias(%x: tensor<?x64xbf16>, %w: tensor<32x64xbf16>, %b: tensor<32xbf16>) -> tensor<?x32xbf16> {
  %y = liger.linear %x, %w, %b : tensor<?x64xbf16>, tensor<32x64xbf16>, tensor<32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// A dynamic table batch is resolved at run time: broadcast when it is 1.
// CHECK-LABEL: func.func @rope_dynamic_table_batch
//  CHECK-SAME:   %[[COS:[a-z0-9]+]]: tensor<?x?x8xf32>
//       CHECK:   %[[TB:.+]] = tensor.dim %[[COS]], %{{.+}} : tensor<?x?x8xf32>
//       CHECK:   %[[BCAST:.+]] = arith.cmpi eq, %[[TB]], %{{.+}} : index
//       CHECK:   linalg.generic
//       CHECK:     %[[B:.+]] = linalg.index 0 : index
//       CHECK:     %[[ROW:.+]] = arith.select %[[BCAST]], %{{.+}}, %[[B]] : index
//       CHECK:     tensor.extract %[[COS]][%[[ROW]], %{{.+}}, %{{.+}}]
func.func @rope_dynamic_table_batch(%q: tensor<?x2x?x8xf32>, %k: tensor<?x1x?x8xf32>, %c: tensor<?x?x8xf32>) -> (tensor<?x2x?x8xf32>, tensor<?x1x?x8xf32>) {
  %qr, %kr = liger.rope %q, %k, %c, %c : tensor<?x2x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x8xf32>
  return %qr, %kr : tensor<?x2x?x8xf32>, tensor<?x1x?x8xf32>
}

// -----

// The target logit is read at a clamped index (0 for ignored or
// out-of-range targets); out-of-range targets give NaN.
// CHECK-LABEL: func.func @cross_entropy_guards_the_target_read
//       CHECK:   %[[IDX:.+]]:4 = linalg.generic
//       CHECK:     %[[CAST:.+]] = arith.index_cast %{{.+}} : i64 to index
//       CHECK:     arith.select %{{.+}}, %[[CAST]], %{{.+}} : index
//       CHECK:   linalg.generic
//       CHECK:     tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<?x100xf32>
//       CHECK:     arith.constant 0x7FC00000 : f32
func.func @cross_entropy_guards_the_target_read(%x: tensor<?x100xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x100xf32>, tensor<?xi64>
  return %l : tensor<f32>
}

// -----

// Grouped-query attention: query head h reads key/value head h floordiv 2.
// CHECK: #{{.+}} = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d3, d4)>
// CHECK-LABEL: func.func @attention_gqa
//   CHECK-NOT: math.log
//       CHECK: return %{{.+}} : tensor<1x4x?x8xbf16>
func.func @attention_gqa(%q: tensor<1x4x?x8xbf16>, %k: tensor<1x2x?x8xbf16>, %v: tensor<1x2x?x8xbf16>) -> tensor<1x4x?x8xbf16> {
  %o = liger.attention %q, %k, %v causal : tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
  return %o : tensor<1x4x?x8xbf16>
}

// -----

// attention_grad: the probabilities recomputed, then dq by query head; a
// key/value head's dk and dv sum over the query heads of its group (the
// query heads split [B, 4, ...] -> [B, 2, 2, ...], reduced over the group
// member and the query position), rounded to bf16.
// CHECK-LABEL: func.func @attention_grad_gqa
//       CHECK: arith.maximumf
//       CHECK: arith.divf
//   CHECK-DAG: tensor.expand_shape %{{.+}} {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, %{{.+}}, %{{.+}}] : tensor<1x4x?x?xf32> into tensor<1x2x2x?x?xf32>
//   CHECK-DAG: tensor.expand_shape %{{.+}} {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, %{{.+}}, 8] : tensor<1x4x?x8xbf16> into tensor<1x2x2x?x8xbf16>
//       CHECK: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]
//       CHECK: return %{{.+}}, %{{.+}}, %{{.+}} : tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
func.func @attention_grad_gqa(%do: tensor<1x4x?x8xbf16>, %q: tensor<1x4x?x8xbf16>, %k: tensor<1x2x?x8xbf16>, %v: tensor<1x2x?x8xbf16>) -> (tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v causal : tensor<1x4x?x8xbf16>, tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
  return %dq, %dk, %dv : tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
}

// -----

// A softcap c = 2 at scale 0.5: t = tanh(s · 0.5 / 2) kept, the scores c · t
// masked; the gradient's ds = p (dp - D) (1 - t²) · scale.
// CHECK-LABEL: func.func @attention_softcap
//       CHECK:   %[[T:.+]] = linalg.generic {{.*}} ins(%{{[a-z0-9_]+}} : tensor<1x4x?x?xf32>)
//  CHECK-NEXT:   ^bb0
//  CHECK-NEXT:     %[[QUARTER:.+]] = arith.constant 2.500000e-01 : f32
//  CHECK-NEXT:     %[[ARG:.+]] = arith.mulf %{{.+}}, %[[QUARTER]] : f32
//  CHECK-NEXT:     math.tanh %[[ARG]] : f32
//       CHECK:   linalg.generic {{.*}} ins(%[[T]] :
//       CHECK:     arith.constant 2.000000e+00 : f32
//       CHECK:     arith.constant 0xFF800000 : f32
// CHECK-LABEL: func.func @attention_grad_softcap
//       CHECK:   %[[TG:.+]] = linalg.generic {{.*}} ins(%{{[a-z0-9_]+}} : tensor<1x4x?x?xf32>)
//       CHECK:     math.tanh
//       CHECK:   linalg.generic {{.*}} ins(%{{.+}}, %{{.+}}, %{{.+}}, %[[TG]] :
//       CHECK:   ^bb0(%[[P:.+]]: f32, %[[DP:.+]]: f32, %[[D:.+]]: f32, %[[TT:.+]]: f32, %{{.+}}: f32):
//       CHECK:     %[[C:.+]] = arith.subf %[[DP]], %[[D]] : f32
//       CHECK:     %[[G:.+]] = arith.mulf %[[P]], %[[C]] : f32
//       CHECK:     %[[T2:.+]] = arith.mulf %[[TT]], %[[TT]] : f32
//       CHECK:     %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
//       CHECK:     %[[SLOPE:.+]] = arith.subf %[[ONE]], %[[T2]] : f32
//       CHECK:     %[[GS:.+]] = arith.mulf %[[G]], %[[SLOPE]] : f32
//       CHECK:     %[[HALF:.+]] = arith.constant 5.000000e-01 : f32
//       CHECK:     arith.mulf %[[GS]], %[[HALF]] : f32
func.func @attention_softcap(%q: tensor<1x4x?x8xbf16>, %k: tensor<1x2x?x8xbf16>, %v: tensor<1x2x?x8xbf16>) -> tensor<1x4x?x8xbf16> {
  %o = liger.attention %q, %k, %v causal softcap = 2.0 scale = 0.5 : tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
  return %o : tensor<1x4x?x8xbf16>
}
func.func @attention_grad_softcap(%do: tensor<1x4x?x8xbf16>, %q: tensor<1x4x?x8xbf16>, %k: tensor<1x2x?x8xbf16>, %v: tensor<1x2x?x8xbf16>) -> (tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v softcap = 2.0 scale = 0.5 : tensor<1x4x?x8xbf16>, tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
  return %dq, %dk, %dv : tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
}

// -----

// return_lse: the rows' log-sum-exp from the softmax's own row max and sum
// (max + log(sum)), -inf where the max is -inf (every key masked: the sum
// is NaN there), returned beside the output.
// CHECK-LABEL: func.func @attention_return_lse
//       CHECK:   %[[MAX:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]
//       CHECK:     arith.maximumf
//       CHECK:   %[[SUM:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%{{.+}}, %[[MAX]] : tensor<1x4x?x?xf32>, tensor<1x4x?xf32>)
//       CHECK:     math.exp
//       CHECK:   %[[LSE:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]{{.*}} ins(%[[MAX]], %[[SUM]] : tensor<1x4x?xf32>, tensor<1x4x?xf32>)
//       CHECK:   ^bb0(%[[M:.+]]: f32, %[[L:.+]]: f32, %{{.+}}: f32):
//       CHECK:     %[[LOG:.+]] = math.log %[[L]] : f32
//       CHECK:     %[[ADD:.+]] = arith.addf %[[M]], %[[LOG]] : f32
//       CHECK:     %[[NEGINF:.+]] = arith.constant 0xFF800000 : f32
//       CHECK:     %[[EMPTY:.+]] = arith.cmpf oeq, %[[M]], %[[NEGINF]] : f32
//       CHECK:     arith.select %[[EMPTY]], %[[M]], %[[ADD]] : f32
//       CHECK:   return %{{.+}}, %[[LSE]] : tensor<1x4x?x8xbf16>, tensor<1x4x?xf32>
func.func @attention_return_lse(%q: tensor<1x4x?x8xbf16>, %k: tensor<1x2x?x8xbf16>, %v: tensor<1x2x?x8xbf16>) -> (tensor<1x4x?x8xbf16>, tensor<1x4x?xf32>) {
  %o, %lse = liger.attention %q, %k, %v causal return_lse : tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
  return %o, %lse : tensor<1x4x?x8xbf16>, tensor<1x4x?xf32>
}

// -----

// attention_grad with the forward's saved out and lse: p = exp(s - lse)
// (no softmax: no row max, no division) and D = rowsum(grad * out) over the
// value dimension in f32, in place of rowsum(p * dp).
// CHECK-LABEL: func.func @attention_grad_saved
//  CHECK-SAME:   (%[[DO:.+]]: tensor<1x4x?x8xbf16>, %{{.+}}: tensor<1x4x?x8xbf16>, %{{.+}}: tensor<1x2x?x8xbf16>, %{{.+}}: tensor<1x2x?x8xbf16>, %[[O:.+]]: tensor<1x4x?x8xbf16>, %[[LSE:.+]]: tensor<1x4x?xf32>)
//   CHECK-NOT:   arith.maximumf
//       CHECK:   %[[P:.+]] = linalg.generic {{.*}} ins(%{{.+}}, %[[LSE]] : tensor<1x4x?x?xf32>, tensor<1x4x?xf32>)
//  CHECK-NEXT:   ^bb0(%[[S:.+]]: f32, %[[ROWLSE:.+]]: f32, %{{.+}}: f32):
//  CHECK-NEXT:     %[[SHIFTED:.+]] = arith.subf %[[S]], %[[ROWLSE]] : f32
//  CHECK-NEXT:     %[[EXP:.+]] = math.exp %[[SHIFTED]] : f32
//  CHECK-NEXT:     linalg.yield %[[EXP]] : f32
//       CHECK:   %[[D:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%[[DO]], %[[O]] : tensor<1x4x?x8xbf16>, tensor<1x4x?x8xbf16>) outs(%{{.+}} : tensor<1x4x?xf32>)
//       CHECK:   linalg.generic {{.*}} ins(%[[P]], %{{.+}}, %[[D]] : tensor<1x4x?x?xf32>, tensor<1x4x?x?xf32>, tensor<1x4x?xf32>)
//   CHECK-NOT:   arith.divf
//       CHECK:   return %{{.+}}, %{{.+}}, %{{.+}} : tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
func.func @attention_grad_saved(%do: tensor<1x4x?x8xbf16>, %q: tensor<1x4x?x8xbf16>, %k: tensor<1x2x?x8xbf16>, %v: tensor<1x2x?x8xbf16>, %o: tensor<1x4x?x8xbf16>, %lse: tensor<1x4x?xf32>) -> (tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>) {
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%o, %lse : tensor<1x4x?x8xbf16>, tensor<1x4x?xf32>) causal : tensor<1x4x?x8xbf16>, tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
  return %dq, %dk, %dv : tensor<1x4x?x8xbf16>, tensor<1x2x?x8xbf16>, tensor<1x2x?x8xbf16>
}

// -----

// fused_linear_cross_entropy means the linear projection (logits rounded to
// the input dtype) then cross-entropy.
// CHECK-LABEL: func.func @flce
//       CHECK:   iterator_types = ["parallel", "parallel", "reduction"]
//       CHECK:   arith.truncf %{{.+}} : f32 to bf16
//       CHECK:   math.log
func.func @flce(%h: tensor<?x16xbf16>, %w: tensor<40x16xbf16>, %t: tensor<?xi32>) -> tensor<f32> {
  %l = liger.fused_linear_cross_entropy %h, %w, %t : tensor<?x16xbf16>, tensor<40x16xbf16>, tensor<?xi32>
  return %l : tensor<f32>
}

// -----

// Near-miss: ops of other dialects around liger ops are left as they are.
// CHECK-LABEL: func.func @leaves_other_ops_alone
//       CHECK:   %[[E:.+]] = tensor.expand_shape
//       CHECK:   %[[S:.+]] = linalg.generic
//       CHECK:   %[[C:.+]] = tensor.collapse_shape %[[S]]
//       CHECK:   %[[F:.+]] = call @other(%[[C]])
//       CHECK:   return %[[F]]
func.func private @other(tensor<?x64xf32>) -> tensor<?x64xf32>
func.func @leaves_other_ops_alone(%x: tensor<?x64xf32>, %n: index) -> tensor<?x64xf32> {
  %e = tensor.expand_shape %x [[0], [1, 2]] output_shape [%n, 2, 32] : tensor<?x64xf32> into tensor<?x2x32xf32>
  %s = liger.silu %e : tensor<?x2x32xf32>
  %c = tensor.collapse_shape %s [[0], [1, 2]] : tensor<?x2x32xf32> into tensor<?x64xf32>
  %f = func.call @other(%c) : (tensor<?x64xf32>) -> tensor<?x64xf32>
  return %f : tensor<?x64xf32>
}

// -----

// Near-miss: a function without liger ops is unchanged.
// CHECK-LABEL: func.func @no_liger_ops
//  CHECK-NEXT:   arith.addf
//  CHECK-NEXT:   return
func.func @no_liger_ops(%a: f32) -> f32 {
  %b = arith.addf %a, %a : f32
  return %b : f32
}

// -----

// The JSD's gradient over logits at a temperature, (d - Q · sum(d)) / T,
// takes Q from the terms' own exponentials: the final map holds two
// exponentials and one log an element, where a softmax of its own took a
// third exponential.
// CHECK-LABEL: func.func @jsd_logits_grad
//       CHECK:   linalg.generic {{.*}} ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?xf32>, tensor<?xf32>) outs(%{{.+}} : tensor<?x64xbf16>)
// CHECK-COUNT-2:     math.exp %{{.+}} fastmath<afn> : f32
//   CHECK-NOT:     math.exp
//       CHECK:     math.log %{{.+}} fastmath<afn> : f32
//   CHECK-NOT:     math.exp
//       CHECK:     linalg.yield %{{.+}} : bf16
func.func @jsd_logits_grad(%x: tensor<?x64xbf16>, %y: tensor<?x64xbf16>, %g: tensor<?xf32>) -> tensor<?x64xbf16> {
  %d = liger.jsd_grad %x, %y, %g beta = 0.5 temperature = 2.0 per_token : tensor<?x64xbf16>, tensor<?xf32>
  return %d : tensor<?x64xbf16>
}

// -----

// liger.scale: the product in f32, rounded once; a scalar factor read
// through an empty map, one per row through the row map.
// CHECK-DAG: #[[ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[SCALAR:.+]] = affine_map<(d0, d1) -> ()>
// CHECK-DAG: #[[ROW:.+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @scale
//  CHECK-SAME:   (%[[D:.+]]: tensor<?x7xbf16>, %[[G:.+]]: tensor<f32>, %[[R:.+]]: tensor<?xf32>)
//       CHECK:   linalg.generic {indexing_maps = [#[[ID]], #[[SCALAR]], #[[ID]]]{{.*}} ins(%[[D]], %[[G]] : tensor<?x7xbf16>, tensor<f32>)
//       CHECK:     %[[X:.+]] = arith.extf %{{.+}} : bf16 to f32
//  CHECK-NEXT:     %[[P:.+]] = arith.mulf %[[X]], %{{.+}} : f32
//  CHECK-NEXT:     arith.truncf %[[P]] : f32 to bf16
//       CHECK:   linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]]{{.*}} ins(%[[D]], %[[R]] : tensor<?x7xbf16>, tensor<?xf32>)
func.func @scale(%d: tensor<?x7xbf16>, %g: tensor<f32>, %r: tensor<?xf32>) -> (tensor<?x7xbf16>, tensor<?x7xbf16>) {
  %0 = liger.scale %d, %g : tensor<?x7xbf16>, tensor<f32>
  %1 = liger.scale %d, %r : tensor<?x7xbf16>, tensor<?xf32>
  return %0, %1 : tensor<?x7xbf16>, tensor<?x7xbf16>
}

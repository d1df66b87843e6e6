// q/k projections with RoPE whose cos and sin are one table (the group
// reads that input twice): the matmul templates bind RoPE's tables by the
// plan's values, not by one role per input, so both the cos and the sin
// loads of the epilogue read the table's parameter (wgmma on sm_90a,
// mma.sync on sm_80). The role chain bound the input to cos alone and
// left sin unbound (a crash).
// RUN: liger-compile %s --emit=gpu --target=sm_90a -o - | FileCheck %s
// RUN: liger-compile %s --emit=gpu --target=sm_80 -o - | FileCheck %s --check-prefix=SM80

// The table is one parameter, of kind tables; the sin and the cos pair of
// each rotation are two loads of it.
// CHECK-LABEL: gpu.func @qk_rope_one_table_matmul_0
//  CHECK-SAME:   (%{{[^:]+}}: memref<?x64xbf16>, %{{[^:]+}}: memref<64x64xbf16>, %{{[^:]+}}: memref<32x64xbf16>, %[[T:[^:]+]]: memref<1x?x16xbf16>, %{{[^:]+}}: memref<?x4x?x16xbf16>, %{{[^:]+}}: memref<?x2x?x16xbf16>, %{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: !llvm.ptr, %{{[^:]+}}: !llvm.ptr)
//  CHECK-SAME:   #liger.kernel_param<name = "input3", role = input, kind = tables, dtype = bf16, length = 16, outer = 1>, #liger.kernel_param<name = "output0", role = output, kind = heads, dtype = bf16, length = 16, outer = 4>
//       CHECK:   %[[SIN:.+]] = vector.load %[[T]][%[[B:[0-9a-z_]+]], %[[P:[0-9a-z_]+]], %[[D:[0-9a-z_]+]]] {{.*}} : memref<1x?x16xbf16>, vector<2xbf16>
//  CHECK-NEXT:   arith.extf %[[SIN]]
//  CHECK-NEXT:   vector.load %[[T]][%[[B]], %[[P]], %[[D]]] {{.*}} : memref<1x?x16xbf16>, vector<2xbf16>
// SM80-LABEL: gpu.func @qk_rope_one_table_matmul_0
//  SM80-SAME:   (%{{[^:]+}}: memref<?x64xbf16>, %{{[^:]+}}: memref<64x64xbf16>, %{{[^:]+}}: memref<32x64xbf16>, %[[T:[^:]+]]: memref<1x?x16xbf16>, %{{[^:]+}}: memref<?x4x?x16xbf16>, %{{[^:]+}}: memref<?x2x?x16xbf16>)
//       SM80:   %[[SIN:.+]] = vector.load %[[T]][%[[B:[0-9a-z_]+]], %[[P:[0-9a-z_]+]], %[[D:[0-9a-z_]+]]] {{.*}} : memref<1x?x16xbf16>, vector<2xbf16>
//  SM80-NEXT:   arith.extf %[[SIN]]
//  SM80-NEXT:   vector.load %[[T]][%[[B]], %[[P]], %[[D]]] {{.*}} : memref<1x?x16xbf16>, vector<2xbf16>
func.func @qk_rope_one_table(%x: tensor<?x?x64xbf16>, %wq: tensor<64x64xbf16>, %wk: tensor<32x64xbf16>,
                             %cs: tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x64xbf16>
  %t = tensor.dim %x, %c1 : tensor<?x?x64xbf16>
  %q = liger.linear %x, %wq : tensor<?x?x64xbf16>, tensor<64x64xbf16>
  %k = liger.linear %x, %wk : tensor<?x?x64xbf16>, tensor<32x64xbf16>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%b, %t, 4, 16] : tensor<?x?x64xbf16> into tensor<?x?x4x16xbf16>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%b, %t, 2, 16] : tensor<?x?x32xbf16> into tensor<?x?x2x16xbf16>
  %qi = tensor.empty(%b, %t) : tensor<?x4x?x16xbf16>
  %ki = tensor.empty(%b, %t) : tensor<?x2x?x16xbf16>
  %qh = linalg.transpose ins(%q4 : tensor<?x?x4x16xbf16>) outs(%qi : tensor<?x4x?x16xbf16>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<?x?x2x16xbf16>) outs(%ki : tensor<?x2x?x16xbf16>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cs, %cs : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<1x?x16xbf16>
  return %qr, %kr : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
}

// RUN: liger-opt %s --liger-select-kernel-config | FileCheck %s

// A pinned matmul configuration that fits stays as written.
// CHECK-LABEL: func.func @pinned_matmul
//       CHECK:   #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 256, tile_k = 64, stages = 3>
func.func @pinned_matmul(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  %q = liger.fusion matmul(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 64, tile_n = 256, tile_k = 64, stages = 3>} : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  return %q : tensor<?x4096xbf16>
}

// A pinned attention configuration that fits stays as written.
// CHECK-LABEL: func.func @pinned_attention
//       CHECK:   #liger.kernel_config<kernel_template = attention, tile_n = 64, stages = 3>
func.func @pinned_attention(%q: tensor<?x4x?x128xbf16>) -> tensor<?x4x?x128xbf16> {
  %o = liger.fusion attention(%q) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 64, stages = 3>} : (tensor<?x4x?x128xbf16>) -> tensor<?x4x?x128xbf16> {
  ^bb0(%a: tensor<?x4x?x128xbf16>):
    %r = liger.attention %a, %a, %a causal : tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>, tensor<?x4x?x128xbf16>
    liger.yield %r : tensor<?x4x?x128xbf16>
  }
  return %o : tensor<?x4x?x128xbf16>
}

// A pinned loop-form row program stays as written, without the spill
// fallback a default one gets: liger-compile never changes what the user
// pinned. A pinned one may name its own fallback, checked like the pin; an
// unpinned one with its own keeps it beside the default.
// CHECK-LABEL: func.func @pinned_loop
//       CHECK:   {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>}
//       CHECK:   {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 1024, vector_width = 8>, liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 128, vector_width = 8>}
//       CHECK:   {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>, liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 128, vector_width = 8>}
func.func @pinned_loop(%x: tensor<?x128256xbf16>) -> (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?x128256xbf16>) {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  %z = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 1024, vector_width = 8>, liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 128, vector_width = 8>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  %u = liger.fusion rowwise(%x) attributes {liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 128, vector_width = 8>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  return %y, %z, %u : tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?x128256xbf16>
}

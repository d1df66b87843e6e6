// Matmul groups whose results the wgmma template stores from registers,
// not through TMA-store tiles (test-matmul-plan.mlir).

// Three results whose 128 x 256 tiles (3 x 64 KiB) exceed two stages of
// the gate/up pair (2 x 80 KiB): stored from registers.
func.func @gated_keeps_two_stages(%x: tensor<?x512xbf16>, %g: tensor<1024x512xbf16>, %u: tensor<1024x512xbf16>) -> (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>) {
  %r:3 = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 2>} : (tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<1024x512xbf16>) -> (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>) {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<1024x512xbf16>, %c: tensor<1024x512xbf16>):
    %lg = liger.linear %a, %b : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %lu = liger.linear %a, %c : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %h = liger.swiglu %lg, %lu : tensor<?x1024xbf16>
    liger.yield %lg, %lu, %h : tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>
  }
  return %r#0, %r#1, %r#2 : tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>
}

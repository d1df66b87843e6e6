// Matmul groups whose results the wgmma template stores from registers,
// not through TMA-store tiles (test-matmul-plan.mlir).

// Four results whose 128 x 128 tiles (4 x 32 KiB) exceed two stages of
// the gate/up pair (2 x 48 KiB): stored from registers.
func.func @gated_keeps_two_stages(%x: tensor<?x512xbf16>, %g: tensor<1024x512xbf16>, %u: tensor<1024x512xbf16>) -> (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>) {
  %r:4 = liger.fusion matmul(%x, %g, %u) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 2>} : (tensor<?x512xbf16>, tensor<1024x512xbf16>, tensor<1024x512xbf16>) -> (tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>) {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<1024x512xbf16>, %c: tensor<1024x512xbf16>):
    %lg = liger.linear %a, %b : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %lu = liger.linear %a, %c : tensor<?x512xbf16>, tensor<1024x512xbf16>
    %h = liger.swiglu %lg, %lu : tensor<?x1024xbf16>
    %h2 = liger.swiglu %lu, %lg : tensor<?x1024xbf16>
    liger.yield %lg, %lu, %h, %h2 : tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>
  }
  return %r#0, %r#1, %r#2, %r#3 : tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>
}

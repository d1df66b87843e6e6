// Read by lower-to-gpu-matmul-invalid.mlir with features=+ptx80: the wgmma
// template's TMA copies to shared::cta need PTX ISA 8.6, so the group is
// left uncompiled with a warning instead of failing later in ptxas.
func.func @wgmma_ptx80(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  // expected-warning @+1 {{the wgmma template's TMA copies to shared::cta need PTX ISA 8.6 or later (features +ptx86), the target has +ptx80}}
  %y = liger.fusion matmul(%x, %w) : (tensor<?x64xbf16>, tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  ^bb0(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>):
    %l = liger.linear %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
    liger.yield %l : tensor<?x64xbf16>
  }
  return %y : tensor<?x64xbf16>
}

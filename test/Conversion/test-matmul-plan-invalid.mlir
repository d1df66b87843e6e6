// RUN: liger-opt %s --liger-test-matmul-plan -split-input-file -verify-diagnostics -o /dev/null
// RUN: liger-opt %s --liger-test-matmul-part -split-input-file -verify-diagnostics -o /dev/null

// The test passes read the configuration liger-select-kernel-config writes.
func.func @unconfigured(%x: tensor<?x512xbf16>, %w: tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  // expected-error @+1 {{'liger.fusion' op needs a matmul 'liger.kernel_config' (run liger-select-kernel-config first)}}
  %y = liger.fusion matmul(%x, %w) : (tensor<?x512xbf16>, tensor<1024x512xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<1024x512xbf16>):
    %l = liger.linear %a, %b : tensor<?x512xbf16>, tensor<1024x512xbf16>
    liger.yield %l : tensor<?x1024xbf16>
  }
  return %y : tensor<?x1024xbf16>
}

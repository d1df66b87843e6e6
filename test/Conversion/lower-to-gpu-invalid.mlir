// RUN: liger-opt %s --liger-lower-to-gpu --split-input-file -verify-diagnostics
// RUN: not liger-opt %s --liger-lower-to-gpu=chip=sm_90,features=+ptx86 -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not liger-opt %s --liger-lower-to-gpu="features=ptx86" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FEATURES

// The target strings are checked before LLVM sees them (LLVM aborts on a
// malformed one).
// CHIP: error: liger-lower-to-gpu: unsupported GPU target 'sm_90,features=+ptx86' (supported: sm_80, sm_86, sm_90a)
// FEATURES: error: liger-lower-to-gpu: malformed PTX feature string 'ptx86' (expected +ptxNN, e.g. +ptx86)

// Cross-entropy has its own template (CrossEntropyKernel.cpp): a group of
// one cross_entropy, one cross_entropy_grad, or a cross_entropy and the
// gradient of that same loss, reading the group's inputs and yielding the
// ops' results in order.
func.func @cross_entropy_grad_then_silu(%x: tensor<?x64xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'liger.fusion' op cannot be lowered to a cross-entropy kernel: it must hold one liger.cross_entropy, one liger.cross_entropy_grad, or a cross_entropy followed by its cross_entropy_grad}}
  %r = liger.fusion rowwise(%x, %t, %g) : (tensor<?x64xf32>, tensor<?xi64>, tensor<f32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<?xi64>, %c: tensor<f32>):
    %d = liger.cross_entropy_grad %a, %b, %c : tensor<?x64xf32>, tensor<?xi64>, tensor<f32>
    %s = liger.silu %d : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %r : tensor<?x64xf32>
}

// -----

func.func @cross_entropy_inputs_swapped(%x: tensor<?x64xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  // expected-error @+1 {{'liger.fusion' op cannot be lowered to a cross-entropy kernel: its ops must read the group inputs in order}}
  %l = liger.fusion rowwise(%t, %x) : (tensor<?xi64>, tensor<?x64xf32>) -> tensor<f32> {
  ^bb0(%b: tensor<?xi64>, %a: tensor<?x64xf32>):
    %c = liger.cross_entropy %a, %b : tensor<?x64xf32>, tensor<?xi64>
    liger.yield %c : tensor<f32>
  }
  return %l : tensor<f32>
}

// -----

func.func @cross_entropy_results_swapped(%x: tensor<?x64xf32>, %t: tensor<?xi64>) -> (tensor<f32>, tensor<f32>) {
  // expected-error @+1 {{'liger.fusion' op cannot be lowered to a cross-entropy kernel: the group must yield the ops' results in order}}
  %l:2 = liger.fusion rowwise(%x, %t) : (tensor<?x64xf32>, tensor<?xi64>) -> (tensor<f32>, tensor<f32>) {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<?xi64>):
    %c, %z = liger.cross_entropy %a, %b lse_square_scale = 1.0e-4 z_loss : tensor<?x64xf32>, tensor<?xi64>
    liger.yield %z, %c : tensor<f32>, tensor<f32>
  }
  return %l#0, %l#1 : tensor<f32>, tensor<f32>
}

// -----

func.func @cross_entropy_grad_of_another_loss(%x: tensor<?x64xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>) {
  // expected-error @+1 {{'liger.fusion' op cannot be lowered to a cross-entropy kernel: the gradient must be of the loss in the group (the same logits, targets, weights and attributes)}}
  %r:2 = liger.fusion rowwise(%x, %t, %g) : (tensor<?x64xf32>, tensor<?xi64>, tensor<f32>) -> (tensor<f32>, tensor<?x64xf32>) {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<?xi64>, %c: tensor<f32>):
    %l = liger.cross_entropy %a, %b label_smoothing = 0.1 : tensor<?x64xf32>, tensor<?xi64>
    %d = liger.cross_entropy_grad %a, %b, %c : tensor<?x64xf32>, tensor<?xi64>, tensor<f32>
    liger.yield %l, %d : tensor<f32>, tensor<?x64xf32>
  }
  return %r#0, %r#1 : tensor<f32>, tensor<?x64xf32>
}

// -----

func.func @cross_entropy_width_past_16_bytes(%x: tensor<?x1000xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  // expected-error @+1 {{'liger.fusion' op has an invalid 'liger.kernel_config': vector_width 8 spans 32 bytes of f32, more than one 16-byte load}}
  %l = liger.fusion rowwise(%x, %t) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 256, vector_width = 8>} : (tensor<?x1000xf32>, tensor<?xi64>) -> tensor<f32> {
  ^bb0(%a: tensor<?x1000xf32>, %b: tensor<?xi64>):
    %c = liger.cross_entropy %a, %b : tensor<?x1000xf32>, tensor<?xi64>
    liger.yield %c : tensor<f32>
  }
  return %l : tensor<f32>
}

// -----

// The weight gradient is only known once every row is done: no step of a row
// may read it.
func.func @weight_gradient_read_per_row(%dy: tensor<?x64xf32>, %x: tensor<?x64xf32>, %w: tensor<64xf32>, %r: tensor<?xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'liger.fusion' op cannot be lowered to a rowwise GPU kernel: a step mixes rows with a value reduced across rows}}
  %g = liger.fusion rowwise(%dy, %x, %w, %r) : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>, tensor<?xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<?x64xf32>, %c: tensor<64xf32>, %d: tensor<?xf32>):
    %dx, %dw = liger.rms_norm_grad %a, %b, %c, %d : tensor<?x64xf32>, tensor<64xf32>, tensor<?xf32>
    %y = liger.rms_norm %dx, %dw eps = 1.0e-6 : tensor<?x64xf32>, tensor<64xf32>
    liger.yield %y : tensor<?x64xf32>
  }
  return %g : tensor<?x64xf32>
}

// -----

func.func @rope_with_more(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %c: tensor<1x3x8xf32>) -> tensor<1x2x3x8xf32> {
  // expected-error @+1 {{'liger.fusion' op cannot be lowered to a RoPE kernel: it must hold one liger.rope or liger.rope_grad}}
  %r = liger.fusion rowwise(%q, %k, %c) : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x3x8xf32>) -> tensor<1x2x3x8xf32> {
  ^bb0(%a: tensor<1x2x3x8xf32>, %b: tensor<1x2x3x8xf32>, %t: tensor<1x3x8xf32>):
    %qo, %ko = liger.rope %a, %b, %t, %t : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x3x8xf32>
    %s = liger.silu %qo : tensor<1x2x3x8xf32>
    liger.yield %s : tensor<1x2x3x8xf32>
  }
  return %r : tensor<1x2x3x8xf32>
}

// -----

// The outputs are the op's results in order: swapped, q's rotation would
// land in k's buffer.
func.func @rope_outputs_swapped(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %c: tensor<1x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'liger.fusion' op cannot be lowered to a RoPE kernel: it must yield its op's two results in order}}
  %r:2 = liger.fusion rowwise(%q, %k, %c) : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) {
  ^bb0(%a: tensor<1x2x3x8xf32>, %b: tensor<1x2x3x8xf32>, %t: tensor<1x3x8xf32>):
    %qo, %ko = liger.rope %a, %b, %t, %t : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x3x8xf32>
    liger.yield %ko, %qo : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  }
  return %r#0, %r#1 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
}

// -----

func.func @rope_one_output(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %c: tensor<1x3x8xf32>) -> tensor<1x2x3x8xf32> {
  // expected-error @+1 {{'liger.fusion' op cannot be lowered to a RoPE kernel: it must yield its op's two results in order}}
  %r = liger.fusion rowwise(%q, %k, %c) : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x3x8xf32>) -> tensor<1x2x3x8xf32> {
  ^bb0(%a: tensor<1x2x3x8xf32>, %b: tensor<1x2x3x8xf32>, %t: tensor<1x3x8xf32>):
    %qo, %ko = liger.rope %a, %b, %t, %t : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x3x8xf32>
    liger.yield %qo : tensor<1x2x3x8xf32>
  }
  return %r : tensor<1x2x3x8xf32>
}

// -----

// Every input of the group is a parameter the op reads.
func.func @rope_unread_input(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %c: tensor<1x3x8xf32>, %x: tensor<1x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) {
  // expected-error @+1 {{'liger.fusion' op cannot be lowered to a RoPE kernel: its input 3 is not read by its op}}
  %r:2 = liger.fusion rowwise(%q, %k, %c, %x) : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) {
  ^bb0(%a: tensor<1x2x3x8xf32>, %b: tensor<1x2x3x8xf32>, %t: tensor<1x3x8xf32>, %u: tensor<1x3x8xf32>):
    %qo, %ko = liger.rope %a, %b, %t, %t : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x3x8xf32>
    liger.yield %qo, %ko : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
  }
  return %r#0, %r#1 : tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>
}

// -----

func.func @width_not_a_power_of_two(%x: tensor<?x66xf32>) -> tensor<?x66xf32> {
  // expected-error @+1 {{'liger.fusion' op has an invalid 'liger.kernel_config': vector_width 3 is not a power of two}}
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 3>} : (tensor<?x66xf32>) -> tensor<?x66xf32> {
  ^bb0(%a: tensor<?x66xf32>):
    %s = liger.silu %a : tensor<?x66xf32>
    liger.yield %s : tensor<?x66xf32>
  }
  return %y : tensor<?x66xf32>
}

// -----

// Near-miss of the divergences' row kernels: a loss reduced to one scalar
// adds every token up, which no row program step does; the per_token form
// (below) is what a row kernel computes.
func.func @kl_div_reduced(%x: tensor<?x7xf32>, %t: tensor<?x7xf32>) -> tensor<f32> {
  // expected-error @+1 {{'liger.kl_div' op cannot be lowered to a row kernel: it reduces every token to one scalar; a row kernel computes the per_token form, which the caller adds up}}
  %l = liger.kl_div %x, %t reduction = batchmean : tensor<?x7xf32>
  return %l : tensor<f32>
}

// -----

func.func @jsd_grad_reduced(%x: tensor<?x7xf32>, %y: tensor<?x7xf32>, %g: tensor<f32>) -> tensor<?x7xf32> {
  // expected-error @+1 {{'liger.jsd_grad' op cannot be lowered to a row kernel: it reduces every token to one scalar; a row kernel computes the per_token form, which the caller adds up}}
  %d = liger.jsd_grad %x, %y, %g : tensor<?x7xf32>, tensor<f32>
  return %d : tensor<?x7xf32>
}

// -----

// The per-token forms are row kernels (must not be refused).
func.func @jsd_per_token(%x: tensor<?x7xf32>, %y: tensor<?x7xf32>) -> tensor<?xf32> {
  %l = liger.jsd %x, %y per_token : tensor<?x7xf32>
  return %l : tensor<?xf32>
}

// -----

// A cluster splits each row among its CTAs; a program reducing across rows
// runs a grid of CTAs over the rows, which it cannot split.
func.func @row_cluster_across_rows(%dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %r: tensor<?xf32>) -> (tensor<?x4096xbf16>, tensor<4096xbf16>) {
  // expected-error @+1 {{'liger.fusion' op cannot be lowered to a rowwise GPU kernel: a cluster of 2 CTAs splits each row, and the program reduces across rows, whose grid is of CTAs, not of rows}}
  %dx, %dw = liger.fusion rowwise(%dy, %x, %w, %r) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, cluster = 2>} : (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<?xf32>) -> (tensor<?x4096xbf16>, tensor<4096xbf16>) {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<?x4096xbf16>, %c: tensor<4096xbf16>, %d: tensor<?xf32>):
    %0, %1 = liger.rms_norm_grad %a, %b, %c, %d : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?x4096xbf16>, tensor<4096xbf16>
  }
  return %dx, %dw : tensor<?x4096xbf16>, tensor<4096xbf16>
}

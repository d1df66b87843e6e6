//===- LigerGradOps.td - liger backward ops ---------------------*- tablegen -*-===//
//
// Backward ops of the liger dialect: each computes the gradients of one
// forward op's inputs from the gradient of its outputs, with the same shape
// rules (shared through Verification.cpp). The forward op's description names
// its backward op; ops without one (yet) are differentiated by a lowering to
// their decomposition.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_LIGERGRADOPS_TD
#define LIGER_DIALECT_LIGER_IR_LIGERGRADOPS_TD

def Liger_RMSNormGradOp : Liger_InferOp<"rms_norm_grad",
    [AllTypesMatch<["grad", "input"]>]> {
  let summary = "gradients of liger.rms_norm with respect to input and weight";
  let description = [{
    From the gradient `grad` of `y = rms_norm(x, w)`, the input `x`, the
    weight and the `rstd` that the forward op returned (f32, `x`'s shape minus
    the hidden dimension), computes, in f32 with `g = grad * (offset + w)`:

    ```
    dx = rstd * (g - x_hat * mean(g * x_hat))        x_hat = x * rstd
    dw = sum over tokens of grad * x_hat              (f32 accumulation)
    ```

    `dx` has the type of `input`, `dw` the type of `weight`. `offset` and
    `casting_mode` must be those of the forward op.

    ```mlir
    %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %rstd
        : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<?xf32>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$grad, Liger_FloatTensor:$input,
      Liger_FloatTensor:$weight, Liger_FloatTensor:$rstd,
      DefaultValuedAttr<Liger_FiniteF32Attr, "0.0f">:$offset,
      DefaultValuedAttr<Liger_CastingModeAttr, "::mlir::liger::CastingMode::llama">:$casting_mode);
  let results = (outs Liger_FloatTensor:$grad_input, Liger_FloatTensor:$grad_weight);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `,` $rstd (`offset` `=` $offset^)?
    (`casting` `=` custom<EnumKeyword>($casting_mode)^)?
    attr-dict `:` type($input) `,` type($weight) `,` type($rstd)
  }];
}

def Liger_LayerNormGradOp : Liger_InferOp<"layer_norm_grad",
    [AllTypesMatch<["grad", "input"]>, AllTypesMatch<["mean", "rstd"]>]> {
  let summary = "gradients of liger.layer_norm with respect to input, weight and bias";
  let description = [{
    From the gradient `grad` of `y = layer_norm(x, w, b)`, the input `x`, the
    weight and the `mean` and `rstd` that the forward op returned with
    `stats` (f32, `x`'s shape minus the hidden dimension), computes, in f32
    with `x_hat = (x - mean) * rstd` and `g = grad * w`:

    ```
    dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))
    dw = sum over tokens of grad * x_hat               (f32 accumulation)
    db = sum over tokens of grad                       (f32 accumulation)
    ```

    `dx` has the type of `input`, `dw` and `db` the type of `weight` (a
    layer without bias ignores `db`).

    ```mlir
    %dx, %dw, %db = liger.layer_norm_grad %dy, %x, %w, %mean, %rstd
        : tensor<?x1024xbf16>, tensor<1024xbf16>, tensor<?xf32>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$grad, Liger_FloatTensor:$input,
      Liger_FloatTensor:$weight, Liger_FloatTensor:$mean,
      Liger_FloatTensor:$rstd);
  let results = (outs Liger_FloatTensor:$grad_input,
      Liger_FloatTensor:$grad_weight, Liger_FloatTensor:$grad_bias);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `,` $mean `,` $rstd
    attr-dict `:` type($input) `,` type($weight) `,` type($mean)
  }];
}

def Liger_RoPEGradOp : Liger_InferOp<"rope_grad", [AllTypesMatch<["cos", "sin"]>,
    AllElementTypesMatch<["grad_q", "grad_k"]>]> {
  let summary = "gradients of liger.rope with respect to q and k";
  let description = [{
    RoPE is a rotation, so its gradient is the inverse rotation of the
    incoming gradients: `dq = grad_q * cos - rotate_half(grad_q * sin)`
    (likewise for k), which equals `liger.rope` with `-sin`. Shape rules are
    those of `liger.rope`.

    ```mlir
    %dq, %dk = liger.rope_grad %gq, %gk, %cos, %sin
        : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$grad_q, Liger_FloatTensor:$grad_k,
      Liger_FloatTensor:$cos, Liger_FloatTensor:$sin);
  let results = (outs Liger_FloatTensor:$grad_q_in, Liger_FloatTensor:$grad_k_in);
  let assemblyFormat = [{
    $grad_q `,` $grad_k `,` $cos `,` $sin attr-dict
    `:` type($grad_q) `,` type($grad_k) `,` type($cos)
  }];
}

def Liger_SwiGLUGradOp : Liger_InferOp<"swiglu_grad",
    [AllTypesMatch<["grad", "gate", "up"]>]> {
  let summary = "gradients of liger.swiglu with respect to gate and up";
  let description = [{
    With `s = sigmoid(gate)` recomputed in f32:

    ```
    d_up   = grad * gate * s
    d_gate = grad * up * s * (1 + gate * (1 - s))
    ```

    Both results have the type of `gate`.

    ```mlir
    %dg, %du = liger.swiglu_grad %dh, %gate, %up : tensor<?x14336xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$grad, Liger_FloatTensor:$gate,
      Liger_FloatTensor:$up);
  let results = (outs Liger_FloatTensor:$grad_gate, Liger_FloatTensor:$grad_up);
  let assemblyFormat = "$grad `,` $gate `,` $up attr-dict `:` type($gate)";
}

def Liger_GEGLUGradOp : Liger_InferOp<"geglu_grad",
    [AllTypesMatch<["grad", "gate", "up"]>]> {
  let summary = "gradients of liger.geglu with respect to gate and up";
  let description = [{
    With the GELU of `approximate` recomputed in f32 (see `liger.gelu`):

    ```
    d_up   = grad * gelu(gate)
    d_gate = grad * up * gelu'(gate)
    ```

    where `gelu'(x) = Φ(x) + x φ(x)` for the exact GELU and, for `tanh`, with
    `t = tanh(√(2/π) (x + 0.044715 x³))`,
    `gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t²) √(2/π) (1 + 3·0.044715 x²)`.
    Both results have the type of `gate`.

    ```mlir
    %dg, %du = liger.geglu_grad %dh, %gate, %up approximate = tanh : tensor<?x16384xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$grad, Liger_FloatTensor:$gate,
      Liger_FloatTensor:$up,
      DefaultValuedAttr<Liger_GeluApproximationAttr, "::mlir::liger::GeluApproximation::none">:$approximate);
  let results = (outs Liger_FloatTensor:$grad_gate, Liger_FloatTensor:$grad_up);
  let assemblyFormat = [{
    $grad `,` $gate `,` $up (`approximate` `=` custom<EnumKeyword>($approximate)^)?
    attr-dict `:` type($gate)
  }];
}

def Liger_SoftmaxGradOp : Liger_InferOp<"softmax_grad",
    [AllTypesMatch<["grad", "output"]>]> {
  let summary = "gradient of liger.softmax with respect to its input";
  let description = [{
    From the gradient `grad` of `y = softmax(x)` and the forward output `y`
    (`output`), over the last dimension, in f32:

    ```
    dx = y * (grad - sum_j(grad_j * y_j))
    ```

    The result has the type of `output`; the last dimension is static.

    ```mlir
    %dx = liger.softmax_grad %dy, %y : tensor<?x32000xf32>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$grad, Liger_FloatTensor:$output);
  let results = (outs Liger_FloatTensor:$grad_input);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($output)";
}

def Liger_CrossEntropyGradOp : Liger_InferOp<"cross_entropy_grad"> {
  let summary = "gradient of liger.cross_entropy with respect to the logits";
  let description = [{
    `grad_loss` is the incoming gradient: `tensor<f32>` for `reduction = mean`
    and `reduction = sum`, `[N]` f32 for `reduction = none`. With `p =
    softmax(z)` and the attributes of the forward op, per counted token:

    ```
    dz = grad_loss_i * scale_i * ((1 - label_smoothing) * (p - onehot(target))
                                  + label_smoothing * (p - 1/V)
                                  + 2 * lse_square_scale * lse * p)
    ```

    chained through the softcap's `1 - tanh^2` when `softcap` is given;
    `scale_i` is 1 for `sum`/`none` and one over the counted tokens (or their
    total class weight) for `mean`. Ignored tokens get zero gradient,
    whatever their incoming gradient, and so does every token when none is
    counted (the mean's scale 1/0 is not applied: PyTorch's gradient). The
    result has the type of `logits`.

    ```mlir
    %dlogits = liger.cross_entropy_grad %logits, %target, %dloss
        : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$logits, Liger_IndexTensor:$target,
      Liger_FloatTensor:$grad_loss, Optional<Liger_FloatTensor>:$weight,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<Liger_UnitIntervalF32Attr, "0.0f">:$label_smoothing,
      DefaultValuedAttr<Liger_ReductionAttr, "::mlir::liger::Reduction::mean">:$reduction,
      OptionalAttr<Liger_PositiveFiniteF32Attr>:$softcap,
      DefaultValuedAttr<Liger_NonNegativeF32Attr, "0.0f">:$lse_square_scale);
  let results = (outs Liger_FloatTensor:$grad_logits);
  let assemblyFormat = [{
    $logits `,` $target `,` $grad_loss (`weight` `(` $weight^ `:` type($weight) `)`)?
    (`ignore_index` `=` $ignore_index^)?
    (`label_smoothing` `=` $label_smoothing^)?
    (`reduction` `=` custom<EnumKeyword>($reduction)^)?
    (`softcap` `=` $softcap^)?
    (`lse_square_scale` `=` $lse_square_scale^)?
    attr-dict `:` type($logits) `,` type($target) `,` type($grad_loss)
  }];
}

def Liger_KLDivGradOp : Liger_InferOp<"kl_div_grad"> {
  let summary = "gradient of liger.kl_div with respect to its input";
  let description = [{
    `grad_loss` is the incoming gradient, of the forward's result type:
    `[N, V]` f32 for `reduction = none`, `[N]` f32 with `per_token`, else
    `tensor<f32>`. With the forward's attributes, in f32 (as Liger-Kernel,
    the derivative of the pointwise term, `eps` plays no part):

    ```
    d input = -(log_target ? exp(target) : target) * grad_loss * scale
    ```

    `scale` is `1/N` for `batchmean`, `1/(N·V)` for `mean` and 1 for `sum`,
    `none` and `per_token` (whose incoming gradient is per token). The
    result has the type of `target` (the forward's input type); the input
    itself is not read.

    ```mlir
    %dx = liger.kl_div_grad %q, %dloss : tensor<?x32000xbf16>, tensor<f32>
    %dr = liger.kl_div_grad %q, %drows per_token : tensor<?x32000xbf16>, tensor<?xf32>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$target, Liger_FloatTensor:$grad_loss,
      DefaultValuedAttr<Liger_KLReductionAttr, "::mlir::liger::KLReduction::batchmean">:$reduction,
      UnitAttr:$log_target,
      UnitAttr:$per_token);
  let results = (outs Liger_FloatTensor:$grad_input);
  let assemblyFormat = [{
    $target `,` $grad_loss (`reduction` `=` custom<EnumKeyword>($reduction)^)?
    (`log_target` $log_target^)? (`per_token` $per_token^)?
    attr-dict `:` type($target) `,` type($grad_loss)
  }];
}

def Liger_JSDGradOp : Liger_InferOp<"jsd_grad", [AllTypesMatch<["input", "target"]>]> {
  let summary = "gradient of liger.jsd with respect to the student's log-probabilities";
  let description = [{
    `grad_loss` is the incoming gradient: `tensor<f32>`, or `[N]` f32 with
    `per_token`. With the forward's operands and attributes, `P =
    exp(target)`, `Q = exp(input)`, `log M` as the forward forms it, per
    element in f32:

    ```
    beta = 0:   d = -P
    beta = 1:   d = Q * (input - target + 1)
    otherwise:  d = (1 - beta) * Q * (input - log M)
    d input = d * grad_loss * scale
    ```

    `scale` is one over the counted tokens (at least 1) for the reduced
    loss, 1 with `per_token` (`grad_loss` is then per token). Skipped tokens
    (label equal to `ignore_index`) get 0. The result has the type of
    `input`.

    With `temperature = T` (the forward's logits form: `input` and `target`
    are logits, `log_softmax(logits / T)` their log-probabilities) the
    result is the gradient with respect to the student's logits, through
    its log-softmax: with `s = softmax(input / T)` and `d` as above,

    ```
    d input = (d - s * sum_v d) / T
    ```

    ```mlir
    %dx = liger.jsd_grad %student, %teacher, %dloss beta = 1.000000e-01
        : tensor<?x32000xbf16>, tensor<f32>
    %dz = liger.jsd_grad %zs, %zt, %share temperature = 2.000000e+00 per_token
        : tensor<?x128256xbf16>, tensor<?xf32>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$input, Liger_FloatTensor:$target,
      Liger_FloatTensor:$grad_loss,
      Optional<Liger_IndexTensor>:$shift_labels,
      DefaultValuedAttr<Liger_UnitIntervalF32Attr, "0.5f">:$beta,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      OptionalAttr<Liger_PositiveFiniteF32Attr>:$temperature,
      UnitAttr:$per_token);
  let results = (outs Liger_FloatTensor:$grad_input);
  let assemblyFormat = [{
    $input `,` $target `,` $grad_loss (`labels` `(` $shift_labels^ `:` type($shift_labels) `)`)?
    (`beta` `=` $beta^)? (`ignore_index` `=` $ignore_index^)?
    (`temperature` `=` $temperature^)? (`per_token` $per_token^)? attr-dict `:` type($input) `,` type($grad_loss)
  }];
}

def Liger_FusedLinearCrossEntropyGradOp
    : Liger_InferOp<"fused_linear_cross_entropy_grad",
                    [AllElementTypesMatch<["hidden", "weight"]>,
                     AttrSizedOperandSegments]> {
  let summary = "gradients of liger.fused_linear_cross_entropy with respect to hidden, weight and bias";
  let description = [{
    The backward of `liger.fused_linear_cross_entropy` (the same operands,
    attributes and incoming gradient as `liger.cross_entropy_grad`, its
    class weights `class_weight`): with
    `G = cross_entropy_grad(hidden · weightᵀ + bias, target, grad_loss)`
    (the logits rounded to the input dtype, as the forward op's meaning;
    `G` rounded to it too), returns `dhidden = G · weight` `[N, H]`,
    `dweight = Gᵀ · hidden` `[V, H]` (each accumulated in f32 and rounded to
    the input dtype) and, with a bias, `dbias = Σ_tokens G` `[V]` (rounded
    to the bias dtype). Its meaning does not depend on the logits or `G`
    being stored: a lowering may compute them chunk by chunk.

    ```mlir
    %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %lm_head, %target, %dloss
        : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>, tensor<f32>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$hidden, Liger_FloatTensor:$weight,
      Liger_IndexTensor:$target, Liger_FloatTensor:$grad_loss,
      Optional<Liger_FloatTensor>:$bias,
      Optional<Liger_FloatTensor>:$class_weight,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<Liger_UnitIntervalF32Attr, "0.0f">:$label_smoothing,
      DefaultValuedAttr<Liger_ReductionAttr, "::mlir::liger::Reduction::mean">:$reduction,
      OptionalAttr<Liger_PositiveFiniteF32Attr>:$softcap,
      DefaultValuedAttr<Liger_NonNegativeF32Attr, "0.0f">:$lse_square_scale);
  let results = (outs Liger_FloatTensor:$grad_hidden, Liger_FloatTensor:$grad_weight,
      Optional<Liger_FloatTensor>:$grad_bias);
  let assemblyFormat = [{
    $hidden `,` $weight `,` $target `,` $grad_loss (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`class_weight` `(` $class_weight^ `:` type($class_weight) `)`)?
    (`ignore_index` `=` $ignore_index^)?
    (`label_smoothing` `=` $label_smoothing^)?
    (`reduction` `=` custom<EnumKeyword>($reduction)^)?
    (`softcap` `=` $softcap^)?
    (`lse_square_scale` `=` $lse_square_scale^)?
    attr-dict `:` type($hidden) `,` type($weight) `,` type($target) `,` type($grad_loss)
  }];
}

def Liger_LinearGradInputOp : Liger_InferOp<"linear_grad_input",
    [AllElementTypesMatch<["grad", "weight"]>]> {
  let summary = "gradient of liger.linear with respect to its input: dx = dy · W";
  let description = [{
    From the gradient `grad` `[..., N]` of `y = x · Wᵀ` and the weight `[N, K]`
    (the PyTorch layout), computes `dx = grad · W` `[..., K]`, accumulated in
    f32 and rounded once to the input dtype. The GPU template reads W
    N-major (the transposed operand of the forward product); no copy of W is
    made.

    ```mlir
    %dx = liger.linear_grad_input %dy, %w : tensor<?x4096xbf16>, tensor<4096x14336xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$grad, Liger_FloatTensor:$weight);
  let results = (outs Liger_FloatTensor:$grad_input);
  let assemblyFormat = "$grad `,` $weight attr-dict `:` type($grad) `,` type($weight)";
}

def Liger_LinearGradWeightOp : Liger_InferOp<"linear_grad_weight",
    [AllElementTypesMatch<["grad", "input"]>]> {
  let summary = "gradient of liger.linear with respect to its weight: dW = dyᵀ · x";
  let description = [{
    From the gradient `grad` `[T, N]` of `y = x · Wᵀ` and the input `x`
    `[T, K]` (the same tokens `T`, which may be dynamic), computes
    `dW = gradᵀ · x` `[N, K]`, accumulated in f32 over the tokens. Without
    `accumulate` the result is rounded to the input dtype; with an f32
    `[N, K]` buffer the result is that buffer plus the product, in f32
    (gradient accumulation across micro-batches: pass the buffer as the
    output too, and the update happens in place — each element is read and
    written by the same thread). A buffer of the input's dtype is allowed
    too: the sum is formed in f32 and rounded to that dtype (what a chunked
    lm_head gradient accumulates into without an f32 copy of W).

    ```mlir
    %dw = liger.linear_grad_weight %dy, %x : tensor<?x4096xbf16>, tensor<?x14336xbf16>
    %acc1 = liger.linear_grad_weight %dy, %x accumulate %acc0
        : tensor<?x4096xbf16>, tensor<?x14336xbf16>, tensor<4096x14336xf32>
    %dw1 = liger.linear_grad_weight %dy, %x accumulate %dw0
        : tensor<?x4096xbf16>, tensor<?x14336xbf16>, tensor<4096x14336xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$grad, Liger_FloatTensor:$input,
      Optional<Liger_FloatTensor>:$accumulate);
  let results = (outs Liger_FloatTensor:$grad_weight);
  let assemblyFormat = [{
    $grad `,` $input (`accumulate` $accumulate^)?
    attr-dict `:` type($grad) `,` type($input) (`,` type($accumulate)^)?
  }];
}

def Liger_ScaleOp : Liger_InferOp<"scale"> {
  let summary = "rows times a factor: a gradient formed in the forward, scaled by the incoming one";
  let description = [{
    `y[n, :] = input[n, :] * factor` with `factor` a `tensor<f32>` (one for
    every row) or `[N]` f32 (one per row), the product formed in f32 and
    rounded once to the input dtype. It is how a loss that forms its
    gradient in the forward for a unit incoming gradient (cross-entropy,
    the divergences) meets the gradient that does come in.

    Its kernel may write over its input (the output buffer is the input's:
    the gradient scaled in place). A row whose factor is exactly 1 is then
    left as it is, neither read nor written, so a unit incoming gradient
    costs one load of the factor per row, and the caller need not read the
    factor on the host to know whether to scale.

    ```mlir
    %d = liger.scale %grad, %dloss : tensor<?x50257xbf16>, tensor<f32>
    %e = liger.scale %grad, %drows : tensor<?x50257xbf16>, tensor<?xf32>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$input, Liger_FloatTensor:$factor);
  let results = (outs Liger_FloatTensor:$result);
  let assemblyFormat = "$input `,` $factor attr-dict `:` type($input) `,` type($factor)";
}

def Liger_AttentionGradOp : Liger_InferOp<"attention_grad",
    [AttrSizedOperandSegments, AllElementTypesMatch<["grad", "q", "k", "v"]>]> {
  let summary = "gradients of liger.attention with respect to q, k and v";
  let description = [{
    From the gradient `grad` `[B, Hq, T, Dv]` of `liger.attention`'s output
    and its operands `q`, `k`, `v` (the attention's rules; `causal`,
    `window`, `softcap` and `scale` its own), with the probabilities `p` in
    f32:

    ```
    dv = pᵀ · grad                              [B, Hkv, S, Dv]
    dp = grad · vᵀ
    ds = p * (dp - rowsum(p * dp)) * scale      (rowsum(p * dp) = rowsum(grad * out))
         * (1 - tanh²(scale * q · kᵀ / c))      (with softcap c)
    dq = ds · k                                 [B, Hq, T, D]
    dk = dsᵀ · q                                [B, Hkv, S, D]
    ```

    Without `saved`, `p` is recomputed by the forward's softmax. With
    `saved(out, lse)`, the forward's output `out` (the type of `grad`) and
    its `lse` (`liger.attention ... return_lse`: f32 `[B, Hq, T]`) stand in
    for the softmax's statistics, as a backward kernel uses them:

    ```
    p = exp(s + mask - lse)                     (f32; s the attention's scores)
    D = rowsum(grad * out)                      (f32; in place of rowsum(p * dp))
    ```

    They must be the forward's values for the same `q`, `k`, `v`, `causal`,
    `window`, `softcap` and `scale`; then both forms agree up to the rounding
    of `out`. Both are given or neither.

    A key/value head's gradients sum over the query heads that read it
    (grouped-query attention); masked positions have `p = 0`, so no
    gradient. A row with every key masked (causal with `S < T`) is NaN in
    `liger.attention`'s output (its `lse` is `-inf`) and poisons these
    gradients likewise, with or without `saved`. Each product accumulates in
    f32 and is rounded to the operands' type.

    ```mlir
    %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v causal
        : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>,
          tensor<?x8x?x128xbf16>
    %dq2, %dk2, %dv2 = liger.attention_grad %do, %q, %k, %v
        saved(%o, %lse : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) causal
        : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>,
          tensor<?x8x?x128xbf16>
    ```
  }];
  // `out` and `lse` are two optional operands rather than one variadic
  // group so that each has its accessor (getOut, getLse) on the op and its
  // adaptor; the rule that both come together is verified with the others.
  let arguments = (ins Liger_FloatTensor:$grad, Liger_FloatTensor:$q,
      Liger_FloatTensor:$k, Liger_FloatTensor:$v,
      Optional<Liger_FloatTensor>:$out, Optional<Liger_FloatTensor>:$lse,
      UnitAttr:$causal, OptionalAttr<Liger_PositiveI64Attr>:$window,
      OptionalAttr<Liger_PositiveFiniteF32Attr>:$softcap,
      OptionalAttr<Liger_PositiveF32Attr>:$scale);
  let results = (outs Liger_FloatTensor:$grad_q, Liger_FloatTensor:$grad_k,
      Liger_FloatTensor:$grad_v);
  let assemblyFormat = [{
    $grad `,` $q `,` $k `,` $v
    (`saved` `(` $out^ `,` $lse `:` type($out) `,` type($lse) `)`)?
    (`causal` $causal^)? (`window` `=` $window^)?
    (`softcap` `=` $softcap^)? (`scale` `=` $scale^)?
    attr-dict `:` type($grad) `,` type($q) `,` type($k) `,` type($v)
  }];
}

#endif // LIGER_DIALECT_LIGER_IR_LIGERGRADOPS_TD

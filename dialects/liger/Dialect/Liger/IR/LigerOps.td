//===- LigerOps.td - liger forward ops -------------------------*- tablegen -*-===//
//
// The forward ops of the liger dialect. Shape and type rules that ODS cannot
// express live in Verification.cpp and are reached through inferReturnTypes,
// so the parser, the builders and the verifier apply the same rule.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_LIGEROPS_TD
#define LIGER_DIALECT_LIGER_IR_LIGEROPS_TD

include "liger/Dialect/Liger/IR/LigerBase.td"

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

def Liger_RMSNormOp : Liger_InferOp<"rms_norm"> {
  let summary = "root-mean-square normalization over the hidden dimension";
  let description = [{
    Normalizes each row of `input` (the last dimension, of static size H) by
    its root mean square and scales it by `offset + weight`:

    ```
    rstd = 1 / sqrt(mean(x_f32^2) + eps)
    y    = (x * rstd) * (offset + weight)
    ```

    The mean and `rstd` are always computed in f32. `casting_mode` says where
    the result is rounded, following Hugging Face:

    * `llama` (default): `(x_f32 * rstd)` is cast to the input dtype, then
      multiplied by `offset + weight` (LlamaRMSNorm).
    * `gemma`: everything in f32, one cast at the end (GemmaRMSNorm, used
      with `offset = 1.0`).
    * `none`: everything in the input dtype except the mean.

    With `rstd`, a second result holds `rstd` in f32 for the backward op, with
    the shape of `input` minus its last dimension. `weight` may have a
    different float type than `input`; the result has the type of `input`.

    ```mlir
    %y = liger.rms_norm %x, %w eps = 1.000000e-05 : tensor<?x4096xbf16>, tensor<4096xbf16>
    %g, %rstd = liger.rms_norm %x, %w offset = 1.000000e+00 casting = gemma rstd
        : tensor<?x2048xbf16>, tensor<2048xf32>
    ```

    Backward: `liger.rms_norm_grad`.
  }];
  let arguments = (ins Liger_FloatTensor:$input, Liger_FloatTensor:$weight,
      DefaultValuedAttr<Liger_PositiveF32Attr, "1.0e-6f">:$eps,
      DefaultValuedAttr<Liger_FiniteF32Attr, "0.0f">:$offset,
      DefaultValuedAttr<Liger_CastingModeAttr, "::mlir::liger::CastingMode::llama">:$casting_mode,
      UnitAttr:$with_rstd);
  let results = (outs Liger_FloatTensor:$result, Optional<Liger_FloatTensor>:$rstd);
  let assemblyFormat = [{
    $input `,` $weight (`eps` `=` $eps^)? (`offset` `=` $offset^)?
    (`casting` `=` custom<EnumKeyword>($casting_mode)^)? (`rstd` $with_rstd^)?
    attr-dict `:` type($input) `,` type($weight)
  }];
  let hasCanonicalizer = 1;
}

def Liger_AddRMSNormOp : Liger_InferOp<"add_rms_norm",
    [AllTypesMatch<["input", "residual"]>]> {
  let summary = "residual add followed by RMSNorm";
  let description = [{
    Adds `residual` to `input` and normalizes the sum, as in the pre-norm of
    every decoder layer after the first:

    ```
    sum = input + residual           (rounded to the input dtype)
    y   = rms_norm(sum, weight)      (same attributes as liger.rms_norm)
    ```

    Returns the normalized value and the new residual stream `sum`, plus
    `rstd` in f32 when `rstd` is given. Attributes as for `liger.rms_norm`.

    ```mlir
    %y, %sum = liger.add_rms_norm %h, %res, %w eps = 1.000000e-05
        : tensor<?x4096xbf16>, tensor<4096xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$input, Liger_FloatTensor:$residual,
      Liger_FloatTensor:$weight,
      DefaultValuedAttr<Liger_PositiveF32Attr, "1.0e-6f">:$eps,
      DefaultValuedAttr<Liger_FiniteF32Attr, "0.0f">:$offset,
      DefaultValuedAttr<Liger_CastingModeAttr, "::mlir::liger::CastingMode::llama">:$casting_mode,
      UnitAttr:$with_rstd);
  let results = (outs Liger_FloatTensor:$result, Liger_FloatTensor:$sum,
      Optional<Liger_FloatTensor>:$rstd);
  let assemblyFormat = [{
    $input `,` $residual `,` $weight (`eps` `=` $eps^)? (`offset` `=` $offset^)?
    (`casting` `=` custom<EnumKeyword>($casting_mode)^)? (`rstd` $with_rstd^)?
    attr-dict `:` type($input) `,` type($weight)
  }];
  let hasCanonicalizer = 1;
}

def Liger_LayerNormOp : Liger_InferOp<"layer_norm"> {
  let summary = "layer normalization over the hidden dimension";
  let description = [{
    `y = (x - mean(x)) * rstd * weight + bias`, with the mean, the (biased)
    variance and `rstd = 1 / sqrt(var + eps)` computed in f32 over the last
    dimension, and the result rounded once to the input dtype. `bias` is
    optional; when given it has the type of `weight`.

    With `stats`, two more results hold the row statistics in f32 for the
    backward op, each with the shape of `input` minus its last dimension:
    `mean`, then `rstd`.

    Backward: `liger.layer_norm_grad`.

    ```mlir
    %y = liger.layer_norm %x, %w, %b eps = 1.000000e-05
        : tensor<?x1024xf16>, tensor<1024xf16>, tensor<1024xf16>
    %z, %mean, %rstd = liger.layer_norm %x, %w stats
        : tensor<?x1024xf16>, tensor<1024xf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$input, Liger_FloatTensor:$weight,
      Optional<Liger_FloatTensor>:$bias,
      DefaultValuedAttr<Liger_PositiveF32Attr, "1.0e-5f">:$eps,
      UnitAttr:$with_stats);
  // The statistics are one variadic group (none, or mean and rstd): two
  // optional results would need a segment-size attribute that inferred
  // result types cannot fill in. inferReturnTypes gives the two with
  // `stats`, none without, and getMean / getRstd name them.
  let results = (outs Liger_FloatTensor:$result,
      Variadic<Liger_FloatTensor>:$stats);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? (`eps` `=` $eps^)? (`stats` $with_stats^)?
    attr-dict `:` type($input) `,` type($weight) (`,` type($bias)^)?
  }];
  let extraClassDeclaration = [{
    /// The row mean that `stats` adds (f32), or null without it.
    ::mlir::Value getMean() {
      return getStats().empty() ? ::mlir::Value() : getStats()[0];
    }
    /// The row rstd that `stats` adds (f32), or null without it.
    ::mlir::Value getRstd() {
      return getStats().empty() ? ::mlir::Value() : getStats().back();
    }
  }];
}

//===----------------------------------------------------------------------===//
// Rotary embedding
//===----------------------------------------------------------------------===//

def Liger_RoPEOp : Liger_InferOp<"rope", [AllTypesMatch<["cos", "sin"]>,
    AllElementTypesMatch<["q", "k"]>]> {
  let summary = "rotary position embedding of q and k (rotate-half convention)";
  let description = [{
    Applies rotary position embeddings to queries `q` `[B, Hq, T, D]` and keys
    `k` `[B, Hkv, T, D]` with the tables `cos` and `sin` `[B or 1, T, D]`, in
    the Hugging Face rotate-half convention:

    ```
    rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2])
    q_out = q * cos + rotate_half(q) * sin      (cos, sin broadcast over heads)
    k_out = k * cos + rotate_half(k) * sin
    ```

    Math in f32, results in the dtype of `q`. Head counts and `D` are static,
    `D` is even; batch and sequence may be dynamic. `Hq` need not equal `Hkv`
    (grouped-query attention).

    ```mlir
    %qr, %kr = liger.rope %q, %k, %cos, %sin
        : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
    ```

    Backward: `liger.rope_grad`.
  }];
  let arguments = (ins Liger_FloatTensor:$q, Liger_FloatTensor:$k,
      Liger_FloatTensor:$cos, Liger_FloatTensor:$sin);
  let results = (outs Liger_FloatTensor:$q_out, Liger_FloatTensor:$k_out);
  let assemblyFormat = [{
    $q `,` $k `,` $cos `,` $sin attr-dict `:` type($q) `,` type($k) `,` type($cos)
  }];
}

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

def Liger_LinearOp : Liger_InferOp<"linear", [AllElementTypesMatch<["input", "weight"]>]> {
  let summary = "y = x · Wᵀ + bias (torch.nn.functional.linear)";
  let description = [{
    `input` is `[..., K]`, `weight` is `[N, K]` (the PyTorch layout, K-major),
    the optional `bias` is `[N]`; the result is `[..., N]`. Products are
    accumulated in f32 and rounded once to the input dtype. `K` and `N` are
    static; the leading (token) dimensions may be dynamic.

    ```mlir
    %q = liger.linear %x, %wq : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    %y = liger.linear %x, %w, %b : tensor<8x64xf32>, tensor<32x64xf32>, tensor<32xf32>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$input, Liger_FloatTensor:$weight,
      Optional<Liger_FloatTensor>:$bias);
  let results = (outs Liger_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)?
    attr-dict `:` type($input) `,` type($weight) (`,` type($bias)^)?
  }];
}

def Liger_LoRALinearOp : Liger_InferOp<"lora_linear",
    [AllElementTypesMatch<["input", "weight", "lora_a", "lora_b"]>]> {
  let summary = "linear projection with a low-rank (LoRA) update";
  let description = [{
    `y = x · Wᵀ + scale · (x · Aᵀ) · Bᵀ + bias`, with `weight` `[N, K]`,
    `lora_a` `[r, K]`, `lora_b` `[N, r]` and the optional `bias` `[N]`. `scale`
    is PEFT's `lora_alpha / r`. Both products accumulate in f32; the low-rank
    intermediate `x · Aᵀ` is rounded to the input dtype, as PEFT does, before
    the product with `B`.

    ```mlir
    %y = liger.lora_linear %x, %w, %a, %b scale = 2.000000e+00
        : tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>
    ```

    A `scale` of zero canonicalizes to `liger.linear`.
  }];
  let arguments = (ins Liger_FloatTensor:$input, Liger_FloatTensor:$weight,
      Liger_FloatTensor:$lora_a, Liger_FloatTensor:$lora_b,
      Optional<Liger_FloatTensor>:$bias,
      DefaultValuedAttr<Liger_FiniteF32Attr, "1.0f">:$scale);
  let results = (outs Liger_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $lora_a `,` $lora_b (`,` $bias^)? (`scale` `=` $scale^)?
    attr-dict `:` type($input) `,` type($weight) `,` type($lora_a) `,` type($lora_b)
    (`,` type($bias)^)?
  }];
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise and gated activations
//===----------------------------------------------------------------------===//

class Liger_UnaryElementwiseOp<string mnemonic, list<Trait> traits = []>
    : Liger_Op<mnemonic, !listconcat([SameOperandsAndResultType], traits)> {
  let arguments = (ins Liger_FloatTensor:$input);
  let results = (outs Liger_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Liger_SiLUOp : Liger_UnaryElementwiseOp<"silu"> {
  let summary = "SiLU (swish): x * sigmoid(x)";
  let description = [{
    `y = x / (1 + exp(-x))`, computed in f32 and rounded to the input dtype.

    ```mlir
    %y = liger.silu %x : tensor<?x14336xbf16>
    ```
  }];
}

def Liger_GELUOp : Liger_Op<"gelu", [SameOperandsAndResultType]> {
  let summary = "GELU, exact or with the tanh approximation";
  let description = [{
    `approximate = none` (default): `y = 0.5 x (1 + erf(x / sqrt(2)))`;
    `approximate = tanh`: `y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`
    (PyTorch's `gelu(approximate="tanh")`, HF's `gelu_pytorch_tanh`). Math in
    f32.

    ```mlir
    %y = liger.gelu %x approximate = tanh : tensor<?x16384xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$input,
      DefaultValuedAttr<Liger_GeluApproximationAttr, "::mlir::liger::GeluApproximation::none">:$approximate);
  let results = (outs Liger_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`approximate` `=` custom<EnumKeyword>($approximate)^)? attr-dict `:` type($input)
  }];
}

def Liger_SwiGLUOp : Liger_Op<"swiglu", [SameOperandsAndResultType]> {
  let summary = "gated SiLU: silu(gate) * up";
  let description = [{
    `y = silu(gate) * up`, elementwise, in f32 and rounded once; the
    activation of the Llama MLP (`down(silu(gate(x)) * up(x))`).

    ```mlir
    %h = liger.swiglu %gate, %up : tensor<?x14336xbf16>
    ```

    Backward: `liger.swiglu_grad`.
  }];
  let arguments = (ins Liger_FloatTensor:$gate, Liger_FloatTensor:$up);
  let results = (outs Liger_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($gate)";
}

def Liger_GEGLUOp : Liger_Op<"geglu", [SameOperandsAndResultType]> {
  let summary = "gated GELU: gelu(gate) * up";
  let description = [{
    `y = gelu(gate) * up` with the GELU formula chosen by `approximate` (see
    `liger.gelu`); the activation of the Gemma MLP (which uses `tanh`).

    ```mlir
    %h = liger.geglu %gate, %up approximate = tanh : tensor<?x16384xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$gate, Liger_FloatTensor:$up,
      DefaultValuedAttr<Liger_GeluApproximationAttr, "::mlir::liger::GeluApproximation::none">:$approximate);
  let results = (outs Liger_FloatTensor:$result);
  let assemblyFormat = [{
    $gate `,` $up (`approximate` `=` custom<EnumKeyword>($approximate)^)? attr-dict `:` type($gate)
  }];
}

class Liger_BinaryElementwiseOp<string mnemonic, list<Trait> traits = []>
    : Liger_Op<mnemonic, !listconcat([SameOperandsAndResultType], traits)> {
  let arguments = (ins Liger_FloatTensor:$lhs, Liger_FloatTensor:$rhs);
  let results = (outs Liger_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs)";
}

def Liger_AddOp : Liger_BinaryElementwiseOp<"add", [Commutative]> {
  let summary = "elementwise sum (e.g. a residual connection)";
  let description = [{
    `y = lhs + rhs`, with operands of one type (no broadcasting).

    ```mlir
    %h = liger.add %attn, %residual : tensor<?x4096xbf16>
    ```
  }];
}

def Liger_MulOp : Liger_BinaryElementwiseOp<"mul", [Commutative]> {
  let summary = "elementwise product";
  let description = [{
    `y = lhs * rhs`, with operands of one type (no broadcasting).

    ```mlir
    %h = liger.mul %a, %b : tensor<?x14336xbf16>
    ```
  }];
}

def Liger_SoftmaxOp : Liger_UnaryElementwiseOp<"softmax"> {
  let summary = "softmax over the last dimension";
  let description = [{
    `y_i = exp(x_i - max(x)) / sum_j exp(x_j - max(x))` over the last
    dimension, which must be static; f32 math, rounded once.

    ```mlir
    %p = liger.softmax %logits : tensor<?x32000xf32>
    ```
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Liger_CrossEntropyOp : Liger_InferOp<"cross_entropy"> {
  let summary = "cross-entropy of logits against integer targets";
  let description = [{
    `logits` is `[N, V]` (N tokens, may be dynamic; V static), `target` is
    `[N]` of i32 or i64, the optional class `weight` is `[V]`. Per token, in
    f32, with `s = softcap` when given:

    ```
    z      = softcap ? s * tanh(logits / s) : logits
    lse    = logsumexp(z)
    loss_i = (1 - label_smoothing) * (lse - z[target])
             + label_smoothing * (lse - mean(z))
             + lse_square_scale * lse^2                  (z-loss)
    ```

    Tokens whose target equals `ignore_index` contribute 0 and are not
    counted; `ignore_index` must be a value of the target's integer type
    (for an i32 target, in [-2^31, 2^31 - 1]). With class weights `w`, the
    first term is scaled by `w[target]` and the smoothing term becomes `sum_v w_v (lse - z_v) / V` (PyTorch's
    `F.cross_entropy`); the z-loss term is not weighted. `reduction = mean`
    (default) divides the weighted terms by the total `w[target]` of the
    counted tokens (their number without weights) and the z-loss term by the
    number of counted tokens (0/0, NaN, when every token is ignored, as in
    PyTorch); `sum` sums; `none` returns `[N]`. A target that is neither
    `ignore_index` nor in `[0, V)` gives a NaN loss for its token. With
    `z_loss`, a second result returns the z-loss term alone, reduced the same
    way. Results are f32.

    ```mlir
    %loss = liger.cross_entropy %logits, %target : tensor<?x128256xbf16>, tensor<?xi64>
    %l, %z = liger.cross_entropy %logits, %t ignore_index = -1 label_smoothing = 1.000000e-01
        reduction = sum softcap = 3.000000e+01 lse_square_scale = 1.000000e-04 z_loss
        : tensor<8x32000xf32>, tensor<8xi32>
    ```

    Backward: `liger.cross_entropy_grad`.
  }];
  let arguments = (ins Liger_FloatTensor:$logits, Liger_IndexTensor:$target,
      Optional<Liger_FloatTensor>:$weight,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<Liger_UnitIntervalF32Attr, "0.0f">:$label_smoothing,
      DefaultValuedAttr<Liger_ReductionAttr, "::mlir::liger::Reduction::mean">:$reduction,
      OptionalAttr<Liger_PositiveFiniteF32Attr>:$softcap,
      DefaultValuedAttr<Liger_NonNegativeF32Attr, "0.0f">:$lse_square_scale,
      UnitAttr:$return_z_loss);
  let results = (outs Liger_FloatTensor:$loss, Optional<Liger_FloatTensor>:$z_loss);
  let assemblyFormat = [{
    $logits `,` $target (`weight` `(` $weight^ `:` type($weight) `)`)?
    (`ignore_index` `=` $ignore_index^)?
    (`label_smoothing` `=` $label_smoothing^)?
    (`reduction` `=` custom<EnumKeyword>($reduction)^)?
    (`softcap` `=` $softcap^)?
    (`lse_square_scale` `=` $lse_square_scale^)?
    (`z_loss` $return_z_loss^)?
    attr-dict `:` type($logits) `,` type($target)
  }];
  let hasCanonicalizer = 1;
}

def Liger_FusedLinearCrossEntropyOp : Liger_InferOp<"fused_linear_cross_entropy",
    [AllElementTypesMatch<["hidden", "weight"]>, AttrSizedOperandSegments]> {
  let summary = "lm_head projection and cross-entropy, without materialized logits";
  let description = [{
    `cross_entropy(hidden · weightᵀ + bias, target)` with `hidden` `[N, H]`,
    `weight` `[V, H]`, optional `bias` `[V]`, `target` `[N]` and optional
    class weights `class_weight` `[V]` (`liger.cross_entropy`'s `weight`);
    the attributes and results are those of `liger.cross_entropy`. The op's
    meaning does not depend on the logits being stored: a lowering may (and
    the GPU lowering does) compute them tile by tile.

    ```mlir
    %loss = liger.fused_linear_cross_entropy %h, %lm_head, %target
        : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>
    %wloss = liger.fused_linear_cross_entropy %h, %lm_head, %target
        class_weight(%w : tensor<128256xf32>)
        : tensor<?x4096xbf16>, tensor<128256x4096xbf16>, tensor<?xi64>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$hidden, Liger_FloatTensor:$weight,
      Liger_IndexTensor:$target, Optional<Liger_FloatTensor>:$bias,
      Optional<Liger_FloatTensor>:$class_weight,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<Liger_UnitIntervalF32Attr, "0.0f">:$label_smoothing,
      DefaultValuedAttr<Liger_ReductionAttr, "::mlir::liger::Reduction::mean">:$reduction,
      OptionalAttr<Liger_PositiveFiniteF32Attr>:$softcap,
      DefaultValuedAttr<Liger_NonNegativeF32Attr, "0.0f">:$lse_square_scale,
      UnitAttr:$return_z_loss);
  let results = (outs Liger_FloatTensor:$loss, Optional<Liger_FloatTensor>:$z_loss);
  let assemblyFormat = [{
    $hidden `,` $weight `,` $target (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`class_weight` `(` $class_weight^ `:` type($class_weight) `)`)?
    (`ignore_index` `=` $ignore_index^)?
    (`label_smoothing` `=` $label_smoothing^)?
    (`reduction` `=` custom<EnumKeyword>($reduction)^)?
    (`softcap` `=` $softcap^)?
    (`lse_square_scale` `=` $lse_square_scale^)?
    (`z_loss` $return_z_loss^)?
    attr-dict `:` type($hidden) `,` type($weight) `,` type($target)
  }];
  let hasCanonicalizer = 1;
}

def Liger_KLDivOp : Liger_InferOp<"kl_div", [AllTypesMatch<["input", "target"]>]> {
  let summary = "KL divergence of log-probabilities (torch.nn.KLDivLoss)";
  let description = [{
    `input` holds log-probabilities `[N, V]`; `target` holds probabilities, or
    log-probabilities with `log_target`. Pointwise, in f32:

    ```
    log_target:  l = exp(target) * (target - input)
    otherwise:   l = target * (log(max(target, eps)) - input)
    ```

    `reduction`: `none` returns `[N, V]`, `sum` the total, `mean` the total
    over N·V, `batchmean` (default) the total over N. Results are f32.
    With `per_token` (a reduction other than `none`) the result is the `[N]`
    sums per token that the reduction adds up, and the caller reduces them:
    the form a row kernel computes. The gradient is `liger.kl_div_grad`.

    ```mlir
    %l = liger.kl_div %logp, %q reduction = sum log_target : tensor<?x32000xf32>
    %rows = liger.kl_div %logp, %q per_token : tensor<?x32000xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$input, Liger_FloatTensor:$target,
      DefaultValuedAttr<Liger_KLReductionAttr, "::mlir::liger::KLReduction::batchmean">:$reduction,
      UnitAttr:$log_target,
      DefaultValuedAttr<Liger_PositiveF32Attr, "1.0e-10f">:$eps,
      UnitAttr:$per_token);
  let results = (outs Liger_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $target (`reduction` `=` custom<EnumKeyword>($reduction)^)? (`log_target` $log_target^)?
    (`eps` `=` $eps^)? (`per_token` $per_token^)? attr-dict `:` type($input)
  }];
}

def Liger_JSDOp : Liger_InferOp<"jsd", [AllTypesMatch<["input", "target"]>]> {
  let summary = "generalized Jensen-Shannon divergence (distillation loss)";
  let description = [{
    `input` (student) and `target` (teacher) hold log-probabilities `[N, V]`.
    With `P = exp(target)`, `Q = exp(input)` and `M = beta P + (1-beta) Q`,
    per token in f32:

    ```
    jsd_i = beta * KL(P || M) + (1 - beta) * KL(Q || M)
    ```

    At the ends, as in Liger-Kernel, `beta = 0` is the forward KL `KL(P ||
    Q)` and `beta = 1` the reverse KL `KL(Q || P)` (where the formula above
    would vanish). `log M` is formed as `max(x, y) + log(beta e^(y - max) +
    (1 - beta) e^(x - max))`, so that tokens of vanishing probability in
    both distributions add 0, not NaN. With `shift_labels` `[N]`, tokens
    whose label equals `ignore_index` are skipped. The result is the f32
    sum over counted tokens divided by their number (0 when every token is
    skipped, as Liger-Kernel gives). With `per_token` it is the `[N]` f32
    loss of each token (0 for a skipped one) before that division: the form
    a row kernel computes. The gradient is `liger.jsd_grad`.

    With `temperature = T`, `input` and `target` hold logits instead (the
    distillation form, both lm_heads' outputs): each row is taken to its
    log-probabilities `log_softmax(logits / T)` first, in f32, and the loss
    is that of those. A row kernel then reads the logits themselves, in
    their dtype, with no f32 log-probabilities in memory.

    ```mlir
    %l = liger.jsd %student, %teacher beta = 5.000000e-01 : tensor<?x32000xbf16>
    %rows = liger.jsd %student, %teacher labels(%lab : tensor<?xi64>) per_token : tensor<?x32000xbf16>
    %t = liger.jsd %zs, %zt temperature = 2.000000e+00 per_token : tensor<?x128256xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$input, Liger_FloatTensor:$target,
      Optional<Liger_IndexTensor>:$shift_labels,
      DefaultValuedAttr<Liger_UnitIntervalF32Attr, "0.5f">:$beta,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      OptionalAttr<Liger_PositiveFiniteF32Attr>:$temperature,
      UnitAttr:$per_token);
  let results = (outs Liger_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $target (`labels` `(` $shift_labels^ `:` type($shift_labels) `)`)?
    (`beta` `=` $beta^)? (`ignore_index` `=` $ignore_index^)?
    (`temperature` `=` $temperature^)? (`per_token` $per_token^)? attr-dict `:` type($input)
  }];
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Liger_AttentionOp : Liger_InferOp<"attention",
    [AllElementTypesMatch<["q", "k", "v"]>]> {
  let summary = "scaled dot-product attention with optional causal mask and GQA";
  let description = [{
    `q` `[B, Hq, T, D]`, `k` `[B, Hkv, S, D]`, `v` `[B, Hkv, S, Dv]`, with `Hq`
    a multiple of `Hkv` (query head h reads key/value head `h / (Hq/Hkv)`):

    ```
    s   = scale * q · kᵀ                     (softcap c: c * tanh(s / c))
    p   = softmax(s + mask)                  (f32)
    out = p · v                              [B, Hq, T, Dv]
    lse = log(sum_j exp(s + mask))           [B, Hq, T] f32 (return_lse)
    ```

    `scale` defaults to `1/sqrt(D)`. `causal` masks key positions `j > i + (S
    - T)` (the bottom-right aligned mask of `scaled_dot_product_attention`
    when `S = T`). `window = W` (with `causal` only) also masks the keys
    `j <= i + (S - T) - W`: each query row sees the `W` keys up to its
    diagonal, Hugging Face's `sliding_window` (Mistral's, Gemma 2's and 3's
    local layers), which keeps key `j` for query `i` where `i - W < j <= i`
    when `S = T`. `softcap = c` bounds the scaled scores to `(-c, c)` before
    the mask, Gemma 2's `attn_logit_softcapping` (`tanh` of `s / c`, times
    `c`).

    With `return_lse`, a second result holds each query row's log-sum-exp
    (natural log, f32, `[B, Hq, T]` of `q`) over the keys the mask keeps:
    the softmax's statistics, what FlashAttention and cuDNN return as
    `logsumexp`, so that `p = exp(s - lse)`. A row whose keys are
    all masked (causal with `S < T`) has `lse = -inf` and a NaN output.
    The canonicalizer drops an `lse` that nothing reads.

    Its backward op is `liger.attention_grad`, which takes `out` and `lse`
    as saved values.

    ```mlir
    %o = liger.attention %q, %k, %v causal
        : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
    %o2, %lse = liger.attention %q, %k, %v causal return_lse
        : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
    %o3 = liger.attention %q, %k, %v causal window = 4096
        : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
    %o4 = liger.attention %q, %k, %v causal softcap = 5.000000e+01
        : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
    ```
  }];
  let arguments = (ins Liger_FloatTensor:$q, Liger_FloatTensor:$k, Liger_FloatTensor:$v,
      UnitAttr:$causal, OptionalAttr<Liger_PositiveI64Attr>:$window,
      OptionalAttr<Liger_PositiveFiniteF32Attr>:$softcap,
      OptionalAttr<Liger_PositiveF32Attr>:$scale, UnitAttr:$return_lse);
  let results = (outs Liger_FloatTensor:$result, Optional<Liger_FloatTensor>:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`causal` $causal^)? (`window` `=` $window^)?
    (`softcap` `=` $softcap^)? (`scale` `=` $scale^)?
    (`return_lse` $return_lse^)?
    attr-dict `:` type($q) `,` type($k) `,` type($v)
  }];
  let hasCanonicalizer = 1;
}

include "liger/Dialect/Liger/IR/LigerGradOps.td"
include "liger/Dialect/Liger/IR/LigerFusion.td"

#endif // LIGER_DIALECT_LIGER_IR_LIGEROPS_TD

"""Every argument of every liger.ops function is checked before a module
is formed, compiled or launched: each case is a call that once reached the
IR, the compiler or the runner unchecked (or was silently changed), and the
whole message it gets now. Nothing here compiles or runs a kernel: the
checks run first (CPU tensors, LIGER_OPS_CPU_REFERENCE=1)."""

import re

import pytest

torch = pytest.importorskip("torch")

from liger import ops  # noqa: E402
from liger.errors import LigerError, LigerTypeError, LigerValueError  # noqa: E402


@pytest.fixture(autouse=True)
def no_kernels(monkeypatch):
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")

    def never(*args, **kwargs):
        raise AssertionError("an invalid call reached the kernels")
    for name in ("bundle_path", "load", "kernels", "loss_plan_kernels", "matmul_kernel",
                 "matmul_kernels"):
        monkeypatch.setattr("liger.bundles." + name, never)
    ops.clear_caches()
    yield
    ops.clear_caches()


X, W = torch.randn(4, 8), torch.ones(8)
LOGITS, T = torch.randn(4, 16), torch.tensor([1, 2, -100, 3])
LEAF = torch.randn(4, 16, requires_grad=True)
LP = torch.randn(4, 16).log_softmax(-1)


def _no_grad(call):
    def wrapped():
        with torch.no_grad():
            return call()
    return wrapped
H, LW = torch.randn(4, 16, dtype=torch.bfloat16), torch.randn(24, 16, dtype=torch.bfloat16)
Q, K, C = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8), torch.randn(1, 3, 8)
# A LoRA projection [48, 64] of rank 16, x [2, 3, 64], bf16.
LX, LW_, LA, LB, LC = [torch.randn(*shape, dtype=torch.bfloat16) for shape in
                       ((2, 3, 64), (48, 64), (16, 64), (48, 16), (48,))]


# A gated MLP of H = 64 and I = 40, x [2, 3, 64], bf16.
MX, MG, MD = [torch.randn(*shape, dtype=torch.bfloat16) for shape in
              ((2, 3, 64), (40, 64), (64, 40))]


def _mlp(x=MX, gate_weight=MG, up_weight=MG, down_weight=MD, activation="swiglu",
         approximate="tanh"):
    return lambda: ops.gated_mlp(x, gate_weight, up_weight, down_weight, activation,
                                 approximate)


def _lora(x=LX, weight=LW_, bias=LC, lora_a=LA, lora_b=LB, scale=2.0):
    return lambda: ops.lora_linear(x, weight, bias, lora_a, lora_b, scale)


def _lora_rank(r, n=48, k=64):
    return _lora(LX[..., :k], LW_[:n, :k], LC[:n], torch.randn(r, k, dtype=torch.bfloat16),
                 torch.randn(n, r, dtype=torch.bfloat16))

CASES = [
    # (call, exception type, the whole message)
    (lambda: ops.cross_entropy(LOGITS, T, softcap=-30), LigerValueError,
     "softcap must be None, 0 (no softcap) or > 0, got -30.0"),
    (lambda: ops.cross_entropy(LOGITS, T, softcap=float("inf")), LigerValueError,
     "softcap must be finite, got inf"),
    (lambda: ops.cross_entropy(LOGITS, T, ignore_index=1.5), LigerTypeError,
     "ignore_index must be an int, got 1.5"),
    (lambda: ops.cross_entropy(LOGITS, T, ignore_index=2 ** 63), LigerValueError,
     "ignore_index must be in [-9223372036854775808, 9223372036854775807], got "
     "9223372036854775808"),
    (lambda: ops.cross_entropy(LOGITS, T, ignore_index=True), LigerTypeError,
     "ignore_index must be an int, got True"),
    # Labels are compared with ignore_index in their own type: with int32
    # labels 2^32 would wrap to 0 and drop the tokens of class 0.
    (lambda: ops.cross_entropy(LOGITS, T.int(), ignore_index=2 ** 32), LigerValueError,
     "ignore_index (of i32 labels) must be in [-2147483648, 2147483647], got 4294967296"),
    (lambda: ops.fused_linear_cross_entropy(H, LW, T.int(), ignore_index=-2 ** 31 - 1),
     LigerValueError,
     "ignore_index (of i32 labels) must be in [-2147483648, 2147483647], got -2147483649"),
    (lambda: ops.jsd(LOGITS.log_softmax(-1), LOGITS.log_softmax(-1), T.int(),
                     ignore_index=2 ** 31), LigerValueError,
     "ignore_index (of i32 labels) must be in [-2147483648, 2147483647], got 2147483648"),
    # Inputs the backward gives no gradient: refused where they require it.
    (lambda: ops.kl_div(LP, LP.exp().requires_grad_()), LigerValueError,
     "liger.ops.kl_div: target must not require grad (the target gets no gradient here, as "
     "in Liger-Kernel: detach it)"),
    (lambda: ops.jsd(LP, LP.clone().requires_grad_()), LigerValueError,
     "liger.ops.jsd: target must not require grad (the teacher gets no gradient here, as in "
     "Liger-Kernel: detach it)"),
    (lambda: ops.fused_linear_jsd(H, LW, H, LW.clone().requires_grad_()), LigerValueError,
     "liger.ops.fused_linear_jsd: teacher_input and teacher_weight must not require grad (the "
     "teacher gets no gradient here, as in Liger-Kernel: detach them)"),
    (lambda: ops.cross_entropy(LOGITS, T, weight=torch.rand(16, requires_grad=True)),
     LigerValueError,
     "liger.ops.cross_entropy: weight must not require grad (class weights get no gradient, "
     "as in PyTorch: detach it)"),
    (lambda: ops.fused_linear_cross_entropy(H, LW, T,
                                            class_weight=torch.rand(24, requires_grad=True)),
     LigerValueError,
     "liger.ops.fused_linear_cross_entropy: class_weight must not require grad (class weights "
     "get no gradient, as in PyTorch: detach it)"),
    (lambda: ops.cross_entropy(LOGITS, T, label_smoothing=1.5), LigerValueError,
     "label_smoothing must be <= 1.0, got 1.5"),
    (lambda: ops.cross_entropy(LOGITS, T, lse_square_scale=-1e-4), LigerValueError,
     "lse_square_scale must be >= 0.0, got -0.0001"),
    (lambda: ops.cross_entropy(LOGITS, T, reduction="batchmean"), LigerValueError,
     "reduction must be one of 'mean', 'sum', 'none', got 'batchmean'"),
    (lambda: ops.cross_entropy(LOGITS, T, inplace=1), LigerTypeError,
     "inplace must be a bool, got 1"),
    (lambda: ops.cross_entropy(LOGITS, T, return_z_loss=1), LigerTypeError,
     "return_z_loss must be a bool, got 1"),
    (lambda: ops.cross_entropy(LOGITS, T, inplace=True, return_z_loss="yes"), LigerTypeError,
     "return_z_loss must be a bool, got 'yes'"),
    (lambda: ops.cross_entropy(LOGITS, T.float()), LigerTypeError,
     "liger.ops.cross_entropy: target's dtype must be i32 or i64, got torch.float32"),
    (lambda: ops.cross_entropy(LOGITS.view(2, 2, 16), T[:3]), LigerValueError,
     "liger.ops.cross_entropy: target must have shape [2, 2] or [4] (one class per row), got "
     "[3]"),
    (lambda: ops.cross_entropy(LOGITS, T[:3]), LigerValueError,
     "liger.ops.cross_entropy: target must have shape [4] (one class per row), got [3]"),
    (lambda: ops.cross_entropy(LOGITS, T, weight=torch.ones(15)), LigerValueError,
     "liger.ops.cross_entropy: weight must be a float tensor of shape [16] (the vocabulary), "
     "got torch.float32 [15]"),
    (lambda: ops.cross_entropy(torch.randn(16, 4).t(), T, inplace=True), LigerValueError,
     "liger.ops.cross_entropy(inplace=True) needs contiguous logits (a copy would not be in "
     "place)"),
    (lambda: ops.rms_norm(X, W, eps=float("nan")), LigerValueError, "eps must be finite, got nan"),
    (lambda: ops.rms_norm(X, W, eps=-1e-6), LigerValueError, "eps must be > 0.0, got -1e-06"),
    # Every float attribute is an f32 (the IR's rules: eps > 0).
    (lambda: ops.rms_norm(X, W, eps=0.0), LigerValueError, "eps must be > 0.0, got 0.0"),
    (lambda: ops.rms_norm(X, W, eps=1e-50), LigerValueError,
     "eps must be an f32: 0 or of a magnitude in [1.1754943508222875e-38, "
     "3.4028234663852886e+38], got 1e-50"),
    (lambda: ops.rms_norm(X, W, eps=1e39), LigerValueError,
     "eps must be an f32: 0 or of a magnitude in [1.1754943508222875e-38, "
     "3.4028234663852886e+38], got 1e+39"),
    (lambda: ops.rms_norm(X, W, offset=-1e39), LigerValueError,
     "offset must be an f32: 0 or of a magnitude in [1.1754943508222875e-38, "
     "3.4028234663852886e+38], got -1e+39"),
    (lambda: ops.cross_entropy(LOGITS, T, softcap=1e39), LigerValueError,
     "softcap must be an f32: 0 or of a magnitude in [1.1754943508222875e-38, "
     "3.4028234663852886e+38], got 1e+39"),
    (lambda: ops.cross_entropy(LOGITS, T, lse_square_scale=1e39), LigerValueError,
     "lse_square_scale must be an f32: 0 or of a magnitude in [1.1754943508222875e-38, "
     "3.4028234663852886e+38], got 1e+39"),
    (lambda: ops.cross_entropy(LOGITS, T, label_smoothing=1e-45), LigerValueError,
     "label_smoothing must be an f32: 0 or of a magnitude in [1.1754943508222875e-38, "
     "3.4028234663852886e+38], got 1e-45"),
    (lambda: ops.rms_norm(X, W, eps="1e-6"), LigerTypeError, "eps must be a number, got '1e-6'"),
    (lambda: ops.rms_norm(X, W, casting="gemma rstd : tensor<8xf32>"), LigerValueError,
     "casting must be one of 'llama', 'gemma', 'none', got 'gemma rstd : tensor<8xf32>'"),
    (lambda: ops.rms_norm(X, W, offset=float("-inf")), LigerValueError,
     "offset must be finite, got -inf"),
    (lambda: ops.rms_norm(X, torch.ones(7)), LigerValueError,
     "liger.ops.rms_norm: weight must have shape [8] (the hidden size of x), got [7]"),
    (lambda: ops.rms_norm(X.int(), W), LigerTypeError,
     "dtype must be bf16 or f16 or f32, got torch.int32"),
    (lambda: ops.rms_norm(X, [1.0] * 8), LigerTypeError,
     "liger.ops.rms_norm: weight must be a torch.Tensor, got list"),
    (lambda: ops.rms_norm(torch.randn(0, 8), W), LigerValueError,
     "liger.ops.rms_norm: x must be [..., H] with at least one row, got shape [0, 8]"),
    (lambda: ops.rms_norm(X, W.to("meta")), LigerValueError,
     "liger.ops.rms_norm: x is on cpu and weight on meta"),
    (lambda: ops.layer_norm(X, W, torch.zeros(7)), LigerValueError,
     "liger.ops.layer_norm: bias must have shape [8] (the hidden size of x), got [7]"),
    (lambda: ops.layer_norm(X, torch.ones(8, 1), None), LigerValueError,
     "liger.ops.layer_norm: weight must have shape [8] (the hidden size of x), got [8, 1]"),
    (lambda: ops.layer_norm(X, W, W.bfloat16()), LigerTypeError,
     "liger.ops.layer_norm: bias must have the dtype of weight (torch.float32), got "
     "torch.bfloat16"),
    (lambda: ops.layer_norm(X, W, [0.0] * 8), LigerTypeError,
     "liger.ops.layer_norm: bias must be a torch.Tensor, got list"),
    (lambda: ops.layer_norm(X, W.double(), W.double()), LigerTypeError,
     "weight_dtype must be bf16 or f16 or f32, got torch.float64"),
    (lambda: ops.layer_norm(X.half(), W, W, eps=0.0), LigerValueError,
     "eps must be > 0.0, got 0.0"),
    (lambda: ops.layer_norm(X, W, W, eps=None), LigerTypeError, "eps must be a number, got None"),
    (lambda: ops.layer_norm(torch.tensor(1.0), W, W), LigerValueError,
     "liger.ops.layer_norm: x must be [..., H] with at least one row, got shape []"),
    (lambda: ops.layer_norm(torch.randn(3, 0), torch.ones(0), None), LigerValueError,
     "hidden must be in [1, 2147483647], got 0"),
    (lambda: ops.layer_norm(X, W, W.to("meta")), LigerValueError,
     "liger.ops.layer_norm: x is on cpu and bias on meta"),
    (lambda: ops.add_rms_norm(X, X[:, :4], W), LigerValueError,
     "liger.ops.add_rms_norm: residual must have the shape of x [4, 8], got [4, 4]"),
    (lambda: ops.add_rms_norm(X, X.view(2, 2, 8), W), LigerValueError,
     "liger.ops.add_rms_norm: residual must have the shape of x [4, 8], got [2, 2, 8]"),
    (lambda: ops.add_rms_norm(X, X.bfloat16(), W), LigerTypeError,
     "liger.ops.add_rms_norm: residual must have the dtype of x (torch.float32), got "
     "torch.bfloat16"),
    (lambda: ops.add_rms_norm(X, None, W), LigerTypeError,
     "liger.ops.add_rms_norm: residual must be a torch.Tensor, got NoneType"),
    (lambda: ops.add_rms_norm(X, X, torch.ones(9)), LigerValueError,
     "liger.ops.add_rms_norm: weight must have shape [8] (the hidden size of x), got [9]"),
    (lambda: ops.add_rms_norm(X, X, W, casting="llama3"), LigerValueError,
     "casting must be one of 'llama', 'gemma', 'none', got 'llama3'"),
    (lambda: ops.add_rms_norm(X, X, W, offset=float("nan")), LigerValueError,
     "offset must be finite, got nan"),
    (lambda: ops.add_rms_norm(X, X, W, eps=-1.0), LigerValueError, "eps must be > 0.0, got -1.0"),
    (lambda: ops.add_rms_norm(X.int(), X.int(), W), LigerTypeError,
     "dtype must be bf16 or f16 or f32, got torch.int32"),
    (lambda: ops.add_rms_norm(X[:0], X[:0], W), LigerValueError,
     "liger.ops.add_rms_norm: x must be [..., H] with at least one row, got shape [0, 8]"),
    (lambda: ops.add_rms_norm(X, X.to("meta"), W), LigerValueError,
     "liger.ops.add_rms_norm: x is on cpu and residual on meta"),
    (lambda: ops.geglu(X, X, approximate="erf"), LigerValueError,
     "approximate must be one of 'tanh', 'none', got 'erf'"),
    (lambda: ops.swiglu(X, X[:, :4]), LigerValueError,
     "liger.ops.swiglu: up must have the shape of gate [4, 8], got [4, 4]"),
    (lambda: ops.swiglu(X, X.double()), LigerTypeError,
     "liger.ops.swiglu: up must have the dtype of gate (torch.float32), got torch.float64"),
    (lambda: ops.rope(Q, K, C, C[:, :2]), LigerValueError,
     "liger.ops.rope: sin must have the shape of cos [1, 3, 8], got [1, 2, 8]"),
    (lambda: ops.rope(Q, K, C[:, :, :4], C[:, :, :4]), LigerValueError,
     "liger.ops.rope: cos must be [1 or 1, 3, 8] (B, T, D of q), got [1, 3, 4]"),
    (lambda: ops.rope(Q[0], K, C, C), LigerValueError,
     "liger.ops.rope: q and k must be [B, Hq, T, D] and [B, Hk, T, D], got [4, 3, 8] and "
     "[1, 2, 3, 8]"),
    (lambda: ops.rope(Q[..., :7], K[..., :7], C[..., :7], C[..., :7]), LigerValueError,
     "head_dim must be even (RoPE rotates the two halves of a head), got 7"),
    (lambda: ops.rope(Q, K, C.clone().requires_grad_(), C), LigerValueError,
     "liger.ops.rope: cos and sin must not require grad (RoPE's tables get no gradient here: "
     "detach them)"),
    (lambda: ops.fused_linear_cross_entropy(H, LW, T, reduction="batchmean"), LigerValueError,
     "reduction must be one of 'mean', 'sum', 'none', got 'batchmean'"),
    (lambda: ops.fused_linear_cross_entropy(H, LW, T, class_weight=torch.ones(24),
                                            lse_square_scale=1e-4), LigerValueError,
     "liger.ops.fused_linear_cross_entropy: class weights with a z-loss and reduction=mean "
     "divide the two terms by different totals; use liger.ops.cross_entropy on materialized "
     "logits"),
    (lambda: ops.fused_linear_cross_entropy(H, LW[:, :8], T), LigerValueError,
     "liger.ops.fused_linear_cross_entropy takes hidden [..., H] and weight [V, H], got "
     "[4, 16] and [24, 8]"),
    (lambda: ops.fused_linear_cross_entropy(H, LW, T[:3]), LigerValueError,
     "liger.ops.fused_linear_cross_entropy: target must have shape [4] (one class per "
     "row), got [3]"),
    (lambda: ops.fused_linear_cross_entropy(H, LW[:20], T), LigerValueError,
     "liger.ops.fused_linear_cross_entropy needs an lm_head whose vocabulary and hidden sizes "
     "are multiples of 8 (its matmul kernels move 16-byte rows), got [20, 16]; use "
     "liger.ops.cross_entropy on the logits"),
    (lambda: ops.fused_linear_cross_entropy(H.float(), LW.float(), T), LigerTypeError,
     "liger.ops.fused_linear_cross_entropy takes bf16 or f16 (its matmul kernels are wgmma's "
     "and mma.sync's); for f32 use liger.ops.cross_entropy on the logits"),
    (lambda: ops.fused_linear_cross_entropy(H, LW, T, memory_budget=2 ** 29 + 0.5),
     LigerTypeError, "memory_budget must be an int, got 536870912.5"),
    (lambda: ops.fused_linear_cross_entropy(H, LW, T, memory_budget=10), LigerValueError,
     "memory_budget of 10 bytes holds no row of logits (48 bytes)"),
    (lambda: ops.fused_linear_cross_entropy(H, LW, T, dw_f32="yes"), LigerTypeError,
     "dw_f32 must be a bool, got 'yes'"),
    # LoRA: the operands' shapes and dtypes, then the kernel's rules.
    (_lora(x=LX.tolist()), LigerTypeError,
     "liger.ops.lora_linear: x must be a torch.Tensor, got list"),
    (_lora(lora_b=None), LigerTypeError,
     "liger.ops.lora_linear: lora_b must be a torch.Tensor, got NoneType"),
    (_lora(weight=LW_.to("meta")), LigerValueError,
     "liger.ops.lora_linear: x is on cpu and weight on meta"),
    (_lora(x=LX[0, 0, 0]), LigerValueError,
     "liger.ops.lora_linear: x must be [..., H] with at least one row, got shape []"),
    (_lora(x=LX[:0]), LigerValueError,
     "liger.ops.lora_linear: x must be [..., H] with at least one row, got shape [0, 3, 64]"),
    (_lora(weight=LW_[:, :32]), LigerValueError,
     "liger.ops.lora_linear: weight must be [N, K] with K = 64 (the features of x), got "
     "[48, 32]"),
    (_lora(weight=LW_[0]), LigerValueError,
     "liger.ops.lora_linear: weight must be [N, K] with K = 64 (the features of x), got [64]"),
    (_lora(lora_a=LA.t()), LigerValueError,
     "liger.ops.lora_linear: lora_a must be [r, K] with K = 64 (the features of x), got "
     "[64, 16]"),
    (_lora(lora_b=LB.t()), LigerValueError,
     "liger.ops.lora_linear: lora_b must be [N, r] = [48, 16] (weight's N, lora_a's r), got "
     "[16, 48]"),
    (_lora(bias=LC[:40]), LigerValueError,
     "liger.ops.lora_linear: bias must be [N] = [48] (weight's N), got [40]"),
    (_lora(lora_a=LA.float()), LigerTypeError,
     "liger.ops.lora_linear: lora_a must have the dtype of x (torch.bfloat16), got "
     "torch.float32"),
    (_lora(bias=LC.half()), LigerTypeError,
     "liger.ops.lora_linear: bias must have the dtype of x (torch.bfloat16), got "
     "torch.float16"),
    (_lora(LX.float(), LW_.float(), LC.float(), LA.float(), LB.float()), LigerTypeError,
     "liger.ops.lora_linear takes bf16 or f16 (its kernels are the matmul template's: wgmma "
     "and mma.sync), got f32"),
    (_lora(LX.double(), LW_.double(), LC.double(), LA.double(), LB.double()), LigerTypeError,
     "dtype must be bf16 or f16 or f32, got torch.float64"),
    (_lora_rank(8), LigerValueError,
     "rank must be 16, 32 or 64 (the kernel's second product is k16 MMAs over the rank, B's "
     "rows one TMA swizzle span), got 8"),
    (_lora_rank(48), LigerValueError,
     "rank must be 16, 32 or 64 (the kernel's second product is k16 MMAs over the rank, B's "
     "rows one TMA swizzle span), got 48"),
    (_lora_rank(16, k=60), LigerValueError,
     "in_features must be a multiple of 8 on sm_90a (the matmul template reads K in 16-byte "
     "rows), got 60"),
    (_lora_rank(16, n=44), LigerValueError,
     "out_features must be a multiple of 8 (the matmul template's column tiles), got 44"),
    (_lora(scale=0.0), LigerValueError,
     "scale must not be 0 (the projection is then the base layer alone: use "
     "torch.nn.functional.linear)"),
    (_lora(scale="2"), LigerTypeError, "scale must be a number, got '2'"),
    (_lora(scale=float("nan")), LigerValueError, "scale must be finite, got nan"),
    (lambda: ops.lora_linear_spec(520, 1000, 16, "bf16", target="sm_80"), LigerValueError,
     "in_features must be a multiple of 32 on sm_80 (the matmul template reads K in 64-byte "
     "rows), got 520"),
    (lambda: ops.lora_linear_spec(64, 48, 16, "bf16", bias=1), LigerTypeError,
     "bias must be a bool, got 1"),
    (_mlp(x=MX.tolist()), LigerTypeError,
     "liger.ops.gated_mlp: x must be a torch.Tensor, got list"),
    (_mlp(down_weight=None), LigerTypeError,
     "liger.ops.gated_mlp: down_weight must be a torch.Tensor, got NoneType"),
    (_mlp(up_weight=MG.to("meta")), LigerValueError,
     "liger.ops.gated_mlp: x is on cpu and up_weight on meta"),
    (_mlp(x=MX[:0]), LigerValueError,
     "liger.ops.gated_mlp: x must be [..., H] with at least one row, got shape [0, 3, 64]"),
    (_mlp(gate_weight=MG[:, :32]), LigerValueError,
     "liger.ops.gated_mlp: gate_weight must be [I, H] with H = 64 (the features of x), got "
     "[40, 32]"),
    (_mlp(gate_weight=MG[0]), LigerValueError,
     "liger.ops.gated_mlp: gate_weight must be [I, H] with H = 64 (the features of x), got "
     "[64]"),
    (_mlp(up_weight=MG[:32]), LigerValueError,
     "liger.ops.gated_mlp: up_weight must have the shape of gate_weight [40, 64], got [32, 64]"),
    (_mlp(down_weight=MD.t()), LigerValueError,
     "liger.ops.gated_mlp: down_weight must be [H, I] = [64, 40] (x's H, gate_weight's I), "
     "got [40, 64]"),
    (_mlp(up_weight=MG.half()), LigerTypeError,
     "liger.ops.gated_mlp: up_weight must have the dtype of x (torch.bfloat16), got "
     "torch.float16"),
    (_mlp(MX.float(), MG.float(), MG.float(), MD.float()), LigerTypeError,
     "liger.ops.gated_mlp takes bf16 or f16 (its kernels are the matmul template's: wgmma "
     "and mma.sync), got f32"),
    (_mlp(activation="silu"), LigerValueError,
     "activation must be one of 'swiglu', 'geglu', got 'silu'"),
    (_mlp(activation="geglu", approximate="exact"), LigerValueError,
     "approximate must be one of 'tanh', 'none', got 'exact'"),
    (_mlp(MX[..., :60], MG[:, :60], MG[:, :60], MD[:60]), LigerValueError,
     "hidden must be a multiple of 8 on sm_90a (the matmul template reads K in 16-byte rows), "
     "got 60"),
    (_mlp(MX, MG[:36], MG[:36], MD[:, :36]), LigerValueError,
     "intermediate must be a multiple of 8 (the matmul template's column tiles), got 36"),
    (lambda: ops.gated_mlp_spec(520, 1000, "bf16", target="sm_86"), LigerValueError,
     "hidden must be a multiple of 32 on sm_86 (the matmul template reads K in 64-byte rows), "
     "got 520"),
    (lambda: ops.gated_mlp_spec(64, 40, "bf16", activation=None), LigerValueError,
     "activation must be one of 'swiglu', 'geglu', got None"),
]


@pytest.mark.parametrize("call,kind,message", CASES, ids=[c[2][:60] for c in CASES])
def test_invalid_arguments_are_refused_with_their_message(call, kind, message):
    with pytest.raises(kind, match="^%s$" % re.escape(message)):
        call()


NONCONTIGUOUS = torch.randn(16, 4).t()
# (a valid call, a call of the same configuration that is not valid, the
# exception type, its whole message): once a configuration has been seen,
# what changes between its calls is still checked, and so is every
# argument whose value is equal but not the same (True for 1.0).
NEAR_MISSES = [
    (lambda: ops.rms_norm(X, W, eps=1.0), lambda: ops.rms_norm(X, W, eps=True),
     LigerTypeError, "eps must be a number, got True"),
    (lambda: ops.rms_norm(X, W), lambda: ops.rms_norm(X[:0], W), LigerValueError,
     "liger.ops.rms_norm: x must be [..., H] with at least one row, got shape [0, 8]"),
    (lambda: ops.rms_norm(X, W), lambda: ops.rms_norm(None, W), LigerTypeError,
     "liger.ops.rms_norm: x must be a torch.Tensor, got NoneType"),
    (lambda: ops.rms_norm(X, W), lambda: ops.rms_norm(X, None), LigerTypeError,
     "liger.ops.rms_norm: weight must be a torch.Tensor, got NoneType"),
    (lambda: ops.layer_norm(X, W, W), lambda: ops.layer_norm(X[:0], W, W), LigerValueError,
     "liger.ops.layer_norm: x must be [..., H] with at least one row, got shape [0, 8]"),
    (lambda: ops.layer_norm(X, W, W, eps=1.0), lambda: ops.layer_norm(X, W, W, eps=True),
     LigerTypeError, "eps must be a number, got True"),
    (lambda: ops.layer_norm(X, W, None), lambda: ops.layer_norm(X, W, torch.ones(4)),
     LigerValueError,
     "liger.ops.layer_norm: bias must have shape [8] (the hidden size of x), got [4]"),
    (lambda: ops.add_rms_norm(X, X, W), lambda: ops.add_rms_norm(X, X[:2], W), LigerValueError,
     "liger.ops.add_rms_norm: residual must have the shape of x [4, 8], got [2, 8]"),
    (lambda: ops.add_rms_norm(X, X, W), lambda: ops.add_rms_norm(X[:0], X[:0], W),
     LigerValueError,
     "liger.ops.add_rms_norm: x must be [..., H] with at least one row, got shape [0, 8]"),
    (lambda: ops.add_rms_norm(X, X, W), lambda: ops.add_rms_norm(X, X, W, casting="gemma "),
     LigerValueError, "casting must be one of 'llama', 'gemma', 'none', got 'gemma '"),
    (lambda: ops.swiglu(X, X), lambda: ops.swiglu(X, X[:2]), LigerValueError,
     "liger.ops.swiglu: up must have the shape of gate [4, 8], got [2, 8]"),
    (lambda: ops.geglu(X, X), lambda: ops.geglu(X, X, approximate=None), LigerValueError,
     "approximate must be one of 'tanh', 'none', got None"),
    (lambda: ops.softmax(X), lambda: ops.softmax(X[:0]), LigerValueError,
     "liger.ops.softmax: x must be [..., H] with at least one row, got shape [0, 8]"),
    (lambda: ops.rope(Q, K, C, C), lambda: ops.rope(Q, K, C[:, :2], C[:, :2]), LigerValueError,
     "liger.ops.rope: cos must be [1 or 1, 3, 8] (B, T, D of q), got [1, 2, 8]"),
    (lambda: ops.rope(Q, K, C, C), lambda: ops.rope(Q, K[:, :, :2], C, C), LigerValueError,
     "liger.ops.rope: q and k must be [B, Hq, T, D] and [B, Hk, T, D], got [1, 4, 3, 8] and "
     "[1, 2, 2, 8]"),
    (lambda: ops.cross_entropy(LOGITS, T), lambda: ops.cross_entropy(LOGITS, T[:3]),
     LigerValueError,
     "liger.ops.cross_entropy: target must have shape [4] (one class per row), got [3]"),
    (lambda: ops.cross_entropy(LOGITS, T, ignore_index=1),
     lambda: ops.cross_entropy(LOGITS, T, ignore_index=True), LigerTypeError,
     "ignore_index must be an int, got True"),
    (lambda: ops.cross_entropy(LOGITS, T.int(), ignore_index=2 ** 31 - 1),
     lambda: ops.cross_entropy(LOGITS, T.int(), ignore_index=2 ** 31), LigerValueError,
     "ignore_index (of i32 labels) must be in [-2147483648, 2147483647], got 2147483648"),
    (lambda: ops.cross_entropy(LOGITS, T, ignore_index=2 ** 32),
     lambda: ops.cross_entropy(LOGITS, T.int(), ignore_index=2 ** 32), LigerValueError,
     "ignore_index (of i32 labels) must be in [-2147483648, 2147483647], got 4294967296"),
    (lambda: ops.jsd(LOGITS.log_softmax(-1), LOGITS.log_softmax(-1), T.int(),
                     ignore_index=-2 ** 31),
     lambda: ops.jsd(LOGITS.log_softmax(-1), LOGITS.log_softmax(-1), T.int(),
                     ignore_index=-2 ** 31 - 1), LigerValueError,
     "ignore_index (of i32 labels) must be in [-2147483648, 2147483647], got -2147483649"),
    (lambda: ops.cross_entropy(LOGITS, T, inplace=True),
     lambda: ops.cross_entropy(NONCONTIGUOUS, T, inplace=True), LigerValueError,
     "liger.ops.cross_entropy(inplace=True) needs contiguous logits (a copy would not be in "
     "place)"),
    (_no_grad(lambda: ops.jsd(LP, LP.clone().requires_grad_())),
     lambda: ops.jsd(LP, LP.clone().requires_grad_()), LigerValueError,
     "liger.ops.jsd: target must not require grad (the teacher gets no gradient here, as in "
     "Liger-Kernel: detach it)"),
    (lambda: ops.fused_linear_jsd(H.clone().requires_grad_(), LW.clone().requires_grad_(),
                                  H, LW),
     lambda: ops.fused_linear_jsd(H, LW, H.clone().requires_grad_(), LW), LigerValueError,
     "liger.ops.fused_linear_jsd: teacher_input and teacher_weight must not require grad (the "
     "teacher gets no gradient here, as in Liger-Kernel: detach them)"),
    (lambda: ops.cross_entropy(LEAF * 1.0, T, inplace=True),
     lambda: ops.cross_entropy(LEAF, T, inplace=True), LigerValueError,
     "liger.ops.cross_entropy(inplace=True) would write the gradient over a leaf that requires "
     "grad (or a view of one), which PyTorch does not write in place: pass logits computed "
     "from it, or inplace=False"),
    (_no_grad(lambda: ops.cross_entropy(torch.randn(4, 16, requires_grad=True), T,
                                        inplace=True)),
     lambda: ops.cross_entropy(LEAF, T, inplace=True), LigerValueError,
     "liger.ops.cross_entropy(inplace=True) would write the gradient over a leaf that requires "
     "grad (or a view of one), which PyTorch does not write in place: pass logits computed "
     "from it, or inplace=False"),
    (lambda: ops.cross_entropy(LEAF.detach().view(2, 2, 16), T.view(2, 2), inplace=True),
     lambda: ops.cross_entropy(LEAF.view(2, 2, 16), T.view(2, 2), inplace=True),
     LigerValueError,
     "liger.ops.cross_entropy(inplace=True) would write the gradient over a leaf that requires "
     "grad (or a view of one), which PyTorch does not write in place: pass logits computed "
     "from it, or inplace=False"),
    (lambda: ops.cross_entropy(LOGITS, T, inplace=True),
     lambda: ops.cross_entropy(LOGITS, T, inplace=1), LigerTypeError,
     "inplace must be a bool, got 1"),
    (lambda: ops.cross_entropy(LOGITS, T, return_z_loss=True),
     lambda: ops.cross_entropy(LOGITS, T, return_z_loss=1), LigerTypeError,
     "return_z_loss must be a bool, got 1"),
    (lambda: ops.cross_entropy(LOGITS, T), lambda: ops.cross_entropy(LOGITS, None),
     LigerTypeError, "liger.ops.cross_entropy: target must be a torch.Tensor, got NoneType"),
    (lambda: ops.fused_linear_cross_entropy(H, LW, T),
     lambda: ops.fused_linear_cross_entropy(H, LW, T[:3]), LigerValueError,
     "liger.ops.fused_linear_cross_entropy: target must have shape [4] (one class per row), "
     "got [3]"),
    (lambda: ops.fused_linear_cross_entropy(H, LW, T, memory_budget=2 ** 20),
     lambda: ops.fused_linear_cross_entropy(H, LW, T, memory_budget=float(2 ** 20)),
     LigerTypeError, "memory_budget must be an int, got 1048576.0"),
    (_lora(), _lora(x=LX[:0]), LigerValueError,
     "liger.ops.lora_linear: x must be [..., H] with at least one row, got shape [0, 3, 64]"),
    (_lora(scale=2.0), _lora(scale=True), LigerTypeError, "scale must be a number, got True"),
    (_mlp(), _mlp(x=MX[:0]), LigerValueError,
     "liger.ops.gated_mlp: x must be [..., H] with at least one row, got shape [0, 3, 64]"),
    (_mlp(activation="geglu"), _mlp(activation="geglu", approximate=None), LigerValueError,
     "approximate must be one of 'tanh', 'none', got None"),
]


def _reaches_the_kernels(call):
    with pytest.raises(AssertionError, match="^an invalid call reached the kernels$"):
        call()


@pytest.mark.parametrize("valid,call,kind,message", NEAR_MISSES,
                         ids=[c[3][:60] for c in NEAR_MISSES])
def test_a_configuration_seen_still_refuses_its_near_misses(valid, call, kind, message):
    _reaches_the_kernels(valid)
    with pytest.raises(kind, match="^%s$" % re.escape(message)):
        call()


def test_a_configuration_seen_is_checked_once(monkeypatch):
    """The checks of a configuration run at its first call; the next calls
    (any token count) cost a dictionary lookup and the per-call shape
    comparisons."""
    calls = []
    checked = ops._rms_norm_checked

    def counting(*args):
        calls.append(args[2])
        return checked(*args)
    monkeypatch.setattr(ops, "_rms_norm_checked", counting)
    for rows, eps in ((4, 1e-6), (7, 1e-6), (2, 1e-6), (4, 1e-5), (9, 1e-5)):
        _reaches_the_kernels(lambda: ops.rms_norm(torch.randn(rows, 8), W, eps=eps))
    assert calls == [1e-6, 1e-5]
    ops.clear_caches()
    _reaches_the_kernels(lambda: ops.rms_norm(X, W, eps=1e-5))
    assert calls == [1e-6, 1e-5, 1e-5]


def test_the_fused_loss_forms_the_gradients_autograd_will_ask_for(monkeypatch):
    """dx, dW and dbias only for tensors that require a gradient, and none
    under torch.no_grad (an lm_head Parameter in evaluation)."""
    from liger import operators
    wanted = []

    def recording(*args):
        wanted.append(args[-3:])
        return (torch.zeros(()),) + (torch.empty(0),) * 4
    monkeypatch.setattr(operators, "fused_linear_cross_entropy", recording)
    h, w = H.clone().requires_grad_(True), torch.nn.Parameter(LW.clone())
    b = torch.nn.Parameter(torch.zeros(LW.shape[0], dtype=LW.dtype))
    ops.fused_linear_cross_entropy(h, w, T)
    ops.fused_linear_cross_entropy(h, w.detach(), T)
    ops.fused_linear_cross_entropy(H, w, T)
    ops.fused_linear_cross_entropy(H, w.detach(), T, bias=b)
    ops.fused_linear_cross_entropy(h, w, T, bias=b.detach())
    with torch.no_grad():
        ops.fused_linear_cross_entropy(h, w, T, bias=b)
    assert wanted == [(True, True, False), (True, False, False), (False, True, False),
                      (False, False, True), (True, True, False), (False, False, False)]


def test_errors_are_liger_errors_and_python_errors():
    assert issubclass(LigerValueError, LigerError) and issubclass(LigerValueError, ValueError)
    assert issubclass(LigerTypeError, LigerError) and issubclass(LigerTypeError, TypeError)


def test_softcap_none_and_zero_mean_no_softcap():
    """The documented choice: None and 0 are the same spec (no softcap
    attribute in the module); a positive softcap is in it."""
    none = ops.cross_entropy_spec(16, "f32", softcap=None)
    assert ops.cross_entropy_spec(16, "f32", softcap=0) == none
    assert "softcap" not in none.module_text()
    assert "softcap = 3.000000000e+01" in ops.cross_entropy_spec(16, "f32",
                                                                  softcap=30).module_text()


def test_a_spec_text_is_validated_as_a_call_is():
    """What `python -m liger.ops precompile|module` reads goes through the
    same checks: nothing of the text is pasted into the module unchecked."""
    with pytest.raises(LigerValueError, match="^eps must be finite, got nan$"):
        ops.parse_spec("rms_norm:casting=llama,dtype=bf16,eps=nan,hidden=8,offset=0.0,"
                       "weight_dtype=bf16")
    with pytest.raises(LigerValueError, match="^casting must be one of 'llama', 'gemma', "
                                              "'none', got 'gemma rstd'$"):
        ops.parse_spec("rms_norm:casting=gemma rstd,dtype=bf16,eps=1e-6,hidden=8,offset=0.0,"
                       "weight_dtype=bf16")
    with pytest.raises(LigerValueError, match="^malformed op spec 'cross_entropy:vocab=8,"
                                              "dtype=f32,ignore_index=1.5': invalid literal"):
        ops.parse_spec("cross_entropy:vocab=8,dtype=f32,ignore_index=1.5")
    with pytest.raises(LigerValueError, match="^hidden must be in \\[1, 2147483647\\], got 0$"):
        ops.parse_spec("swiglu:dtype=f32,hidden=0")


def test_the_largest_and_smallest_f32_attributes_are_taken():
    spec = ops.rms_norm_spec(8, "f32", eps=1.1754943508222875e-38, offset=-3.4028234663852886e+38)
    assert spec.eps == 1.1754943508222875e-38 and spec.offset == -3.4028234663852886e+38
    assert ops.cross_entropy_spec(8, "f32", label_smoothing=0, lse_square_scale=0.0).softcap == 0


class _Pretending(str):
    """A str whose __str__ and __eq__ say something else."""

    def __str__(self):
        return "gemma rstd : tensor<8xf32>"

    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


def test_a_spec_holds_the_canonical_strings_not_the_callers_objects():
    """A str subclass cannot paste its __str__ into the module, nor pass
    for a choice it is not; a spec of its characters is the clean spec,
    with the clean key."""
    spec = ops.rms_norm_spec(8, _Pretending("f32"), casting=_Pretending("llama"))
    clean = ops.rms_norm_spec(8, "f32", casting="llama")
    assert type(spec.casting) is str and type(spec.dtype) is str
    assert spec == clean and spec.key() == clean.key()
    assert spec.module_text() == clean.module_text()
    with pytest.raises(LigerValueError, match="^casting must be one of 'llama', 'gemma', "
                                              "'none', got 'bogus'$"):
        ops.rms_norm_spec(8, "f32", casting=_Pretending("bogus"))
    with pytest.raises(LigerTypeError, match="^dtype must be bf16 or f16 or f32, got "):
        ops.rms_norm_spec(8, _Pretending("f64"))


def test_cpu_tensors_without_the_reference_are_refused(monkeypatch):
    monkeypatch.delenv("LIGER_OPS_CPU_REFERENCE")
    with pytest.raises(LigerError, match=r"^liger.ops runs on CUDA tensors, got tensors on cpu "
                                         r"\(LIGER_OPS_CPU_REFERENCE=1 runs CPU tensors "
                                         r"through the slow reference lowering, for tests\)$"):
        ops.softmax(X)

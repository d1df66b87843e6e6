"""Every liger op on the CPU reference path against a float64 reference.

Each test builds a one-op function, runs it through liger-cpu-runner
(liger-lower-to-linalg, bufferization, LLVM JIT) on fresh random inputs and
compares every result with refs.py (float64) at the tolerance of its dtype:
1e-5 for f32, 2e-3 for f16 and 1e-2 for bf16, relative to the largest
reference magnitude; NaN and infinities pass only where the reference has
them. Functions are written with dynamic token dimensions, so the dynamic
code path of the lowering is the one checked (the runner checks the shapes
first). Gradients are checked against finite differences of the forward
reference.
"""

import numpy as np
import pytest

import refs
from liger.reference import assert_close, round_to, run_cpu, to_bf16

DTYPES = ["f32", "bf16"]


def ttype(shape, dt, dynamic=()):
    """tensor type text; dims listed in `dynamic` are written as '?'."""
    dims = ["?" if i in dynamic else str(d) for i, d in enumerate(shape)]
    return "tensor<" + "".join(d + "x" for d in dims) + dt + ">"


def make(rng, shape, dt, scale=1.0, values=None):
    """Random input of `dt`: returns (what the runner takes, its exact float64 values)."""
    v = rng.standard_normal(shape) * scale if values is None else values
    if dt == "bf16":
        b = to_bf16(np.asarray(v, dtype=np.float32))
        return b, b.to_f32().astype(np.float64)
    a = np.asarray(v).astype({"f32": np.float32, "f16": np.float16}[dt])
    return a, a.astype(np.float64)


def run(mlir, inputs):
    return run_cpu(mlir, "f", inputs)


# ----------------------------------------------------------------------------
# Norms
# ----------------------------------------------------------------------------

NORM_SHAPES = [(1, 1000), (3, 64), (2, 3, 40), (7, 4096)]


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
@pytest.mark.parametrize("casting,offset", [("llama", 0.0), ("gemma", 1.0), ("none", 0.0)])
@pytest.mark.parametrize("dt,wdt", [("f32", "f32"), ("bf16", "bf16"), ("bf16", "f32"), ("f16", "f16")])
def test_rms_norm(rng, shape, casting, offset, dt, wdt):
    hidden = shape[-1]
    X, W = ttype(shape, dt, dynamic=(0,)), ttype((hidden,), wdt)
    R = ttype(shape[:-1], "f32", dynamic=(0,))
    mlir = f"""func.func @f(%x: {X}, %w: {W}) -> ({X}, {R}) {{
  %y, %r = liger.rms_norm %x, %w eps = 1.0e-5 offset = {offset} casting = {casting} rstd : {X}, {W}
  return %y, %r : {X}, {R}
}}"""
    x, x64 = make(rng, shape, dt)
    w, w64 = make(rng, (hidden,), wdt)
    y, rstd = run(mlir, [x, w])
    ey, er = refs.rms_norm(x64, w64, 1e-5, offset, casting, dt, wdt)
    assert_close(y, ey, dt, "y")
    assert_close(rstd, er, "f32", "rstd")


@pytest.mark.parametrize("shape", [(1, 1000), (3, 64), (2, 2, 24)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_add_rms_norm(rng, shape, dt):
    hidden = shape[-1]
    X, W = ttype(shape, dt, dynamic=(0,)), ttype((hidden,), dt)
    R = ttype(shape[:-1], "f32", dynamic=(0,))
    mlir = f"""func.func @f(%x: {X}, %res: {X}, %w: {W}) -> ({X}, {X}, {R}) {{
  %y, %s, %r = liger.add_rms_norm %x, %res, %w eps = 1.0e-6 rstd : {X}, {W}
  return %y, %s, %r : {X}, {X}, {R}
}}"""
    x, x64 = make(rng, shape, dt)
    res, res64 = make(rng, shape, dt)
    w, w64 = make(rng, (hidden,), dt)
    y, s, rstd = run(mlir, [x, res, w])
    es = round_to(x64 + res64, dt)
    ey, er = refs.rms_norm(es, w64, 1e-6, 0.0, "llama", dt, dt)
    assert_close(s, es, dt, "sum")
    assert_close(y, ey, dt, "y")
    assert_close(rstd, er, "f32", "rstd")


@pytest.mark.parametrize("shape", [(1, 1000), (3, 33), (2, 3, 16)], ids=str)
@pytest.mark.parametrize("dt", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("bias,stats", [(True, True), (False, True), (True, False)],
                         ids=["bias_stats", "stats", "bias"])
def test_layer_norm(rng, shape, dt, bias, stats):
    hidden = shape[-1]
    X, W = ttype(shape, dt, dynamic=(0,)), ttype((hidden,), dt)
    R = ttype(shape[:-1], "f32", dynamic=(0,))
    operands, types = "%x, %w", f"{X}, {W}"
    if bias:
        operands, types = operands + ", %b", types + f", {W}"
    args = f"%x: {X}, %w: {W}" + (f", %b: {W}" if bias else "")
    results, rtypes = ("%y, %m, %r", f"{X}, {R}, {R}") if stats else ("%y", X)
    mlir = f"""func.func @f({args}) -> ({rtypes}) {{
  {results} = liger.layer_norm {operands} eps = 1.0e-5{" stats" if stats else ""} : {types}
  return {results} : {rtypes}
}}"""
    # Rows of mean 3 (LayerNorm subtracts it).
    x, x64 = make(rng, shape, dt, values=rng.standard_normal(shape) * 3.0 + 3.0)
    w, w64 = make(rng, (hidden,), dt)
    inputs = [x, w]
    b64 = None
    if bias:
        b, b64 = make(rng, (hidden,), dt)
        inputs.append(b)
    out = run(mlir, inputs)
    assert len(out) == (3 if stats else 1)
    assert_close(out[0], refs.layer_norm(x64, w64, b64, 1e-5), dt, "y")
    if stats:
        mean, rstd = refs.layer_norm_stats(x64, 1e-5)
        assert out[1].shape == shape[:-1] and out[2].shape == shape[:-1]
        assert_close(out[1], mean, "f32", "mean")
        assert_close(out[2], rstd, "f32", "rstd")


@pytest.mark.parametrize("shape", [(3, 16), (1, 40), (2, 2, 8)], ids=str)
@pytest.mark.parametrize("casting,offset,dt", [("llama", 0.0, "f32"), ("gemma", 1.0, "f32"),
                                               ("none", 0.0, "f32"), ("gemma", 1.0, "bf16"),
                                               ("llama", 0.0, "bf16")])
def test_rms_norm_grad(rng, shape, casting, offset, dt):
    hidden = shape[-1]
    X, W = ttype(shape, dt, dynamic=(0,)), ttype((hidden,), dt)
    R = ttype(shape[:-1], "f32", dynamic=(0,))
    mlir = f"""func.func @f(%dy: {X}, %x: {X}, %w: {W}, %r: {R}) -> ({X}, {W}) {{
  %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %r offset = {offset} casting = {casting} : {X}, {W}, {R}
  return %dx, %dw : {X}, {W}
}}"""
    dy, dy64 = make(rng, shape, dt)
    x, x64 = make(rng, shape, dt)
    w, w64 = make(rng, (hidden,), dt)
    rstd = refs.rms_norm(x64, w64, 1e-6)[1].astype(np.float32)
    dx, dw = run(mlir, [dy, x, w, rstd])
    # The gradient of sum(dy * y) where y is the f32 (gemma) forward.
    fwd = lambda xx, ww: float(np.sum(dy64 * refs.rms_norm(xx, ww, 1e-6, offset, "gemma")[0]))
    assert_close(dx, refs.numeric_grad(lambda xx: fwd(xx, w64), x64.copy()), dt, "dx", atol=1e-7)
    want_dw = refs.numeric_grad(lambda ww: fwd(x64, ww), w64.copy())
    if casting == "llama" and dt == "bf16":
        # Llama's casting multiplies the weight by x̂ rounded to bf16, so dw
        # sums dy · bf16(x̂): against the f32 forward's x̂ a sum over rows
        # that cancels was 1.1% off (LIGER_TEST_SEED=334873902).
        xhat = to_bf16((x64 * rstd[..., None]).astype(np.float32)).to_f32()
        want_dw = np.sum((dy64 * xhat).reshape(-1, hidden), axis=0)
    assert_close(dw, want_dw, dt, "dw", atol=1e-7)


@pytest.mark.parametrize("shape", [(3, 16), (1, 40), (2, 2, 8), (5, 1000)], ids=str)
@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_layer_norm_grad(rng, shape, dt):
    hidden = shape[-1]
    X, W = ttype(shape, dt, dynamic=(0,)), ttype((hidden,), dt)
    R = ttype(shape[:-1], "f32", dynamic=(0,))
    mlir = f"""func.func @f(%dy: {X}, %x: {X}, %w: {W}, %m: {R}, %r: {R}) -> ({X}, {W}, {W}) {{
  %dx, %dw, %db = liger.layer_norm_grad %dy, %x, %w, %m, %r : {X}, {W}, {R}
  return %dx, %dw, %db : {X}, {W}, {W}
}}"""
    dy, dy64 = make(rng, shape, dt)
    x, x64 = make(rng, shape, dt, values=rng.standard_normal(shape) * 3.0 + 3.0)
    w, w64 = make(rng, (hidden,), dt)
    b64 = np.zeros(hidden)
    # The statistics as the forward returns them: f32.
    mean, rstd = (s.astype(np.float32) for s in refs.layer_norm_stats(x64, 1e-5))
    dx, dw, db = run(mlir, [dy, x, w, mean, rstd])
    # The gradients of sum(dy * layer_norm(x, w, b)), by finite differences.
    fwd = lambda xx, ww, bb: float(np.sum(dy64 * refs.layer_norm(xx, ww, bb, 1e-5)))
    assert_close(dx, refs.numeric_grad(lambda xx: fwd(xx, w64, b64), x64.copy()), dt, "dx",
                 atol=1e-7)
    assert_close(dw, refs.numeric_grad(lambda ww: fwd(x64, ww, b64), w64.copy()), dt, "dw",
                 atol=1e-7)
    assert_close(db, refs.numeric_grad(lambda bb: fwd(x64, w64, bb), b64.copy()), dt, "db",
                 atol=1e-7)


# ----------------------------------------------------------------------------
# RoPE
# ----------------------------------------------------------------------------

ROPE_SHAPES = [  # batch, q heads, kv heads, seq, head dim, batch of the tables
    (1, 4, 2, 3, 16, 1), (2, 2, 1, 1, 8, 2), (1, 3, 3, 7, 128, 1), (3, 2, 2, 5, 4, 3)]


def rope_case(rng, shape, dt):
    b, hq, hkv, t, d, cb = shape
    Q = ttype((b, hq, t, d), dt, dynamic=(0, 2))
    K = ttype((b, hkv, t, d), dt, dynamic=(0, 2))
    # A table batch other than 1 is written dynamic: the lowering then
    # decides between broadcast and per-batch tables at run time.
    C = ttype((cb, t, d), dt, dynamic=(1,) if cb == 1 else (0, 1))
    q, q64 = make(rng, (b, hq, t, d), dt)
    k, k64 = make(rng, (b, hkv, t, d), dt)
    # Independent (not half-duplicated) tables, so that a wrong partner
    # index is caught.
    c, c64 = make(rng, (cb, t, d), dt)
    s, s64 = make(rng, (cb, t, d), dt)
    return Q, K, C, [q, k, c, s], (q64, k64, c64, s64)


@pytest.mark.parametrize("shape", ROPE_SHAPES, ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", ["rope", "rope_grad"])
def test_rope(rng, shape, dt, op):
    Q, K, C, inputs, (q64, k64, c64, s64) = rope_case(rng, shape, dt)
    mlir = f"""func.func @f(%q: {Q}, %k: {K}, %c: {C}, %s: {C}) -> ({Q}, {K}) {{
  %qo, %ko = liger.{op} %q, %k, %c, %s : {Q}, {K}, {C}
  return %qo, %ko : {Q}, {K}
}}"""
    qo, ko = run(mlir, inputs)
    ref = refs.rope if op == "rope" else refs.rope_grad
    assert_close(qo, ref(q64, c64, s64), dt, "q")
    assert_close(ko, ref(k64, c64, s64), dt, "k")


def test_rope_grad_is_the_adjoint_of_rope(rng):
    """<rope(q), g> = <q, rope_grad(g)> on the CPU path, for random tables."""
    shape = (2, 3, 3, 4, 8, 1)
    Q, K, C, inputs, (q64, k64, c64, s64) = rope_case(rng, shape, "f32")
    g, g64 = make(rng, q64.shape, "f32")
    fwd = f"""func.func @f(%q: {Q}, %k: {K}, %c: {C}, %s: {C}) -> ({Q}, {K}) {{
  %qo, %ko = liger.rope %q, %k, %c, %s : {Q}, {K}, {C}
  return %qo, %ko : {Q}, {K}
}}"""
    bwd = fwd.replace("liger.rope ", "liger.rope_grad ")
    (rq, _) = run(fwd, inputs)
    (gq, _) = run(bwd, [g, inputs[1], inputs[2], inputs[3]])
    lhs = float(np.sum(rq.astype(np.float64) * g64))
    rhs = float(np.sum(q64 * gq.astype(np.float64)))
    assert abs(lhs - rhs) <= 1e-5 * max(abs(lhs), 1.0)


# ----------------------------------------------------------------------------
# Projections
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("xshape,n,bias", [((1, 1000), 24, True), ((3, 64), 17, False),
                                           ((2, 3, 40), 8, True)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_linear(rng, xshape, n, bias, dt):
    k = xshape[-1]
    X, W, B = ttype(xshape, dt, dynamic=(0,)), ttype((n, k), dt), ttype((n,), dt)
    Y = ttype(xshape[:-1] + (n,), dt, dynamic=(0,))
    operands, types = "%x, %w" + (", %b" if bias else ""), f"{X}, {W}" + (f", {B}" if bias else "")
    args = f"%x: {X}, %w: {W}" + (f", %b: {B}" if bias else "")
    mlir = f"""func.func @f({args}) -> {Y} {{
  %y = liger.linear {operands} : {types}
  return %y : {Y}
}}"""
    x, x64 = make(rng, xshape, dt)
    w, w64 = make(rng, (n, k), dt, scale=k ** -0.5)
    inputs, b64 = [x, w], None
    if bias:
        b, b64 = make(rng, (n,), dt)
        inputs.append(b)
    (y,) = run(mlir, inputs)
    assert_close(y, refs.linear(x64, w64, b64), dt, "y")


@pytest.mark.parametrize("tokens,k,n,rank,scale,bias", [(3, 64, 17, 4, 2.0, True),
                                                        (1, 1000, 24, 8, 0.5, False)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_lora_linear(rng, tokens, k, n, rank, scale, bias, dt):
    X, W = ttype((tokens, k), dt, dynamic=(0,)), ttype((n, k), dt)
    A, Bm, Bias = ttype((rank, k), dt), ttype((n, rank), dt), ttype((n,), dt)
    Y = ttype((tokens, n), dt, dynamic=(0,))
    args = f"%x: {X}, %w: {W}, %a: {A}, %bm: {Bm}" + (f", %b: {Bias}" if bias else "")
    operands = "%x, %w, %a, %bm" + (", %b" if bias else "")
    types = f"{X}, {W}, {A}, {Bm}" + (f", {Bias}" if bias else "")
    mlir = f"""func.func @f({args}) -> {Y} {{
  %y = liger.lora_linear {operands} scale = {scale} : {types}
  return %y : {Y}
}}"""
    x, x64 = make(rng, (tokens, k), dt)
    w, w64 = make(rng, (n, k), dt, scale=k ** -0.5)
    a, a64 = make(rng, (rank, k), dt, scale=k ** -0.5)
    bm, bm64 = make(rng, (n, rank), dt)
    inputs, b64 = [x, w, a, bm], None
    if bias:
        b, b64 = make(rng, (n,), dt)
        inputs.append(b)
    (y,) = run(mlir, inputs)
    assert_close(y, refs.lora_linear(x64, w64, a64, bm64, scale, b64, dt), dt, "y")


@pytest.mark.parametrize("yshape,k", [((1, 24), 1000), ((3, 17), 64), ((2, 3, 8), 40)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_linear_grad_input(rng, yshape, k, dt):
    """dx = dy · W against float64, any leading dims."""
    n = yshape[-1]
    DY, W = ttype(yshape, dt, dynamic=(0,)), ttype((n, k), dt)
    DX = ttype(yshape[:-1] + (k,), dt, dynamic=(0,))
    mlir = f"""func.func @f(%dy: {DY}, %w: {W}) -> {DX} {{
  %dx = liger.linear_grad_input %dy, %w : {DY}, {W}
  return %dx : {DX}
}}"""
    dy, dy64 = make(rng, yshape, dt)
    w, w64 = make(rng, (n, k), dt, scale=n ** -0.5)
    (dx,) = run(mlir, [dy, w])
    assert_close(dx, dy64 @ w64, dt, "dx")


@pytest.mark.parametrize("tokens,n,k", [(1, 24, 1000), (37, 17, 64), (5, 8, 40)], ids=str)
@pytest.mark.parametrize("accumulate", [False, "f32", "own"],
                         ids=["fresh", "accumulate", "accumulate-own-dtype"])
@pytest.mark.parametrize("dt", DTYPES)
def test_linear_grad_weight(rng, tokens, n, k, accumulate, dt):
    """dW = dyᵀ · x against float64; with a buffer (f32, or of the input's
    dtype), buffer + dyᵀ · x in f32, rounded once to the buffer's dtype."""
    DY, X = ttype((tokens, n), dt, dynamic=(0,)), ttype((tokens, k), dt, dynamic=(0,))
    acc_dt = "f32" if accumulate == "f32" else dt
    ACC = ttype((n, k), acc_dt)
    DW = ACC if accumulate else ttype((n, k), dt)
    args = f"%dy: {DY}, %x: {X}" + (f", %acc: {ACC}" if accumulate else "")
    tail = (" accumulate %acc", f", {ACC}") if accumulate else ("", "")
    mlir = f"""func.func @f({args}) -> {DW} {{
  %dw = liger.linear_grad_weight %dy, %x{tail[0]} : {DY}, {X}{tail[1]}
  return %dw : {DW}
}}"""
    dy, dy64 = make(rng, (tokens, n), dt)
    x, x64 = make(rng, (tokens, k), dt, scale=tokens ** -0.5)
    inputs, ref = [dy, x], dy64.T @ x64
    if accumulate:
        acc, acc64 = make(rng, (n, k), acc_dt)
        inputs.append(acc)
        ref = ref + acc64
    (dw,) = run(mlir, inputs)
    if accumulate == "f32":
        assert dw.dtype == np.float32, "an accumulated dW stays f32"
    assert_close(dw, ref, acc_dt if accumulate else dt, "dw")


ATTENTION_SHAPES = [  # batch, q heads, kv heads, q len, kv len, head dim, v head dim, causal
    (1, 4, 2, 5, 5, 8, 8, True), (2, 2, 2, 3, 7, 16, 8, True), (1, 2, 1, 1, 6, 8, 8, False),
    (1, 6, 3, 4, 4, 32, 32, False)]
# Causal with S < T: query rows 0-2 see no key (NaN output, lse = -inf).
MASKED_ROWS_SHAPE = (1, 2, 1, 6, 3, 8, 8, True)


def attention_types(shape, dt):
    """Q, K, V, O and the lse's type of an attention shape, with dynamic batch
    and sequence dimensions."""
    b, hq, hkv, t, s, d, dv, _ = shape
    return (ttype((b, hq, t, d), dt, dynamic=(0, 2)), ttype((b, hkv, s, d), dt, dynamic=(0, 2)),
            ttype((b, hkv, s, dv), dt, dynamic=(0, 2)), ttype((b, hq, t, dv), dt, dynamic=(0, 2)),
            ttype((b, hq, t), "f32", dynamic=(0, 2)))


def attention_attrs(causal, scale):
    return (" causal" if causal else "") + (f" scale = {scale}" if scale else "")


def attention_inputs(rng, shape, dt):
    """Random (grad, q, k, v) of an attention shape: (what the runner takes,
    their exact float64 values)."""
    b, hq, hkv, t, s, d, dv, _ = shape
    pairs = [make(rng, dims, dt) for dims in
             ((b, hq, t, dv), (b, hq, t, d), (b, hkv, s, d), (b, hkv, s, dv))]
    return [p[0] for p in pairs], [p[1] for p in pairs]


@pytest.mark.parametrize("shape", ATTENTION_SHAPES, ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("scale", [None, 0.25])
def test_attention(rng, shape, dt, scale):
    causal = shape[-1]
    Q, K, V, O, _ = attention_types(shape, dt)
    mlir = f"""func.func @f(%q: {Q}, %k: {K}, %v: {V}) -> {O} {{
  %o = liger.attention %q, %k, %v{attention_attrs(causal, scale)} : {Q}, {K}, {V}
  return %o : {O}
}}"""
    (_, q, k, v), (_, q64, k64, v64) = attention_inputs(rng, shape, dt)
    (o,) = run(mlir, [q, k, v])
    assert_close(o, refs.attention(q64, k64, v64, causal, scale), dt, "out")


@pytest.mark.parametrize("shape", ATTENTION_SHAPES + [MASKED_ROWS_SHAPE], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("scale", [None, 0.25])
def test_attention_lse(rng, shape, dt, scale):
    """return_lse: the output as without it, and each query row's
    log-sum-exp in f32 against a float64 logsumexp of the scaled, masked
    scores (-inf exactly where every key is masked)."""
    causal = shape[-1]
    Q, K, V, O, L = attention_types(shape, dt)
    mlir = f"""func.func @f(%q: {Q}, %k: {K}, %v: {V}) -> ({O}, {L}) {{
  %o, %lse = liger.attention %q, %k, %v{attention_attrs(causal, scale)} return_lse : {Q}, {K}, {V}
  return %o, %lse : {O}, {L}
}}"""
    (_, q, k, v), (_, q64, k64, v64) = attention_inputs(rng, shape, dt)
    o, lse = run(mlir, [q, k, v])
    assert lse.dtype == np.float32, "lse is f32"
    assert_close(o, refs.attention(q64, k64, v64, causal, scale), dt, "out")
    want = refs.attention_lse(q64, k64, causal, scale)
    assert np.array_equal(np.isneginf(lse), np.isneginf(want)), "lse: -inf rows differ"
    assert_close(lse, want, "f32", "lse")


@pytest.mark.parametrize("shape", ATTENTION_SHAPES, ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("scale", [None, 0.25])
def test_attention_grad(rng, shape, dt, scale):
    """liger.attention_grad's dq, dk and dv against float64 central
    differences of the attention's output dotted with the incoming
    gradient (refs.attention), at the operands' rounded values: grouped
    key/value heads, causal masks with S > T, a one-token query.

    With the forward's saved out and lse (liger.attention ... return_lse in
    the same function): in f32 against the same differences; in bf16, where
    rowsum(grad * out) reads the rounded out and dp - rowsum cancels (up to
    a few percent of the largest gradient on these sizes), against the saved
    formula in float64 on the out and lse the forward returned."""
    causal = shape[-1]
    inputs, exact = attention_inputs(rng, shape, dt)
    go64, operands = exact[0], exact[1:]
    got, saved, formula = run_attention_grads(shape, dt, scale, inputs, exact)
    for i, name in enumerate(("dq", "dk", "dv")):
        def loss(x, i=i):
            args = list(operands)
            args[i] = x
            return float((refs.attention(*args, causal, scale) * go64).sum())
        want = refs.numeric_grad(loss, operands[i].copy())
        assert_close(got[i], want, dt, name)
        assert_close(saved[i], want if dt == "f32" else formula[i], dt, name + " (saved)")


@pytest.mark.parametrize("dt", DTYPES)
def test_attention_grad_masked_rows(rng, dt):
    """Query rows that see no key (causal, S < T): their out is NaN and
    their lse -inf, so with or without the saved values their dq is NaN, and
    so are all of dk and dv (every key's sums take those rows), in the same
    places. The other rows' dq match float64 central differences of the
    loss over the rows that have a value (the saved form in bf16: the saved
    formula, as in test_attention_grad)."""
    t, s, causal = MASKED_ROWS_SHAPE[3], MASKED_ROWS_SHAPE[4], MASKED_ROWS_SHAPE[-1]
    inputs, exact = attention_inputs(rng, MASKED_ROWS_SHAPE, dt)
    go64, q64, k64, v64 = exact
    got, saved, formula = run_attention_grads(MASKED_ROWS_SHAPE, dt, None, inputs, exact)
    masked = np.arange(t) < t - s
    for name, a, c in zip(("dq", "dk", "dv"), got, saved):
        nan = np.isnan(np.asarray(a, np.float64))
        assert np.array_equal(nan, np.isnan(np.asarray(c, np.float64))), name + ": NaN places differ"
        if name == "dq":
            assert nan[:, :, masked].all(), "dq: a masked row's gradient is not NaN"
        else:
            assert nan.all(), name + ": expected NaN throughout"

    def loss(x):
        with np.errstate(invalid="ignore"):
            return float(np.nansum(refs.attention(x, k64, v64, causal) * go64))
    want = refs.numeric_grad(loss, q64.copy())
    assert_close(got[0][:, :, ~masked], want[:, :, ~masked], dt, "dq")
    want = want if dt == "f32" else formula[0]
    assert_close(saved[0][:, :, ~masked], want[:, :, ~masked], dt, "dq (saved)")


def run_attention_grads(shape, dt, scale, inputs, exact):
    """Runs liger.attention with return_lse, then liger.attention_grad
    without and with saved(out, lse), on (grad, q, k, v): returns the two
    (dq, dk, dv), and the saved formula (refs.attention_grad_saved) in
    float64 on the exact operands and the out and lse the forward returned."""
    causal = shape[-1]
    Q, K, V, O, L = attention_types(shape, dt)
    attrs = attention_attrs(causal, scale)
    mlir = f"""func.func @f(%do: {O}, %q: {Q}, %k: {K}, %v: {V}) -> ({Q}, {K}, {V}, {Q}, {K}, {V}, {O}, {L}) {{
  %o, %lse = liger.attention %q, %k, %v{attrs} return_lse : {Q}, {K}, {V}
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v{attrs} : {O}, {Q}, {K}, {V}
  %sq, %sk, %sv = liger.attention_grad %do, %q, %k, %v saved(%o, %lse : {O}, {L}){attrs} : {O}, {Q}, {K}, {V}
  return %dq, %dk, %dv, %sq, %sk, %sv, %o, %lse : {Q}, {K}, {V}, {Q}, {K}, {V}, {O}, {L}
}}"""
    results = run(mlir, inputs)
    o, lse = (np.asarray(r, np.float64) for r in results[6:])
    formula = refs.attention_grad_saved(*exact, o, lse, causal, scale)
    return results[:3], results[3:6], formula


# ----------------------------------------------------------------------------
# Elementwise
# ----------------------------------------------------------------------------

UNARY = {
    "silu": ("liger.silu %a", refs.silu),
    "gelu": ("liger.gelu %a", refs.gelu),
    "gelu_tanh": ("liger.gelu %a approximate = tanh", lambda x: refs.gelu(x, "tanh")),
    "softmax": ("liger.softmax %a", refs.softmax),
}
BINARY = {
    "swiglu": ("liger.swiglu %a, %b", lambda g, u: refs.silu(g) * u),
    "geglu": ("liger.geglu %a, %b", lambda g, u: refs.gelu(g) * u),
    "geglu_tanh": ("liger.geglu %a, %b approximate = tanh", lambda g, u: refs.gelu(g, "tanh") * u),
    "add": ("liger.add %a, %b", np.add),
    "mul": ("liger.mul %a, %b", np.multiply),
}


@pytest.mark.parametrize("shape", [(1, 1000), (3, 7), (2, 3, 5)], ids=str)
@pytest.mark.parametrize("dt", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("name", sorted(UNARY) + sorted(BINARY))
def test_elementwise(rng, shape, dt, name):
    T = ttype(shape, dt, dynamic=(0,))
    unary = name in UNARY
    text, ref = UNARY[name] if unary else BINARY[name]
    args = f"%a: {T}" if unary else f"%a: {T}, %b: {T}"
    mlir = f"""func.func @f({args}) -> {T} {{
  %y = {text} : {T}
  return %y : {T}
}}"""
    a, a64 = make(rng, shape, dt, scale=3.0)
    if unary:
        (y,) = run(mlir, [a])
        expected = ref(a64)
    else:
        b, b64 = make(rng, shape, dt, scale=3.0)
        (y,) = run(mlir, [a, b])
        expected = ref(a64, b64)
    assert_close(y, expected, dt, name)


@pytest.mark.parametrize("shape", [(3, 7), (1, 40), (2, 2, 5)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_swiglu_grad(rng, shape, dt):
    T = ttype(shape, dt, dynamic=(0,))
    mlir = f"""func.func @f(%dy: {T}, %g: {T}, %u: {T}) -> ({T}, {T}) {{
  %dg, %du = liger.swiglu_grad %dy, %g, %u : {T}
  return %dg, %du : {T}, {T}
}}"""
    dy, dy64 = make(rng, shape, dt)
    g, g64 = make(rng, shape, dt, scale=2.0)
    u, u64 = make(rng, shape, dt)
    dg, du = run(mlir, [dy, g, u])
    fwd = lambda gg, uu: float(np.sum(dy64 * refs.silu(gg) * uu))
    assert_close(dg, refs.numeric_grad(lambda gg: fwd(gg, u64), g64.copy()), dt, "d_gate", atol=1e-7)
    assert_close(du, refs.numeric_grad(lambda uu: fwd(g64, uu), u64.copy()), dt, "d_up", atol=1e-7)


# ----------------------------------------------------------------------------
# Losses
# ----------------------------------------------------------------------------

CE_VARIANTS = {
    "default": {},
    "sum_ignore": {"reduction": "sum", "ignore": True},
    "none": {"reduction": "none", "ignore": True},
    "smoothing": {"label_smoothing": 0.1, "ignore": True},
    "softcap": {"softcap": 30.0, "logit_scale": 40.0},
    "zloss": {"lse_square_scale": 1e-4, "z_loss": True, "ignore": True},
    "weights": {"weight": True, "label_smoothing": 0.2, "ignore": True},
    "everything": {"weight": True, "label_smoothing": 0.05, "softcap": 20.0,
                   "lse_square_scale": 1e-3, "z_loss": True, "ignore": True,
                   "ignore_index": -1, "reduction": "none"},
}


def ce_attrs(v):
    text = ""
    if "ignore_index" in v:
        text += " ignore_index = %d" % v["ignore_index"]
    if v.get("label_smoothing"):
        text += " label_smoothing = %s" % v["label_smoothing"]
    if "reduction" in v:
        text += " reduction = " + v["reduction"]
    if v.get("softcap"):
        text += " softcap = %s" % v["softcap"]
    if v.get("lse_square_scale"):
        text += " lse_square_scale = %s" % v["lse_square_scale"]
    return text


def ce_kwargs(v):
    return dict(ignore_index=v.get("ignore_index", -100),
                label_smoothing=v.get("label_smoothing", 0.0),
                reduction=v.get("reduction", "mean"), softcap=v.get("softcap"),
                lse_square_scale=v.get("lse_square_scale", 0.0))


def ce_targets(rng, n, vocab, v, itype=np.int64):
    t = rng.integers(0, vocab, size=n).astype(itype)
    if v.get("ignore") and n > 1:
        t[rng.choice(n, size=max(1, n // 3), replace=False)] = v.get("ignore_index", -100)
    return t


def loss_type(v, n):
    return "tensor<?xf32>" if v.get("reduction") == "none" else "tensor<f32>"


@pytest.mark.parametrize("n,vocab", [(1, 37), (3, 1000), (8, 128), (2, 32000)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("variant", sorted(CE_VARIANTS))
def test_cross_entropy(rng, n, vocab, dt, variant):
    v = CE_VARIANTS[variant]
    itype = "i32" if variant == "sum_ignore" else "i64"
    L, Tg = ttype((n, vocab), dt, dynamic=(0,)), ttype((n,), itype, dynamic=(0,))
    W = ttype((vocab,), dt)
    Loss = loss_type(v, n)
    weight_arg = f", %cw: {W}" if v.get("weight") else ""
    weight_use = f" weight(%cw : {W})" if v.get("weight") else ""
    results = f"{Loss}, {Loss}" if v.get("z_loss") else Loss
    values = "%l, %z" if v.get("z_loss") else "%l"
    mlir = f"""func.func @f(%x: {L}, %t: {Tg}{weight_arg}) -> ({results}) {{
  {values} = liger.cross_entropy %x, %t{weight_use}{ce_attrs(v)}{" z_loss" if v.get("z_loss") else ""} : {L}, {Tg}
  return {values} : {results}
}}"""
    x, x64 = make(rng, (n, vocab), dt, scale=v.get("logit_scale", 2.0))
    t = ce_targets(rng, n, vocab, v, np.int32 if itype == "i32" else np.int64)
    inputs, w64 = [x, t], None
    if v.get("weight"):
        w, w64 = make(rng, (vocab,), dt, values=rng.uniform(0.5, 2.0, vocab))
        inputs.append(w)
    outs = run(mlir, inputs)
    loss, zl = refs.cross_entropy(x64, t, w64, **ce_kwargs(v))
    # The loss sums over the vocabulary in f32 (logsumexp, and label
    # smoothing's mean log-probability): allow 16 sqrt(vocab) f32 ulps of
    # relative rounding on top of the input's tolerance (a seed at vocab
    # 32000 with smoothing measured 2.7e-5).
    rtol = max(1e-5 if dt == "f32" else 2e-5, 16 * vocab ** 0.5 * 2.0 ** -24)
    assert_close(outs[0], loss, "f32", "loss", rtol=rtol)
    if v.get("z_loss"):
        assert_close(outs[1], zl, "f32", "z_loss")


@pytest.mark.parametrize("n,vocab", [(1, 11), (3, 37), (4, 16)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("variant", sorted(CE_VARIANTS))
def test_cross_entropy_grad(rng, n, vocab, dt, variant):
    v = CE_VARIANTS[variant]
    L, Tg = ttype((n, vocab), dt, dynamic=(0,)), ttype((n,), "i64", dynamic=(0,))
    W = ttype((vocab,), dt)
    G = loss_type(v, n)
    weight_arg = f", %cw: {W}" if v.get("weight") else ""
    weight_use = f" weight(%cw : {W})" if v.get("weight") else ""
    mlir = f"""func.func @f(%x: {L}, %t: {Tg}, %g: {G}{weight_arg}) -> {L} {{
  %d = liger.cross_entropy_grad %x, %t, %g{weight_use}{ce_attrs(v)} : {L}, {Tg}, {G}
  return %d : {L}
}}"""
    x, x64 = make(rng, (n, vocab), dt, scale=v.get("logit_scale", 2.0))
    t = ce_targets(rng, n, vocab, v)
    none = v.get("reduction") == "none"
    g64 = rng.uniform(0.5, 1.5, size=(n,) if none else ())
    inputs, w64 = [x, t, g64.astype(np.float32)], None
    if v.get("weight"):
        w, w64 = make(rng, (vocab,), dt, values=rng.uniform(0.5, 2.0, vocab))
        inputs.append(w)
    (dx,) = run(mlir, inputs)
    g64 = g64.astype(np.float32).astype(np.float64)
    # The z-loss result is part of the loss: d(sum(g * loss)) / dx.
    fwd = lambda xx: float(np.sum(g64 * refs.cross_entropy(xx, t, w64, **ce_kwargs(v))[0]))
    # softmax - onehot is computed in f32: where the softmax saturates
    # (p_target near 1, all gradients tiny) the target's p - 1 keeps only an
    # absolute precision of a few f32 ulps of 1, times the incoming gradient
    # (seen: LIGER_TEST_SEED=4251114356, softcap, one row of 11, max |dx|
    # 3e-6, off by 2.2e-7). Allow 8 such ulps.
    atol = 8 * 2.0 ** -23 * float(np.max(np.abs(g64)))
    assert_close(dx, refs.numeric_grad(fwd, x64.copy()), dt, "dlogits", atol=atol)


def test_cross_entropy_out_of_range_target_gives_nan(rng):
    """A target that is neither ignored nor a class is NaN, never a stray read."""
    L, Tg = "tensor<?x5xf32>", "tensor<?xi64>"
    fwd = f"""func.func @f(%x: {L}, %t: {Tg}) -> tensor<?xf32> {{
  %l = liger.cross_entropy %x, %t reduction = none : {L}, {Tg}
  return %l : tensor<?xf32>
}}"""
    bwd = f"""func.func @f(%x: {L}, %t: {Tg}, %g: tensor<?xf32>) -> {L} {{
  %d = liger.cross_entropy_grad %x, %t, %g reduction = none : {L}, {Tg}, tensor<?xf32>
  return %d : {L}
}}"""
    x = rng.standard_normal((4, 5)).astype(np.float32)
    t = np.array([1, 5, -100, -3], dtype=np.int64)
    (loss,) = run(fwd, [x, t])
    assert np.isfinite(loss[0]) and loss[2] == 0.0
    assert np.isnan(loss[1]) and np.isnan(loss[3])
    (d,) = run(bwd, [x, t, np.ones(4, np.float32)])
    assert np.all(np.isfinite(d[0])) and np.all(d[2] == 0.0)
    assert np.all(np.isnan(d[1])) and np.all(np.isnan(d[3]))


def test_cross_entropy_mean_of_all_ignored_is_nan(rng):
    """As in PyTorch, the mean over zero counted tokens is 0/0."""
    mlir = """func.func @f(%x: tensor<?x7xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x7xf32>, tensor<?xi64>
  return %l : tensor<f32>
}"""
    (loss,) = run(mlir, [rng.standard_normal((3, 7)).astype(np.float32),
                         np.full(3, -100, dtype=np.int64)])
    assert np.isnan(loss)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_cross_entropy_grad_of_all_ignored_is_zero(rng, weighted):
    """The mean's gradient over zero counted tokens is zero (PyTorch's), not
    the 0/0 of its scale; so are an ignored token's under a NaN incoming
    gradient, per token."""
    L, Tg, W = "tensor<?x7xf32>", "tensor<?xi64>", "tensor<7xf32>"
    w_arg, w_use = (", %%w: %s" % W, " weight(%%w : %s)" % W) if weighted else ("", "")
    mean = f"""func.func @f(%x: {L}, %t: {Tg}, %g: tensor<f32>{w_arg}) -> {L} {{
  %d = liger.cross_entropy_grad %x, %t, %g{w_use} lse_square_scale = 1.000000e-04 : {L}, {Tg}, tensor<f32>
  return %d : {L}
}}"""
    x = rng.standard_normal((3, 7)).astype(np.float32)
    w = [rng.uniform(0.5, 2.0, 7).astype(np.float32)] if weighted else []
    (d,) = run(mean, [x, np.full(3, -100, dtype=np.int64), np.float32(1.0)] + w)
    assert np.all(d == 0.0), d
    none = f"""func.func @f(%x: {L}, %t: {Tg}, %g: tensor<?xf32>{w_arg}) -> {L} {{
  %d = liger.cross_entropy_grad %x, %t, %g{w_use} reduction = none : {L}, {Tg}, tensor<?xf32>
  return %d : {L}
}}"""
    t = np.array([2, -100, 6], dtype=np.int64)
    (d,) = run(none, [x, t, np.array([1.0, np.nan, 1.0], np.float32)] + w)
    assert np.all(d[1] == 0.0) and np.all(np.isfinite(d[[0, 2]])), d


FLCE_VARIANTS = {
    "default": {},
    "bias_smoothing_zloss_none": {"bias": True, "label_smoothing": 0.1, "lse_square_scale": 1e-4,
                                  "z_loss": True, "reduction": "none", "ignore": True},
    "softcap_sum": {"softcap": 15.0, "reduction": "sum", "ignore": True},
    "class_weight_smoothing": {"class_weight": True, "label_smoothing": 0.1, "ignore": True},
}


def flce_class_weight(rng, v, vocab):
    """The class-weight parameter, use and values (f32 [V]) of a variant."""
    if not v.get("class_weight"):
        return "", "", [], None
    CW = ttype((vocab,), "f32")
    cw = rng.uniform(0.5, 1.5, size=(vocab,)).astype(np.float32)
    return f", %cw: {CW}", f" class_weight(%cw : {CW})", [cw], cw.astype(np.float64)


@pytest.mark.parametrize("n,hidden,vocab", [(1, 64, 37), (3, 100, 1000), (5, 32, 128)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("variant", sorted(FLCE_VARIANTS))
def test_fused_linear_cross_entropy(rng, n, hidden, vocab, dt, variant):
    v = FLCE_VARIANTS[variant]
    H, W = ttype((n, hidden), dt, dynamic=(0,)), ttype((vocab, hidden), dt)
    Tg, B = ttype((n,), "i64", dynamic=(0,)), ttype((vocab,), dt)
    Loss = loss_type(v, n)
    results = f"{Loss}, {Loss}" if v.get("z_loss") else Loss
    values = "%l, %z" if v.get("z_loss") else "%l"
    bias_arg = f", %b: {B}" if v.get("bias") else ""
    bias_use = f" bias(%b : {B})" if v.get("bias") else ""
    cw_arg, cw_use, cw_in, cw64 = flce_class_weight(rng, v, vocab)
    mlir = f"""func.func @f(%h: {H}, %w: {W}, %t: {Tg}{bias_arg}{cw_arg}) -> ({results}) {{
  {values} = liger.fused_linear_cross_entropy %h, %w, %t{bias_use}{cw_use}{ce_attrs(v)}{" z_loss" if v.get("z_loss") else ""} : {H}, {W}, {Tg}
  return {values} : {results}
}}"""
    h, h64 = make(rng, (n, hidden), dt)
    w, w64 = make(rng, (vocab, hidden), dt, scale=2.0 * hidden ** -0.5)
    t = ce_targets(rng, n, vocab, v)
    inputs, b64 = [h, w, t], None
    if v.get("bias"):
        b, b64 = make(rng, (vocab,), dt)
        inputs.append(b)
    outs = run(mlir, inputs + cw_in)
    logits = round_to(refs.linear(h64, w64, b64), dt)
    loss, zl = refs.cross_entropy(logits, t, cw64, **ce_kwargs(v))
    # bf16 logits: one rounding of each logit can flip with the f32 vs f64
    # product, which moves the loss by about one bf16 ulp of a logit.
    tol = 1e-5 if dt == "f32" else 1e-2
    assert_close(outs[0], loss, "f32", "loss", rtol=tol)
    if v.get("z_loss"):
        assert_close(outs[1], zl, "f32", "z_loss", rtol=tol)


@pytest.mark.parametrize("n,hidden,vocab", [(1, 64, 37), (3, 32, 128), (4, 16, 200)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("variant", sorted(FLCE_VARIANTS))
def test_fused_linear_cross_entropy_grad(rng, n, hidden, vocab, dt, variant):
    """dhidden = G · W, dweight = Gᵀ · h, dbias = Σ G, with G the loss's
    gradient with respect to the logits (numerical, float64, rounded to the
    dtype as the op's G is)."""
    v = FLCE_VARIANTS[variant]
    H, W = ttype((n, hidden), dt, dynamic=(0,)), ttype((vocab, hidden), dt)
    Tg, B = ttype((n,), "i64", dynamic=(0,)), ttype((vocab,), dt)
    G = loss_type(v, n)
    bias = v.get("bias")
    bias_arg = f", %b: {B}" if bias else ""
    bias_use = f" bias(%b : {B})" if bias else ""
    cw_arg, cw_use, cw_in, cw64 = flce_class_weight(rng, v, vocab)
    results = f"{H}, {W}" + (f", {B}" if bias else "")
    values = "%dh, %dw" + (", %db" if bias else "")
    mlir = f"""func.func @f(%h: {H}, %w: {W}, %t: {Tg}, %g: {G}{bias_arg}{cw_arg}) -> ({results}) {{
  {values} = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g{bias_use}{cw_use}{ce_attrs(v)} : {H}, {W}, {Tg}, {G}
  return {values} : {results}
}}"""
    h, h64 = make(rng, (n, hidden), dt)
    w, w64 = make(rng, (vocab, hidden), dt, scale=2.0 * hidden ** -0.5)
    t = ce_targets(rng, n, vocab, v)
    none = v.get("reduction") == "none"
    g64 = rng.uniform(0.5, 1.5, size=(n,) if none else ()).astype(np.float32)
    inputs, b64 = [h, w, t, g64], None
    if bias:
        b, b64 = make(rng, (vocab,), dt)
        inputs.append(b)
    outs = run(mlir, inputs + cw_in)
    logits = round_to(refs.linear(h64, w64, b64), dt)
    g64 = g64.astype(np.float64)
    fwd = lambda z: float(np.sum(g64 * refs.cross_entropy(z, t, cw64, **ce_kwargs(v))[0]))
    dz = round_to(refs.numeric_grad(fwd, logits.copy()), dt)
    assert_close(outs[0], dz @ w64, dt, "dhidden")
    assert_close(outs[1], dz.T @ h64, dt, "dweight")
    if bias:
        assert_close(outs[2], dz.sum(0), dt, "dbias")


@pytest.mark.parametrize("n,vocab", [(1, 1000), (3, 37), (4, 128)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(rng, n, vocab, dt, reduction, log_target):
    T = ttype((n, vocab), dt, dynamic=(0,))
    R = ttype((n, vocab), "f32", dynamic=(0,)) if reduction == "none" else "tensor<f32>"
    mlir = f"""func.func @f(%x: {T}, %t: {T}) -> {R} {{
  %l = liger.kl_div %x, %t reduction = {reduction}{" log_target" if log_target else ""} : {T}
  return %l : {R}
}}"""
    logp = np.log(refs.softmax(rng.standard_normal((n, vocab))))
    tgt = refs.softmax(rng.standard_normal((n, vocab)))
    if log_target:
        tgt = np.log(tgt)
    x, x64 = make(rng, None, dt, values=logp)
    t, t64 = make(rng, None, dt, values=tgt)
    (l,) = run(mlir, [x, t])
    assert_close(l, refs.kl_div(x64, t64, reduction, log_target), "f32", "kl",
                 rtol=1e-5 if dt == "f32" else 2e-5)


@pytest.mark.parametrize("n,vocab", [(1, 1000), (3, 37), (6, 64)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("beta", [0.0, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("labels", [False, True])
def test_jsd(rng, n, vocab, dt, beta, labels):
    T, Lb = ttype((n, vocab), dt, dynamic=(0,)), ttype((n,), "i64", dynamic=(0,))
    label_arg = f", %lb: {Lb}" if labels else ""
    label_use = f" labels(%lb : {Lb})" if labels else ""
    mlir = f"""func.func @f(%x: {T}, %y: {T}{label_arg}) -> tensor<f32> {{
  %l = liger.jsd %x, %y{label_use} beta = {beta} : {T}
  return %l : tensor<f32>
}}"""
    x, x64 = make(rng, None, dt, values=np.log(refs.softmax(rng.standard_normal((n, vocab)))))
    y, y64 = make(rng, None, dt, values=np.log(refs.softmax(rng.standard_normal((n, vocab)))))
    inputs, lb = [x, y], None
    if labels:
        lb = rng.integers(0, vocab, size=n)
        lb[0] = -100  # at least one ignored token
        if n > 1:
            lb[-1] = 3
        inputs.append(lb.astype(np.int64))
    (l,) = run(mlir, inputs)
    assert_close(l, refs.jsd(x64, y64, beta, lb), "f32", "jsd", rtol=1e-5 if dt == "f32" else 2e-5)


def _log_probs(rng, n, vocab):
    return np.log(refs.softmax(rng.standard_normal((n, vocab)) * 2))


@pytest.mark.parametrize("n,vocab", [(1, 1), (3, 7), (2, 129)], ids=str)
@pytest.mark.parametrize("dt", DTYPES + ["f16"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_per_token(rng, n, vocab, dt, log_target):
    T, R = ttype((n, vocab), dt, dynamic=(0,)), ttype((n,), "f32", dynamic=(0,))
    mlir = f"""func.func @f(%x: {T}, %t: {T}) -> {R} {{
  %l = liger.kl_div %x, %t reduction = sum{" log_target" if log_target else ""} per_token : {T}
  return %l : {R}
}}"""
    tgt = refs.softmax(rng.standard_normal((n, vocab)))
    x, x64 = make(rng, None, dt, values=_log_probs(rng, n, vocab))
    t, t64 = make(rng, None, dt, values=np.log(tgt) if log_target else tgt)
    (l,) = run(mlir, [x, t])
    assert_close(l, refs.kl_div(x64, t64, "sum", log_target, per_token=True), "f32", "kl",
                 rtol=1e-5 if dt == "f32" else 2e-5)


@pytest.mark.parametrize("n,vocab", [(1, 1), (3, 7), (2, 129)], ids=str)
@pytest.mark.parametrize("dt", DTYPES + ["f16"])
@pytest.mark.parametrize("reduction,per_token", [("none", False), ("sum", False),
                                                 ("mean", False), ("batchmean", False),
                                                 ("batchmean", True)])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_grad(rng, n, vocab, dt, reduction, per_token, log_target):
    """liger.kl_div_grad against finite differences of the float64 forward,
    weighted by a random incoming gradient of the forward's result type."""
    T = ttype((n, vocab), dt, dynamic=(0,))
    G = {"none": ttype((n, vocab), "f32", dynamic=(0,))}.get(
        reduction, ttype((n,), "f32", dynamic=(0,)) if per_token else "tensor<f32>")
    attrs = f"reduction = {reduction}" + (" log_target" if log_target else "") + \
        (" per_token" if per_token else "")
    mlir = f"""func.func @f(%t: {T}, %g: {G}) -> {T} {{
  %d = liger.kl_div_grad %t, %g {attrs} : {T}, {G}
  return %d : {T}
}}"""
    tgt = refs.softmax(rng.standard_normal((n, vocab)))
    t, t64 = make(rng, None, dt, values=np.log(tgt) if log_target else tgt)
    x64 = _log_probs(rng, n, vocab)
    gshape = (n, vocab) if reduction == "none" else (n,) if per_token else ()
    g = rng.standard_normal(gshape).astype(np.float32)
    (d,) = run(mlir, [t, g])
    fwd = lambda z: float(np.sum(g.astype(np.float64) *
                                 refs.kl_div(z, t64, reduction, log_target, per_token=per_token)))
    assert_close(d, round_to(refs.numeric_grad(fwd, x64.copy()), dt), dt, "dx")


@pytest.mark.parametrize("n,hidden", [(1, 1), (3, 7), (5, 129)], ids=str)
@pytest.mark.parametrize("dt", DTYPES + ["f16"])
@pytest.mark.parametrize("per_row", [False, True])
def test_scale(rng, n, hidden, dt, per_row):
    """liger.scale: x times one factor or one per row, in f32, rounded once
    (factors of 1 and 0 among them)."""
    X = ttype((n, hidden), dt, dynamic=(0,))
    F = ttype((n,), "f32", dynamic=(0,)) if per_row else "tensor<f32>"
    mlir = f"""func.func @f(%x: {X}, %g: {F}) -> {X} {{
  %y = liger.scale %x, %g : {X}, {F}
  return %y : {X}
}}"""
    x, x64 = make(rng, (n, hidden), dt, scale=3.0)
    f = np.asarray(rng.standard_normal((n,) if per_row else ()) * 2, dtype=np.float32)
    if per_row:
        f[::2] = 1.0
        f[1::3] = 0.0
    (y,) = run(mlir, [x, f])
    want = x64 * (f.astype(np.float64)[:, None] if per_row else float(f))
    assert_close(y, round_to(want, dt), dt, "y")


@pytest.mark.parametrize("n,vocab", [(1, 1), (3, 7), (4, 129)], ids=str)
@pytest.mark.parametrize("dt", DTYPES + ["f16"])
@pytest.mark.parametrize("beta", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("labels", [False, True])
@pytest.mark.parametrize("per_token", [False, True])
def test_jsd_grad(rng, n, vocab, dt, beta, labels, per_token):
    """liger.jsd_grad against finite differences of the float64 forward, and
    liger.jsd's per-token form against the reference."""
    x, x64 = make(rng, None, dt, values=_log_probs(rng, n, vocab))
    y, y64 = make(rng, None, dt, values=_log_probs(rng, n, vocab))
    _check_jsd_and_grad(rng, dt, labels, per_token, f"beta = {beta}", x, x64, y,
                        lambda z, lb: refs.jsd(z, y64, beta, lb, per_token=per_token))


def _check_jsd_and_grad(rng, dt, labels, per_token, attrs, x, x64, y, loss, grad_rtol=None,
                        grad_atol=None):
    """liger.jsd and liger.jsd_grad with `attrs` (and per_token, shift labels
    with one ignored token) of the student's x and the teacher's y: the
    loss against loss(x64, labels), the float64 reference as a function
    of the student's operand, and the gradient against its finite
    differences, weighted by a random incoming gradient (within
    `grad_rtol`, else dt's tolerance, plus `grad_atol(g, labels)` where
    given: g the incoming gradient)."""
    n, vocab = x64.shape
    T, Lb = ttype((n, vocab), dt, dynamic=(0,)), ttype((n,), "i64", dynamic=(0,))
    G = ttype((n,), "f32", dynamic=(0,)) if per_token else "tensor<f32>"
    label_arg = f", %lb: {Lb}" if labels else ""
    label_use = f" labels(%lb : {Lb})" if labels else ""
    attrs += " per_token" if per_token else ""
    mlir = f"""func.func @f(%x: {T}, %y: {T}{label_arg}, %g: {G}) -> ({T}, {G}) {{
  %l = liger.jsd %x, %y{label_use} {attrs} : {T}
  %d = liger.jsd_grad %x, %y, %g{label_use} {attrs} : {T}, {G}
  return %d, %l : {T}, {G}
}}"""
    lb = None
    if labels:
        lb = rng.integers(0, vocab, size=n)
        lb[0] = -100
    g = rng.standard_normal((n,) if per_token else ()).astype(np.float32)
    (d, l) = run(mlir, [x, y] + ([lb.astype(np.int64)] if labels else []) + [g])
    assert_close(l, loss(x64, lb), "f32", "jsd", rtol=1e-5 if dt == "f32" else 2e-5)
    fwd = lambda z: float(np.sum(g.astype(np.float64) * loss(z, lb)))
    assert_close(d, round_to(refs.numeric_grad(fwd, x64.copy()), dt), dt, "dx",
                 rtol=grad_rtol, atol=1e-6 if grad_atol is None else max(1e-6, grad_atol(g, lb)))


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


@pytest.mark.parametrize("n,vocab", [(1, 1), (3, 7), (2, 129)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
@pytest.mark.parametrize("temperature", [1.0, 0.7, 3.0])
@pytest.mark.parametrize("labels,per_token", [(False, True), (True, False)])
def test_jsd_logits(rng, n, vocab, dt, beta, temperature, labels, per_token):
    """liger.jsd and liger.jsd_grad with a temperature (operands are logits):
    the loss of log_softmax(logits / T) against the float64 reference, and
    the gradient with respect to the student's logits against finite
    differences through the log-softmax."""
    x, x64 = make(rng, None, dt, values=rng.standard_normal((n, vocab)) * 3)
    y, y64 = make(rng, None, dt, values=rng.standard_normal((n, vocab)) * 3)
    log_q, log_p = _log_softmax(x64 / temperature), _log_softmax(y64 / temperature)

    def cancelling_terms(g, lb):
        # The log-softmax's backward, (d - softmax · sum d) / T, cancels: at
        # a peaked row its result can be 1000 times smaller than its terms
        # (LIGER_TEST_SEED=3099053419: terms of 16.2, a result of 0.0153),
        # so its f32 error is a few roundings of the terms (there 6.3e-6
        # against the analytic float64 gradient, which the finite
        # differences match to 1e-9). A wrong term errs by their size.
        d = refs.numeric_grad(lambda z: float(np.sum(
            g.astype(np.float64) * refs.jsd(z, log_p, beta, lb, per_token=per_token))),
            log_q.copy())
        terms = np.abs(d) + np.exp(log_q) * np.abs(d.sum(-1, keepdims=True))
        return 1e-6 * float(terms.max()) / temperature

    _check_jsd_and_grad(
        rng, dt, labels, per_token, f"beta = {beta} temperature = {temperature}", x, x64, y,
        lambda z, lb: refs.jsd(_log_softmax(z / temperature), log_p, beta, lb,
                               per_token=per_token),
        grad_rtol=3e-4 if dt == "f32" else None,
        grad_atol=cancelling_terms if dt == "f32" else None)


def test_jsd_every_token_skipped(rng):
    """A JSD over no counted token is 0 and so is its gradient (Liger-Kernel's
    answer), not 0/0."""
    T, Lb = ttype((2, 5), "f32", dynamic=(0,)), ttype((2,), "i64", dynamic=(0,))
    mlir = f"""func.func @f(%x: {T}, %y: {T}, %lb: {Lb}, %g: tensor<f32>) -> (tensor<f32>, {T}) {{
  %l = liger.jsd %x, %y labels(%lb : {Lb}) : {T}
  %d = liger.jsd_grad %x, %y, %g labels(%lb : {Lb}) : {T}, tensor<f32>
  return %l, %d : tensor<f32>, {T}
}}"""
    x = _log_probs(rng, 2, 5).astype(np.float32)
    l, d = run(mlir, [x, x[::-1].copy(), np.array([-100, -100]), np.array(1.0, np.float32)])
    assert float(l) == 0.0 and not np.any(d)


@pytest.mark.parametrize("temperature", [None, 2.0])
def test_jsd_ignored_rows_may_hold_anything(rng, temperature):
    """An ignored token's row (-inf and NaN in both operands here) adds
    nothing to the loss and its gradient row is exactly 0, not NaN from a
    product with a 0 scale; the counted rows are those of the same inputs
    with the ignored row finite."""
    T, Lb = ttype((3, 6), "f32", dynamic=(0,)), ttype((3,), "i64", dynamic=(0,))
    attrs = "beta = 0.4" + (f" temperature = {temperature}" if temperature else "")
    mlir = f"""func.func @f(%x: {T}, %y: {T}, %lb: {Lb}, %g: tensor<f32>) -> (tensor<f32>, {T}) {{
  %l = liger.jsd %x, %y labels(%lb : {Lb}) {attrs} : {T}
  %d = liger.jsd_grad %x, %y, %g labels(%lb : {Lb}) {attrs} : {T}, tensor<f32>
  return %l, %d : tensor<f32>, {T}
}}"""
    x = (rng.standard_normal((3, 6)) if temperature else _log_probs(rng, 3, 6)).astype(np.float32)
    y = (rng.standard_normal((3, 6)) if temperature else _log_probs(rng, 3, 6)).astype(np.float32)
    labels, g = np.array([2, -100, 4]), np.array(1.5, np.float32)
    l_ref, d_ref = run(mlir, [x, y, labels, g])
    x[1, :3], y[1, :3], x[1, 4], y[1, 5] = -np.inf, -np.inf, np.nan, np.nan
    l, d = run(mlir, [x, y, labels, g])
    assert float(l) == float(l_ref) and np.isfinite(float(l))
    assert not np.any(d[1]) and np.all(np.isfinite(d))
    np.testing.assert_array_equal(d[[0, 2]], d_ref[[0, 2]])


def test_jsd_vanishing_probabilities():
    """Where both distributions give a token probability e^-200 (0 in f32),
    the middle JSD adds 0 there, not NaN (log M formed from the maximum)."""
    T = ttype((1, 3), "f32", dynamic=(0,))
    mlir = f"""func.func @f(%x: {T}, %y: {T}) -> tensor<f32> {{
  %l = liger.jsd %x, %y beta = 0.5 : {T}
  return %l : tensor<f32>
}}"""
    x = np.array([[np.log(0.5), np.log(0.5), -200.0]], np.float32)
    y = np.array([[np.log(0.25), np.log(0.75), -200.0]], np.float32)
    (l,) = run(mlir, [x, y])
    assert np.isfinite(l) and abs(float(l) - float(refs.jsd(x.astype(np.float64),
                                                           y.astype(np.float64)))) < 1e-6


@pytest.mark.parametrize("shape", [(3, 7), (1, 40), (2, 2, 5)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_geglu_grad(rng, shape, dt, approximate):
    T = ttype(shape, dt, dynamic=(0,))
    attr = " approximate = tanh" if approximate == "tanh" else ""
    mlir = f"""func.func @f(%dy: {T}, %g: {T}, %u: {T}) -> ({T}, {T}) {{
  %dg, %du = liger.geglu_grad %dy, %g, %u{attr} : {T}
  return %dg, %du : {T}, {T}
}}"""
    dy, dy64 = make(rng, shape, dt)
    g, g64 = make(rng, shape, dt, scale=2.0)
    u, u64 = make(rng, shape, dt)
    dg, du = run(mlir, [dy, g, u])
    fwd = lambda gg, uu: float(np.sum(dy64 * refs.gelu(gg, approximate) * uu))
    assert_close(dg, refs.numeric_grad(lambda gg: fwd(gg, u64), g64.copy()), dt, "d_gate", atol=1e-7)
    assert_close(du, refs.numeric_grad(lambda uu: fwd(g64, uu), u64.copy()), dt, "d_up", atol=1e-7)


@pytest.mark.parametrize("shape", [(3, 7), (1, 40), (2, 2, 5)], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
def test_softmax_grad(rng, shape, dt):
    T = ttype(shape, dt, dynamic=(0,))
    mlir = f"""func.func @f(%dy: {T}, %y: {T}) -> {T} {{
  %dx = liger.softmax_grad %dy, %y : {T}
  return %dx : {T}
}}"""
    x64 = rng.standard_normal(shape) * 2.0
    dy, dy64 = make(rng, shape, dt)
    y, y64 = make(rng, shape, dt, values=refs.softmax(x64))
    (dx,) = run(mlir, [dy, y])
    # The gradient of sum(dy * softmax(x)) at x, with y = softmax(x).
    expected = refs.numeric_grad(lambda xx: float(np.sum(dy64 * refs.softmax(xx))), x64.copy())
    if dt == "f32":
        assert_close(dx, expected, dt, "dx", atol=1e-7)
    else:
        # y is given rounded to bf16: compare with the formula on that y.
        formula = y64 * (dy64 - np.sum(dy64 * y64, axis=-1, keepdims=True))
        assert_close(dx, formula, dt, "dx")

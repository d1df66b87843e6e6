"""liger.ops on the GPU: each fused op and its gradients (through autograd,
the backward kernels) against float64 PyTorch autograd on fresh random
inputs, with the bundles precompiled on the build machine
(LIGER_OPS_BUNDLES). Skips cleanly without torch, a GPU, the runtime or the
bundles."""

import math

import pytest

import kernels

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import ops  # noqa: E402

TOL = {"bf16": 1e-2, "f16": 2e-3, "f32": 2e-5}
CASES = kernels.ops_cases()


pytestmark = pytest.mark.usefixtures("ops_bundles")


def _round(t, dt):
    return t.to(torch.bfloat16).to(torch.float64) if dt == "bf16" else t


def reference(op, dt, args, kw):
    """The op in float64 on float64 copies (differentiable)."""
    if op == "rms_norm":
        x, w = args
        eps, offset = kw.get("eps", 1e-6), kw.get("offset", 0.0)
        x_hat = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        if kw.get("casting", "llama") == "llama":
            x_hat = _round(x_hat, dt)
        return (x_hat * (offset + w),)
    if op == "swiglu":
        return (torch.nn.functional.silu(args[0]) * args[1],)
    if op == "geglu":
        g = args[0]
        return (0.5 * g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))
                * args[1],)
    if op == "softmax":
        return (torch.softmax(args[0], -1),)
    if op == "rope":
        q, k, c, s = args
        c, s = c.unsqueeze(1), s.unsqueeze(1)

        def rot(x):
            a, b = x.chunk(2, -1)
            return torch.cat((-b, a), -1)
        return q * c + rot(q) * s, k * c + rot(k) * s
    raise AssertionError(op)


def check(actual, expected, dt, what):
    actual = actual.detach().to(torch.float64)
    assert not torch.isnan(actual).any(), "%s: NaN" % what
    scale = expected.abs().max().item() or 1.0
    err = (actual - expected).abs().max().item() / scale
    assert err <= TOL[dt], "%s: max error %.3g (of %.3g) exceeds %g" % (what, err, scale, TOL[dt])


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_and_its_gradients(name):
    spec, op, shapes, dt, kw = CASES[name]
    dtype = kernels.torch_dtype(dt)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    args = [torch.randn(s, generator=gen, device="cuda").to(dtype) for s in shapes]
    if op == "rope":  # real tables: cos and sin of angles
        angle = torch.rand(shapes[2], generator=gen, device="cuda") * 6.3
        args[2], args[3] = angle.cos().to(dtype), angle.sin().to(dtype)
    grads_of = [0, 1] if op != "softmax" else [0]
    leaves = [a.clone().requires_grad_(i in grads_of) for i, a in enumerate(args)]
    out = getattr(ops, op)(*leaves, **kw)
    out = out if isinstance(out, tuple) else (out,)
    refs64 = [a.detach().to(torch.float64).requires_grad_(i in grads_of)
              for i, a in enumerate(args)]
    expected = reference(op, dt, refs64, kw)
    assert len(out) == len(expected)
    dys = [torch.randn(e.shape, generator=gen, device="cuda").to(dtype) for e in expected]
    for i, (o, e) in enumerate(zip(out, expected)):
        check(o, e, dt, "%s output %d" % (name, i))
    torch.autograd.backward(out, dys)
    torch.autograd.backward(expected, [d.to(torch.float64) for d in dys])
    for i in grads_of:
        assert leaves[i].grad is not None, "%s: no gradient for input %d" % (name, i)
        check(leaves[i].grad, refs64[i].grad, dt, "%s gradient of input %d" % (name, i))


@pytest.mark.parametrize("inplace", [False, True], ids=["fresh", "inplace"])
@pytest.mark.parametrize("name", sorted(kernels.ops_ce_cases()))
def test_cross_entropy_and_its_gradient(name, inplace):
    spec, vocab, dt, tokens, kw = kernels.ops_ce_cases()[name]
    dtype = kernels.torch_dtype(dt)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    x = (torch.randn(tokens, vocab, generator=gen, device="cuda") * 2).to(dtype)
    tdt = torch.int32 if spec.target_dtype == "i32" else torch.int64
    t = torch.randint(0, vocab, (tokens,), generator=gen, device="cuda")
    t[::4] = kw.get("ignore_index", -100)
    t = t.to(tdt)
    weighted = spec.weighted
    w = torch.rand(vocab, generator=gen, device="cuda") + 0.5 if weighted else None
    leaf = x.clone().requires_grad_(True)
    # In place, the logits are an intermediate (as a loss's are): the
    # gradient overwrites them and still reaches the leaf.
    logits = leaf * 1 if inplace else leaf
    out = ops.cross_entropy(logits, t, weight=w, inplace=inplace, **kw)
    loss, z_loss = out if kw.get("return_z_loss") else (out, None)
    # The reference: F.cross_entropy on the capped float64 logits, plus the
    # z-loss, through float64 autograd.
    ref_x = x.to(torch.float64).requires_grad_(True)
    cap = kw.get("softcap")
    z = cap * torch.tanh(ref_x / cap) if cap else ref_x
    red = kw.get("reduction", "mean")
    ce = torch.nn.functional.cross_entropy(
        z, t.long(), weight=None if w is None else w.double(),
        ignore_index=kw.get("ignore_index", -100), reduction="none",
        label_smoothing=kw.get("label_smoothing", 0.0))
    counted = (t.long() != kw.get("ignore_index", -100)).double()
    zl = kw.get("lse_square_scale", 0.0) * torch.logsumexp(z, -1) ** 2 * counted
    if red == "none":
        expected, expected_z = ce + zl, zl
    else:
        wt = (w.double()[t.long().clamp(min=0)] if w is not None else 1.0) * counted
        expected_z = zl.sum() if red == "sum" else zl.sum() / counted.sum()
        expected = ce.sum() / (wt.sum() if red == "mean" else 1.0) + expected_z
    check(loss, expected.detach(), "f32" if dt == "f32" else dt, name + " loss")
    if z_loss is not None:
        # (f32, as the loss; no gradient of its own: its term is in the loss)
        assert z_loss.shape == loss.shape and z_loss.dtype == torch.float32, name
        assert not z_loss.requires_grad, name
        check(z_loss, expected_z.detach(), "f32" if dt == "f32" else dt, name + " z-loss")
    dloss = torch.rand(loss.shape, generator=gen, device="cuda") + 0.5
    loss.backward(dloss)
    expected.backward(dloss.double())
    check(leaf.grad, ref_x.grad, dt, name + " gradient")


@pytest.mark.parametrize("name", sorted(kernels.ops_ce_cases()))
def test_cross_entropy_in_place_compiles(name):
    """The in-place cross-entropy (an autograd.Function around the mutating
    operator) under torch.compile(fullgraph=True): the loss and the
    gradient reaching the leaf are the eager call's."""
    spec, vocab, dt, tokens, kw = kernels.ops_ce_cases()[name]
    dtype = kernels.torch_dtype(dt)
    t = torch.randint(0, vocab, (tokens,), device="cuda").to(
        torch.int32 if spec.target_dtype == "i32" else torch.int64)
    w = torch.rand(vocab, device="cuda") + 0.5 if spec.weighted else None

    def loss_of(leaf):
        # (With return_z_loss the loss and the z-loss.)
        return ops.cross_entropy(leaf * 2, t, weight=w, inplace=True, **kw)
    x = torch.randn(tokens, vocab, device="cuda").to(dtype)
    a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    torch._dynamo.reset()
    loss = torch.compile(loss_of, fullgraph=True)(a)
    ref = loss_of(b)
    z = ref_z = None
    if kw.get("return_z_loss"):
        (loss, z), (ref, ref_z) = loss, ref
    dloss = torch.rand(loss.shape, device="cuda") + 0.5
    loss.backward(dloss)
    ref.backward(dloss)
    # (Inductor may fuse the scalings around the kernel: rounding apart.)
    tol = TOL[dt]
    assert torch.allclose(loss, ref, rtol=tol, atol=0), name
    if z is not None:
        assert torch.allclose(z, ref_z, rtol=tol, atol=0), name
    assert torch.allclose(a.grad.float(), b.grad.float(), rtol=tol,
                          atol=tol * b.grad.abs().max().item()), name


def _bf16_ulp(v):
    """One bf16 ulp at each |v| (float64): 2^(e - 7) for |v| in [2^e, 2^(e + 1))."""
    return torch.pow(2.0, torch.floor(torch.log2(v.abs().clamp(min=2.0 ** -126))) - 7)


@pytest.mark.parametrize("name", sorted(kernels.ops_ce_cases()))
def test_cross_entropy_with_every_token_ignored(name):
    """A batch with no counted token (a fully padded micro-batch): the
    loss is PyTorch's (the mean 0/0 = NaN, else 0) and the gradient is zero
    everywhere, not the mean's 0/0, in place and not."""
    spec, vocab, dt, tokens, kw = kernels.ops_ce_cases()[name]
    dtype = kernels.torch_dtype(dt)
    ignore = kw.get("ignore_index", -100)
    t = torch.full((tokens,), ignore, device="cuda",
                   dtype=torch.int32 if spec.target_dtype == "i32" else torch.int64)
    w = torch.rand(vocab, device="cuda") + 0.5 if spec.weighted else None
    x = torch.randn(tokens, vocab, device="cuda").to(dtype)
    ref_x = x.double().requires_grad_(True)
    expected = torch.nn.functional.cross_entropy(
        ref_x, t.long(), weight=None if w is None else w.double(), ignore_index=ignore,
        reduction=kw.get("reduction", "mean"))
    expected.backward(torch.ones_like(expected))
    assert not ref_x.grad.any(), "PyTorch's own gradient is zero"
    for inplace in (False, True):
        leaf = x.clone().requires_grad_(True)
        out = ops.cross_entropy(leaf * 1 if inplace else leaf, t, weight=w, inplace=inplace, **kw)
        loss = out[0] if kw.get("return_z_loss") else out
        assert torch.allclose(loss.double(), expected.detach(), equal_nan=True), (name, loss)
        loss.backward(torch.ones_like(loss))
        assert torch.equal(leaf.grad, torch.zeros_like(leaf.grad)), (name, inplace)


@pytest.mark.parametrize("name", sorted(kernels.ops_flce_cases()))
def test_fused_linear_cross_entropy_with_every_token_ignored(name):
    """The chunked lm_head + loss over a batch with no counted token: the
    loss (and z-loss) PyTorch's (the mean 0/0 = NaN, else 0) and dx, dW and
    dbias exactly zero, over every chunk."""
    spec, (n, h, v), budget, kw = kernels.ops_flce_cases()[name]
    kw = dict(kw)
    weighted = kw.pop("weighted", False)
    bias, frozen = kw.pop("bias", False), kw.pop("frozen_bias", False)
    x = torch.randn(n, h, device="cuda").to(torch.bfloat16).requires_grad_(True)
    w = (torch.randn(v, h, device="cuda") / h ** 0.5).to(torch.bfloat16).requires_grad_(True)
    b = torch.randn(v, device="cuda").to(torch.bfloat16).requires_grad_(not frozen) \
        if bias else None
    t = torch.full((n,), -100, device="cuda")
    cw = torch.rand(v, device="cuda") + 0.5 if weighted else None
    out = ops.fused_linear_cross_entropy(x, w, t, class_weight=cw, memory_budget=budget,
                                         bias=b, **kw)
    losses = out if kw.get("return_z_loss") else (out,)
    reduction = kw.get("reduction", "mean")
    for loss in losses:
        if reduction == "mean":
            assert loss.isnan().all(), (name, loss)
        else:
            assert torch.equal(loss, torch.zeros_like(loss)), (name, loss)
    losses[0].backward(torch.ones_like(losses[0]))
    for what, leaf in (("dx", x), ("dW", w), ("db", b if bias and not frozen else None)):
        if leaf is not None:
            assert torch.equal(leaf.grad, torch.zeros_like(leaf.grad)), (name, what)


@pytest.mark.parametrize("name", sorted(kernels.ops_flce_cases()))
def test_fused_linear_cross_entropy_and_its_gradients(name):
    """The chunked lm_head + loss against float64 autograd of F.linear (its
    logits, with the bias where there is one, rounded to bf16, as the op's
    meaning says) and F.cross_entropy, with an incoming gradient of 0.75
    (per token, for reduction "none": values of both signs, ignored
    tokens' too); dx, dW and dbias through the kernels, the z-loss where
    returned. The gradients are allocated inside the call, so the
    allocator's memory is filled with NaN first: an element no kernel
    wrote shows as NaN."""
    spec, (n, h, v), budget, kw = kernels.ops_flce_cases()[name]
    kw = dict(kw)
    weighted = kw.pop("weighted", False)
    bias, frozen = kw.pop("bias", False), kw.pop("frozen_bias", False)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    x = torch.randn(n, h, generator=gen, device="cuda").to(torch.bfloat16)
    w = (torch.randn(v, h, generator=gen, device="cuda") * 3 / h ** 0.5).to(torch.bfloat16)
    b = torch.randn(v, generator=gen, device="cuda").to(torch.bfloat16) if bias else None
    t = torch.randint(0, v, (n,), generator=gen, device="cuda")
    t[1::5] = -100  # (a single token is counted)
    cw = torch.rand(v, generator=gen, device="cuda") + 0.5 if weighted else None
    lx, lw = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    lb = b.clone().requires_grad_(not frozen) if bias else None
    # Blocks of the sizes the call allocates (dx, dW and its f32 sum, a
    # chunk's logits, dbias and its f32 sum), NaN, freed.
    poison = [torch.full((m,), float("nan"), dtype=torch.bfloat16, device="cuda")
              for m in (n * h, v * h, 2 * v * h, min(n, budget // (2 * v)) * v, v, 2 * v)]
    del poison
    out = ops.fused_linear_cross_entropy(lx, lw, t, class_weight=cw, memory_budget=budget,
                                         bias=lb, **kw)
    loss, z_loss = out if kw.get("return_z_loss") else (out, None)
    x64 = x.double().requires_grad_(True)
    w64 = w.double().requires_grad_(True)
    b64 = b.double().requires_grad_(not frozen) if bias else None
    z = ((x64 @ w64.t()) + (b64 if bias else 0)).to(torch.bfloat16).to(torch.float64)
    cap = kw.get("softcap")
    z = cap * torch.tanh(z / cap) if cap else z
    ce = torch.nn.functional.cross_entropy(z, t, reduction="none",
                                           weight=cw.double() if weighted else None,
                                           label_smoothing=kw.get("label_smoothing", 0.0))
    counted = (t != -100).double()
    total = (cw.double()[t.clamp(min=0)] * counted).sum() if weighted else counted.sum()
    zl = kw.get("lse_square_scale", 0.0) * torch.logsumexp(z, -1) ** 2 * counted
    reduction = kw.get("reduction", "mean")
    if reduction == "none":
        expected, expected_z = ce + zl, zl
        dloss = torch.rand(n, generator=gen, device="cuda") * 2 - 0.5
        assert loss.shape == (n,) and loss.dtype == torch.float32, name
        # Per token, a logit whose f32 accumulation lies on the other side
        # of a bf16 rounding boundary than the float64 product's rounds one
        # ulp apart: the token's loss may move by an ulp of its target's
        # logit and as much again through the lse (both under an ulp of the
        # row's largest logit). The mean and sum average such flips away.
        allowed = 1e-4 * expected.abs().max() + 2 * _bf16_ulp(z.detach().abs().amax(-1))
        err = ((loss.double() - expected).abs() / allowed).max().item()
        assert err <= 1, "%s: loss error %.3g of its bound" % (name, err)
    else:
        expected, expected_z = ce.sum() + zl.sum(), zl.sum()
        if reduction == "mean":
            expected_z = expected_z / counted.sum()
            expected = ce.sum() / total + expected_z  # (no z-loss with weights and mean)
        dloss = torch.tensor(0.75, device="cuda")
        err = abs(loss.item() - expected.item()) / abs(expected.item())
        assert err < 1e-4, "%s: loss rel err %.3g" % (name, err)
    if z_loss is not None:
        assert z_loss.shape == loss.shape and not z_loss.requires_grad, name
        allowed_z = 1e-4 * expected_z.abs().max()
        if reduction == "none":
            # The same flips per token move its lse by up to two ulps of
            # the row's largest logit, and its z-loss s lse^2 by 2 s |lse|
            # as much (measured on an H200: 1.13e-4 of the largest).
            lse = torch.logsumexp(z.detach(), -1)
            allowed_z = allowed_z + 2 * kw["lse_square_scale"] * lse.abs() * 2 * _bf16_ulp(
                z.detach().abs().amax(-1)) * counted
        zerr = ((z_loss.double() - expected_z).abs() / allowed_z).max().item()
        assert zerr <= 1, "%s: z-loss error %.3g of its bound" % (name, zerr)
    loss.backward(dloss)
    expected.backward(dloss.double())
    grads = [("dx", lx.grad, x64.grad), ("dW", lw.grad, w64.grad)]
    if bias and not frozen:
        grads.append(("db", lb.grad, b64.grad))
    elif bias:
        assert lb.grad is None, name
    for what, got, want in grads:
        assert got is not None and not torch.isnan(got).any(), "%s: %s not written" % (name, what)
        rel = ((got.double() - want).norm() / want.norm()).item()
        assert rel < 1e-2, "%s: %s rel err %.3g" % (name, what, rel)


@pytest.mark.parametrize("name", ["swiglu_bf16", "geglu_f32"])
@pytest.mark.parametrize("layout", ["contiguous", "halves"])
def test_gated_backward_in_place_matches_the_functional_one(name, layout):
    """liger::swiglu_backward_ / geglu_backward_ (the torch.compile
    backend's form where the saved gate and up die at their backward) write
    dgate over gate and dup over up: the same bits as the functional
    operator, over contiguous inputs (the kernel reads and writes the same
    memory) and over the two strided halves of one gate_up tensor (Phi-3's
    fused projection; through a copy)."""
    spec, op, shapes, dt, kw = CASES[name]
    dtype = kernels.torch_dtype(dt)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    rows, width = shapes[0]
    if layout == "contiguous":
        gate, up = (torch.randn(rows, width, generator=gen, device="cuda").to(dtype)
                    for _ in range(2))
    else:
        gate, up = torch.randn(rows, 2 * width, generator=gen, device="cuda").to(
            dtype).chunk(2, -1)
    dy = torch.randn(rows, width, generator=gen, device="cuda").to(dtype)
    extra = (kw.get("approximate", "tanh"),) if op == "geglu" else ()
    want = getattr(torch.ops.liger, op + "_backward")(dy, gate, up, *extra)
    ptrs = gate.data_ptr(), up.data_ptr()
    getattr(torch.ops.liger, op + "_backward_")(dy, gate, up, *extra)
    assert (gate.data_ptr(), up.data_ptr()) == ptrs
    assert torch.equal(gate, want[0]) and torch.equal(up, want[1])

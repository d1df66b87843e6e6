"""The matmul templates on the GPU (mma.sync, and wgmma + TMA
on sm_90a): y = x · Wᵀ against PyTorch in f32 on fresh random inputs, at
row counts 1, 7, 77, 100, 4096 and 16384 (partial row tiles), partial
column tiles (N = 1000, 264), a K that is not a multiple of the K slice
(520, wgmma), Llama-3-8B's up projection (4096 -> 14336), a 64-row tile, f16, a bias, a residual + SiLU epilogue, a gate/up pair with
SwiGLU, a residual + GELU and a gate/up pair with GeGLU (tanh), LoRA projections (r = 16, 32, 64) and an RMSNorm prologue (Llama and Gemma weights; against float64), outputs
poisoned with NaN; the gradient products dx = dy · W and dW = dyᵀ · x
(bf16, f16, into an f32 buffer, in place) and the q/k projections with
RoPE stored head-major (Llama-3-8B with its RMSNorm, biases, per-batch
tables, head_dim 64) against float64; kernels of several results: the
gated MLP's backward (dh = dy · W_down with SwiGLU's or GeGLU's gradient in
the epilogue, dgate and dup, dh too where kept) and the gate/up pair
writing gate and up beside the activation, against float64; a LoRA
projection's hand-over of x·Aᵀ between column tiles (the products and
flags it leaves, the same bits as launches that compute it in every
tile). Skips cleanly without torch, a GPU, the
runtime or the bundle (scripts/build-gpu-bundles.sh compiles it with
liger-compile)."""

import pytest

import kernels

torch = pytest.importorskip("torch", reason="the GPU suite needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
CASES = [(name, rows) for name in kernels.MATMULS for rows in kernels.MATMUL_ROWS]


@pytest.fixture(scope="module")
def bundle(bundles_dir):
    return kernels.load_bundle(bundles_dir, "matmul")


@pytest.mark.parametrize("name,rows", CASES, ids=["%s-m%d" % c for c in CASES])
def test_linear(bundle, name, rows):
    k, n, dt = kernels.MATMULS[name][:3]
    dtype = DTYPES[dt]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    x = torch.randn(rows, k, generator=gen, device="cuda").to(dtype)
    w = (torch.randn(n, k, generator=gen, device="cuda") / k ** 0.5).to(dtype)
    y = torch.full((rows, n), float("nan"), dtype=dtype, device="cuda")
    inputs = [x, w]
    a = x.double()
    norm = kernels.MATMUL_PROLOGUES.get(name)
    if norm:
        # RMSNorm in float64: x * rsqrt(mean(x^2) + eps) * (g [+ 1]).
        g = (1 + 0.1 * torch.randn(k, generator=gen, device="cuda")).to(dtype)
        inputs.insert(1, g)
        eps, off = (1e-6, 1.0) if norm == "rms_norm_gemma" else (1e-5, 0.0)
        a = a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + eps) * (g.double() + off)
    ref = (a @ w.double().t()).float()
    if name in kernels.MATMUL_LORA:
        # y = x·Wᵀ + scale · round(x·Aᵀ) · Bᵀ (PEFT rounds the low-rank
        # product).
        r, scale = kernels.MATMUL_LORA[name]
        la = (torch.randn(r, k, generator=gen, device="cuda") / k ** 0.5).to(dtype)
        lb = (torch.randn(n, r, generator=gen, device="cuda") / r ** 0.5).to(dtype)
        inputs += [la, lb]
        t = (a @ la.double().t()).to(dtype).double()
        ref = (a @ w.double().t() + scale * (t @ lb.double().t())).float()
    if name in kernels.MATMUL_BIAS:
        b = torch.randn(n, generator=gen, device="cuda").to(dtype)
        inputs.append(b)
        ref = ref + b.float()
    # Without a prologue the kernel's projections are liger.linear's exactly
    # up to summation order: round the reference's where it does. After the
    # folded norm (x·g rounded, not x·rstd) they may round to the other
    # neighbour: keep the float64 values instead, so that the comparison is
    # against float64 and not against a second rounding.
    mid = (lambda t: t) if norm else (lambda t: t.to(dtype).float())
    epilogue = kernels.MATMUL_EPILOGUES.get(name)
    if epilogue in ("add_silu", "add_gelu"):
        # liger.linear rounds, then the residual add (rounded) and SiLU or
        # exact GELU.
        r = torch.randn(rows, n, generator=gen, device="cuda").to(dtype)
        inputs.append(r)
        s = mid(mid(ref) + r.float())
        ref = s * torch.sigmoid(s) if epilogue == "add_silu" else \
            torch.nn.functional.gelu(s)
    elif epilogue == "geglu_tanh":
        # gate and up projections, each rounded, then GeGLU (tanh) in f32.
        u = (torch.randn(n, k, generator=gen, device="cuda") / k ** 0.5).to(dtype)
        inputs.append(u)
        gate = mid(ref)
        up = mid((a @ u.double().t()).float())
        ref = torch.nn.functional.gelu(gate, approximate="tanh") * up
    elif epilogue == "swiglu":
        # gate and up projections, each rounded, then SwiGLU in f32.
        u = (torch.randn(n, k, generator=gen, device="cuda") / k ** 0.5).to(dtype)
        inputs.append(u)
        gate = mid(ref)
        up = mid((a @ u.double().t()).float())
        ref = gate * torch.sigmoid(gate) * up
    bundle[name + "_matmul_0"](*inputs, out=[y])
    torch.cuda.synchronize()
    assert not torch.isnan(y).any(), "unwritten outputs"
    err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
    assert err <= 1e-2, "max error %.3g relative to max |y|" % err


GRAD_CASES = [(name, rows) for name in kernels.MATMUL_GRADS for rows in kernels.MATMUL_ROWS]


@pytest.mark.parametrize("name,rows", GRAD_CASES, ids=["%s-m%d" % c for c in GRAD_CASES])
def test_linear_grad(bundle, name, rows):
    """dx = dy · W and dW = dyᵀ · x (optionally into an f32 buffer or one of
    the input's dtype, in place at odd row counts) against float64, outputs
    poisoned with NaN."""
    op, n, k, dt = kernels.MATMUL_GRADS[name][:4]
    dtype = DTYPES[dt]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    dy = torch.randn(rows, n, generator=gen, device="cuda").to(dtype)
    if op == "dx":
        w = (torch.randn(n, k, generator=gen, device="cuda") / n ** 0.5).to(dtype)
        inputs, ref = [dy, w], dy.double() @ w.double()
        y = torch.full((rows, k), float("nan"), dtype=dtype, device="cuda")
    else:
        x = (torch.randn(rows, k, generator=gen, device="cuda") / rows ** 0.5).to(dtype)
        inputs, ref = [dy, x], dy.double().t() @ x.double()
        y = torch.full((n, k), float("nan"), dtype=dtype, device="cuda")
        if op in ("dw_acc", "dw_acc_lowp"):
            acc_dtype = torch.float32 if op == "dw_acc" else dtype
            acc = torch.randn(n, k, generator=gen, device="cuda").to(acc_dtype)
            ref = ref + acc.double()
            if rows % 2:  # in place: the buffer is the output too
                y = acc
            else:
                y = torch.full((n, k), float("nan"), dtype=acc_dtype, device="cuda")
            inputs.append(acc)
    bundle[name + "_matmul_0"](*inputs, out=[y])
    torch.cuda.synchronize()
    assert not torch.isnan(y).any(), "unwritten outputs"
    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
    assert err <= 1e-2, "max error %.3g relative to max |y|" % err


ROPE_CASES = [(name, b, t) for name in kernels.MATMUL_ROPE for b, t in kernels.MATMUL_ROPE_SHAPES]


@pytest.mark.parametrize("name,batch,seq", ROPE_CASES,
                         ids=["%s-b%d-t%d" % c for c in ROPE_CASES])
def test_qk_rope(bundle, name, batch, seq):
    """q/k projections with RoPE in the epilogue, stored head-major, against
    float64 (the projections rounded as liger.linear rounds them, except
    after a folded RMSNorm, whose rounding differs: see test_linear),
    outputs poisoned with NaN."""
    k, hq, hkv, d, dt, _, _, _, norm, bias, batched, _ = kernels.MATMUL_ROPE[name]
    dtype = DTYPES[dt]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, device="cuda") * scale).to(dtype)
    x = rand(batch, seq, k)
    inputs, a = [x], x.double()
    if norm:
        g = (1 + 0.1 * torch.randn(k, generator=gen, device="cuda")).to(dtype)
        inputs.append(g)
        a = a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-5) * g.double()
    w = {p: rand(h * d, k, scale=k ** -0.5) for p, h in (("q", hq), ("k", hkv))}
    inputs += [w["q"], w["k"]]
    b = {p: rand(h * d) for p, h in (("q", hq), ("k", hkv))} if bias else None
    if bias:
        inputs += [b["q"], b["k"]]
    # Tables as a model computes them: cos/sin of position x frequency.
    pos = torch.arange(seq, device="cuda", dtype=torch.float64)
    freq = 10000.0 ** (-torch.arange(0, d, 2, device="cuda", dtype=torch.float64) / d)
    ang = torch.cat([pos[:, None] * freq[None]] * 2, -1)[None]
    if batched:  # per-batch position offsets
        ang = ang + torch.arange(batch, device="cuda", dtype=torch.float64)[:, None, None]
    cos, sin = ang.cos().to(dtype), ang.sin().to(dtype)
    inputs += [cos, sin]
    outs = [torch.full((batch, h, seq, d), float("nan"), dtype=dtype, device="cuda")
            for h in (hq, hkv)]
    bundle[name + "_matmul_0"](*inputs, out=outs)
    torch.cuda.synchronize()
    for (p, h), y in zip((("q", hq), ("k", hkv)), outs):
        proj = a @ w[p].double().t()
        if bias:
            proj = proj + b[p].double()
        if not norm:
            proj = proj.to(dtype).double()
        heads = proj.view(batch, seq, h, d).transpose(1, 2)
        rot = torch.cat([-heads[..., d // 2:], heads[..., :d // 2]], -1)
        ref = heads * cos.double()[:, None] + rot * sin.double()[:, None]
        assert not torch.isnan(y).any(), "unwritten %s outputs" % p
        err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
        assert err <= 1e-2, "%s: max error %.3g relative to max |y|" % (p, err)


def _gated_grads(dh, g, u, act):
    """dgate, dup of act(gate) * up at dh (float64)."""
    if act == "swiglu":
        s = torch.sigmoid(g)
        return dh * u * s * (1 + g * (1 - s)), dh * g * s
    c = (2 / torch.pi) ** 0.5
    t = torch.tanh(c * (g + 0.044715 * g ** 3))
    dgelu = 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * c * (1 + 3 * 0.044715 * g * g)
    return dh * u * dgelu, dh * 0.5 * g * (1 + t)


GATED_GRAD_CASES = [(name, rows) for name in kernels.MATMUL_GATED_GRADS
                    for rows in kernels.MATMUL_ROWS]


@pytest.mark.parametrize("name,rows", GATED_GRAD_CASES,
                         ids=["%s-m%d" % c for c in GATED_GRAD_CASES])
def test_gated_grad(bundle, name, rows):
    """The gated MLP's backward in one kernel: dh = dy · W_down rounded as
    liger.linear_grad_input rounds it, then SwiGLU's (GeGLU's) gradient at
    gate and up, against float64 (dh written too where the group keeps it),
    outputs poisoned with NaN; at odd row counts written in place over gate
    and up."""
    act, n, k, dt, _, _, _, _, keep = kernels.MATMUL_GATED_GRADS[name]
    dtype = DTYPES[dt]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    dy = torch.randn(rows, n, generator=gen, device="cuda").to(dtype)
    w = (torch.randn(n, k, generator=gen, device="cuda") / n ** 0.5).to(dtype)
    g = torch.randn(rows, k, generator=gen, device="cuda").to(dtype)
    u = torch.randn(rows, k, generator=gen, device="cuda").to(dtype)
    dh = dy.double() @ w.double()
    refs = list(_gated_grads(dh.to(dtype).double(), g.double(), u.double(), act))
    if keep:
        refs.insert(0, dh)
    outs = [torch.full((rows, k), float("nan"), dtype=dtype, device="cuda") for _ in refs]
    if rows % 2 and not keep:
        # In place: dgate over gate, dup over up (each pair is read and
        # written by one thread), the memory of an in-place backward.
        g, u = g.clone(), u.clone()
        outs = [g, u]
    bundle[name + "_matmul_0"](dy, w, g, u, out=outs)
    torch.cuda.synchronize()
    for i, (y, ref) in enumerate(zip(outs, refs)):
        assert not torch.isnan(y).any(), "unwritten outputs in result #%d" % i
        err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
        assert err <= 1e-2, "result #%d: max error %.3g relative to max |y|" % (i, err)


GATED_KEEPS_CASES = [(name, rows) for name in kernels.MATMUL_GATED_KEEPS
                     for rows in kernels.MATMUL_ROWS]


@pytest.mark.parametrize("name,rows", GATED_KEEPS_CASES,
                         ids=["%s-m%d" % c for c in GATED_KEEPS_CASES])
def test_gate_up_keeping_gate_and_up(bundle, name, rows):
    """The gate/up pair writing gate, up and SwiGLU(gate, up), each against
    float64 (the activation of the rounded projections), outputs poisoned
    with NaN."""
    k, n, dt = kernels.MATMUL_GATED_KEEPS[name][:3]
    dtype = DTYPES[dt]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    x = torch.randn(rows, k, generator=gen, device="cuda").to(dtype)
    wg, wu = ((torch.randn(n, k, generator=gen, device="cuda") / k ** 0.5).to(dtype)
              for _ in range(2))
    gate, up = ((x.double() @ w.double().t()) for w in (wg, wu))
    rg, ru = gate.to(dtype).double(), up.to(dtype).double()
    refs = [gate, up, rg * torch.sigmoid(rg) * ru]
    outs = [torch.full((rows, n), float("nan"), dtype=dtype, device="cuda") for _ in refs]
    bundle[name + "_matmul_0"](x, wg, wu, out=outs)
    torch.cuda.synchronize()
    for i, (y, ref) in enumerate(zip(outs, refs)):
        assert not torch.isnan(y).any(), "unwritten outputs in result #%d" % i
        err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
        assert err <= 1e-2, "result #%d: max error %.3g relative to max |y|" % (i, err)


# The wgmma LoRA cases of more than one column tile.
LORA_HANDOVER = sorted(n for n in kernels.MATMUL_LORA if kernels.MATMULS[n][6] == "wgmma"
                       and kernels.MATMULS[n][1] > kernels.MATMULS[n][4])


@pytest.mark.parametrize("name", LORA_HANDOVER)
def test_lora_hands_its_product_over(bundle, name):
    """A LoRA projection of several column tiles hands x·Aᵀ over
    (docs/Design/GPU-Lowering.md): after a launch on 16384 rows the products
    workspace holds every row's rstd·x̂Aᵀ (against float64) and every 64-row
    block's flag is set; the output has the same bits as launches of 128
    rows, whose column tiles start together and compute it themselves, and
    as a repeated launch."""
    k, n, dt = kernels.MATMULS[name][:3]
    dtype = DTYPES[dt]
    r, _ = kernels.MATMUL_LORA[name]
    rows = 16384
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    x = torch.randn(rows, k, generator=gen, device="cuda").to(dtype)
    w = (torch.randn(n, k, generator=gen, device="cuda") / k ** 0.5).to(dtype)
    la = (torch.randn(r, k, generator=gen, device="cuda") / k ** 0.5).to(dtype)
    lb = (torch.randn(n, r, generator=gen, device="cuda") / r ** 0.5).to(dtype)
    rest, a = [w], x.double()
    if kernels.MATMUL_PROLOGUES.get(name):
        g = (1 + 0.1 * torch.randn(k, generator=gen, device="cuda")).to(dtype)
        rest.insert(0, g)
        a = a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-5) * g.double()
    rest += [la, lb]
    kernel = bundle[name + "_matmul_0"]
    assert [tuple(s) for s in kernel.workspace_shapes([x] + rest)] == [(rows, r), (rows,)]
    spaces = [torch.full(s, float("nan"), device="cuda") for s in ((rows, r), (rows,))]
    whole = kernel(x, *rest, workspaces=spaces)
    torch.cuda.synchronize()
    products, flags = spaces
    want = a @ la.double().t()
    err = ((products.double() - want).abs().max() / want.abs().max()).item()
    assert err < 1e-2, "%s: the handed-over x·Aᵀ is off by %.3g" % (name, err)
    assert (flags[::64] == 1).all() and (flags.view(-1, 64)[:, 1:] == 0).all(), name
    assert torch.equal(whole, kernel(x, *rest)), name
    parts = torch.cat([kernel(x[i:i + 128], *rest) for i in range(0, rows, 128)])
    assert torch.equal(whole, parts), "%s: %d of %d elements differ" % (
        name, (whole != parts).sum().item(), parts.numel())

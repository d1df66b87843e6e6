"""Loss groups planned by the compiler (liger-plan-loss) and run by
liger.runtime.run_loss_plan on the GPU: the loss and both gradients of an
lm_head, in 128-token chunks, against float64 PyTorch on fresh random
inputs with ignored targets. The gradients are allocated inside the call,
so the allocator's memory is filled with NaN first (freed blocks are
reused): an element no kernel wrote shows as NaN. Skips cleanly without
torch, a GPU or the bundle."""
import math

import pytest

import kernels

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import runtime  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


@pytest.fixture(scope="module")
def bundle(bundles_dir):
    return kernels.load_bundle(bundles_dir, "loss_plan")


@pytest.mark.parametrize("name", sorted(kernels.LOSS_PLANS))
@pytest.mark.parametrize("tokens", [1, 300, 1000])
def test_planned_loss_and_gradients(bundle, name, tokens):
    v, h, dt, _, kw = kernels.LOSS_PLANS[name]
    (plan,) = [p for p in bundle.plans if p["function"] == name]
    assert plan["chunk_tokens"] == 128
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    x = torch.randn(tokens, h, generator=gen, device="cuda").to(DTYPES[dt])
    w = (torch.randn(v, h, generator=gen, device="cuda") * 3 / math.sqrt(h)).to(DTYPES[dt])
    b = torch.randn(v, generator=gen, device="cuda").to(DTYPES[dt]) if kw.get("bias") else None
    t = torch.randint(0, v, (tokens,), generator=gen, device="cuda")
    t[1::5] = -100
    # Blocks of the sizes the call allocates (dx, dW, a chunk's logits, the
    # bias's f32 sums and its gradient), filled with NaN and freed: the
    # caching allocator hands them out again.
    poison = [torch.full((n,), float("nan"), dtype=DTYPES[dt], device="cuda")
              for n in (tokens * h, v * h, min(128, tokens) * v, 2 * v, v)]
    del poison
    out = runtime.run_loss_plan(bundle, x, w, t, function=name, bias=b,
                                grad_loss=torch.tensor(0.75, device="cuda"))
    # The group's results: the loss, the z-loss (returned apart), dx, dW,
    # dbias (with a bias).
    assert len(out) == 3 + ("z_loss" in kw) + (b is not None), name
    loss, rest = out[0], list(out[1:])
    z_loss = rest.pop(0) if "z_loss" in kw else None
    dx, dw = rest[:2]
    x64, w64 = x.double().requires_grad_(True), w.double().requires_grad_(True)
    b64 = b.double().requires_grad_(True) if b is not None else None
    z = x64 @ w64.t() + (b64 if b is not None else 0)
    z = z.to(DTYPES[dt]).double()
    cap = kw.get("softcap")
    z = cap * torch.tanh(z / cap) if cap else z
    ref = torch.nn.functional.cross_entropy(z, t, reduction=kw.get("reduction", "mean"),
                                            label_smoothing=kw.get("label_smoothing", 0.0))
    if "z_loss" in kw:
        want_z = kw["z_loss"] * (torch.logsumexp(z, -1) ** 2)[t != -100].mean()
        ref = ref + want_z
        err = abs(z_loss.item() - want_z.item()) / want_z.item()
        assert err < 1e-4, "%s: z-loss rel err %.3g" % (name, err)
    ref.backward(torch.tensor(0.75, dtype=torch.float64, device="cuda"))
    err = abs(loss.item() - ref.item()) / abs(ref.item())
    assert err < 1e-4, "%s: loss rel err %.3g" % (name, err)
    grads = [("dx", dx, x64.grad), ("dW", dw, w64.grad)]
    if b is not None:
        grads.append(("db", rest[2], b64.grad))
    for what, got, want in grads:
        assert not torch.isnan(got).any(), "%s: %s has NaN (unwritten)" % (name, what)
        rel = ((got.double() - want).norm() / want.norm()).item()
        assert rel < 1e-2, "%s: %s rel err %.3g" % (name, what, rel)


@pytest.mark.parametrize("tokens", [100, 128, 16384])
def test_dx_kernel_and_its_narrow_variant(bundle, tokens):
    """A chunk's dx kernel (G · W, one column tile of 256 for hidden 256)
    carries a narrow-tile variant, which the launcher runs where its grid
    fills the GPU better: 100 or 128 rows are one CTA of 128 rows against
    two of 64 (the variant); 16384 rows are 128 CTAs against 256, more
    than one wave of an H100's or H200's 132 SMs (the kernel). Each
    launch, into a NaN-filled output, is G · W in float64 to the dtype's
    rounding, and the profiler names the entry point that ran."""
    v, h, dt, _, _ = kernels.LOSS_PLANS["step_mean"]
    (plan,) = [p for p in bundle.plans if p["function"] == "step_mean"]
    dx = bundle[plan["kernels"]["dx"]]
    assert dx.narrow == dx.name + "_narrow"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert sms >= 128, "the row counts are chosen for 128 to 132 SMs, this GPU has %d" % sms
    gen = torch.Generator(device="cuda")
    gen.manual_seed(torch.seed())
    g = torch.randn(tokens, v, generator=gen, device="cuda").to(DTYPES[dt])
    w = (torch.randn(v, h, generator=gen, device="cuda") / math.sqrt(v)).to(DTYPES[dt])
    out = torch.full((tokens, h), float("nan"), dtype=DTYPES[dt], device="cuda")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        dx(g, w, out=[out])
        torch.cuda.synchronize()
    ran = {e.name for e in prof.events() if e.name.startswith(dx.name)}
    want = dx.narrow if tokens <= 128 else dx.name
    assert ran == {want}, "%d rows ran %s, expected %s" % (tokens, sorted(ran), want)
    ref = g.double() @ w.double()
    assert not torch.isnan(out).any(), "rows the kernel did not write"
    rel = ((out.double() - ref).norm() / ref.norm()).item()
    assert rel < 5e-3, "%d rows: rel err %.3g" % (tokens, rel)

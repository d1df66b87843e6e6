"""liger.ops.kl_div and liger.ops.jsd on the GPU (the divergences' row
kernels, precompiled on the build machine: LIGER_OPS_BUNDLES): the loss
and the input's gradient against float64 PyTorch on fresh random inputs
over odd vocabularies (1, 7, 50257, 128256, 262147) and token counts, every
output element of the kernels written (outputs poisoned with NaN first),
and torch.compile(fullgraph=True) (their opcheck: test_ops_opcheck.py).
Skips cleanly without torch, a GPU, the runtime or the bundles."""

import os
import sys

import pytest

import kernels

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import refs  # noqa: E402  (the float64 references of the CPU tests)

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import bundles, ops  # noqa: E402

pytestmark = pytest.mark.usefixtures("ops_bundles")

CASES = kernels.ops_divergence_cases()
# Relative to the largest reference magnitude.
TOL = {"bf16": 1e-2, "f16": 2e-3, "f32": 2e-5}
LABELS = {"i32": torch.int32, "i64": torch.int64}


def _inputs(name, spread=3.0):
    """Fresh log-probabilities (a random seed each run, printed on failure)
    for the case, the log-softmax of normal logits times `spread`: input,
    target (probabilities for a KL divergence without log_target), shift
    labels or None, the seed."""
    spec, op, (tokens, vocab), kw = CASES[name]
    seed = torch.seed()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    dtype = kernels.torch_dtype(spec.dtype)

    def log_probs():
        return (torch.randn(tokens, vocab, generator=gen, device="cuda") * spread).log_softmax(-1)

    x, t = log_probs().to(dtype), log_probs()
    if op == "kl_div" and not kw.get("log_target"):
        t = t.exp()
    labels = None
    if kw.get("labels"):
        labels = torch.randint(0, vocab, (tokens,), generator=gen, device="cuda")
        labels[::3] = kw.get("ignore_index", -100)
        labels = labels.to(LABELS[kw["labels"]])
    return x, t.to(dtype), labels, seed


def _reference(op, x, t, labels, kw):
    """The loss in float64 (differentiable in x): PyTorch's KL divergence,
    Liger-Kernel's JSD."""
    if op == "kl_div":
        return torch.nn.functional.kl_div(x, t, reduction=kw.get("reduction", "batchmean"),
                                          log_target=kw.get("log_target", False))
    return refs.jsd(x, t, kw.get("beta", 0.5), labels, kw.get("ignore_index", -100))


def _check(actual, expected, dt, what):
    actual = actual.detach().to(torch.float64)
    assert not torch.isnan(actual).any(), "%s: NaN (unwritten or wrong)" % what
    assert actual.shape == expected.shape, what
    scale = expected.abs().max().item() or 1.0
    err = (actual - expected).abs().max().item() / scale
    assert err <= TOL[dt], "%s: max error %.3g of max |ref| %.3g" % (what, err, scale)


def _call(op, x, t, labels, kw):
    if op == "kl_div":
        return ops.kl_div(x, t, kw.get("reduction", "batchmean"), kw.get("log_target", False))
    return ops.jsd(x, t, labels, kw.get("beta", 0.5), kw.get("ignore_index", -100))


def test_the_jsd_without_a_gradient_is_the_same_loss():
    """Under torch.no_grad the JSD runs its loss-only kernel: the same loss."""
    spec, op, _, kw = CASES["jsd_bf16_50257_labels"]
    x, t, labels, _ = _inputs("jsd_bf16_50257_labels")
    with_grad = _call(op, x.clone().requires_grad_(True), t, labels, kw)
    with torch.no_grad():
        assert torch.equal(_call(op, x, t, labels, kw), with_grad.detach())


def _check_loss_and_gradient(name, spread=3.0, label=""):
    """The case's loss and its input's gradient (a random incoming
    gradient) against float64 on fresh inputs of `spread`; the gradient in
    the input's dtype and finite."""
    spec, op, _, kw = CASES[name]
    x, t, labels, seed = _inputs(name, spread)
    leaf = x.clone().requires_grad_(True)
    loss = _call(op, leaf, t, labels, kw)
    ref_x = x.to(torch.float64).requires_grad_(True)
    expected = _reference(op, ref_x, t.to(torch.float64), labels, kw)
    what = "%s%s (seed %d)" % (name, label, seed)
    # The KL divergence's loss is f32 (Liger-Kernel's), the JSD's of the
    # input's dtype.
    _check(loss, expected.detach(), "f32" if op == "kl_div" else spec.dtype, what + " loss")
    dloss = torch.rand(loss.shape, device="cuda", dtype=loss.dtype) + 0.5
    loss.backward(dloss)
    expected.backward(dloss.to(torch.float64))
    assert leaf.grad.dtype == x.dtype
    assert torch.isfinite(leaf.grad).all(), what + " gradient: not finite"
    _check(leaf.grad, ref_x.grad, spec.dtype, what + " gradient")


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_loss_and_its_gradient_are_pytorchs(name):
    _check_loss_and_gradient(name)


@pytest.mark.parametrize("name", ["jsd_bf16_50257_labels", "jsd_f16_128256_reverse_kl",
                                  "jsd_f32_7_forward_kl", "kl_f32_262147_log"])
def test_peaked_distributions_match_float64(name):
    """Logits 40 times wider than the other tests' (log-probabilities
    hundreds below zero): most of each row's probabilities are below
    2^-126, where the row kernels' fast exponentials (ex2.approx.ftz) give
    0 and the float64 reference a subnormal or less. The loss and the
    gradient still match it, with no NaN or infinity."""
    _check_loss_and_gradient(name, spread=120.0, label=" peaked")


def test_ignored_rows_may_hold_anything():
    """An ignored token's row of -inf and NaN adds nothing to the loss and
    gets a gradient row of exact zeros; the counted rows' results are
    those of the same inputs with the ignored rows finite."""
    spec, op, _, kw = CASES["jsd_bf16_50257_labels"]
    x, t, labels, seed = _inputs("jsd_bf16_50257_labels")
    ignored = labels == kw.get("ignore_index", -100)

    def run(x, t):
        leaf = x.clone().requires_grad_(True)
        loss = _call(op, leaf, t, labels, kw)
        loss.backward()
        return loss.detach(), leaf.grad
    loss, grad = run(x, t)
    x[ignored, ::2], t[ignored, ::2] = float("-inf"), float("-inf")
    x[ignored, 1::7], t[ignored, 3::7] = float("nan"), float("nan")
    dirty_loss, dirty_grad = run(x, t)
    what = "seed %d" % seed
    assert torch.equal(dirty_loss, loss), what
    assert not dirty_grad[ignored].any() and not dirty_grad.isnan().any(), what
    assert torch.equal(dirty_grad[~ignored], grad[~ignored]), what


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_output_element_is_written(name):
    """The kernels' outputs, poisoned with NaN before the launch, hold no
    NaN after it: each token's loss (each element's, for reduction none)
    and each gradient element, ignored tokens' zeros included."""
    spec, op, (tokens, vocab), kw = CASES[name]
    x, t, labels, _ = _inputs(name)
    extra = [] if labels is None else [labels]
    loss_shape = (tokens, vocab) if op == "kl_div" and spec.pointwise else (tokens,)

    def poisoned(shape, like=None):
        return torch.full(shape, float("nan"), device="cuda",
                          dtype=torch.float32 if like is None else like.dtype)
    loss, grad = poisoned(loss_shape), poisoned(x.shape, x)
    g = torch.rand(loss_shape, device="cuda")
    if op == "kl_div":
        fwd, bwd = bundles.kernels(spec)
        fwd(x, t, out=[loss])
        bwd(t, g, out=[grad])
        if not spec.pointwise:
            # The loss and the gradient in one kernel: the same results.
            both_loss, both_grad = poisoned(loss_shape), poisoned(x.shape, x)
            bundles.load(spec)["fwd_grad_rowwise_0"](x, t, g, out=[both_loss, both_grad])
            torch.testing.assert_close(both_loss, loss, rtol=1e-5, atol=1e-6,
                                       msg=lambda m: name + ": the fused loss differs: " + m)
            assert torch.equal(both_grad, grad), name + ": the fused gradient differs"
    else:
        bundle = bundles.load(spec)
        bundle["fwd_rowwise_0"](x, t, g, *extra, out=[loss, grad])
        alone = poisoned(loss_shape)
        bundle["loss_rowwise_0"](x, t, *extra, out=[alone])
        # The same loss, not the same bits: the loss-only kernel may run
        # with more threads per row (1024 against 256 at vocabulary 50257),
        # which sums the row's f32 terms in another order.
        torch.testing.assert_close(alone, loss, rtol=1e-5, atol=1e-6,
                                   msg=lambda m: name + ": the loss alone differs: " + m)
    assert not loss.isnan().any(), name + " loss"
    assert not grad.isnan().any(), name + " gradient"


def test_the_distillation_losses_compile_with_no_graph_break():
    name = "jsd_bf16_50257_labels"
    x, t, labels, _ = _inputs(name)
    p = t.float().exp()

    def loss_of(x, t, p, labels):
        return ops.jsd(x, t, labels) + ops.kl_div(x, p.to(x.dtype))

    explained = torch._dynamo.explain(loss_of)(x, t, p, labels)
    assert explained.graph_break_count == 0, [r.reason for r in explained.break_reasons]
    leaf = x.clone().requires_grad_(True)
    eager = torch.autograd.grad(loss_of(leaf, t, p, labels), leaf)[0]
    compiled = torch.compile(loss_of, fullgraph=True)
    got = torch.autograd.grad(compiled(leaf, t, p, labels), leaf)[0]
    torch.testing.assert_close(got, eager)

"""liger.ops.kl_div and liger.ops.jsd on the CPU through the reference
lowering (the kernels' module: a loss per token, added up by the
operator) against float64 PyTorch formulas: the loss and the gradient of
the input, in f32, f16 and bf16, over odd vocabularies, for every
reduction and beta, with and without shift labels; every bad argument
refused with its message."""

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import refs  # noqa: E402
from liger import ops  # noqa: E402
from liger.errors import LigerError, LigerTypeError, LigerValueError  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Relative to the largest reference magnitude, as test_cpu_reference's.
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}


@pytest.fixture(autouse=True)
def reference(cpu_reference):
    yield


def _log_probs(rows, vocab, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, vocab, generator=g, dtype=torch.float64) * 2).log_softmax(-1) \
        .to(dtype)


def _close(got, want, dtype, what):
    """got (liger's) against the float64 want, both of the same shape."""
    got, want = got.double(), want.double()
    scale = max(want.abs().max().item(), 1e-30)
    err = (got - want).abs().max().item() / scale
    assert err <= TOL[dtype] + 1e-6 / scale, "%s: max error %.3g of max |ref| %.3g" % (
        what, err, scale)


@pytest.mark.parametrize("rows,vocab", [(1, 1), (3, 7), (5, 33)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", ["batchmean", "sum", "mean", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_is_pytorchs(rows, vocab, dtype, reduction, log_target):
    x = _log_probs(rows, vocab, 1, dtype).requires_grad_()
    t = _log_probs(rows, vocab, 2, dtype)
    if not log_target:
        t = t.exp()
    loss = ops.kl_div(x, t, reduction=reduction, log_target=log_target)
    x64 = x.detach().double().requires_grad_()
    want = F.kl_div(x64, t.double(), reduction=reduction, log_target=log_target)
    assert loss.dtype == torch.float32 and loss.shape == want.shape
    _close(loss, want, torch.float32 if dtype == torch.float32 else torch.float16, "loss")
    g = torch.randn(want.shape, generator=torch.Generator().manual_seed(3))
    (dx,) = torch.autograd.grad(loss, x, g)
    want.backward(g.double())
    assert dx.dtype == dtype
    _close(dx, x64.grad, dtype, "dx")


@pytest.mark.parametrize("rows,vocab", [(1, 1), (4, 7), (6, 33)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("beta", [0.0, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("labels", [None, torch.int64, torch.int32], ids=str)
def test_jsd_is_liger_kernels(rows, vocab, dtype, beta, labels):
    x = _log_probs(rows, vocab, 4, dtype).requires_grad_()
    y = _log_probs(rows, vocab, 5, dtype)
    lab = None
    if labels is not None:
        lab = torch.randint(0, vocab, (rows,), generator=torch.Generator().manual_seed(6),
                            dtype=labels)
        lab[0] = -100
    loss = ops.jsd(x, y, lab, beta=beta)
    x64 = x.detach().double().requires_grad_()
    want = refs.jsd(x64, y.double(), beta, lab)
    assert loss.dtype == dtype and loss.shape == ()
    _close(loss, want, dtype, "loss")
    (dx,) = torch.autograd.grad(loss, x, torch.tensor(1.7, dtype=dtype))
    want.backward(torch.tensor(1.7, dtype=torch.float64))
    assert dx.dtype == dtype
    _close(dx, x64.grad, dtype, "dx")


@pytest.mark.parametrize("reduction", ["batchmean", "sum", "mean"])
def test_the_kl_div_without_a_gradient_is_the_same_loss(reduction):
    """A reduced KL divergence whose input needs a gradient forms it in its
    forward's kernel; without one (torch.no_grad, or an input that needs
    none) the loss-only kernel runs: the same loss either way, and the
    gradient formed in the forward, scaled by the incoming one, is
    PyTorch's."""
    x, t = _log_probs(3, 7, 15, torch.float32), _log_probs(3, 7, 16, torch.float32).exp()
    leaf = x.clone().requires_grad_(True)
    with_grad = ops.kl_div(leaf, t, reduction)
    with torch.no_grad():
        assert torch.equal(ops.kl_div(x.clone().requires_grad_(True), t, reduction),
                           with_grad.detach())
    alone = ops.kl_div(x, t, reduction)
    assert torch.equal(alone, with_grad.detach()) and not alone.requires_grad
    with_grad.backward(torch.tensor(2.5))
    x64 = x.double().requires_grad_(True)
    F.kl_div(x64, t.double(), reduction=reduction).backward(torch.tensor(2.5, dtype=torch.float64))
    _close(leaf.grad, x64.grad, torch.float32, "dx")


def test_an_f16_kl_div_gradient_survives_a_loss_scale():
    """f16 with reduction mean: -target / (tokens · vocab) is below f16's
    smallest subnormal here, so a gradient formed in the forward for a unit
    incoming gradient would be 0 before a loss scaler's 2^16 reached it;
    the gradient is -target · dloss / divisor, rounded once."""
    x = _log_probs(8, 2000, 24, torch.float16).requires_grad_(True)
    t = _log_probs(8, 2000, 25, torch.float16).exp()
    scale = torch.tensor(2.0 ** 16)
    (dx,) = torch.autograd.grad(ops.kl_div(x, t, "mean"), x, scale)
    x64 = x.detach().double().requires_grad_(True)
    F.kl_div(x64, t.double(), reduction="mean").backward(scale.double())
    # (a gradient element is 0 where the target is, nowhere else)
    assert torch.equal(dx == 0, t == 0), "%d zeros where the target is not 0" % (
        ((dx == 0) & (t != 0)).sum().item())
    _close(dx, x64.grad, torch.float16, "dx")


def test_a_direct_call_without_want_grad_still_differentiates():
    """liger::kl_div called with want_grad False on an input that needs a
    gradient: the backward forms it from the target (no gradient silently
    lost)."""
    from liger import operators
    x = _log_probs(3, 7, 26, torch.float32).requires_grad_(True)
    t = _log_probs(3, 7, 27, torch.float32).exp()
    loss, _ = operators.kl_div(x, t, "batchmean", False, 1e-10, False)
    loss.backward(torch.tensor(1.5))
    x64 = x.detach().double().requires_grad_(True)
    F.kl_div(x64, t.double(), reduction="batchmean").backward(torch.tensor(1.5).double())
    _close(x.grad, x64.grad, torch.float32, "dx")


def test_the_jsd_without_a_gradient_is_the_same_loss():
    """Under torch.no_grad (or for an input that needs no gradient) the
    JSD runs its loss-only function: the same loss, no gradient kept."""
    x, y = _log_probs(3, 7, 13, torch.bfloat16), _log_probs(3, 7, 14, torch.bfloat16)
    lab = torch.tensor([2, -100, 5])
    with_grad = ops.jsd(x.clone().requires_grad_(True), y, lab, beta=0.7)
    assert with_grad.requires_grad
    with torch.no_grad():
        assert torch.equal(ops.jsd(x.clone().requires_grad_(True), y, lab, beta=0.7),
                           with_grad.detach())
    alone = ops.jsd(x, y, lab, beta=0.7)
    assert torch.equal(alone, with_grad.detach()) and not alone.requires_grad


@pytest.mark.parametrize("op", ["kl_div", "jsd", "fused_linear_jsd"])
def test_the_backward_gets_no_zeros_for_the_gradient_outputs(op):
    """The losses whose forward writes the input's gradient (an extra
    output, non-differentiable) do not have autograd materialize a
    [tokens, vocab] tensor of zeros as that output's incoming gradient
    (a 2 GiB fill per step at Llama-3's vocabulary): no zeros are made in
    the backward."""
    x = _log_probs(5, 33, 21, torch.float32).requires_grad_(True)
    y = _log_probs(5, 33, 22, torch.float32)
    if op == "kl_div":
        loss = ops.kl_div(x, y.exp(), "batchmean")
    elif op == "jsd":
        loss = ops.jsd(x, y)
    else:
        g = torch.Generator().manual_seed(23)
        w = torch.randn(40, 16, generator=g, dtype=torch.bfloat16)
        xs = torch.randn(5, 16, generator=g, dtype=torch.bfloat16).requires_grad_(True)
        loss = ops.fused_linear_jsd(xs, w.requires_grad_(True), xs.detach(), w.detach())
    with torch.profiler.profile() as prof:
        loss.backward(torch.tensor(1.5, dtype=loss.dtype))
    made = [e.name for e in prof.events() if e.name in ("aten::zeros", "aten::zeros_like",
                                                         "aten::zero_")]
    assert not made, "%s's backward made zeros: %s" % (op, made)


def test_jsd_over_no_counted_token_is_zero():
    x = _log_probs(2, 5, 7, torch.float32).requires_grad_()
    loss = ops.jsd(x, _log_probs(2, 5, 8, torch.float32), torch.tensor([-1, -1]),
                   ignore_index=-1)
    loss.backward()
    assert loss.item() == 0.0 and not x.grad.any()


def test_a_custom_ignore_index_skips_its_tokens():
    x, y = _log_probs(3, 9, 9, torch.float32), _log_probs(3, 9, 10, torch.float32)
    lab = torch.tensor([0, 4, 0])
    got = ops.jsd(x, y, lab, beta=0.2, ignore_index=0)
    _close(got, refs.jsd(x[1:2].double(), y[1:2].double(), 0.2), torch.float32, "loss")


@pytest.mark.parametrize("call,kind,message", [
    (lambda x, t: ops.kl_div(x, t, reduction="batch"), LigerValueError,
     "reduction must be one of 'none', 'sum', 'mean', 'batchmean', got 'batch'"),
    (lambda x, t: ops.kl_div(x, t, eps=0.0), LigerValueError, "eps must be > 0.0, got 0.0"),
    (lambda x, t: ops.kl_div(x, t, log_target=1), LigerTypeError,
     "log_target must be a bool, got 1"),
    (lambda x, t: ops.kl_div(x[0], t[0]), LigerValueError,
     "liger.ops.kl_div: input must be [tokens, vocab] with at least one token, got shape [7]"),
    (lambda x, t: ops.kl_div(x[:0], t[:0]), LigerValueError,
     "liger.ops.kl_div: input must be [tokens, vocab] with at least one token, got shape "
     "[0, 7]"),
    (lambda x, t: ops.kl_div(x, t[:2]), LigerValueError,
     "liger.ops.kl_div: target must have the shape of input [3, 7], got [2, 7]"),
    (lambda x, t: ops.kl_div(x, t.double()), LigerTypeError,
     "liger.ops.kl_div: target must have the dtype of input (torch.float32), got "
     "torch.float64"),
    (lambda x, t: ops.jsd(x, t, beta=1.5), LigerValueError, "beta must be <= 1.0, got 1.5"),
    (lambda x, t: ops.jsd(x, t, torch.tensor([1, 2])), LigerValueError,
     "liger.ops.jsd: shift_labels must have shape [3] (one label per token), got [2]"),
    (lambda x, t: ops.jsd(x, t, torch.tensor([1.0, 2.0, 3.0])), LigerTypeError,
     "liger.ops.jsd: shift_labels' dtype must be i32 or i64, got torch.float32"),
    (lambda x, t: ops.jsd(x, t, ignore_index=2 ** 63), LigerValueError,
     "ignore_index must be in [-9223372036854775808, 9223372036854775807], got "
     "9223372036854775808"),
    (lambda x, t: ops.jsd(x, [1.0]), LigerTypeError,
     "liger.ops.jsd: target must be a torch.Tensor, got list"),
    (lambda x, t: ops.jsd(x.half(), t.half().view(7, 3)), LigerValueError,
     "liger.ops.jsd: target must have the shape of input [3, 7], got [7, 3]"),
], ids=range(13))
def test_a_bad_call_is_refused_with_its_reason(call, kind, message):
    x, t = _log_probs(3, 7, 11, torch.float32), _log_probs(3, 7, 12, torch.float32)
    with pytest.raises(kind) as e:
        call(x, t)
    assert str(e.value) == message


def test_the_kernels_spec_is_what_precompile_takes():
    """The error for a configuration without kernels names a spec that
    `python -m liger.ops precompile` takes back (parse_spec round trip)."""
    from liger import specs
    for spec in (specs.kl_div_spec(50257, torch.bfloat16, log_target=True, pointwise=True),
                 specs.jsd_spec(128256, "f16", beta=0.1, ignore_index=7, labels=torch.int32),
                 specs.jsd_spec(7, "f32"),
                 specs.jsd_spec(128256, "bf16", labels="i64", temperature=0.7)):
        assert specs.parse_spec(str(spec)) == spec
    with pytest.raises(LigerError):
        specs.parse_spec("jsd:vocab=7,dtype=f32,labels=i16")


def test_a_jsd_of_log_probabilities_keeps_its_spec_text():
    """The temperature (the fused linear JSD's logits form) is written only
    where set: the spec text, and so the bundle key, of a JSD over
    log-probabilities is what it was before the field existed, and a
    temperature makes another kernel."""
    from liger import specs
    plain = specs.jsd_spec(128256, "bf16", labels="i64")
    assert str(plain) == "jsd:beta=0.5,dtype=bf16,ignore_index=-100,labels=i64,vocab=128256"
    warm = specs.jsd_spec(128256, "bf16", labels="i64", temperature=2.0)
    assert str(warm) == str(plain).replace(",vocab", ",temperature=2.0,vocab")
    assert warm.key() != plain.key()
    assert "temperature = 2.000000000e+00 per_token" in warm.module_text()
    assert "temperature" not in plain.module_text()


@pytest.mark.parametrize("temperature,kind,message", [
    (0, LigerValueError, "temperature must be > 0 (the logits are divided by it), got 0.0"),
    (-1.0, LigerValueError, "temperature must be > 0 (the logits are divided by it), got -1.0"),
    (True, LigerTypeError, "temperature must be a number, got True"),
    (float("nan"), LigerValueError, "temperature must be finite, got nan"),
    ("2", LigerTypeError, "temperature must be a number, got '2'"),
    # (subnormal in f32: its reciprocal overflows; the dialect refuses it too)
    (1e-40, LigerValueError, "temperature must be an f32: 0 or of a magnitude in "
     "[1.1754943508222875e-38, 3.4028234663852886e+38], got 1e-40")])
def test_a_jsd_spec_refuses_a_temperature_not_above_0(temperature, kind, message):
    from liger import specs
    with pytest.raises(kind) as e:
        specs.jsd_spec(128256, "bf16", temperature=temperature)
    assert str(e.value) == message


@pytest.mark.parametrize("op", ["kl_div", "jsd"])
def test_each_backward_of_a_kept_graph_gets_its_own_gradient(op):
    """The backward scales the gradient the forward formed over that
    gradient itself (liger.scale in place) only where nothing reads it
    again: with the graph kept each backward forms its own product, and
    the last one (the graph released) scales in place. Every one is
    PyTorch's for its incoming gradient, 1 and 0 included."""
    x = _log_probs(5, 33, 7, torch.float32).requires_grad_()
    t = _log_probs(5, 33, 8, torch.float32)
    x64 = x.detach().double().requires_grad_()
    if op == "kl_div":
        loss = ops.kl_div(x, t.exp(), reduction="batchmean")
        want = F.kl_div(x64, t.exp().double(), reduction="batchmean")
    else:
        loss = ops.jsd(x, t, beta=0.3)
        want = refs.jsd(x64, t.double(), 0.3, None)
    dlosses = [2.5, 1.0, 0.0, -3.0, 1.0]
    for i, dloss in enumerate(dlosses):
        last = i == len(dlosses) - 1
        (dx,) = torch.autograd.grad(loss, x, torch.tensor(dloss, dtype=loss.dtype),
                                    retain_graph=not last)
        (want_dx,) = torch.autograd.grad(want, x64, torch.tensor(dloss, dtype=torch.float64),
                                         retain_graph=True)
        _close(dx, want_dx, torch.float32, "dx for dloss %s" % dloss)


def _kl_div_op(x, t, _labels):
    return torch.ops.liger.kl_div(x, t.exp(), "batchmean", False, 1e-10, True)


def _kl_div_ref(x64, t, _labels):
    return F.kl_div(x64, t.double().exp(), reduction="batchmean")


def _jsd_op(x, t, labels):
    return torch.ops.liger.jsd(x, t, labels, 0.3, -100, True)


def _jsd_ref(x64, t, labels):
    return refs.jsd(x64, t.double(), 0.3, labels)


@pytest.mark.parametrize("op,ref", [(_kl_div_op, _kl_div_ref), (_jsd_op, _jsd_ref)],
                         ids=["kl_div", "jsd"])
@pytest.mark.parametrize("dropped", [False, True])
def test_the_gradient_output_changes_only_where_the_caller_dropped_it(op, ref, dropped):
    """torch.ops.liger.kl_div and jsd return the gradient their forward
    formed (for a unit incoming gradient) beside the loss. The backward
    scales that tensor over itself only where the caller said it dropped
    it (operators.grads_dropped, which liger.ops' functions call): a caller
    holding it sees it unchanged, and gets the same gradient apart."""
    from liger import operators
    x = _log_probs(4, 9, 11, torch.float32).requires_grad_()
    t = _log_probs(4, 9, 12, torch.float32)
    labels = torch.tensor([3, -100, 0, 8])
    loss, grad = op(x, t, labels)
    unit = grad.clone()
    if dropped:
        operators.grads_dropped(loss)
    (dx,) = torch.autograd.grad(loss, x, torch.tensor(2.5))
    x64 = x.detach().double().requires_grad_()
    ref(x64, t, labels).backward(torch.tensor(2.5).double())
    _close(dx, x64.grad, torch.float32, "dx")
    assert (dx.data_ptr() == grad.data_ptr()) == dropped
    if not dropped:
        assert torch.equal(grad, unit), "the caller's gradient output changed"


@pytest.mark.parametrize("labelled", [False, True])
def test_the_raw_jsd_operator_over_no_token_is_zero(labelled):
    """torch.ops.liger.jsd called with no row (liger.ops.jsd refuses it):
    a loss of 0 and an empty gradient, with shift labels or without."""
    x = _log_probs(3, 7, 13, torch.float32)[:0].requires_grad_()
    t = _log_probs(3, 7, 14, torch.float32)[:0]
    labels = torch.zeros(0, dtype=torch.int64) if labelled else None
    loss, grad = torch.ops.liger.jsd(x, t, labels, 0.5, -100, True)
    assert loss.shape == () and loss.item() == 0.0
    assert grad.shape == (0, 7)

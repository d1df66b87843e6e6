"""liger.nn on the GPU: each module, built as Liger-Kernel's is, against
its plain-PyTorch computation in float64 on the same parameters (forward
and gradients), on configurations whose liger.ops bundles
scripts/build-gpu-bundles.sh compiles (kernels.ops_cases and friends).
Skips cleanly without torch, a GPU, the runtime or the bundles."""

import types

import pytest

import kernels

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import nn  # noqa: E402
from test_ops_autograd import check, reference  # noqa: E402

F = torch.nn.functional
pytestmark = pytest.mark.usefixtures("ops_bundles")
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


def _compare(module, plain, inputs, dt, name):
    """module(*inputs) and its gradients (inputs and parameters) against
    plain(params64, *inputs64) through float64 autograd."""
    leaves = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    x64 = [x.detach().double().requires_grad_(True) if x.is_floating_point() else x
           for x in inputs]
    p64 = {k: v.detach().double().requires_grad_(True) for k, v in module.named_parameters()}
    out, expected = module(*leaves), plain(p64, *x64)
    check(out, expected.detach(), dt, name + " output")
    dy = torch.rand(out.shape, device="cuda") + 0.5
    out.backward(dy.to(out.dtype))
    expected.backward(dy.double())
    for i, x in enumerate(leaves):
        if x.is_floating_point():
            check(x.grad, x64[i].grad, dt, "%s gradient of input %d" % (name, i))
    for k, v in module.named_parameters():
        check(v.grad, p64[k].grad, dt, "%s gradient of %s" % (name, k))


@pytest.mark.parametrize("name,hidden,shape,dt,kw", [
    ("rms_llama_bf16", 1000, (2, 7, 1000), "bf16", {}),
    ("rms_gemma_f32", 4096, (5, 4096), "f32", dict(eps=1e-5, offset=1.0, casting="gemma")),
])
def test_rms_norm(name, hidden, shape, dt, kw):
    m = nn.LigerRMSNorm(hidden, eps=kw.get("eps", 1e-6), offset=kw.get("offset", 0.0),
                        casting_mode=kw.get("casting", "llama")).to("cuda", DTYPES[dt])
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
    x = torch.randn(shape, device="cuda").to(DTYPES[dt])
    _compare(m, lambda p, x: reference("rms_norm", dt, [x, p["weight"]], kw)[0], [x], dt,
             name)


def test_layer_norm():
    """LigerLayerNorm's defaults (eps 1e-6, a bias parameter): liger.ops'
    "ln_bf16_1000" configuration."""
    spec, shape = kernels.ops_norm_cases()["ln_bf16_1000"]
    m = nn.LigerLayerNorm(1000).to("cuda", torch.bfloat16)
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
        m.bias.normal_()
    x = (torch.randn(shape, device="cuda") * 2 + 3).to(torch.bfloat16)
    _compare(m, lambda p, x: F.layer_norm(x, (1000,), p["weight"], p["bias"], spec.eps), [x],
             "bf16", "ln_bf16_1000")


def test_fused_add_rms_norm():
    """LigerFusedAddRMSNorm's defaults: liger.ops' "add_rms_bf16_1000"
    configuration; both outputs get an incoming gradient."""
    spec, shape = kernels.ops_norm_cases()["add_rms_bf16_1000"]
    m = nn.LigerFusedAddRMSNorm(1000).to("cuda", torch.bfloat16)
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
    x, res = (torch.randn(shape, device="cuda").to(torch.bfloat16) for _ in range(2))
    lx, lres = x.clone().requires_grad_(True), res.clone().requires_grad_(True)
    x64, res64 = (t.double().requires_grad_(True) for t in (x, res))
    w64 = m.weight.detach().double().requires_grad_(True)
    out, want = m(lx, lres), kernels.norm_reference(spec, [x64, res64, w64])
    dys = [torch.rand(o.shape, device="cuda").to(o.dtype) + 0.5 for o in out]
    torch.autograd.backward(out, dys)
    torch.autograd.backward(want, [d.double() for d in dys])
    for i, (o, w) in enumerate(zip(out, want)):
        check(o, w.detach(), "bf16", "add_rms_bf16_1000 output %d" % i)
    for name, got, ref in (("x", lx, x64), ("residual", lres, res64), ("weight", m.weight, w64)):
        check(got.grad, ref.grad, "bf16", "add_rms_bf16_1000 gradient of " + name)


@pytest.mark.parametrize("name,cls,act,op,inter,dt", [
    ("swiglu_bf16", nn.LigerSwiGLUMLP, "silu", "swiglu", 5120, "bf16"),
    ("geglu_f32", nn.LigerGEGLUMLP, "gelu_pytorch_tanh", "geglu", 1000, "f32"),
])
def test_gated_mlp(name, cls, act, op, inter, dt):
    config = types.SimpleNamespace(hidden_size=64, intermediate_size=inter, hidden_act=act)
    m = cls(config).to("cuda", DTYPES[dt])

    def plain(p, x):
        gate, up = (F.linear(x, p[n + "_proj.weight"]) for n in ("gate", "up"))
        return F.linear(reference(op, dt, [gate, up], {})[0], p["down_proj.weight"])
    _compare(m, plain, [torch.randn(33, 64, device="cuda").to(DTYPES[dt])], dt, name)


def test_cross_entropy_loss():
    # liger.ops' "ce_bf16_mean" configuration (vocabulary 1000, int64).
    x = (torch.randn(37, 1000, device="cuda") * 2).to(torch.bfloat16)
    t = torch.randint(0, 1000, (37,), device="cuda")
    t[::4] = -100
    _compare(nn.LigerCrossEntropyLoss(), lambda p, x, t: F.cross_entropy(x, t), [x, t],
             "bf16", "ce_bf16_mean")


def test_cross_entropy_loss_with_the_z_loss():
    # liger.ops' "ce_bf16_zloss_mean" configuration (vocabulary 1000, the
    # z-loss returned apart), called as Liger-Kernel calls the module: a
    # CrossEntropyOutput back.
    m = nn.LigerCrossEntropyLoss(None, -100, 1e-4, 0.0, "mean", None, True)
    x = (torch.randn(37, 1000, device="cuda") * 2).to(torch.bfloat16)
    t = torch.randint(0, 1000, (37,), device="cuda")
    t[::4] = -100
    leaf = x.clone().requires_grad_(True)
    out = m(leaf, t)
    assert isinstance(out, nn.CrossEntropyOutput) and out.token_accuracy is None
    assert not out.z_loss.requires_grad
    x64 = x.double().requires_grad_(True)
    z_loss = 1e-4 * (torch.logsumexp(x64, -1) ** 2)[t != -100].mean()
    expected = F.cross_entropy(x64, t) + z_loss
    check(out.loss, expected.detach(), "bf16", "ce loss")
    check(out.z_loss, z_loss.detach(), "bf16", "ce z-loss")
    out.loss.backward()
    expected.backward()
    check(leaf.grad, x64.grad, "bf16", "ce gradient of _input")


def test_fused_linear_cross_entropy_loss():
    # liger.ops' "flce_bf16_dw_f32" configuration (lm_head [1000, 256], dW
    # summed in f32), in three chunks; the logits rounded to bf16 as the
    # op's meaning says.
    m = nn.LigerFusedLinearCrossEntropyLoss(accum_dtype=torch.float32,
                                            memory_budget=128 * 1000 * 2)
    x = torch.randn(300, 256, device="cuda").to(torch.bfloat16)
    w = (torch.randn(1000, 256, device="cuda") * 3 / 16).to(torch.bfloat16)
    t = torch.randint(0, 1000, (300,), device="cuda")
    t[::5] = -100
    lx, lw = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    loss = m(lw, lx, t)
    x64, w64 = (v.double().requires_grad_(True) for v in (x, w))
    expected = F.cross_entropy((x64 @ w64.t()).to(torch.bfloat16).double(), t)
    check(loss, expected.detach(), "bf16", "flce loss")
    loss.backward()
    expected.backward()
    check(lx.grad, x64.grad, "bf16", "flce gradient of _input")
    check(lw.grad, w64.grad, "bf16", "flce gradient of lin_weight")


def test_fused_linear_cross_entropy_loss_with_a_bias_and_the_z_loss():
    # liger.ops' "flce_bf16_bias_zloss_mean" configuration (lm_head [1000,
    # 256] with a bias, label smoothing, the z-loss returned apart), called
    # as Liger-Kernel calls the module: (lin_weight, _input, target, bias),
    # a CrossEntropyOutput back.
    m = nn.LigerFusedLinearCrossEntropyLoss(None, -100, 1e-4, 0.1, "mean", None, True,
                                            memory_budget=128 * 1000 * 2)
    x = torch.randn(300, 256, device="cuda").to(torch.bfloat16)
    w = (torch.randn(1000, 256, device="cuda") * 3 / 16).to(torch.bfloat16)
    b = torch.randn(1000, device="cuda").to(torch.bfloat16)
    t = torch.randint(0, 1000, (300,), device="cuda")
    t[::5] = -100
    lx, lw, lb = (v.clone().requires_grad_(True) for v in (x, w, b))
    out = m(lw, lx, t, lb)
    assert isinstance(out, nn.CrossEntropyOutput) and out.token_accuracy is None
    x64, w64, b64 = (v.double().requires_grad_(True) for v in (x, w, b))
    z = (x64 @ w64.t() + b64).to(torch.bfloat16).double()
    z_loss = 1e-4 * (torch.logsumexp(z, -1) ** 2)[t != -100].mean()
    expected = F.cross_entropy(z, t, label_smoothing=0.1) + z_loss
    check(out.loss, expected.detach(), "bf16", "flce loss")
    check(out.z_loss, z_loss.detach(), "bf16", "flce z-loss")
    out.loss.backward()
    expected.backward()
    check(lx.grad, x64.grad, "bf16", "flce gradient of _input")
    check(lw.grad, w64.grad, "bf16", "flce gradient of lin_weight")
    check(lb.grad, b64.grad, "bf16", "flce gradient of bias")

"""A loss group planned by the compiler (liger-plan-loss, in
liger-compile) and run by liger.runtime.run_loss_plan, on the CPU: the
bundle's plan names the chunk functions' kernels, which run here through the
reference lowering, chunk by chunk, against float64 PyTorch; and the plan's
kernels are the very ones liger.ops compiles for the same configuration."""
import json
import os
import subprocess

import pytest

from liger import driver, ops, reference, runtime
from liger.driver import LigerError

torch = pytest.importorskip("torch")

STEP = """func.func @step(%h: tensor<?x256xbf16>, %w: tensor<1000x256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x256xbf16>, tensor<1000x256xbf16>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t label_smoothing = 0.1 : tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g label_smoothing = 0.1 : tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x256xbf16>, tensor<1000x256xbf16>
}
"""
STEP_WEIGHTED = """func.func @step(%h: tensor<?x256xbf16>, %w: tensor<1000x256xbf16>, %t: tensor<?xi64>, %cw: tensor<1000xf32>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x256xbf16>, tensor<1000x256xbf16>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t class_weight(%cw : tensor<1000xf32>) label_smoothing = 0.1 : tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g class_weight(%cw : tensor<1000xf32>) label_smoothing = 0.1 : tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x256xbf16>, tensor<1000x256xbf16>
}
"""
# An lm_head with a bias, the z-loss returned apart: the group's results are
# the loss, the z-loss, dh, dW and the bias's gradient.
STEP_BIAS = """func.func @step(%h: tensor<?x256xbf16>, %w: tensor<1000x256xbf16>, %t: tensor<?xi64>, %b: tensor<1000xbf16>, %g: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<1000xbf16>) {
  %l, %z = liger.fused_linear_cross_entropy %h, %w, %t bias(%b : tensor<1000xbf16>) label_smoothing = 0.1 lse_square_scale = 1.0e-3 z_loss : tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<?xi64>
  %dh, %dw, %db = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g bias(%b : tensor<1000xbf16>) label_smoothing = 0.1 lse_square_scale = 1.0e-3 : tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %z, %dh, %dw, %db : tensor<f32>, tensor<f32>, tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<1000xbf16>
}
"""
BUDGET = 128 * 1000 * 2  # chunks of 128 tokens


def _tools():
    try:
        for tool in ("liger-compile", "liger-opt", "liger-cpu-runner"):
            driver.find_tool(tool)
    except LigerError as e:
        pytest.skip(str(e))
    if not (os.path.exists(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                                        "bin", "ptxas"))):
        pytest.skip("no ptxas: liger-compile cannot write a bundle")


def _compile(tmp_path, text, name):
    src = tmp_path / (name + ".mlir")
    src.write_text(text)
    out = tmp_path / (name + ".bundle")
    subprocess.run([driver.find_tool("liger-compile"), str(src), "--matmul-kernels",
                    "--target=sm_90a", "--loss-memory-budget=%d" % BUDGET, "-o", str(out)],
                   check=True, capture_output=True, text=True)
    return out


def test_a_per_token_plan_runs_chunk_by_chunk(tmp_path):
    """reduction = none: each token's loss, and the gradients of each
    token's incoming gradient; a summed incoming gradient is refused."""
    _tools()
    text = STEP.replace("tensor<f32>", "tensor<?xf32>").replace(
        "label_smoothing = 0.1", "label_smoothing = 0.1 reduction = none")
    manifest = json.load(open(_compile(tmp_path, text, "step") / "manifest.json"))
    (plan,) = manifest["plans"]
    assert plan["chunk_tokens"] == 128 and plan["mean"] is False
    planned = driver.run_opt(text, ["--liger-fuse-linear-cross-entropy",
                                    "--liger-plan-loss=memory-budget=%d" % BUDGET])
    bundle = reference.ReferenceBundle(planned, plans=manifest["plans"])
    g = torch.Generator().manual_seed(6)
    n = 200  # two chunks, the last partial
    h = torch.randn(n, 256, generator=g).to(torch.bfloat16)
    w = (torch.randn(1000, 256, generator=g) * 3 / 16).to(torch.bfloat16)
    t = torch.randint(0, 1000, (n,), generator=g)
    t[::7] = -100
    dl = torch.rand(n, generator=g) * 2 - 0.5
    loss, dh, dw = runtime.run_loss_plan(bundle, h, w, t, grad_loss=dl)

    h64, w64 = h.double().requires_grad_(True), w.double().requires_grad_(True)
    z = (h64 @ w64.t()).to(torch.bfloat16).to(torch.float64)
    ref = torch.nn.functional.cross_entropy(z, t, label_smoothing=0.1, reduction="none")
    ref.backward(dl.double())
    assert loss.shape == (n,) and loss.dtype == torch.float32
    torch.testing.assert_close(loss.double(), ref.detach(), rtol=1e-4, atol=1e-4)
    for got, want in ((dh, h64.grad), (dw, w64.grad)):
        err = ((got.double() - want).norm() / want.norm()).item()
        assert err < 2e-2, err
    with pytest.raises(ValueError, match=r"the plan of @step is of a loss per token: "
                                         r"grad_loss must have shape \[200\], got \[\]"):
        runtime.run_loss_plan(bundle, h, w, t, grad_loss=torch.tensor(1.0))


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "class_weight"])
def test_the_compiled_plan_runs_chunk_by_chunk(tmp_path, weighted):
    """With class weights the loss function takes them and the mean divides
    by the counted tokens' total weight."""
    _tools()
    text = STEP_WEIGHTED if weighted else STEP
    manifest = json.load(open(_compile(tmp_path, text, "step") / "manifest.json"))
    (plan,) = manifest["plans"]
    assert plan["chunk_tokens"] == 128 and plan["mean"] is True
    assert plan["class_weight"] is weighted
    planned = driver.run_opt(text, ["--liger-fuse-linear-cross-entropy",
                                    "--liger-plan-loss=memory-budget=%d" % BUDGET])
    bundle = reference.ReferenceBundle(planned, plans=manifest["plans"])
    g = torch.Generator().manual_seed(5)
    n = 300  # three chunks, the last partial
    h = torch.randn(n, 256, generator=g).to(torch.bfloat16)
    w = (torch.randn(1000, 256, generator=g) * 3 / 16).to(torch.bfloat16)
    t = torch.randint(0, 1000, (n,), generator=g)
    t[::7] = -100
    cw = torch.rand(1000, generator=g) + 0.5 if weighted else None
    loss, dh, dw = runtime.run_loss_plan(bundle, h, w, t, grad_loss=torch.tensor(0.75),
                                         class_weight=cw)

    h64, w64 = h.double().requires_grad_(True), w.double().requires_grad_(True)
    z = (h64 @ w64.t()).to(torch.bfloat16).to(torch.float64)
    ref = torch.nn.functional.cross_entropy(
        z, t, weight=cw.double() if weighted else None, label_smoothing=0.1)
    ref.backward(torch.tensor(0.75, dtype=torch.float64))
    assert abs(loss.item() - ref.item()) / abs(ref.item()) < 1e-4
    for got, want in ((dh, h64.grad), (dw, w64.grad)):
        assert got.dtype == torch.bfloat16
        err = ((got.double() - want).norm() / want.norm()).item()
        assert err < 2e-2, err


def test_a_plan_with_a_bias_and_the_z_loss_runs_chunk_by_chunk(tmp_path):
    """The logits kernel takes the bias after W (its epilogue adds it), the
    loss kernel gives the z-loss after the loss; run_loss_plan returns the
    group's results in their order, dbias the column sums of G over the
    chunks; a missing or unexpected bias is refused."""
    _tools()
    manifest = json.load(open(_compile(tmp_path, STEP_BIAS, "step") / "manifest.json"))
    (plan,) = manifest["plans"]
    (module,) = manifest["modules"]
    params = {k["name"]: [(p["role"], p["dtype"], p["shape"]) for p in k["params"]]
              for k in module["kernels"]}
    assert params[plan["kernels"]["logits"]] == [
        ("input", "bf16", ["rows", 256]), ("input", "bf16", [1000, 256]),
        ("input", "bf16", [1000]), ("output", "bf16", ["rows", 1000])]
    assert [p[:2] for p in params[plan["kernels"]["ce"]] if p[0] == "output"] == [
        ("output", "f32"), ("output", "f32"), ("output", "bf16")]
    planned = driver.run_opt(STEP_BIAS, ["--liger-fuse-linear-cross-entropy",
                                         "--liger-plan-loss=memory-budget=%d" % BUDGET])
    bundle = reference.ReferenceBundle(planned, plans=manifest["plans"])
    g = torch.Generator().manual_seed(7)
    n = 300  # three chunks, the last partial
    h = torch.randn(n, 256, generator=g).to(torch.bfloat16)
    w = (torch.randn(1000, 256, generator=g) * 3 / 16).to(torch.bfloat16)
    b = torch.randn(1000, generator=g).to(torch.bfloat16)
    t = torch.randint(0, 1000, (n,), generator=g)
    t[::7] = -100
    loss, z_loss, dh, dw, db = runtime.run_loss_plan(bundle, h, w, t, bias=b,
                                                     grad_loss=torch.tensor(0.75))

    h64, w64 = h.double().requires_grad_(True), w.double().requires_grad_(True)
    b64 = b.double().requires_grad_(True)
    z = (h64 @ w64.t() + b64).to(torch.bfloat16).to(torch.float64)
    counted = t != -100
    want_z = 1e-3 * (torch.logsumexp(z, -1) ** 2)[counted].mean()
    ref = torch.nn.functional.cross_entropy(z, t, label_smoothing=0.1) + want_z
    ref.backward(torch.tensor(0.75, dtype=torch.float64))
    assert abs(loss.item() - ref.item()) / abs(ref.item()) < 1e-4
    assert abs(z_loss.item() - want_z.item()) / want_z.item() < 1e-4
    for got, want in ((dh, h64.grad), (dw, w64.grad), (db, b64.grad)):
        assert got.dtype == torch.bfloat16
        err = ((got.double() - want).norm() / want.norm()).item()
        assert err < 2e-2, err
    # Without the gradients: the loss and the z-loss, nothing else formed.
    alone = runtime.run_loss_plan(bundle, h, w, t, bias=b, want_dx=False, want_dw=False)
    assert alone[2:] == (None, None, None)
    with pytest.raises(ValueError, match="the plan of @step is of an lm_head with a bias, "
                                         "and bias was not given"):
        runtime.run_loss_plan(bundle, h, w, t)
    plain = reference.ReferenceBundle(driver.run_opt(STEP, [
        "--liger-fuse-linear-cross-entropy", "--liger-plan-loss=memory-budget=%d" % BUDGET]),
        plans=manifest["plans"])
    with pytest.raises(ValueError, match="the plan of @step is of an lm_head without a bias, "
                                         "and bias was given"):
        runtime.run_loss_plan(plain, h, w, t, bias=b)
    with pytest.raises(ValueError, match="the plan of @step is of an lm_head without a bias: "
                                         "there is no dbias"):
        runtime.run_loss_plan(plain, h, w, t, want_db=True)


@pytest.mark.parametrize("variant", ["unweighted", "class_weight", "bias_z_loss"])
def test_the_plan_compiles_liger_ops_kernels(tmp_path, variant):
    """Same configuration, two routes (the compiler's plan, liger.ops' own
    module): the same PTX up to the kernels' names, so what the GPU suite
    checks through liger.ops holds for the plan."""
    _tools()
    text = {"unweighted": STEP, "class_weight": STEP_WEIGHTED, "bias_z_loss": STEP_BIAS}
    plan_ptx = (_compile(tmp_path, text[variant], "step") /
                "liger_kernels.sm_90a.ptx").read_text()
    extra = dict(bias=True, return_z_loss=True, lse_square_scale=1e-3) \
        if variant == "bias_z_loss" else {}
    spec = ops.fused_linear_cross_entropy_spec(1000, 256, "bf16", label_smoothing=0.1,
                                               weighted=variant == "class_weight", **extra)
    # (liger.ops' module also holds @scale, its backward's liger.scale of dx
    # and dW, which the plan's step does not: compared without it)
    loss_only, scale = ops.module_text(spec).split("func.func @scale(")
    assert "liger.scale" in scale
    ops_ptx = (_compile(tmp_path, loss_only, "ops") /
               "liger_kernels.sm_90a.ptx").read_text()
    assert plan_ptx.replace("step_loss0_", "") == ops_ptx.replace("loss_loss0_", "")


def test_run_loss_plan_says_what_is_missing():
    forward_only = reference.ReferenceBundle("", plans=[dict(
        function="f", kernels=dict(logits="f_loss0_logits_matmul_0", ce="f_loss0_ce_rowwise_0"),
        chunk_tokens=128, mean=True, ignore_index=-100)])
    forward_only.path = "b"
    x = torch.zeros(2, 4)
    with pytest.raises(ValueError, match="has no weight gradient .* pass want_dx=False"):
        runtime.run_loss_plan(forward_only, x, x, x)
    with pytest.raises(ValueError, match=r"b has 0 loss plans for @g \(it has @f\)"):
        runtime.run_loss_plan(forward_only, x, x, x, function="g")
    with pytest.raises(ValueError, match="a loss without class weights, and class_weight "
                                         "was given"):
        runtime.run_loss_plan(forward_only, x, x, x, want_dx=False, want_dw=False,
                              class_weight=x[0])
    forward_only.plans[0]["class_weight"] = True
    with pytest.raises(ValueError, match="a loss with class weights, and class_weight "
                                         "was not given"):
        runtime.run_loss_plan(forward_only, x, x, x, want_dx=False, want_dw=False)

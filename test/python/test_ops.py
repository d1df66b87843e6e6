"""liger.ops without a GPU: every op's module compiles (forward and backward
kernels), precompiled bundles are found by key, a changed attribute never
finds a stale bundle, and a machine with neither the bundle nor the compiler
gets an error naming what to precompile."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from liger import LigerError, bundles, cache, driver, ops

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")

SPECS = [
    ops.rms_norm_spec(1000, "bf16"),
    ops.rms_norm_spec(4096, "bf16", "f32", eps=1e-5, offset=1.0, casting="gemma"),
    ops.swiglu_spec(1000, "f32"),
    ops.geglu_spec(64, "bf16", approximate="none"),
    ops.softmax_spec(100, "f32"),
    ops.rope_spec(4, 2, 64, "f32"),
    ops.rope_spec(32, 8, 128, "bf16", broadcast_tables=False),
    ops.add_rms_norm_spec(4097, "f16", "f32", eps=1e-5, offset=1.0, casting="gemma"),
    ops.layer_norm_spec(1000, "bf16"),
    ops.layer_norm_spec(7, "f32", eps=1e-6, bias=False),
    ops.layer_norm_spec(1, "bf16", "f32"),
]
# Cross-entropy: one forward function (the loss and its gradient).
CE_SPECS = [
    ops.cross_entropy_spec(1000, "bf16"),
    ops.cross_entropy_spec(32000, "f32", "torch.int32", ignore_index=-1, label_smoothing=0.1,
                           reduction="none", softcap=30.0, lse_square_scale=1e-4,
                           weighted=True),
    # The z-loss term returned apart.
    ops.cross_entropy_spec(1000, "bf16", lse_square_scale=1e-4, return_z_loss=True),
]

FLCE_SPEC = ops.fused_linear_cross_entropy_spec(1000, 256, "bf16", label_smoothing=0.1)
# An lm_head bias and the z-loss returned apart.
FLCE_BIAS_SPEC = ops.fused_linear_cross_entropy_spec(1000, 256, "bf16", label_smoothing=0.1,
                                                     lse_square_scale=1e-4, bias=True,
                                                     return_z_loss=True)

needs_ptxas = pytest.mark.skipif(
    not shutil.which("ptxas") and not os.path.exists("/usr/local/cuda/bin/ptxas"),
    reason="ptxas (CUDA toolkit) not found: cannot compile bundles")


def test_specs_are_canonical():
    class FakeDtype:
        def __str__(self):
            return "torch.bfloat16"
    assert ops.rms_norm_spec(1000, FakeDtype()) == ops.rms_norm_spec(1000, "bf16")
    assert str(ops.rms_norm_spec(1000, "bf16")) == (
        "rms_norm:casting=llama,dtype=bf16,eps=1e-06,hidden=1000,offset=0.0,weight_dtype=bf16")
    # The text form reads back into the same spec, for every op.
    for spec in SPECS + CE_SPECS + [FLCE_SPEC, FLCE_BIAS_SPEC]:
        assert ops.parse_spec(str(spec), spec.target) == spec
    assert ops.parse_spec(str(SPECS[1])).casting == "gemma"
    # Any attribute is part of the key, and so is the target.
    assert ops.rms_norm_spec(1000, "bf16", eps=1e-5).key() != SPECS[0].key()
    assert SPECS[0].with_target("sm_80").key() != SPECS[0].key()
    assert ops.bundle_key(SPECS[0], "sm_80") == SPECS[0].with_target("sm_80").key()
    assert ops.bundle_key(str(SPECS[0])) == SPECS[0].key()


@pytest.mark.parametrize("spec", SPECS)
def test_module_verifies(spec):
    # The forward and the backward function of each op, through the verifier.
    out = driver.run_opt(ops.module_text(spec))
    assert "func.func @fwd" in out and "func.func @bwd" in out


@pytest.mark.parametrize("spec", CE_SPECS)
def test_cross_entropy_module_verifies(spec):
    out = driver.run_opt(ops.module_text(spec))
    assert "func.func @fwd" in out and "func.func @bwd" not in out
    assert "liger.cross_entropy " in out and "liger.cross_entropy_grad" in out


def _function_types(text, name):
    """The parameter and result types of function @name of a module."""
    import re
    head = re.search(r"func\.func @%s\((.*?)\) -> \(?(.*?)\)? \{\n" % name, text)
    params = re.findall(r"%\w+: (tensor<[^>]*>)", head.group(1))
    return params, re.findall(r"tensor<[^>]*>", head.group(2))


def _param_type(p):
    shape = ["?" if d in ("rows", "ctas") else str(d) for d in p["shape"]]
    return "tensor<%s>" % "x".join(shape + [p["dtype"]])


NORM_SPECS = [s for s in SPECS if s.op in ("rms_norm", "add_rms_norm", "layer_norm")]


@needs_ptxas
@pytest.mark.parametrize("spec", NORM_SPECS, ids=str)
def test_each_function_is_one_kernel_taking_its_parameters_in_order(spec, tmp_path):
    """liger.ops launches @fwd's and @bwd's kernels with the functions'
    arguments and takes their outputs in the functions' result order, on the
    GPU as the reference lowering runs the functions on the CPU: each
    function is one kernel whose parameters are the function's, in order
    (add + RMSNorm's backward is RMSNorm's with the sum's gradient added in
    the same kernel)."""
    (path,) = ops.precompile(str(tmp_path), [spec])
    (module,) = json.load(open(os.path.join(path, "manifest.json")))["modules"]
    kernels = {k["function"]: k for k in module["kernels"]}
    assert sorted(kernels) == ["bwd", "fwd"]
    text = ops.module_text(spec)
    for function, kernel in kernels.items():
        assert kernel["name"] == function + "_rowwise_0"
        params, results = _function_types(text, function)
        assert [_param_type(p) for p in kernel["params"] if p["role"] == "input"] == params
        assert [_param_type(p) for p in kernel["params"] if p["role"] == "output"] == results
    if spec.op == "add_rms_norm":
        assert kernels["bwd"]["ops"] == "liger.rms_norm_grad, liger.add"


@needs_ptxas
def test_cross_entropy_is_one_kernel(tmp_path):
    # The loss and its gradient fuse (liger-fuse-cross-entropy-grad) into
    # one kernel; the mean adds its finishing kernel.
    (path,) = ops.precompile(str(tmp_path), CE_SPECS[:1])
    manifest = open(os.path.join(path, "manifest.json")).read()
    assert '"name": "fwd_rowwise_0"' in manifest
    assert '"ops": "liger.cross_entropy, liger.cross_entropy_grad"' in manifest
    assert '"name": "fwd_rowwise_0_finish"' in manifest


def test_cross_entropy_z_loss_spec():
    """return_z_loss: a field written only when set (the specs before it
    keep their text and their bundles' keys); @fwd gives the loss, the
    z-loss, then the gradient."""
    z_spec = CE_SPECS[2]
    assert "return_z_loss=1" in str(z_spec) and "z_loss" not in str(CE_SPECS[0])
    assert str(CE_SPECS[0]) == (
        "cross_entropy:dtype=bf16,ignore_index=-100,label_smoothing=0.0,lse_square_scale=0.0,"
        "reduction=mean,softcap=0.0,target_dtype=i64,vocab=1000,weighted=0")
    assert ops.bundle_key(z_spec) != ops.bundle_key(
        ops.cross_entropy_spec(1000, "bf16", lse_square_scale=1e-4))
    with pytest.raises(LigerError, match="^return_z_loss must be a bool, got 1$"):
        ops.cross_entropy_spec(1000, "bf16", return_z_loss=1)
    assert _function_types(ops.module_text(z_spec), "fwd")[1] == [
        "tensor<f32>", "tensor<f32>", "tensor<?x1000xbf16>"]
    assert " z_loss : " in ops.module_text(z_spec)


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_z_loss_is_one_kernel(tmp_path, target, reduction):
    """The loss, the z-loss and the gradient come from one kernel
    (liger-fuse-cross-entropy-grad) whose parameters are @fwd's, in order:
    what liger.operators launches it with (the z-loss a scalar, or [rows]
    per token)."""
    spec = ops.cross_entropy_spec(1000, "bf16", reduction=reduction, lse_square_scale=1e-4,
                                  return_z_loss=True)
    (path,) = ops.precompile(str(tmp_path), [spec], target)
    (module,) = json.load(open(os.path.join(path, "manifest.json")))["modules"]
    kernels = {k["name"]: k for k in module["kernels"]}
    # (and @scale's, the backward's liger.scale of the gradient by dloss)
    assert sorted(kernels) == ["fwd_rowwise_0", "scale_rowwise_0"]
    assert kernels["fwd_rowwise_0"]["ops"] == "liger.cross_entropy, liger.cross_entropy_grad"
    assert kernels["scale_rowwise_0"]["ops"] == "liger.scale"
    loss = "tensor<f32>" if reduction == "mean" else "tensor<?xf32>"
    for name, function in (("fwd_rowwise_0", "fwd"), ("scale_rowwise_0", "scale")):
        kernel = kernels[name]
        params, results = _function_types(ops.module_text(spec), function)
        assert [_param_type(p) for p in kernel["params"] if p["role"] == "input"] == params
        assert [_param_type(p) for p in kernel["params"] if p["role"] == "output"] == results
    assert _function_types(ops.module_text(spec), "fwd")[1] == [
        loss, loss, "tensor<?x1000xbf16>"]
    assert _function_types(ops.module_text(spec), "scale") == (
        ["tensor<?x1000xbf16>", loss], ["tensor<?x1000xbf16>"])


def test_fused_linear_cross_entropy_module_verifies():
    """The spec's module is the two lm_head ops; the compiler's loss plan
    writes the chunk functions (the chunk's loss summed: the mean's
    denominator scales it apart)."""
    text = ops.module_text(FLCE_SPEC)
    assert "liger.fused_linear_cross_entropy %h" in text
    assert "liger.fused_linear_cross_entropy_grad %h" in text
    out = driver.run_opt(text, ["--liger-fuse-linear-cross-entropy", "--liger-plan-loss"])
    for stage in ("logits", "ce", "dx", "dw0", "dw"):
        assert "func.func @loss_loss0_%s(" % stage in out
    assert "reduction = sum" in out and "accumulate" in out


def test_fused_linear_cross_entropy_bias_and_z_loss_module():
    """bias and return_z_loss: fields written only when set (the specs
    before them keep their text and their bundles' keys); @loss takes the
    bias after the targets and gives the loss, the z-loss, dh, dW and
    dbias; the plan's logits function takes the bias after W, its loss
    function gives the z-loss after the loss (and nothing for dbias)."""
    assert "bias=1" in str(FLCE_BIAS_SPEC) and "return_z_loss=1" in str(FLCE_BIAS_SPEC)
    assert "bias" not in str(FLCE_SPEC) and "z_loss" not in str(FLCE_SPEC)
    assert str(FLCE_SPEC) == (
        "fused_linear_cross_entropy:dtype=bf16,hidden=256,ignore_index=-100,"
        "label_smoothing=0.1,lse_square_scale=0.0,reduction=mean,softcap=0.0,"
        "target_dtype=i64,vocab=1000,weighted=0")
    for flag in ("bias", "return_z_loss"):
        one = ops.fused_linear_cross_entropy_spec(1000, 256, "bf16", **{flag: True})
        assert ops.bundle_key(one) != ops.bundle_key(
            ops.fused_linear_cross_entropy_spec(1000, 256, "bf16"))
        with pytest.raises(LigerError, match="^%s must be a bool, got 1$" % flag):
            ops.fused_linear_cross_entropy_spec(1000, 256, "bf16", **{flag: 1})
    text = ops.module_text(FLCE_BIAS_SPEC)
    assert "%b: tensor<1000xbf16>, %g: tensor<f32>) -> (tensor<f32>, tensor<f32>, " \
        "tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<1000xbf16>)" in text
    out = driver.run_opt(text, ["--liger-fuse-linear-cross-entropy", "--liger-plan-loss"])
    assert "func.func @loss_loss0_logits(%arg0: tensor<?x256xbf16>, %arg1: " \
        "tensor<1000x256xbf16>, %arg2: tensor<1000xbf16>) -> tensor<?x1000xbf16>" in out
    assert "-> (tensor<f32>, tensor<f32>, tensor<?x1000xbf16>)" in out
    assert sorted(stage for stage in ("logits", "ce", "dx", "dw0", "dw", "db")
                  if "func.func @loss_loss0_%s(" % stage in out) == [
                      "ce", "dw", "dw0", "dx", "logits"]


def _plan_kernels(path):
    import json
    (plan,) = json.load(open(os.path.join(path, "manifest.json")))["plans"]
    return plan


@needs_ptxas
def test_fused_linear_cross_entropy_kernels(tmp_path):
    (path,) = ops.precompile(str(tmp_path), [FLCE_SPEC])
    plan = _plan_kernels(path)
    assert plan["kernels"] == {
        "logits": "loss_loss0_logits_matmul_0", "ce": "loss_loss0_ce_rowwise_0",
        "dx": "loss_loss0_dx_matmul_0", "dw0": "loss_loss0_dw0_matmul_0",
        "dw": "loss_loss0_dw_matmul_0"}
    assert plan["mean"] is True and plan["dw_f32"] is False


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_per_token_fused_linear_cross_entropy_kernels(tmp_path, target):
    """reduction "none": the same five kernels, the chunk's loss kernel
    taking and giving [rows] f32 (each token's incoming gradient, each
    token's loss); no mean."""
    spec = ops.fused_linear_cross_entropy_spec(1024, 256, "bf16", reduction="none")
    (path,) = ops.precompile(str(tmp_path), [spec], target)
    plan = _plan_kernels(path)
    assert sorted(plan["kernels"]) == ["ce", "dw", "dw0", "dx", "logits"]
    assert plan["mean"] is False
    import json
    (module,) = json.load(open(os.path.join(path, "manifest.json")))["modules"]
    (ce,) = [k for k in module["kernels"] if k["name"] == plan["kernels"]["ce"]]
    assert [(p["role"], p["dtype"], p["shape"]) for p in ce["params"]] == [
        ("input", "bf16", ["rows", 1024]), ("input", "i64", ["rows"]),
        ("input", "f32", ["rows"]), ("output", "f32", ["rows"]),
        ("output", "bf16", ["rows", 1024])]


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_fused_linear_cross_entropy_bias_and_z_loss_kernels(tmp_path, target, reduction):
    """The same five kernels; the logits kernel takes the bias [V] after W,
    the loss kernel gives the z-loss after the loss (a scalar, or [rows]
    per token): what liger.loss_plan reads to run the plan."""
    from liger import loss_plan
    # (A vocabulary of whole 64-byte slices: the mma.sync targets' dx reads
    # G in them.)
    spec = ops.fused_linear_cross_entropy_spec(1024, 256, "bf16", reduction=reduction,
                                               lse_square_scale=1e-4, bias=True,
                                               return_z_loss=True)
    (path,) = ops.precompile(str(tmp_path), [spec], target)
    plan = _plan_kernels(path)
    assert sorted(plan["kernels"]) == ["ce", "dw", "dw0", "dx", "logits"]
    (module,) = json.load(open(os.path.join(path, "manifest.json")))["modules"]
    kernels = {k["name"]: k for k in module["kernels"]}
    logits, ce = (kernels[plan["kernels"][stage]] for stage in ("logits", "ce"))
    assert [(p["role"], p["dtype"], p["shape"]) for p in logits["params"]] == [
        ("input", "bf16", ["rows", 256]), ("input", "bf16", [1024, 256]),
        ("input", "bf16", [1024]), ("output", "bf16", ["rows", 1024])]
    loss = [] if reduction == "mean" else ["rows"]
    assert [(p["dtype"], p["shape"]) for p in ce["params"] if p["role"] == "output"] == [
        ("f32", loss), ("f32", loss), ("bf16", ["rows", 1024])]

    class Kernel:  # (as liger.runtime.Kernel describes one)
        def __init__(self, k):
            self.inputs = [p for p in k["params"] if p["role"] == "input"]
            self.outputs = [p for p in k["params"] if p["role"] == "output"]
    assert loss_plan.takes_bias(Kernel(logits)) and loss_plan.gives_z_loss(Kernel(ce))
    assert loss_plan.per_token(Kernel(ce)) == (reduction == "none")
    plain = ops.fused_linear_cross_entropy_spec(1024, 256, "bf16", reduction=reduction)
    (path,) = ops.precompile(str(tmp_path / "plain"), [plain], target)
    plan = _plan_kernels(path)
    (module,) = json.load(open(os.path.join(path, "manifest.json")))["modules"]
    kernels = {k["name"]: Kernel(k) for k in module["kernels"]}
    assert not loss_plan.takes_bias(kernels[plan["kernels"]["logits"]])
    assert not loss_plan.gives_z_loss(kernels[plan["kernels"]["ce"]])


@needs_ptxas
def test_fused_linear_cross_entropy_f32_weight_gradient_kernels(tmp_path):
    """dw_f32: every chunk accumulates into an f32 buffer (no @dw0); the
    spec of the default stays as it was (its bundles keep their keys)."""
    spec = ops.fused_linear_cross_entropy_spec(1000, 256, "bf16", dw_f32=True)
    assert "dw_f32=1" in str(spec) and "dw_f32" not in str(FLCE_SPEC)
    # The same module, another plan (liger-compile --loss-dw-f32): another
    # bundle.
    assert ops.module_text(spec) == ops.module_text(
        ops.fused_linear_cross_entropy_spec(1000, 256, "bf16"))
    assert ops.bundle_key(spec) != ops.bundle_key(
        ops.fused_linear_cross_entropy_spec(1000, 256, "bf16"))
    (path,) = ops.precompile(str(tmp_path), [spec])
    plan = _plan_kernels(path)
    assert sorted(plan["kernels"]) == ["ce", "dw", "dx", "logits"] and plan["dw_f32"] is True
    ptx = open(os.path.join(path, "liger_kernels.sm_90a.ptx")).read()
    assert ".entry loss_loss0_dw0_matmul_0(" not in ptx


def test_fused_linear_cross_entropy_f32_weight_gradient_is_closer(monkeypatch):
    """Through the reference lowering, in 7 chunks: dW summed in f32 then
    rounded once is nearer float64 than dW summed in bf16 chunk by chunk."""
    torch = pytest.importorskip("torch")
    try:
        driver.find_tool("liger-cpu-runner")
    except LigerError:
        pytest.skip("liger-cpu-runner not built")
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    g = torch.Generator().manual_seed(3)
    x = torch.randn(56, 32, generator=g).to(torch.bfloat16)
    w = (torch.randn(96, 32, generator=g) / 4).to(torch.bfloat16)
    t = torch.randint(0, 96, (56,), generator=g)
    x64, w64 = x.double(), w.double().requires_grad_(True)
    torch.nn.functional.cross_entropy((x64 @ w64.t()).to(torch.bfloat16).double(),
                                      t).backward()
    errs = {}
    for f32 in (False, True):
        lw = w.clone().requires_grad_(True)
        ops.fused_linear_cross_entropy(x, lw, t, memory_budget=8 * 96 * 2,
                                       dw_f32=f32).backward()
        assert lw.grad.dtype == torch.bfloat16
        errs[f32] = ((lw.grad.double() - w64.grad).norm() / w64.grad.norm()).item()
    assert errs[True] < 5e-3, errs
    assert errs[True] < errs[False], errs


def test_fused_linear_cross_entropy_plan():
    # Llama-3's lm_head at 8192 tokens in 0.5 GiB: chunks of 2048 tokens.
    plan = ops.fused_linear_cross_entropy_plan(8192, 128256, "bf16", 2 ** 29)
    assert plan == dict(chunk_tokens=2048, chunks=4, extra_bytes=2048 * 128256 * 2)
    assert plan["extra_bytes"] <= 2 ** 29
    # Whole 128-row tiles; never more than the tokens; one row at least.
    assert ops.fused_linear_cross_entropy_plan(1000, 1000, "f32", 4000 * 300)["chunk_tokens"] == 256
    assert ops.fused_linear_cross_entropy_plan(5, 1000, "bf16", 2 ** 29) == dict(
        chunk_tokens=5, chunks=1, extra_bytes=5 * 2000)
    assert ops.fused_linear_cross_entropy_plan(7, 1000, "bf16", 2000 * 3)["chunks"] == 3
    with pytest.raises(LigerError, match="holds no row of logits"):
        ops.fused_linear_cross_entropy_plan(8, 128256, "bf16", 1000)


def test_bad_specs_and_dtypes():
    with pytest.raises(LigerError, match="unknown op 'group_norm'"):
        ops.module_text("group_norm:hidden=8")
    with pytest.raises(LigerError, match=r"malformed op spec 'layer_norm:hidden=8,dtype=f32': "
                                         r"missing bias, eps, weight_dtype"):
        ops.module_text("layer_norm:hidden=8,dtype=f32")
    with pytest.raises(LigerError, match="^bias must be a bool, got 1$"):
        ops.layer_norm_spec(8, "f32", bias=1)
    with pytest.raises(LigerError, match=r"malformed op spec 'swiglu:hidden=8': missing dtype"):
        ops.module_text("swiglu:hidden=8")
    with pytest.raises(LigerError, match=r"malformed op spec 'swiglu:hidden=8,dtype=f32,x=1': "
                                         r"no field 'x' \(swiglu has dtype, hidden\)"):
        ops.parse_spec("swiglu:hidden=8,dtype=f32,x=1")
    with pytest.raises(LigerError, match="dtype must be bf16 or f16 or f32, got torch.int32"):
        ops.swiglu_spec(8, "torch.int32")
    with pytest.raises(LigerError, match="target_dtype must be i32 or i64, got torch.int16"):
        ops.cross_entropy_spec(8, "bf16", "torch.int16")
    with pytest.raises(LigerError, match="reduction must be one of 'mean', 'sum', 'none', got "
                                         "'batchmean'"):
        ops.cross_entropy_spec(8, "bf16", reduction="batchmean")
    with pytest.raises(LigerError, match="target must be one of 'sm_90a', 'sm_80', 'sm_86', "
                                         "'cpu', got 'sm_75'"):
        ops.swiglu_spec(8, "f32", target="sm_75")


@needs_ptxas
def test_precompiled_bundles_are_found(tmp_path, monkeypatch):
    paths = ops.precompile(str(tmp_path), SPECS[:3])
    for spec, path in zip(SPECS, paths):
        assert os.path.basename(os.path.dirname(path)) == spec.key()
        assert cache.read_marker(path)["spec"] == str(spec)
    monkeypatch.setenv("LIGER_OPS_BUNDLES", str(tmp_path))

    def no_compile(*a, **k):
        raise AssertionError("compiled instead of using the precompiled bundle")
    monkeypatch.setattr("liger.compiler.compile", no_compile)
    assert ops.bundle_path(SPECS[1]) == paths[1]
    # The weight gradient's kernel has its workspace in the manifest.
    manifest = open(os.path.join(paths[0], "manifest.json")).read()
    assert '"role": "workspace"' in manifest and '"name": "bwd_rowwise_0_finish"' in manifest


@needs_ptxas
def test_precompile_makes_this_compilers_bundles_beside_anothers(tmp_path, monkeypatch):
    """A bundle's key is its spec and target; under it each compiler has
    its entry: precompile keeps this liger-compile's, and makes it where
    only another compiler's is (else a rebuilt compiler's kernels would
    never reach the bundles), leaving that one whole."""
    (path,) = ops.precompile(str(tmp_path), SPECS[2:3])
    assert cache.read_marker(path)["identity"] == ops.compiler_identity()
    calls = []
    import liger.compiler
    original = liger.compiler.compile

    def recording(*a, **k):
        compiled = original(*a, **k)
        if not compiled.cached:
            calls.append(a)
        return compiled
    monkeypatch.setattr(liger.compiler, "compile", recording)
    ops.precompile(str(tmp_path), SPECS[2:3])
    assert calls == [], "recompiled a bundle this compiler made"
    # Make it another compiler's entry.
    other = os.path.join(os.path.dirname(path), cache.identity_name("0" * 64))
    os.rename(path, other)
    marker = cache.read_marker(other)
    with open(os.path.join(other, cache.MARKER), "w") as f:
        json.dump(dict(marker, identity="0" * 64, created=marker["created"] - 1), f)
    ops.precompile(str(tmp_path), SPECS[2:3])
    assert len(calls) == 1, "took another compiler's bundle"
    assert cache.read_marker(path)["identity"] == ops.compiler_identity()
    assert cache.entry_problem(other, SPECS[2].key(), "0" * 64) is None
    # A machine without the compiler takes the newest whole entry, whoever
    # made it.
    monkeypatch.setenv("LIGER_OPS_BUNDLES", str(tmp_path))
    monkeypatch.setattr(bundles, "_compiler", lambda: None)
    assert ops.bundle_path(SPECS[2]) == path
    shutil.rmtree(path)
    assert ops.bundle_path(SPECS[2]) == other


def test_no_bundle_and_no_compiler_says_what_to_precompile(tmp_path, monkeypatch):
    monkeypatch.setenv("LIGER_OPS_BUNDLES", str(tmp_path))
    monkeypatch.setenv("LIGER_CACHE_DIR", str(tmp_path / "cache"))

    def missing(name="liger-opt"):
        raise LigerError("cannot find %s" % name)
    monkeypatch.setattr(driver, "find_tool", missing)
    with pytest.raises(LigerError) as e:
        ops.bundle_path(SPECS[2])
    message = str(e.value)
    assert "no compiled kernels for swiglu:dtype=f32,hidden=1000 (target sm_90a)" in message
    assert "python -m liger.ops precompile DIR 'swiglu:dtype=f32,hidden=1000'" in message
    with pytest.raises(LigerError, match="python -m liger.ops precompile --target sm_80 DIR "
                                         "'swiglu:dtype=f32,hidden=1000'"):
        ops.bundle_path(SPECS[2].with_target("sm_80"))


def test_precompiling_into_a_directory_that_cannot_be_written_fails(tmp_path):
    """precompile DIR writes DIR or says why not: it never compiles into
    a temporary directory and reports success."""
    try:
        driver.find_tool("liger-compile")
    except LigerError as e:
        pytest.skip(str(e))
    if os.geteuid() != 0:
        out = tmp_path / "ro"
        out.mkdir()
        out.chmod(0o555)
    else:
        out = "/sys/liger-precompile-test"  # (permissions do not stop root)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    proc = subprocess.run([sys.executable, "-m", "liger.ops", "precompile", str(out),
                           str(SPECS[4])], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith("liger.ops: the bundle cache %s cannot be written (" % out)


@needs_ptxas
def test_command_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    proc = subprocess.run([sys.executable, "-m", "liger.ops", "precompile", str(tmp_path),
                           str(SPECS[4])], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(str(SPECS[4]) + " (sm_90a) -> ")
    assert os.path.isdir(tmp_path / SPECS[4].key())
    assert cache.Cache(str(tmp_path)).lookup(SPECS[4].key()) == proc.stdout.split(" -> ")[1].strip()
    proc = subprocess.run([sys.executable, "-m", "liger.ops", "precompile", "--target", "sm_80",
                           str(tmp_path), str(SPECS[4])], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    path = cache.Cache(str(tmp_path)).lookup(SPECS[4].with_target("sm_80").key())
    assert '"arch": "sm_80"' in open(os.path.join(path, "manifest.json")).read()
    proc = subprocess.run([sys.executable, "-m", "liger.ops", "precompile", str(tmp_path),
                           "gelu:hidden=3"], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert "liger.ops: unknown op 'gelu'" in proc.stderr


@needs_ptxas
def test_precompile_for_several_targets_puts_them_side_by_side(tmp_path, monkeypatch):
    """--target, repeated: each target's bundle of a spec in the one
    directory, found there by that target's key, holding that target's
    cubin (the default, sm_90a, only where named)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    specs = [str(SPECS[4]), str(SPECS[2])]
    proc = subprocess.run([sys.executable, "-m", "liger.ops", "precompile", "--target", "sm_80",
                           "--target", "sm_90a", "--target", "sm_80", str(tmp_path)] + specs,
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(" -> ")[0] for line in lines] == [
        "%s (%s)" % (spec, target) for target in ("sm_80", "sm_90a") for spec in specs]
    monkeypatch.setenv("LIGER_OPS_BUNDLES", str(tmp_path))
    monkeypatch.setattr(bundles, "_compiler", lambda: None)  # found, never compiled
    for spec in (SPECS[4], SPECS[2]):
        for target in ("sm_80", "sm_90a"):
            path = bundles.bundle_path(spec.with_target(target))
            assert "%s (%s) -> %s" % (spec, target, path) in lines
            manifest = json.load(open(os.path.join(path, "manifest.json")))
            assert {m["arch"] for m in manifest["modules"]} == {target}, path
    assert len({line.split(" -> ")[1] for line in lines}) == 4
    with pytest.raises(LigerError, match="no compiled kernels for %s \\(target sm_86\\)"
                                         % SPECS[4]):
        bundles.bundle_path(SPECS[4].with_target("sm_86"))


def test_precompile_refuses_an_unknown_target_with_those_it_knows(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    proc = subprocess.run([sys.executable, "-m", "liger.ops", "precompile", "--target", "sm_80",
                           "--target", "sm_70", str(tmp_path), str(SPECS[4])],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.endswith("error: argument --target: invalid choice: 'sm_70' (choose "
                                "from 'sm_90a', 'sm_80', 'sm_86')\n")
    assert os.listdir(tmp_path) == []


class _NoPlans:
    path, plans, kernels = "/bundles/x", [], {}


@pytest.mark.parametrize("where,error", [
    ("load", ImportError("the liger runtime extension (_liger_runtime) is not built")),
    ("load", RuntimeError("CUDA_ERROR_NO_BINARY_FOR_GPU")),
    ("load", PermissionError(13, "Permission denied")),
    ("bundle_path", OSError(28, "No space left on device")),
    ("no plans", ValueError("its bundle /bundles/x has 0 loss plans, not one")),
], ids=["no-runtime", "driver", "permission", "cache-disk-full", "no-loss-plan"])
def test_whatever_stops_kernels_loading_is_a_liger_error(where, error, monkeypatch):
    """A patched model's fallback catches LigerError: every failure to load
    a spec's kernels is one, naming the spec, with its cause."""
    import liger.runtime

    def raising(*args):
        raise error
    monkeypatch.setattr(bundles, "bundle_path", raising if where == "bundle_path" else
                        lambda spec: "/bundles/x")
    monkeypatch.setattr(liger.runtime, "load", raising if where == "load" else
                        lambda path: _NoPlans())
    spec = FLCE_SPEC if where == "no plans" else SPECS[0]
    load = bundles.loss_plan_kernels if where == "no plans" else bundles.kernels
    with pytest.raises(LigerError) as info:
        load(spec)
    assert str(info.value) == "cannot load the kernels of %s (target sm_90a): %s: %s" % (
        spec, type(error).__name__, error)
    if where != "no plans":
        assert info.value.__cause__ is error
    bundles.clear()


def test_a_device_whose_capability_cannot_be_read_is_a_liger_error(monkeypatch):
    torch = pytest.importorskip("torch")

    def failing(device=None):
        raise RuntimeError("CUDA error: initialization error")
    monkeypatch.setattr(torch.cuda, "get_device_capability", failing)
    bundles.clear()
    with pytest.raises(LigerError, match=r"^cannot read the compute capability of cuda:0: "
                                         r"RuntimeError: CUDA error: initialization error$"):
        bundles.device_target(torch.device("cuda", 0))
    bundles.clear()


def test_many_configurations_of_one_op_are_said_once(monkeypatch):
    """Each new attribute value is a new bundle kept loaded (a temperature
    schedule would compile one a step): the RECOMPILE_WARNING_AT-th
    configuration of an op warns, once, naming the op; other ops count
    apart."""
    import warnings

    import liger.reference
    from liger.errors import LigerRecompileWarning
    from liger.frontend.partition import GroupSpec

    class Loaded:
        def __init__(self, text, options, name):
            self.path = name
    monkeypatch.setattr(liger.reference, "ReferenceBundle", Loaded)
    monkeypatch.setattr(bundles, "RECOMPILE_WARNING_AT", 3)
    bundles.clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for eps in (1e-6, 1e-5, 1e-4, 1e-3, 1e-5):
                bundles.load(ops.rms_norm_spec(64, "bf16", eps=eps, target="cpu"))
            for n in (64, 128):
                bundles.load(ops.swiglu_spec(n, "bf16", target="cpu"))
            # (a torch.compile graph's groups are not counted)
            for i in range(4):
                bundles.load(GroupSpec(text="module {} // %d" % i, name="g%d" % i,
                                       target="cpu"))
        said = [str(w.message) for w in caught if w.category is LigerRecompileWarning]
        assert len(said) == 1, said
        assert said[0].startswith("liger.ops: 3 configurations of rms_norm loaded in this "
                                  "process") and "eps=0.0001" in said[0], said
    finally:
        bundles.clear()

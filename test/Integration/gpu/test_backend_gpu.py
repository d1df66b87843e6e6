"""torch.compile(model, backend="liger") on the GPU, with the kernels.

The unpatched tiny decoder of each family (and a PEFT LoRA Llama; sizes the
kernels take: backend_models.py), bf16, compiled with
liger.compile_model(fullgraph=True): three SGD steps against the same model
in eager PyTorch (per-step loss within 1e-2, every gradient within 2e-2 of
its norm), the fusion groups that got a kernel exactly those the build
machine's precompile found (gpu-bundles/backend/expected.json: the GPU run
makes the same graphs), and a warning for each group it left for want of
a kernel, none other (none for a group its options leave).
Then bench/e2e.py's Llama-3-8B-width model (two layers) under
torch.compile(fullgraph=True): one training step against eager.

The kernels are scripts/build-gpu-bundles.sh's (gpu-bundles/backend, by key;
this machine has no compiler). Skips cleanly without torch, a GPU,
transformers, the bundles or (the LoRA case) PEFT.
"""
import copy
import json
import os
import warnings

import pytest

import backend_models as bm

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
pytest.importorskip("transformers", reason="needs transformers")
from liger.errors import LigerFallbackWarning  # noqa: E402
from liger.frontend import backend as lb  # noqa: E402

LOSS_TOL, GRAD_TOL = 1e-2, 2e-2


@pytest.fixture(scope="module")
def expected(bundles_dir):
    """LIGER_OPS_BUNDLES at gpu-bundles/backend for the module, and what the
    precompile found there."""
    path = os.path.join(bundles_dir, "backend")
    if not os.path.isfile(os.path.join(path, "expected.json")):
        pytest.skip("%s not built (run scripts/build-gpu-bundles.sh)" % path)
    old = os.environ.get("LIGER_OPS_BUNDLES")
    os.environ["LIGER_OPS_BUNDLES"] = path
    with open(os.path.join(path, "expected.json")) as f:
        yield json.load(f)
    if old is None:
        del os.environ["LIGER_OPS_BUNDLES"]
    else:
        os.environ["LIGER_OPS_BUNDLES"] = old


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def relative(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30)).item()


def steps(model, compiled, batches):
    """SGD steps of both; each step's loss and gradients compared."""
    eager = copy.deepcopy(model)
    opts = [torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1)
            for m in (model, eager)]
    for step, batch in enumerate(batches):
        loss = compiled(**batch).loss
        loss.backward()
        ref = eager(**batch, use_cache=False).loss
        ref.backward()
        print("step %d: loss %.5f (eager %.5f)" % (step, loss.item(), ref.item()))
        assert abs(loss.item() - ref.item()) <= LOSS_TOL * abs(ref.item()), (step, loss, ref)
        for (name, p), (_, q) in zip(model.named_parameters(), eager.named_parameters()):
            if p.requires_grad:
                assert relative(p.grad, q.grad) <= GRAD_TOL, (step, name,
                                                             relative(p.grad, q.grad))
        for opt in opts:
            opt.step()
            opt.zero_grad(set_to_none=True)


def check_groups(report, want):
    """The groups with kernels and those left, as the precompile found them."""
    got = {p.name.split(".")[-1]: dict(groups=bm.groups(p), left=bm.left(p))
           for p in report.partitions}
    assert got == want, (got, want)


@pytest.mark.parametrize("case,family,lora", bm.CASES, ids=[c[0] for c in bm.CASES])
def test_family_trains_like_eager_with_kernels(expected, case, family, lora):
    if lora:
        pytest.importorskip("peft", reason="needs PEFT")
    model = bm.build(family, "cuda", lora)
    compiled = lb.compile_model(model, fullgraph=True)
    batches = [bm.batch(bm.VOCAB, bm.BATCH, "cuda", seed) for seed in (1, 2, 3)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LigerFallbackWarning)
        steps(model, compiled, batches)
    (report,) = compiled.liger.reports
    print("\n".join(report.lines()))
    check_groups(report, expected[case])
    assert any(p.units for p in report.partitions)  # kernels ran
    fell_back = sorted(str(w.message) for w in caught if issubclass(w.category,
                                                                    LigerFallbackWarning))
    # One warning per group left for want of a kernel; none for a group the
    # backend's options leave (fused_mlp off: the gated pair).
    warned = [left for p in report.partitions for left in p.left if left.warned]
    assert not any(left.warned for p in report.partitions for left in p.left if left.policy)
    assert len(fell_back) == len(warned), (fell_back, warned)
    assert all("fusion group" in m for m in fell_back), fell_back


def test_e2e_model_compiles_fullgraph_and_trains_like_eager(expected):
    model = bm.e2e_model("cuda")
    compiled = lb.compile_model(model, fullgraph=True)
    # A batch of 2 or more: dynamo specialises a dimension of size 1, which
    # would be another graph than the precompile's (its dynamic batch).
    batch = bm.batch(128256, (2, 256), "cuda")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", LigerFallbackWarning)
        loss = compiled(**batch).loss
        loss.backward()
    (report,) = compiled.liger.reports
    print("\n".join(report.summary()))
    check_groups(report, expected["e2e"])
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    ref = model(**batch, use_cache=False).loss
    ref.backward()
    assert abs(loss.item() - ref.item()) <= LOSS_TOL * abs(ref.item()), (loss, ref)
    # The gradients against the same model in f32 (its bf16 weights, upcast):
    # at these widths bf16 gradients two layers deep differ from eager bf16's
    # by a few percent either way, so each is measured against f32, and
    # liger's error may not exceed eager PyTorch's by more than half again
    # (nor GRAD_TOL where both are small).
    f32 = copy.deepcopy(model).float()
    f32.zero_grad(set_to_none=True)
    f32(**batch, use_cache=False).loss.backward()
    want = dict(f32.named_parameters())
    for name, p in model.named_parameters():
        ours, eager = relative(grads[name], want[name].grad), relative(p.grad, want[name].grad)
        assert ours <= max(GRAD_TOL, 1.5 * eager), (name, ours, eager)

"""torch.compile(model, backend="liger") on the CPU, through the reference lowering.

With LIGER_OPS_CPU_REFERENCE=1 every liger operator and every fusion group
runs its reference function (liger-cpu-runner) and Inductor compiles the
rest of each graph for the CPU. For the tiny config of each family in
examples/configs (and a PEFT LoRA Llama), three SGD steps of the compiled
model against the same model in eager PyTorch: the loss of each step and
every parameter's gradient (relative to the eager gradient's norm: f32
1e-5, bf16 1e-2), and the fusion groups the report shows. Then the
switches (LIGER_DEBUG, LIGER_DUMP_DIR), what goes to Inductor and why (a
group without a kernel, a whole graph on the CPU or in f64, sizes dynamic
beyond the tokens, a graph liger cannot compile), dynamic tokens, and the
registration of backend="liger".
"""

import copy
import operator
import os
import re
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from liger import LigerError, bundles, specs  # noqa: E402
from liger.cache import Cache  # noqa: E402
from liger.driver import find_tool  # noqa: E402
from liger.errors import LigerFallbackWarning  # noqa: E402
from liger.frontend import backend as lb  # noqa: E402
from liger.frontend import capture as cap  # noqa: E402
from liger.frontend import partition  # noqa: E402
from liger.frontend import substitute  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(ROOT, "examples", "configs")


def _have(*tools):
    try:
        for tool in tools:
            find_tool(tool)
        return True
    except LigerError:
        return False


needs_runner = pytest.mark.skipif(not _have("liger-opt", "liger-cpu-runner"),
                                  reason="liger-opt/liger-cpu-runner not built")
needs_compiler = pytest.mark.skipif(
    not _have("liger-compile") or not os.path.exists(
        os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas")),
    reason="liger-compile or ptxas not found")

TOLERANCE = {"f32": 1e-5, "bf16": 1e-2}


@pytest.fixture(autouse=True)
def _reference(monkeypatch):
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    monkeypatch.delenv("LIGER_DEBUG", raising=False)
    monkeypatch.delenv("LIGER_DUMP_DIR", raising=False)
    lb._WARNED.clear()
    lb._BACKENDS.clear()
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def relative(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30)).item()


def train(model, compiled, batches, dtype, lr=0.1, trainable=None):
    """SGD steps of `compiled` on the batches, each checked against `model`
    run eagerly from the same parameters (its copy takes the compiled
    model's after every step: each step's loss and gradients are compared
    at one point, not along two bf16 trajectories that drift apart by
    rounding); returns the compiled outputs."""
    tol = TOLERANCE[dtype]
    eager = copy.deepcopy(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=lr)
    outs = []
    for step, batch in enumerate(batches):
        out = compiled(**batch)
        out.loss.backward()
        ref = eager(**batch, use_cache=False)
        ref.loss.backward()
        assert abs(out.loss.item() - ref.loss.item()) <= tol * abs(ref.loss.item()), \
            (step, out.loss.item(), ref.loss.item())
        for (name, p), (_, q) in zip(model.named_parameters(), eager.named_parameters()):
            if p.requires_grad:
                assert relative(p.grad, q.grad) <= tol, (step, name, relative(p.grad, q.grad))
        opt.step()
        opt.zero_grad()
        eager.zero_grad()
        with torch.no_grad():
            for p, q in zip(model.parameters(), eager.parameters()):
                q.copy_(p)
        outs.append(out)
    return outs


def tokens(config, steps=3, shape=(2, 8), seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        ids = torch.randint(0, config.vocab_size, shape, generator=g)
        labels = ids.clone()
        labels[0, 2] = -100  # an ignored label
        out.append(dict(input_ids=ids, labels=labels))
    return out


def family_model(family, dtype):
    config = cap.load_config(os.path.join(CONFIGS, "tiny-%s.json" % family))
    model = cap.build_model(config, dtype, "cpu", layers=1).train()
    if family.startswith("gemma"):  # Gemma's norm weights start at 0 (the scale is 1 + w)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name:
                    p.normal_(0, 0.1)
    return config, model


def groups(part):
    """A forward or backward graph's fusion groups: 'kind (ops)'."""
    return {u.group() for u in part.units}


QKV_ROPE = "matmul (liger.linear, liger.linear, liger.rope)"
ADD_NORM = "rowwise (liger.add_rms_norm)"
NORM_ADD = "rowwise (liger.rms_norm, liger.add)"
SWIGLU = "matmul (liger.linear, liger.linear, liger.swiglu)"
GEGLU = "matmul (liger.linear, liger.linear, liger.geglu)"
LORA = "matmul (liger.lora_linear)"
NORM_GRAD_ADD = "rowwise (liger.rms_norm_grad, liger.add)"
# The forward's groups of each family. Qwen3 and OLMo2 normalise q and k
# between the projections and RoPE (no q/k + RoPE group; RoPE runs as its
# operator); Phi3's fused qkv_proj and gate_up_proj are projections by row
# slices of their weights, which fuse as separate projections do.
FORWARD = {
    "llama": {QKV_ROPE, ADD_NORM, SWIGLU},
    "mistral": {QKV_ROPE, ADD_NORM, SWIGLU},
    "qwen2": {QKV_ROPE, ADD_NORM, SWIGLU},
    "qwen3": {ADD_NORM, SWIGLU},
    "gemma": {QKV_ROPE, ADD_NORM, GEGLU},
    "gemma2": {QKV_ROPE, ADD_NORM, GEGLU},
    "phi3": {QKV_ROPE, ADD_NORM, SWIGLU},
    "olmo2": {NORM_ADD, SWIGLU, ADD_NORM},
}
CASES = [(f, "f32") for f in FORWARD] + [("llama", "bf16"), ("gemma", "bf16")]


def check_report(report, family, dtype):
    recognised = "\n".join(report.recognition)
    # HF's traced causal mask is SDPA's is_causal again (no padding, the
    # sequence within any sliding window); Gemma 2 softcaps its attention
    # logits, so its attention is no SDPA call.
    masks = [line for line in report.recognition if line.startswith("[recognise-causal-mask]")]
    assert all(" causal mask -> is_causal at model.layers.0.self_attn" in line
               for line in masks), masks
    assert len(masks) == (0 if family == "gemma2" else 1), masks
    # Every tiny family has grouped heads (4 query, 2 key/value): the call
    # made causal reads them as they are, as the eager model's does.
    grouped = [line for line in report.recognition if line.startswith("[recognise-grouped-kv]")]
    assert len(grouped) == len(masks) and all(
        " k/v heads repeated 2x -> enable_gqa at model.layers.0.self_attn" in line
        for line in grouped), grouped
    assert "[recognise-rms-norm] recognised liger.rms_norm" in recognised
    assert "[recognise-rope] recognised liger.rope" in recognised
    assert "[recognise-gated-mlp] recognised liger.%s" % (
        "geglu" if family.startswith("gemma") else "swiglu") in recognised
    if dtype == "bf16":
        assert "[recognise-lm-head-loss] recognised liger.fused_linear_cross_entropy" \
            in recognised
    else:  # the fused loss has no f32 kernel: the loss on the logits instead
        assert ("[recognise-lm-head-loss] left alone cross_entropy_loss at model: "
                "liger.ops.fused_linear_cross_entropy takes bf16 or f16") in recognised
        assert "[recognise-cross-entropy] recognised liger.cross_entropy" in recognised
    forward, backward = report.partitions
    assert groups(forward) == FORWARD[family]
    # SDPA's call, causal and grouped again, is liger::attention (the
    # reference takes every configuration): the forward graph holds it with
    # its lse, the backward liger::attention_backward reading them, and it
    # takes k and v with their 2 heads.
    # Gemma 2's eager attention (softcapped scores plus the traced causal
    # mask, k and v repeated) is liger.attention with its softcap, reading
    # the 2 key/value heads; its layer 0 slides a window of 32 keys (wider
    # than the 8 tokens: the window stays, for longer sequences).
    attention = [line for line in report.recognition
                 if line.startswith(("[recognise-attention]", "[recognise-eager-attention]"))]
    calls = re.findall(r"= liger\.attention (.*) loc", forward.mlir)
    grads = re.findall(r"= liger\.attention_grad (.*) loc", backward.mlir)
    pattern, attrs = ("eager-attention", ", window = 32, softcap = 50.0") \
        if family == "gemma2" else ("attention", "")
    assert attention == ["[recognise-%s] recognised liger.attention (causal%s) at "
                         "model.layers.0.self_attn" % (pattern, attrs)]
    assert len(calls) == len(grads) == 1
    attrs = " window = 32 softcap = 50.0" if family == "gemma2" else ""
    assert calls[0].endswith("causal{1} return_lse : tensor<?x4x?x16x{0}>, "
                             "tensor<?x2x?x16x{0}>, tensor<?x2x?x16x{0}>".format(dtype, attrs)), \
        calls
    assert " saved(" in grads[0] and " causal%s : " % attrs in grads[0], grads
    # The gated activation's backward writes over its saved gate and up.
    assert [line.split(" writes ")[0] for line in backward.in_place] == [
        "liger.%s_backward" % ("geglu" if family.startswith("gemma") else "swiglu")]
    assert forward.name == "graph0.forward" and backward.name == "graph0.backward"
    assert report.summary()[0].startswith("graph0.forward: ")
    assert report.summary()[0].endswith(", 0 graph breaks")


@needs_runner
@pytest.mark.parametrize("family,dtype", CASES)
def test_family_trains_like_eager(family, dtype):
    config, model = family_model(family, dtype)
    compiled = lb.compile_model(model, fullgraph=True, attention=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)  # nothing falls back
        outs = train(model, compiled, tokens(config), dtype)
    # Training with labels: no logits (the lm_head and loss may fuse).
    assert all(out.logits is None for out in outs)
    (report,) = compiled.liger.reports  # one graph, compiled once
    check_report(report, family, dtype)
    if family in ("llama", "gemma", "qwen2"):
        assert NORM_GRAD_ADD in groups(report.partitions[1])


@needs_runner
def test_a_padding_mask_and_a_narrow_sliding_window_stay_masks():
    """The near-misses of recognise-causal-mask on real models: a padding
    mask given by the caller (a graph input), and Mistral's sliding window
    narrower than the sequence (is_causal cannot say it): each SDPA keeps
    its mask, and the step trains like eager."""
    config, model = family_model("llama", "f32")
    batches = tokens(config, steps=2)
    for batch in batches:
        batch["attention_mask"] = torch.ones_like(batch["input_ids"])
        batch["attention_mask"][1, :3] = 0  # left padding
    compiled = lb.compile_model(model, fullgraph=True)
    train(model, compiled, batches, "f32")
    (line,) = [line for line in compiled.liger.reports[0].recognition
               if line.startswith("[recognise-causal-mask]")]
    assert ": the mask is computed from the graph input " in line, line
    # The masked call keeps its repeated key/value heads.
    (line,) = [line for line in compiled.liger.reports[0].recognition
               if line.startswith("[recognise-grouped-kv]")]
    assert line.endswith(": the call has a mask (SDPA's fused kernels take grouped heads "
                         "only without one)"), line

    torch._dynamo.reset()
    config = cap.load_config(os.path.join(CONFIGS, "tiny-mistral.json"))
    config.sliding_window = 4  # the tokens are 8 long
    model = cap.build_model(config, "f32", "cpu", layers=1).train()
    compiled = lb.compile_model(model, fullgraph=True)
    train(model, compiled, tokens(config, steps=2), "f32")
    (line,) = [line for line in compiled.liger.reports[0].recognition
               if line.startswith("[recognise-causal-mask]")]
    assert line.endswith(": a causal mask with a sliding window of 4 keys (is_causal cannot "
                         "say it)"), line


def sliding_mistral(window):
    config = cap.load_config(os.path.join(CONFIGS, "tiny-mistral.json"))
    config.sliding_window = window
    return config, cap.build_model(config, "f32", "cpu", layers=1).train()


@needs_runner
def test_a_sliding_window_wider_than_the_traced_sequence_holds_at_longer_ones():
    """Mistral's sliding window of 12 keys, traced on 8 tokens: the mask is
    causal there (and at every small probe size), but not beyond 12. The
    call becomes is_causal with the graph's length guarded to 12, so a
    longer sequence compiles again and keeps the window; both steps train
    like eager. (Causal at every length, the 16-token step's gradients
    were 0.77 off.)"""
    config, model = sliding_mistral(12)
    compiled = lb.compile_model(model, fullgraph=True)
    train(model, compiled, tokens(config, steps=1) + tokens(config, steps=1, shape=(2, 16)),
          "f32")
    short, long = compiled.liger.reports
    mask_lines = [[line for line in r.recognition if line.startswith("[recognise-causal-mask]")]
                  for r in (short, long)]
    assert mask_lines == [
        ["[recognise-causal-mask] causal mask -> is_causal at model.layers.0.self_attn (its "
         "sliding window of 12 keys is wider than the traced length: the graph serves lengths "
         "up to it)"],
        ["[recognise-causal-mask] left alone scaled_dot_product_attention at "
         "model.layers.0.self_attn: a causal mask with a sliding window of 12 keys (is_causal "
         "cannot say it)"]], mask_lines


@needs_runner
@pytest.mark.parametrize("window", [4, 12])
def test_a_sliding_window_is_liger_attention_with_its_window(window):
    """With the attention option, SDPA under Mistral's sliding-window mask
    is liger.attention with the window over the 2 unrepeated key/value
    heads, narrower than the 8 tokens or wider (then causal, the length
    guarded); each step trains like eager, 8 tokens and 16."""
    config, model = sliding_mistral(window)
    compiled = lb.compile_model(model, fullgraph=True, attention=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)
        train(model, compiled, tokens(config, steps=1) + tokens(config, steps=1, shape=(2, 16)),
              "f32")
    calls = [re.findall(r"= liger\.attention %\S+, %\S+, %\S+ (.*) loc", r.partitions[0].mlir)
             for r in compiled.liger.reports]
    grouped = " return_lse : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>"
    windowed = ["causal window = %d" % window + grouped]
    # Narrower than both lengths: one graph; wider than 8 tokens: causal up
    # to 12, then the window.
    assert calls == ([windowed] if window == 4 else [["causal" + grouped], windowed]), calls


@needs_runner
def test_a_layer_norm_family_trains_like_eager(tmp_path, monkeypatch):
    """Phi: nn.LayerNorm (weight and bias) before each layer and at the end,
    partial rotary RoPE, a GELU MLP, a biased lm_head. Each LayerNorm is
    liger.layer_norm (its mean and rstd saved for liger.layer_norm_grad, as
    both imported modules show), and the step trains like eager."""
    monkeypatch.setenv("LIGER_DUMP_DIR", str(tmp_path))
    config, model = family_model("phi", "f32")
    compiled = lb.compile_model(model, fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)
        train(model, compiled, tokens(config), "f32")
    (report,) = compiled.liger.reports
    norms = [line for line in report.recognition if line.startswith("[recognise-layer-norm]")]
    assert norms == ["[recognise-layer-norm] recognised liger.layer_norm at "
                     "model.layers.0.input_layernorm",
                     "[recognise-layer-norm] recognised liger.layer_norm at model.final_layernorm"]
    folder = tmp_path / "graph0"
    assert "torch.ops.liger.layer_norm.default" in (folder / "substituted.txt").read_text()
    forward = (folder / "graph0.forward.mlir").read_text()
    backward = (folder / "graph0.backward.mlir").read_text()
    assert len(re.findall(r"= liger\.layer_norm %\S+, %\S+, %\S+ stats :", forward)) == 2
    assert len(re.findall(r"= liger\.layer_norm_grad ", backward)) == 2


@needs_runner
def test_a_layer_norm_liger_cannot_take_stays_as_it_is():
    """The near-misses of recognise-layer-norm: no weight (OLMo's
    non-parametric LayerNorm), a normalised shape of two dimensions; each
    stays F.layer_norm, with its report line, and trains like eager."""
    class Norms(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.plain = torch.nn.LayerNorm(16, elementwise_affine=False)
            self.wide = torch.nn.LayerNorm((3, 16))
            self.proj = torch.nn.Linear(16, 16)

        def forward(self, x):
            return (self.proj(self.plain(x)) + self.wide(x)).square().mean()

    block = Norms()
    eager = copy.deepcopy(block)
    x = torch.randn(2, 3, 16)
    got, want = torch.compile(block, backend="liger", fullgraph=True)(x), eager(x)
    got.backward()
    want.backward()
    assert abs(got.item() - want.item()) <= 1e-5 * abs(want.item())
    for (name, p), q in zip(block.named_parameters(), eager.parameters()):
        assert relative(p.grad, q.grad) <= 1e-5, name
    graph = [r for r in lb.reports() if r.name == "graph0"][-1]
    lines = [line for line in graph.recognition if line.startswith("[recognise-layer-norm]")]
    assert sorted(line.split(": ", 1)[1] for line in lines) == [
        "no weight (liger.layer_norm scales by one)",
        "the normalised shape [3, 16] is not the last dimension alone"], lines


@needs_runner
def test_the_embedding_gradient_is_pytorchs_own_kernel(tmp_path, monkeypatch):
    """Inductor's decomposition of embedding_dense_backward accumulates in
    an f32 [vocab, hidden] buffer; the backend runs PyTorch's kernel behind
    liger::embedding_dense_backward instead, so the gradient has the eager
    bits and the backward graph holds that op, not an index_put into an f32
    buffer."""
    monkeypatch.setenv("LIGER_DUMP_DIR", str(tmp_path))

    class Embed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(64, 16, dtype=torch.bfloat16)

        def forward(self, ids):
            return (self.embed(ids).float() ** 2).sum()
    model = Embed()
    eager = copy.deepcopy(model)
    ids = torch.randint(0, 64, (3, 20), generator=torch.Generator().manual_seed(0))
    torch.compile(model, backend="liger")(ids).backward()
    eager(ids).backward()
    assert torch.equal(model.embed.weight.grad, eager.embed.weight.grad)
    backward = (tmp_path / "graph0" / "graph0.backward.txt").read_text()
    assert "torch.ops.liger.embedding_dense_backward.default" in backward
    assert "index_put" not in backward


def _gated_backward_graph(extra_use=None, recompute=False):
    """A backward graph as AOTAutograd hands it: placeholders (dy, gate,
    up), liger::swiglu_backward, its results returned; `extra_use` returns
    that placeholder too (a user after it); `recompute` reads gate and up
    before it (the activation recomputed) and returns that too."""
    g = torch.fx.Graph()
    dy, gate, up = (g.placeholder(n) for n in ("dy", "gate", "up"))
    again = g.call_function(torch.ops.liger.swiglu.default, (gate, up)) if recompute else None
    node = g.call_function(torch.ops.liger.swiglu_backward.default, (dy, gate, up))
    dgate = g.call_function(operator.getitem, (node, 0))
    dup = g.call_function(operator.getitem, (node, 1))
    extra = {"gate": gate, "up": up}.get(extra_use)
    g.output((dgate, dup) + tuple(t for t in (extra, again) if t is not None))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"
            and n.target is not operator.getitem]


@pytest.mark.parametrize("recompute", [False, True], ids=["saved", "recomputed"])
def test_a_gated_backward_writes_over_donated_inputs_it_reads_last(recompute):
    from liger.frontend import inplace
    gen = torch.Generator().manual_seed(0)
    dy, gate, up = (torch.randn(5, 24, generator=gen).to(torch.bfloat16) for _ in range(3))
    want = _gated_backward_graph(recompute=recompute)(dy, gate, up)
    gm = _gated_backward_graph(recompute=recompute)
    lines = inplace.reuse_saved_inputs(gm, [0, 1, 2])
    assert lines == ["liger.swiglu_backward writes its gradients over its saved gate and up"]
    assert _targets(gm) == [torch.ops.liger.swiglu.default] * recompute + [
        torch.ops.liger.swiglu_backward_.default]
    g2, u2 = gate.clone(), up.clone()
    got = gm(dy, g2, u2)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert got[0] is g2 and got[1] is u2  # the saved tensors' memory


@pytest.mark.parametrize("donated,extra_use", [([0, 1], None), ([0, 2], None),
                                               ([0, 1, 2], "gate"), ([0, 1, 2], "up"),
                                               ([], None)])
def test_a_gated_backward_keeps_inputs_not_donated_or_used_again(donated, extra_use):
    """Near misses: gate or up not donated (the caller may hold it), or read
    after the backward (here returned): the functional op stays."""
    from liger.frontend import inplace
    gm = _gated_backward_graph(extra_use)
    assert inplace.reuse_saved_inputs(gm, donated) == []
    assert _targets(gm) == [torch.ops.liger.swiglu_backward.default]


def _calls(text, op):
    """The line numbers of `op`'s calls in a dumped graph."""
    return [i for i, line in enumerate(text.splitlines()) if "torch.ops.%s(" % op in line]


@needs_runner
def test_the_gated_activation_is_recomputed_in_the_backward_not_saved(tmp_path, monkeypatch):
    """The forward saves gate and up, not liger.swiglu's [tokens,
    intermediate] product (RECOMPUTED_OPS): the backward runs it again right
    before the down projection's weight gradient reads it -- after the
    backward's first op, not hoisted to its top (the partition keeps the
    graph's order: a moved node lives longer) -- and training matches eager."""
    monkeypatch.setenv("LIGER_DUMP_DIR", str(tmp_path))
    config, model = family_model("llama", "f32")
    train(model, lb.compile_model(model, fullgraph=True), tokens(config, steps=2), "f32")
    layers = model.config.num_hidden_layers
    forward = (tmp_path / "graph0" / "graph0.forward.txt").read_text()
    saved = forward[forward.rindex("return ("):]
    products = [line.split(":")[0].strip() for line in forward.splitlines()
                if "torch.ops.liger.swiglu.default(" in line]
    assert len(products) == layers
    assert not any(re.search(r"\b%s\b" % name, saved) for name in products), saved
    for name in ("graph0.backward.txt", "graph0.backward.partitioned.txt"):
        backward = (tmp_path / "graph0" / name).read_text()
        recomputed = _calls(backward, "liger.swiglu.default")
        assert len(recomputed) == layers, name
        first = min(_calls(backward, "liger.rms_norm_backward.default") +
                    _calls(backward, "aten.mm.default"))
        assert min(recomputed) > first, name


@needs_runner
def test_a_group_reads_the_outputs_of_the_groups_before_it(tmp_path, monkeypatch):
    """A fusion group whose input is an earlier group's output reads that
    call's output: the add + RMSNorm groups' sums and norms feed the next
    groups, and nothing of them is computed again outside a group (once, a
    later group read the original nodes, so the residual add and the norm
    ran a second time, their tensors alive beside the group's). Two layers:
    the only RMSNorm outside a group is the first layer's input norm, no
    residual add is left, and training matches eager."""
    monkeypatch.setenv("LIGER_DUMP_DIR", str(tmp_path))
    config, model = family_model("llama", "f32")
    model = cap.build_model(config, "f32", "cpu", layers=2).train()
    train(model, lb.compile_model(model, fullgraph=True), tokens(config, steps=2), "f32")
    forward = (tmp_path / "graph0" / "graph0.forward.partitioned.txt").read_text()
    assert len(_calls(forward, "liger.rms_norm.default")) == 1, forward
    # (Integer adds stay: the position ids' `+ past_seen_tokens`, which
    # some torch versions keep as `iota + 0`.)
    lines = forward.splitlines()
    assert [i for i in _calls(forward, "aten.add.Tensor") if '"i64[' not in lines[i]] == [], \
        forward
    assert len(_calls(forward, "liger.fusion_group.default")) == 8, forward


@needs_runner
def test_peft_lora_llama_trains_like_eager():
    peft = pytest.importorskip("peft")
    config, base = family_model("llama", "f32")
    torch.manual_seed(3)
    model = peft.get_peft_model(base, peft.LoraConfig(
        r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "k_proj", "v_proj",
                                                             "o_proj"]))
    for name, p in model.named_parameters():
        if "lora_B" in name:  # PEFT starts B at zero; make the update visible
            torch.nn.init.normal_(p, std=0.1)
    model.train()
    compiled = lb.compile_model(model, fullgraph=True)
    train(model, compiled, tokens(config), "f32")
    (report,) = compiled.liger.reports
    assert sum("[recognise-lora] recognised liger.lora_linear (scale = 2.0)" in line
               for line in report.recognition) == 4
    # Training: each LoRA call keeps its x·Aᵀ for its backward (B trains),
    # an output the dialect op does not give, so the four run as the
    # operator (its own kernels), not in the forward's fusion groups.
    forward = report.partitions[0]
    assert LORA not in groups(forward)
    assert {ADD_NORM, SWIGLU} <= groups(forward)
    kept = [line for line in map(str, forward.recognition)
            if "left alone lora_linear" in line and "reads its output(s) 1" in line
            and "runs as the operator it is" in line]
    assert len(kept) == 4, "\n".join(map(str, forward.recognition))
    # Without autograd nothing keeps it: the four import as fusion groups.
    with torch.no_grad():
        compiled(**tokens(config)[0])
    inference = compiled.liger.reports[-1].partitions[0]
    assert [u.group() for u in inference.units].count(LORA) == 4


# --- a small block: the switches and what goes to Inductor --------------------------

class Block(torch.nn.Module):
    """An HF-style RMSNorm, a gated MLP and the residual, and a loss."""

    def __init__(self, hidden=32, inter=64):
        super().__init__()
        self.norm = torch.nn.Parameter(torch.rand(hidden) + 0.5)
        self.gate = torch.nn.Linear(hidden, inter, bias=False)
        self.up = torch.nn.Linear(hidden, inter, bias=False)
        self.down = torch.nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = self.norm * h.to(x.dtype)
        y = x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))
        return (y.float() ** 2).mean()


def block_step(block, compiled, x):
    """One step of both: the loss and the gradients agree (f32)."""
    eager = copy.deepcopy(block)
    got, want = compiled(x), eager(x)
    got.backward()
    want.backward()
    tol = 1e-5 if x.dtype == torch.float32 else 1e-2
    assert abs(got.item() - want.item()) <= tol * abs(want.item())
    for (name, p), (_, q) in zip(block.named_parameters(), eager.named_parameters()):
        assert relative(p.grad, q.grad) <= tol, name


class Norms(torch.nn.Module):
    """liger.nn's add + RMSNorm and LayerNorm around a projection: liger
    operators, the add + RMSNorm with no row in liger_operators (no dialect
    op is its backward), the LayerNorm with one."""

    def __init__(self, hidden=16):
        super().__init__()
        from liger import nn
        self.add_norm = nn.LigerFusedAddRMSNorm(hidden)
        self.proj = torch.nn.Linear(hidden, hidden)
        self.norm = nn.LigerLayerNorm(hidden, bias=True)

    def forward(self, x):
        y, residual = self.add_norm(x, x.flip(-1))
        return (self.norm(self.proj(y)) * residual).square().mean()


@needs_runner
def test_the_device_target_carries_dynamos_constant_mark():
    # bundles marks device_target as torch._dynamo.assume_constant_result
    # would, without importing dynamo: the same attributes, set alike.
    marked = torch._dynamo.assume_constant_result(lambda: None)
    mark = {k: v for k, v in vars(marked).items()}
    assert mark and all(getattr(bundles.device_target, k, None) == v for k, v in mark.items())


def test_the_norm_operators_run_as_they_are():
    """liger::add_rms_norm and liger::layer_norm and their backward
    operators stay in the graphs as the operators they are, each running
    its own kernels; the model trains as it does eagerly."""
    torch.manual_seed(0)
    block = Norms()
    x = torch.randn(2, 6, 16)
    # Traced before any lookup of the CPU's target in this process: the
    # lookup is a constant of the trace, not a guard on bundles' table of
    # targets (which the backend fills while it compiles the graph).
    bundles.clear()
    block_step(block, torch.compile(block, backend="liger", fullgraph=True), x)
    forward, backward = lb.reports()[-1].partitions
    assert forward.summary().endswith("2 kernels (0 fusion groups, 2 liger operators)"), \
        forward.summary()
    # The backward: both operators, and the product's gradient (the muls
    # between them) one elementwise group.
    assert backward.summary().endswith("3 kernels (1 fusion group, 2 liger operators)"), \
        backward.summary()
    assert groups(backward) == {"rowwise (liger.mul, liger.mul, liger.mul)"}
    assert "[recognise-operator] recognised liger.layer_norm_grad at layer_norm_backward" \
        in backward.recognition


class BiasedHead(torch.nn.Module):
    """A projection, then an lm_head with a bias and HF's loss on its f32
    logits."""

    def __init__(self, hidden=16, vocab=40):
        super().__init__()
        self.proj = torch.nn.Linear(hidden, hidden, bias=False)
        self.lm_head = torch.nn.Linear(hidden, vocab, bias=True)

    def forward(self, x, labels):
        logits = self.lm_head(self.proj(x)).float()
        return torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]),
                                                 labels.view(-1))


@needs_runner
def test_an_lm_head_bias_goes_into_the_fused_loss():
    """The lm_head + loss with a bias: the fused loss's operator adds the
    bias to the logits and gives its gradient (not dropped, not left to
    Inductor); loss and every gradient, the bias's among them, as eager."""
    torch.manual_seed(0)
    head = BiasedHead().to(torch.bfloat16)
    compiled = torch.compile(head, backend="liger")
    eager = copy.deepcopy(head)
    x = torch.randn(2, 7, 16, dtype=torch.bfloat16)
    labels = torch.randint(0, 40, (2, 7))
    labels[0, 3] = -100
    got, want = compiled(x, labels), eager(x, labels)
    got.backward()
    want.backward()
    assert abs(got.item() - want.item()) <= 1e-2 * abs(want.item())
    for (name, p), (_, q) in zip(head.named_parameters(), eager.named_parameters()):
        assert relative(p.grad, q.grad) <= 2e-2, name
    recognised = "\n".join(lb.reports()[-1].recognition)
    assert "[recognise-lm-head-loss] recognised liger.fused_linear_cross_entropy" in recognised


@needs_runner
def test_debug_prints_each_graph_and_dump_writes_every_stage(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("LIGER_DEBUG", "1")
    monkeypatch.setenv("LIGER_DUMP_DIR", str(tmp_path))
    block = Block()
    block_step(block, torch.compile(block, backend="liger"), torch.randn(2, 6, 32))
    err = capfd.readouterr().err
    graph = [r for r in lb.reports() if r.name == "graph0"][-1]
    assert "== liger: graph0" in err
    assert "[recognise-rms-norm] recognised liger.rms_norm at rsqrt" in err
    assert "[recognise-gated-mlp] recognised liger.swiglu at mul_2" in err
    assert "-- graph0.forward" in err and "-- graph0.backward" in err
    assert "[liger-fuse-gated-mlp] fused liger.linear, liger.linear, liger.swiglu into a " \
           "matmul group" in err
    assert "kernel graph0.forward.g0: matmul (liger.linear, liger.linear, liger.swiglu)" in err
    assert "with Inductor: " in err and "aten.mean.dim" not in err.split("-- graph0.forward")[1]
    for line in graph.summary():
        assert line in err
    assert graph.summary()[0].startswith("graph0.forward: ")
    assert " aten nodes in liger kernels, " in graph.summary()[0]
    folder = tmp_path / "graph0"
    for name in ("dynamo.txt", "aten.txt", "substituted.txt", "graph0.forward.txt",
                 "graph0.forward.mlir", "graph0.forward.fused.mlir",
                 "graph0.forward.partitioned.txt", "graph0.forward.kernels.txt",
                 "graph0.backward.mlir", "graph0.backward.fused.mlir"):
        assert (folder / name).is_file(), name
    assert "torch.ops.liger.swiglu" in (folder / "substituted.txt").read_text()
    assert 'loc("' in (folder / "graph0.forward.mlir").read_text()
    assert "liger.fusion matmul" in (folder / "graph0.forward.fused.mlir").read_text()
    units = sorted(folder.glob("graph0.forward.g*.mlir"))
    assert units and "func.func @group(" in units[0].read_text()
    kernels = (folder / "graph0.forward.kernels.txt").read_text()
    assert "the reference lowering of fusion group graph0.forward.g" in kernels
    assert "liger.fusion_group" in (folder / "graph0.forward.partitioned.txt").read_text()


@needs_runner
@needs_compiler
def test_a_group_without_a_kernel_stays_with_inductor(tmp_path, monkeypatch):
    # kernel_target: each group is also compiled for sm_90a, and one that
    # gets no kernel there stays with Inductor, with a warning naming it and
    # liger-compile's reason (here: f32, which the matmul templates do not
    # take; fused_mlp lets the gated MLP's group reach them).
    monkeypatch.setenv("LIGER_CACHE_DIR", str(tmp_path))
    block = Block()
    compiled = torch.compile(block, backend="liger",
                             options={"kernel_target": "sm_90a", "fused_mlp": True})
    with pytest.warns(LigerFallbackWarning) as caught:
        block_step(block, compiled, torch.randn(2, 6, 32))
    messages = [str(w.message) for w in caught if "fusion group" in str(w.message)]
    assert messages == [
        "liger: fusion group graph0.forward/matmul 0 (liger.linear, liger.linear, liger.swiglu) "
        "stays with Inductor: left for a later matmul template: wgmma takes bf16 or f16 inputs"]
    forward = lb.reports()[-1].partitions[0]
    assert forward.units == [] and [(left.warned, left.policy) for left in forward.left] == [
        (True, False)]


@needs_runner
@needs_compiler
def test_fused_mlp_runs_the_gated_mlp_and_its_gradient_as_matmul_groups(tmp_path, monkeypatch):
    """backend option fused_mlp: the forward's gate/up pair writes gate and
    up beside the activation (one group of three results), and the
    backward's dx of the down projection carries the activation's gradient
    (liger-fuse's gradient epilogues); training matches eager. Without it,
    a GPU's run (here: kernel_target) leaves the forward's group to Inductor
    with the policy's reason, and the backward has no such group."""
    monkeypatch.setenv("LIGER_CACHE_DIR", str(tmp_path))
    block = Block().to(torch.bfloat16)  # (the gradient fuses in the templates' dtypes)
    block_step(block, torch.compile(block, backend="liger", options={"fused_mlp": True}),
               torch.randn(2, 6, 32, dtype=torch.bfloat16))
    forward, backward = lb.reports()[-1].partitions[:2]
    assert [u.group() for u in forward.units] == [SWIGLU]
    assert "matmul (liger.linear_grad_input, liger.swiglu_grad)" in [
        u.group() for u in backward.units]
    torch._dynamo.reset()
    block = Block()
    with warnings.catch_warnings():  # a choice of the options: no fallback warning
        warnings.simplefilter("error", LigerFallbackWarning)
        block_step(block, torch.compile(block, backend="liger",
                                        options={"kernel_target": "sm_90a"}),
                   torch.randn(2, 6, 32))
    forward, backward = lb.reports()[-1].partitions[:2]
    assert forward.units == [] and [(left.reason, left.policy, left.warned)
                                    for left in forward.left] == [
        (partition.POLICY_SEVERAL_RESULTS, True, False)]
    assert not any("linear_grad_input" in u.group() for u in backward.units)


class Residual(torch.nn.Module):
    """A projection's residual sum and the HF-style RMSNorm of it."""

    def __init__(self, hidden=32):
        super().__init__()
        self.norm = torch.nn.Parameter(torch.rand(hidden) + 0.5)
        self.proj = torch.nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        h = x + self.proj(x)
        n = h.to(torch.float32)
        n = n * torch.rsqrt(n.pow(2).mean(-1, keepdim=True) + 1e-6)
        n = self.norm * n.to(x.dtype)
        return (n.float() ** 2).mean() + h.float().mean()


@needs_runner
@needs_compiler
def test_rowwise_groups_compile_for_the_gpu(tmp_path, monkeypatch):
    # An add + RMSNorm and, in the backward, the norm's gradient with the
    # residual's: their sm_90a kernels compile (here; the reference runs).
    monkeypatch.setenv("LIGER_CACHE_DIR", str(tmp_path))
    block = Residual().to(torch.bfloat16)
    compiled = torch.compile(block, backend="liger", options={"kernel_target": "sm_90a"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)
        block_step(block, compiled, torch.randn(2, 6, 32, dtype=torch.bfloat16))
    forward, backward = lb.reports()[-1].partitions
    assert groups(forward) == {ADD_NORM}
    assert NORM_GRAD_ADD in groups(backward)
    assert not forward.left and not backward.left
    for unit in forward.units + backward.units:  # the sm_90a bundles are in the cache
        assert Cache(str(tmp_path)).lookup(unit.spec.with_target("sm_90a").key()) is not None


@needs_runner
@needs_compiler
def test_precompile_within_a_sliding_window_says_the_lengths_it_serves(tmp_path):
    """A batch of 8 tokens under Mistral's window of 12 keys: the graph is
    causal with its length guarded to 12, so the precompiled kernels serve
    sequences up to 12 tokens; precompile says so, once."""
    config, model = sliding_mistral(12)
    with pytest.warns(UserWarning) as caught:
        reports = lb.precompile(model, tokens(config, 1)[0], str(tmp_path / "bundles"))
    assert {w for r in reports for w in r.guarded_windows} == {12}
    said = [str(w.message) for w in caught if "precompile" in str(w.message)]
    assert said == ["liger precompile: the batch's sequence is within the sliding window of 12 "
                    "keys, so the kernels serve sequences up to it; for longer ones, precompile "
                    "again with a batch longer than the window"], said


@needs_runner
@needs_compiler
def test_precompiled_kernels_serve_a_run_without_the_compiler(tmp_path, monkeypatch):
    # precompile() traces and compiles a training step (nothing runs) and
    # writes its sm_90a kernels; a run of another batch size where no
    # compiler is finds every one of them there (what a GPU machine does).
    config, model = family_model("llama", "bf16")
    out = tmp_path / "bundles"
    reports = lb.precompile(copy.deepcopy(model), tokens(config, 1)[0], str(out))
    made = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    forward, backward = reports[0].partitions
    assert groups(forward) == {QKV_ROPE, ADD_NORM}
    # The gated MLP's gate and up are saved for the backward: three results,
    # a kernel the backend runs only with fused_mlp.
    assert [(left.group(), left.reason, left.policy) for left in forward.left] == [
        (SWIGLU, partition.POLICY_SEVERAL_RESULTS, True)]
    units = [u for p in reports[0].partitions for u in p.units]
    assert all(u.spec.with_target("sm_90a").key() in made for u in units)
    assert "?x?x64xbf16" in units[0].spec.text  # the token dimensions are dynamic
    monkeypatch.setenv("LIGER_OPS_BUNDLES", str(out))
    monkeypatch.setenv("LIGER_CACHE_DIR", str(tmp_path / "cache"))

    def no_compiler(name="liger-opt"):
        if name == "liger-compile":
            raise LigerError("cannot find liger-compile")
        return find_tool(name)
    monkeypatch.setattr("liger.driver.find_tool", no_compiler)
    monkeypatch.setattr("liger.bundles.driver.find_tool", no_compiler)
    compiled = lb.compile_model(model, kernel_target="sm_90a")
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)  # every kernel is there
        train(model, compiled, tokens(config, 1, shape=(3, 6)), "bf16")
    assert not (tmp_path / "cache").exists()
    # Groups that are not there (fused_mlp's, not precompiled): each message
    # says where to precompile them.
    compiled = lb.compile_model(model, kernel_target="sm_90a", fused_mlp=True)
    with pytest.warns(LigerFallbackWarning) as caught:
        train(model, compiled, tokens(config, 1, shape=(3, 6)), "bf16")
    assert [str(w.message) for w in caught] == [
        "liger: fusion group graph0.%s (%s) stays with Inductor: no compiled kernel for it "
        "(target sm_90a) in LIGER_OPS_BUNDLES=%s, and liger-compile is not installed here: "
        "precompile the model's kernels where the compiler is "
        "(liger.frontend.backend.precompile)" % (group, ops, out) for group, ops in [
            ("forward/matmul 2", "liger.linear, liger.linear, liger.swiglu"),
            ("backward/matmul 0", "liger.linear_grad_input, liger.swiglu_grad")]]


@needs_runner
@needs_compiler
def test_a_precompile_serves_a_sequence_past_the_masks_reach(tmp_path, monkeypatch):
    """Where neither liger-opt nor liger-compile is: a run of 6 tokens
    (its mask evaluated up to 12, a reach made small) and then of 40,
    past the reach, so dynamo compiles the graph again under another name
    (graph1): the same module, found in the precompile of 8 tokens."""
    from liger.frontend import masks
    config, model = family_model("llama", "bf16")
    out = tmp_path / "bundles"
    lb.precompile(copy.deepcopy(model), tokens(config, 1)[0], str(out))
    monkeypatch.setenv("LIGER_OPS_BUNDLES", str(out))
    monkeypatch.setenv("LIGER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(masks, "REACH_ELEMENTS", 12 * 12)

    def no_compiler(name="liger-opt"):
        if name in ("liger-compile", "liger-opt"):
            raise LigerError("cannot find %s" % name)
        return find_tool(name)
    monkeypatch.setattr("liger.driver.find_tool", no_compiler)
    monkeypatch.setattr("liger.bundles.driver.find_tool", no_compiler)
    compiled = lb.compile_model(model, kernel_target="sm_90a")
    with warnings.catch_warnings():
        warnings.simplefilter("error", LigerFallbackWarning)  # every graph and kernel is there
        train(model, compiled, tokens(config, 1, shape=(3, 6)) +
              tokens(config, 1, shape=(2, 40)), "bf16")
    assert [[line.split(" (")[-1] for line in r.recognition if "causal-mask" in line]
            for r in compiled.liger.reports] == [
        [masks.REACHED % 12 + ")"], [masks.REACHED % 80 + ")"]]
    assert not (tmp_path / "cache").exists()


# --- attention: liger::attention where its kernels take the call --------------------

class Attention(torch.nn.Module):
    """SDPA of q [2, 4, T, D] over k and v [2, 2, S, D] (grouped heads) as
    the caller gives them, with SDPA's options, then a loss; a fourth input
    is the call's mask."""

    def __init__(self, **sdpa):
        super().__init__()
        self.sdpa = sdpa

    def forward(self, q, k, v, mask=None):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                             enable_gqa=True, **self.sdpa)
        return (o.float() ** 2).mean()


def attention_step(module, dtype="f32", t=8, s=8, d=16, grad=True, mask=False, compare=True,
                   **options):
    """One step of `module` under the backend (`options`, with the attention
    option on unless they say otherwise) against eager: the loss and the
    gradients of q, k and v agree (`compare`), and no operator falls back
    to PyTorch (LigerFallbackWarning); returns the graph's report."""
    options.setdefault("attention", True)
    gen = torch.Generator().manual_seed(0)
    dt = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    inputs = [torch.randn(*shape, generator=gen).to(dt).requires_grad_(grad)
              for shape in ((2, 4, t, d), (2, 2, s, d), (2, 2, s, d))]
    twins = [x.detach().clone().requires_grad_(grad) for x in inputs]
    extra = [torch.rand(t, s, generator=gen) > 0.3] if mask else []
    compiled = torch.compile(module, backend="liger", options=options)
    with warnings.catch_warnings(), torch.set_grad_enabled(grad):
        warnings.simplefilter("error", LigerFallbackWarning)
        got, want = compiled(*inputs, *extra), module(*twins, *extra)
        if grad:
            got.backward()
            want.backward()
    if compare:
        tol = TOLERANCE[dtype]
        assert abs(got.item() - want.item()) <= tol * abs(want.item()), (got, want)
        for name, a, b in zip("qkv", inputs, twins):
            assert not grad or relative(a.grad, b.grad) <= tol, name
    return lb.reports()[-1]


def attention_lines(report):
    """The recognise-attention lines, and the liger.attention ops of each
    forward and backward graph."""
    lines = [line for line in report.recognition if line.startswith("[recognise-attention]")]
    return lines, [re.findall(r"= (liger\.attention\w* .*) loc", p.mlir)
                   for p in report.partitions]


@needs_runner
def test_attention_is_liger_attention_forward_and_backward(tmp_path):
    """A causal SDPA call of grouped heads is liger::attention: the report
    says so, the graphs hold the operator (its lse saved for
    liger::attention_backward) on k and v of 2 heads, and the loss and the
    gradients are eager's."""
    report = attention_step(Attention(is_causal=True), dump_dir=str(tmp_path))
    lines, (forward, backward) = attention_lines(report)
    assert lines == ["[recognise-attention] recognised liger.attention (causal) at "
                     "scaled_dot_product_attention"]
    (call,) = forward
    assert call.startswith("liger.attention ") and call.endswith(
        " causal return_lse : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>")
    (grad,) = backward
    assert grad.startswith("liger.attention_grad ") and " saved(" in grad
    folder = tmp_path / "graph0"
    assert "torch.ops.liger.attention.default(" in (folder / "substituted.txt").read_text()
    assert "aten.scaled_dot_product_attention" not in (folder / "substituted.txt").read_text()
    assert "torch.ops.liger.attention.default(" in (folder / "graph0.forward.txt").read_text()
    assert "torch.ops.liger.attention_backward.default(" in (
        folder / "graph0.backward.txt").read_text()


@needs_runner
@pytest.mark.parametrize("sdpa,t,attrs", [
    ({}, 3, ""),                                # no mask: T != S means the same
    ({"scale": 0.3}, 8, " (scale = 0.3)"),
], ids=["fewer_queries", "scale"])
def test_attention_without_a_causal_mask_and_with_a_scale(sdpa, t, attrs):
    report = attention_step(Attention(**sdpa), t=t)
    lines, (forward, backward) = attention_lines(report)
    assert lines == ["[recognise-attention] recognised liger.attention%s at "
                     "scaled_dot_product_attention" % attrs]
    assert len(forward) == len(backward) == 1


@needs_runner
def test_attention_without_gradients_returns_no_lse():
    report = attention_step(Attention(is_causal=True), grad=False)
    lines, (forward,) = attention_lines(report)  # (no backward graph)
    assert lines == ["[recognise-attention] recognised liger.attention (causal) at "
                     "scaled_dot_product_attention"]
    (call,) = forward
    assert call.endswith(" causal : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, "
                         "tensor<2x2x8x16xf32>"), call


@needs_runner
def test_attention_stays_sdpa_without_the_option():
    """By default the backend leaves SDPA's attention to Inductor (cuDNN on
    an H200), saying why; the step is eager's."""
    report = attention_step(Attention(is_causal=True), attention=False)
    lines, graphs = attention_lines(report)
    assert lines == ["[recognise-attention] left alone scaled_dot_product_attention at "
                     "scaled_dot_product_attention: " + substitute.ATTENTION_OFF]
    assert all(ops == [] for ops in graphs)


@needs_runner
def test_a_family_without_the_attention_option_keeps_sdpa():
    config, model = family_model("llama", "f32")
    compiled = lb.compile_model(model, fullgraph=True)
    train(model, compiled, tokens(config), "f32")
    (report,) = compiled.liger.reports
    assert [line for line in report.recognition if line.startswith("[recognise-attention]")] \
        == ["[recognise-attention] left alone scaled_dot_product_attention at "
            "model.layers.0.self_attn: " + substitute.ATTENTION_OFF]
    forward, backward = report.partitions
    assert "liger.attention" not in forward.mlir and "liger.attention" not in backward.mlir


def _no_backward_head_dim():
    """A head dimension the attention template's forward takes and its backward does not."""
    step, widest = specs.ATTENTION_HEAD_DIMS
    return next((d for d in range(step, widest + 1, step)
                 if d not in specs.ATTENTION_GRAD_HEAD_DIMS), None)


# (SDPA's options, attention_step's, the reason the report gives, a word
# it names.) Each call stays SDPA, which Inductor compiles as eager
# computes it. With kernel_target, the GPU's decisions: the calls on which
# liger.ops.attention would itself run PyTorch's SDPA (the reason is its
# rule's, specs.attention_unsupported, on the target, with the backward
# where the graph trains), so putting the operator there would gain nothing.
_GPU = "liger.ops.attention falls back to PyTorch on %s: "
ATTENTION_LEFT = {
    "mask": ({}, dict(mask=True),
             "an explicit attention mask (liger.attention masks causally, with a sliding "
             "window or not at all)",
             "mask"),
    "dropout": ({"dropout_p": 0.1}, dict(compare=False), "attention dropout 0.1", "dropout"),
    "causal_fewer_queries": ({"is_causal": True}, dict(t=3),
                             "is_causal with 3 queries over 8 keys: SDPA aligns its causal "
                             "mask top-left, liger.attention bottom-right (the two agree only "
                             "where T = S)", "top-left"),
    "f32": ({"is_causal": True}, dict(d=64, kernel_target="sm_90a"),
            ("sm_90a", "f32", 64, 8), "got f32"),
    "sm_80": ({"is_causal": True}, dict(dtype="bf16", d=64, kernel_target="sm_80"),
              ("sm_80", "bf16", 64, 8), "the target is sm_80"),
    "head_dim_80": ({"is_causal": True}, dict(dtype="bf16", d=80, kernel_target="sm_90a"),
                    ("sm_90a", "bf16", 80, 8), "head dimension 80"),
    "lengths": ({}, dict(dtype="bf16", d=64, t=3, kernel_target="sm_90a"),
                ("sm_90a", "bf16", 64, 3), "different lengths"),
    "backward_head_dim": ({"is_causal": True},
                          dict(dtype="bf16", d=_no_backward_head_dim(), kernel_target="sm_90a"),
                          ("sm_90a", "bf16", _no_backward_head_dim(), 8), "with a backward"),
}


@needs_runner
@pytest.mark.parametrize("case", sorted(ATTENTION_LEFT))
def test_attention_liger_would_not_run_stays_sdpa(case):
    sdpa, step, reason, word = ATTENTION_LEFT[case]
    if case == "backward_head_dim" and step["d"] is None:
        pytest.skip("the attention template's backward takes every head dimension its "
                    "forward takes")
    if isinstance(reason, tuple):
        target, dtype, d, t = reason
        why = specs.attention_unsupported(target, dtype, d, True, t, 8)
        assert why, reason
        reason = _GPU % target + why
    report = attention_step(Attention(**sdpa), **step)
    lines, graphs = attention_lines(report)
    assert lines == ["[recognise-attention] left alone scaled_dot_product_attention at "
                     "scaled_dot_product_attention: " + reason]
    assert word in reason
    assert all(ops == [] for ops in graphs)


@needs_runner
@needs_compiler
@pytest.mark.parametrize("d,grad", [(64, True), (_no_backward_head_dim() or 256, False)],
                         ids=["training", "inference"])
def test_attention_compiles_what_its_operator_loads_for_the_gpu(tmp_path, monkeypatch, d, grad):
    """With kernel_target sm_90a, the policy makes the bundle of the spec
    the operator loads (with its backward where the graph trains) in the
    cache; a head dimension the backward does not take is liger::attention
    where nothing needs gradients."""
    monkeypatch.setenv("LIGER_CACHE_DIR", str(tmp_path))
    report = attention_step(Attention(is_causal=True), dtype="bf16", d=d, grad=grad,
                            kernel_target="sm_90a")
    lines, graphs = attention_lines(report)
    assert lines == ["[recognise-attention] recognised liger.attention (causal) at "
                     "scaled_dot_product_attention"]
    assert [len(ops) for ops in graphs] == ([1, 1] if grad else [1])
    spec = specs.attention_spec(4, 2, d, "bf16", True, target="sm_90a")
    assert spec.has_backward() == grad
    assert Cache(str(tmp_path)).lookup(spec.key()) is not None


def norm_module(names):
    """An imported module of an add + RMSNorm whose ops carry the FX node
    names `names` as their locations."""
    return """func.func @graph0_forward(%%h: tensor<?x64xbf16>, %%r: tensor<?x64xbf16>,
        %%w: tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  %%%s = liger.add %%h, %%r : tensor<?x64xbf16> loc("%s")
  %%n = liger.rms_norm %%%s, %%w eps = 1.0e-5 casting = llama : tensor<?x64xbf16>, tensor<64xbf16> loc("%s")
  return %%n, %%%s : tensor<?x64xbf16>, tensor<?x64xbf16>
}
""" % (names[0], names[0], names[0], names[1], names[0])


@needs_runner
def test_a_precompiled_fusion_serves_a_graph_without_liger_opt(tmp_path, monkeypatch):
    # What precompile keeps of liger-fuse's work is found by the module with
    # its names renumbered: a GPU's graph names its nodes otherwise, and a
    # graph dynamo compiles again (a longer sequence past a mask's reach)
    # is named otherwise.
    fused, report = partition._fuse(norm_module(["add", "rms_norm"]), str(tmp_path),
                                    graph="graph0_forward")
    assert 'loc("rms_norm")' in fused and "liger.fusion rowwise" in fused
    assert "@graph0_forward(" in fused and partition._GRAPH_NAME not in fused
    # (a node whose name holds the placeholder keeps it)
    odd, _ = partition._fuse(norm_module(["add", partition._GRAPH_NAME + "_norm"]), None,
                             graph="graph0_forward")
    assert 'loc("%s_norm")' % partition._GRAPH_NAME in odd and "@graph0_forward(" in odd
    monkeypatch.setenv("LIGER_OPS_BUNDLES", str(tmp_path))

    def no_opt(name="liger-opt"):
        raise LigerError("cannot find %s" % name)
    monkeypatch.setattr("liger.driver.find_tool", no_opt)
    again, again_report = partition._fuse(
        norm_module(["add_3", "rms_norm_1"]).replace("graph0_forward", "graph1_forward"), None,
        graph="graph1_forward")

    def renamed(text):
        return text.replace('"add"', '"add_3"').replace('"rms_norm"', '"rms_norm_1"').replace(
            "graph0_forward", "graph1_forward")
    assert again == renamed(fused)
    assert again_report == [renamed(line) for line in report] and again_report
    with pytest.raises(LigerError, match=r"^cannot find liger-opt, and no precompile of this "
                                         r"graph is in LIGER_OPS_BUNDLES: precompile the "
                                         r"model's kernels where the compiler is "
                                         r"\(liger.frontend.backend.precompile\)$"):
        partition._fuse(norm_module(["add", "rms_norm"]).replace("1.0e-5", "1.0e-6"), None)
    # A precompile traced by another torch: its graphs are not this torch's,
    # and the message says so.
    assert (tmp_path / "fused" / "torch-version").read_text() == torch.__version__ + "\n"
    (tmp_path / "fused" / "torch-version").write_text("2.0.0\n")
    with pytest.raises(LigerError, match=r"^cannot find liger-opt, and no precompile of this "
                                         r"graph is in LIGER_OPS_BUNDLES \(its precompile in "
                                         r"%s was traced by torch 2\.0\.0, this is torch %s: "
                                         r"each traces its own graphs\): precompile the model's "
                       % (re.escape(str(tmp_path)), re.escape(torch.__version__))):
        partition._fuse(norm_module(["add", "rms_norm"]).replace("1.0e-5", "1.0e-6"), None)


@needs_runner
def test_cpu_without_the_reference_and_f64_go_to_inductor_whole(monkeypatch):
    monkeypatch.delenv("LIGER_OPS_CPU_REFERENCE")
    block = Block()
    with pytest.warns(LigerFallbackWarning, match="liger: Inductor compiles the whole graph: it "
                      "runs on the CPU; liger's kernels run on CUDA GPUs"):
        block_step(block, torch.compile(block, backend="liger"), torch.randn(2, 6, 32))
    assert "all with Inductor (it runs on the CPU" in lb.reports()[-1].summary()[0]
    monkeypatch.setenv("LIGER_OPS_CPU_REFERENCE", "1")
    torch._dynamo.reset()
    block = Block().double()
    with pytest.warns(LigerFallbackWarning, match="liger: Inductor compiles the whole graph: it "
                      "computes in f64; liger's kernels take bf16, f16 and f32"):
        block_step(block, torch.compile(block, backend="liger"),
                   torch.randn(2, 6, 32, dtype=torch.float64))


@needs_runner
def test_sizes_dynamic_beyond_the_tokens_stay_with_inductor():
    # A second hidden size makes dynamo compile the hidden dimension as
    # dynamic: the norm stays with Inductor, said once.
    def norm(x, w):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return w * h
    compiled = torch.compile(norm, backend="liger")
    for hidden in (16, 24):
        x, w = torch.randn(3, hidden), torch.rand(hidden)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = compiled(x, w)
        assert torch.allclose(got, norm(x, w), rtol=1e-5, atol=1e-6)
    report = lb.reports()[-1]
    assert any("left alone rsqrt at rsqrt: input's size s" in line and
               "dynamic: liger's ops take static hidden sizes" in line
               for line in report.recognition), report.recognition
    assert [str(w.message) for w in caught if "static hidden sizes" in str(w.message)]
    assert not report.partitions[0].error


@needs_runner
def test_dynamic_tokens_compile_once_more_and_agree():
    block = Block()
    compiled = torch.compile(block, backend="liger")
    block_step(block, compiled, torch.randn(2, 6, 32))
    block.zero_grad()
    block_step(block, compiled, torch.randn(2, 9, 32))
    second = lb.reports()[-1]
    texts = [u.spec.text for p in second.partitions for u in p.units]
    assert texts and all("tensor<2x?x32xf32>" in t for t in texts
                         if "tensor<2x" in t), texts


def fallback_messages_of_a_step():
    """The LigerFallbackWarnings of a training step of Block under the backend."""
    block = Block()
    with pytest.warns(LigerFallbackWarning) as caught:
        block_step(block, torch.compile(block, backend="liger"), torch.randn(2, 6, 32))
    return [str(w.message) for w in caught]


@needs_runner
def test_a_graph_liger_cannot_compile_stays_with_inductor(monkeypatch):
    def refuse(text, into, fused_mlp=False, graph=None):
        raise LigerError("liger-opt failed (exit 1)", "<stdin>:1:1: error: made up")
    monkeypatch.setattr(partition, "_fuse", refuse)
    assert fallback_messages_of_a_step() == [
        "liger: graph0.%s stays with Inductor: liger could not compile it: liger-opt failed "
        "(exit 1)" % which for which in ("forward", "backward")]


@needs_runner
def test_a_graph_liger_cannot_trace_goes_to_inductor_whole(monkeypatch):
    def refuse(gm, policy=None):
        raise RuntimeError("an op the aten trace does not take")
    monkeypatch.setattr(lb, "recognize", refuse)
    assert fallback_messages_of_a_step() == [
        "liger: Inductor compiles the whole graph: liger could not trace it: RuntimeError: an op "
        "the aten trace does not take"]


def test_unknown_options_are_an_error():
    with pytest.raises(LigerError, match=r"backend='liger' has no option bogus \(it has attention, "
                                         r"dump_dir, fused_mlp, kernel_target, loss_memory_budget, "
                                         r"precompile_dir, report\)"):
        lb.Options.of({"bogus": 1})
    with pytest.raises(LigerError, match="has no option bogus"):
        lb.compile_model(Block(), bogus=1)


def test_importing_liger_registers_the_backend_without_torch():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    light = subprocess.run([sys.executable, "-c", "import sys, liger; print('torch' in "
                            "sys.modules)"], env=env, capture_output=True, text=True)
    assert light.stdout.strip() == "False", light.stderr
    for order in ("import liger, torch", "import torch, liger"):
        found = subprocess.run([sys.executable, "-c", order + "; from torch._dynamo.backends."
                                "registry import lookup_backend; print(lookup_backend('liger')"
                                ".__name__)"], env=env, capture_output=True, text=True)
        assert found.stdout.strip() == "_liger_backend", found.stderr

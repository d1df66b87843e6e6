"""liger.frontend: Hugging Face decoders imported into the liger dialect.

For the tiny config of each family shipped in examples/configs: the module
verifies, liger-fuse forms the expected groups, and every imported function
run on the CPU reference gives what PyTorch gives (f32, 1e-5). Near-misses
(an RMSNorm whose variance is taken in bf16, a RoPE of another convention)
are left to PyTorch and reported.
"""

import os
import re
import subprocess
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from liger import driver  # noqa: E402
from liger.frontend import (capture_model, check, import_graph, module_text,  # noqa: E402
                            recognize)
from liger.frontend import capture as cap  # noqa: E402
from liger.frontend import graph as G  # noqa: E402
from liger.frontend.backward import backward_module  # noqa: E402
from liger.frontend.records import OPS, Record, format_float  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(ROOT, "examples", "configs")
FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "olmo2", "phi"]

ADD_NORM = "[liger-fuse-add-rms-norm] fused liger.add_rms_norm into a rowwise group"
QK_ROPE = ("[liger-fuse-qkv-rope] fused liger.linear, liger.linear, tensor.expand_shape, "
           "tensor.expand_shape, linalg.transpose, linalg.transpose, liger.rope into a matmul group")
SWIGLU = "[liger-fuse-gated-mlp] fused liger.linear, liger.linear, liger.swiglu into a matmul group"
GEGLU = "[liger-fuse-gated-mlp] fused liger.linear, liger.linear, liger.geglu into a matmul group"
LOSS = ("[liger-fuse-linear-cross-entropy] fused liger.fused_linear_cross_entropy into a loss "
        "group")
NORM_ADD = "[liger-fuse-elementwise] fused liger.rms_norm, liger.add into a rowwise group"
# Phi's parallel block: the MLP's down projection and its residual adds.
LINEAR_ADD = "[liger-fuse-elementwise] fused liger.linear, liger.add into a matmul group"
# The groups liger-fuse forms in each family's layer and head. Qwen3 and OLMo2
# normalise q and k between the projections and RoPE (no q/k + RoPE group);
# Phi3's fused qkv_proj and gate_up_proj are imported as projections by row
# slices of their weights, which fuse as separate projections do.
GROUPS = {
    "llama": [ADD_NORM, QK_ROPE, SWIGLU, LOSS],
    "mistral": [ADD_NORM, QK_ROPE, SWIGLU, LOSS],
    "qwen2": [ADD_NORM, QK_ROPE, SWIGLU, LOSS],
    "qwen3": [ADD_NORM, SWIGLU, LOSS],
    "gemma": [ADD_NORM, QK_ROPE, GEGLU, LOSS],
    "gemma2": [ADD_NORM, QK_ROPE, GEGLU, NORM_ADD, LOSS],
    "phi3": [ADD_NORM, QK_ROPE, SWIGLU, LOSS],
    "olmo2": [NORM_ADD, SWIGLU, LOSS],
    "phi": [LINEAR_ADD, LOSS],
}
# What recognition must find in each family's decoder layer.
RECORDS = {
    "llama": ["rms_norm", "rope", "attention", "add_rms_norm", "swiglu"],
    "qwen3": ["rms_norm", "rms_norm", "rms_norm", "rope", "attention", "add_rms_norm", "swiglu"],
    "gemma": ["rms_norm", "rope", "attention", "add_rms_norm", "geglu"],
    "gemma2": ["rms_norm", "rope", "rms_norm", "add_rms_norm", "geglu", "rms_norm"],
    "olmo2": ["rms_norm", "rms_norm", "rope", "attention", "rms_norm", "swiglu", "rms_norm"],
    "phi": ["layer_norm", "rope", "attention"],
}


def config_path(family):
    return os.path.join(CONFIGS, "tiny-%s.json" % family)


@pytest.fixture(scope="module")
def captured():
    """family -> (captures, imported), with random weights on the CPU."""
    out = {}

    def get(family):
        if family not in out:
            captures = capture_model(config_path(family), device="cpu")
            out[family] = captures, [import_graph(c.graph_module, c.name,
                                                  argument_names=c.argument_names)
                                     for c in captures]
        return out[family]
    return get


@pytest.mark.parametrize("family", FAMILIES)
def test_family_imports_verifies_and_fuses(captured, family):
    _, imported = captured(family)
    text = module_text(imported)
    driver.run_opt(text, ["-o", os.devnull])
    report = driver.run_opt(text, ["--canonicalize", "--liger-fuse=report=true", "-o", os.devnull])
    fused = [line.split(" at ")[0] for line in report.splitlines() if "] fused " in line]
    for group in GROUPS[family]:
        assert group in fused, "%s: no '%s' in\n%s" % (family, group, report)
    layer, head = imported
    assert layer.name == "%s_decoder_layer" % family
    assert head.name == "%s_lm_head_loss" % family
    # The token dimensions are dynamic; the hidden size is not.
    assert "%hidden_states: tensor<?x?x64xf32>" in text
    assert [r.op for r in head.recognition.records] == [
        "layer_norm" if family == "phi" else "rms_norm", "fused_linear_cross_entropy"]
    if family in RECORDS:
        assert [r.op for r in layer.recognition.records] == RECORDS[family]


@pytest.mark.parametrize("family", FAMILIES)
def test_family_numerics_against_pytorch(captured, family):
    captures, imported = captured(family)
    for c, i in zip(captures, imported):
        results = check.compare(c, i)
        assert results, "%s: nothing compared" % i.name
        assert all(r.error <= 1e-5 for r in results)


@pytest.mark.parametrize("family", ["llama", "gemma", "olmo2"])
def test_family_in_bf16(family):
    # The same records as in f32 (the casts are real now), and the CPU
    # reference within bf16's tolerance of PyTorch's eager bf16 layer. OLMo2's
    # RoPE takes f32 tables and rounds back to q's dtype: liger.rope's meaning.
    captures = capture_model(config_path(family), dtype="bf16", device="cpu")
    layer = import_graph(captures[0].graph_module, captures[0].name,
                         argument_names=captures[0].argument_names)
    assert [r.op for r in layer.recognition.records] == RECORDS[family]
    assert layer.graph_breaks == 0 and "tensor<?x?x64xbf16>" in layer.mlir
    assert all(r.error <= 1e-2 for r in check.compare(captures[0], layer))


def test_whole_graph_imported_where_the_attention_is_sdpa(captured):
    _, (layer, head) = captured("llama")
    assert layer.imported_nodes == layer.aten_nodes and layer.graph_breaks == 0
    assert layer.boundary == []
    assert layer.summary(8) == ("llama_decoder_layer: %d of %d aten nodes imported, 13 liger ops, "
                                "8 kernels, 0 graph breaks" % (layer.aten_nodes, layer.aten_nodes))


def test_eager_attention_is_a_graph_break(captured):
    # Gemma2's attention (logit softcapping) runs eagerly: its matmuls and
    # tanh stay with PyTorch, and the layer splits around them.
    captures, (layer, _) = captured("gemma2")
    assert layer.graph_breaks == 1
    assert [f.name for f in layer.functions] == ["gemma2_decoder_layer", "gemma2_decoder_layer_1"]
    assert "aten.matmul.default" in layer.boundary and "aten.tanh.default" in layer.boundary
    # The softmax over the keys has a dynamic last dimension: left, with the reason.
    assert any("[recognise-softmax] left alone softmax" in line and
               "the softmax dimension is dynamic" in line for line in layer.recognition.lines())
    # The second function reads the first's q, k, v (through PyTorch's attention).
    first, second = layer.functions
    assert len(first.results) == 3 and len(second.arguments) > 3


def test_gemma_norm_is_gemma_casting_with_offset(captured):
    _, (layer, _) = captured("gemma")
    norm = layer.recognition.records[0]
    assert norm.op == "rms_norm"
    assert norm.attrs["offset"] == 1.0 and norm.attrs["casting_mode"] == "gemma"
    assert "offset = 1.0 casting = gemma" in layer.mlir


def test_gemma2_loss_takes_the_final_softcap(captured):
    _, (_, head) = captured("gemma2")
    loss = head.recognition.records[-1]
    assert loss.op == "fused_linear_cross_entropy" and loss.attrs["softcap"] == 30.0
    assert "softcap = 30.0" in head.mlir


def test_phi3_fused_projections_are_row_slices(captured):
    _, (layer, _) = captured("phi3")
    assert layer.mlir.count("tensor.extract_slice %mlp_gate_up_proj_weight") == 2
    assert layer.mlir.count("tensor.extract_slice %self_attn_qkv_proj_weight") == 3


def test_llama3_8b_config_bf16_on_meta():
    # The shipped Llama-3-8B config: no weights are made (meta device).
    captures = capture_model(os.path.join(CONFIGS, "llama3-8b.json"))
    layer = import_graph(captures[0].graph_module, captures[0].name,
                         argument_names=captures[0].argument_names)
    assert "%hidden_states: tensor<?x?x4096xbf16>" in layer.mlir
    assert "%mlp_gate_proj_weight: tensor<14336x4096xbf16>" in layer.mlir
    summary = driver.summarize(layer.mlir)[0]
    assert summary.liger_ops == {"liger.add": 1, "liger.add_rms_norm": 1, "liger.attention": 1,
                                 "liger.linear": 7, "liger.rms_norm": 1, "liger.rope": 1,
                                 "liger.swiglu": 1}
    # The same 218,112,000 parameters as the hand-written layer.
    assert summary.weight_elements == 218112000
    fused = driver.run_opt(layer.mlir, ["--canonicalize", "--liger-fuse", "--liger-print-summary",
                                        "-o", os.devnull])
    assert "kernels: 8 (fusion groups: 3 matmul, 1 rowwise; liger ops outside groups: 4)" in fused


def test_the_head_is_found_under_each_final_norm_name_or_said_missing():
    """The lm_head capture stands in for the base model with its final norm:
    Llama's `norm`, Phi's `final_layernorm`, ...; a base model with none of
    those names is a clear error, not an AttributeError."""
    norm = torch.nn.LayerNorm(4)
    for name in cap.FINAL_NORMS:
        base = torch.nn.Module()
        setattr(base, name, norm)
        assert cap._final_norm(base, types.SimpleNamespace(model_type="x")) is norm
    with pytest.raises(cap.CaptureError, match=r"^the base model of gpt9 has no final norm "
                       r"named norm or final_layernorm or final_layer_norm or ln_f: its lm_head "
                       r"and loss cannot be captured$"):
        cap._final_norm(torch.nn.Module(), types.SimpleNamespace(model_type="gpt9"))


def test_static_tokens():
    captures = capture_model(config_path("llama"), tokens=(2, 5))
    layer = import_graph(captures[0].graph_module, captures[0].name)
    assert "tensor<2x5x64xf32>" in layer.mlir and "?" not in layer.mlir.split("{")[0]
    driver.run_opt(layer.mlir, ["-o", os.devnull])


# --- the backward -------------------------------------------------------------

@pytest.mark.parametrize("family", ["llama", "gemma", "phi3", "olmo2"])
def test_backward_of_the_layer_matches_autograd(captured, family):
    (layer_capture, _), (layer, _) = captured(family)
    backward = backward_module(layer)
    driver.run_opt(layer.mlir + backward.mlir, ["-o", os.devnull])
    # The attention has no gradient rule here (its liger.attention_grad reads
    # the forward's lse): the first function returns the gradient of its
    # output, the second takes the gradients of q, k and v.
    first, second = backward.functions
    assert first.name == "%s_decoder_layer_backward" % family
    assert ("grad", "%scaled_dot_product_attention") in first.results
    assert [kind for kind, _, _ in second.arguments if kind == "through"] == ["through"] * 3
    results = check.compare_backward(layer_capture, backward)
    compared = {r.node for r in results}
    for p in layer.functions[0].parameters:
        if p not in ("%cos", "%sin"):  # RoPE's tables take no gradient
            assert p in compared, "no gradient for %s" % p
    assert all(r.error <= 1e-5 for r in results)


def test_backward_uses_the_gradient_ops_and_fuses(captured):
    _, (layer, head) = captured("llama")
    text = layer.mlir + backward_module(layer).mlir
    for op in ("liger.rms_norm_grad", "liger.rope_grad", "liger.swiglu_grad",
               "liger.linear_grad_input", "liger.linear_grad_weight"):
        assert op in text
    report = driver.run_opt(text, ["--canonicalize", "--liger-fuse=report=true", "-o", os.devnull])
    assert "[liger-fuse-elementwise] fused liger.rms_norm_grad, liger.add into a rowwise group" \
        in report
    assert "liger.fused_linear_cross_entropy_grad" in backward_module(head).mlir


def test_backward_of_the_loss_matches_autograd():
    # The gradient of the flattened hidden states is expanded back to
    # [B, T, H], both dynamic (liger-lower-expand-shape lowers it).
    captures = capture_model(config_path("gemma2"), device="cpu")
    head = import_graph(captures[1].graph_module, captures[1].name,
                        argument_names=captures[1].argument_names)
    backward = backward_module(head)
    assert "softcap = 30.0" in backward.mlir.split("fused_linear_cross_entropy_grad")[1]
    results = check.compare_backward(captures[1], backward)
    assert {r.node for r in results} == {"%hidden_states", "%norm_weight", "%lm_head_weight"}
    assert all(r.error <= 1e-5 for r in results)


def test_backward_says_which_bias_gets_no_gradient(captured):
    _, (layer, _) = captured("qwen2")
    missing = backward_module(layer).missing
    assert len(missing) == 3
    assert missing[0] == ("the bias %self_attn_k_proj_bias of %linear_1 (a column sum of the "
                          "output gradient; the dialect has no op for it)")


# --- near-misses -------------------------------------------------------------

def export(module, *args):
    return torch.export.export(module, args).graph_module


class Norm(torch.nn.Module):
    """An RMSNorm; `upcast=False` takes the variance in the input's dtype."""

    def __init__(self, upcast=True, weight_dtype=None):
        super().__init__()
        self.upcast = upcast
        self.weight = torch.nn.Parameter(torch.rand(32, dtype=weight_dtype or torch.bfloat16))

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32) if self.upcast else x
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(dtype)


def test_rms_norm_bf16_recognised_as_llama_casting():
    found = recognize(export(Norm(), torch.randn(4, 32, dtype=torch.bfloat16)))
    assert [r.op for r in found.records] == ["rms_norm"]
    assert found.records[0].attrs["casting_mode"] == "llama"


def test_rms_norm_with_bf16_variance_is_left_alone():
    gm = export(Norm(upcast=False), torch.randn(4, 32, dtype=torch.bfloat16))
    found = recognize(gm)
    assert found.records == []
    assert found.lines() == ["[recognise-rms-norm] left alone rsqrt at rsqrt: the variance is "
                             "computed in bf16; liger.rms_norm computes it in f32"]
    assert "liger.rms_norm" not in import_graph(gm, "f", found).mlir


def test_rms_norm_promoted_by_an_f32_weight_is_left_alone():
    gm = export(Norm(weight_dtype=torch.float32), torch.randn(4, 32, dtype=torch.bfloat16))
    assert recognize(gm).lines() == [
        "[recognise-rms-norm] left alone rsqrt at rsqrt: the result is f32, the input bf16 (the "
        "weight's dtype promotes it); liger.rms_norm returns the input's dtype"]


def test_rms_norm_read_through_an_upcast_is_still_the_norm():
    # A later `.float()` is the reader's cast, not the norm's (Gemma's cast
    # back to the input's dtype is the norm's own).
    class Upcast(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = Norm()

        def forward(self, x):
            return self.norm(x).float() * 2
    found = recognize(export(Upcast(), torch.randn(4, 32, dtype=torch.bfloat16)))
    assert [(r.op, r.attrs["casting_mode"]) for r in found.records] == [("rms_norm", "llama")]


def test_sizes_dynamic_where_the_op_takes_static_ones_are_left_alone():
    def norm(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
    gm = make_fx(norm, tracing_mode="symbolic")(torch.randn(3, 16), torch.rand(16))
    found = recognize(gm)
    assert found.records == []
    (line,) = found.lines()
    assert re.fullmatch(r"\[recognise-rms-norm\] left alone rsqrt at rsqrt: input's size (s\d+), "
                        r"weight's size \1 are dynamic: liger's ops take static hidden sizes "
                        r"\(torch.compile made them dynamic; mark them static or compile with "
                        r"dynamic=False\)", line), line
    assert found.dynamic == [line.split(": ", 1)[1]]


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_every_two(x):  # the GPT-J convention (interleaved pairs)
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


class Rope(torch.nn.Module):
    def __init__(self, rotate):
        super().__init__()
        self.rotate = rotate

    def forward(self, q, k, cos, sin):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * cos + self.rotate(q) * sin, k * cos + self.rotate(k) * sin


def rope_inputs():
    return (torch.randn(2, 4, 8, 16), torch.randn(2, 2, 8, 16), torch.randn(2, 8, 16),
            torch.randn(2, 8, 16))


def test_rope_rotate_half_recognised_and_exact():
    args = rope_inputs()
    gm = export(Rope(rotate_half), *args)
    found = recognize(gm)
    assert [r.op for r in found.records] == ["rope"]
    imported = import_graph(gm, "rope", found)
    q, k = torch.fx.Interpreter(gm).run(*args)
    got = driver_run(imported, args)
    assert np.allclose(got[0], q.numpy(), atol=1e-6) and np.allclose(got[1], k.numpy(), atol=1e-6)


def driver_run(imported, args):
    from liger import reference
    (function,) = imported.functions
    return reference.run_cpu(imported.mlir, function.name, [a.numpy() for a in args])


def test_policy_refuses_a_record():
    gm = export(Rope(rotate_half), *rope_inputs())
    found = recognize(gm, policy=lambda record: record.op != "rope")
    assert found.records == []
    assert found.lines() == ["[recognise-rope] left alone add at add: refused by the policy"]


class Head(torch.nn.Module):
    """An lm_head and the loss on its logits."""

    def __init__(self):
        super().__init__()
        self.lm_head = torch.nn.Linear(16, 40, bias=False)

    def forward(self, h, target):
        return torch.nn.functional.cross_entropy(self.lm_head(h).float(), target)


def test_policy_reason_and_the_loss_on_the_logits_instead():
    # A policy that refuses the lm_head + loss says why, and the loss on the
    # logits (the record's alternative) is offered next.
    gm = export(Head(), torch.randn(6, 16), torch.randint(0, 40, (6,)))
    found = recognize(gm, policy=lambda r: "no kernel here" if r.op ==
                      "fused_linear_cross_entropy" else True)
    assert [r.op for r in found.records] == ["cross_entropy"]
    assert found.lines() == [
        "[recognise-lm-head-loss] left alone cross_entropy_loss at cross_entropy_loss: no "
        "kernel here",
        "[recognise-cross-entropy] recognised liger.cross_entropy at cross_entropy_loss"]
    assert [r.op for r in recognize(gm).records] == ["fused_linear_cross_entropy"]


def test_rope_of_another_convention_is_left_alone():
    gm = export(Rope(rotate_every_two), *rope_inputs())
    found = recognize(gm)
    assert found.records == []
    assert [line for line in found.lines() if "recognise-rope" in line] == [
        "[recognise-rope] left alone add at add: the rotation is not a concatenation "
        "(another convention)",
        "[recognise-rope] left alone add_1 at add_1: the rotation is not a concatenation "
        "(another convention)"]
    assert "liger.rope" not in import_graph(gm, "f", found).mlir


def test_rope_promoted_and_not_rounded_back_is_left_alone():
    q, k, cos, sin = rope_inputs()
    found = recognize(export(Rope(rotate_half), q.bfloat16(), k.bfloat16(), cos, sin))
    assert found.records == []
    assert found.lines() == ["[recognise-rope] left alone add at add: the result stays in f32 "
                             "(the tables promote it); liger.rope returns q's dtype"]


def test_rope_rotating_the_other_way_is_left_alone():
    def backwards(x):
        half = x.shape[-1] // 2
        return torch.cat((x[..., half:], -x[..., :half]), dim=-1)
    found = recognize(export(Rope(backwards), *rope_inputs()))
    assert found.records == []
    assert "the rotation does not negate its first half (another convention)" in found.lines()[0]


# --- graphs after autograd -----------------------------------------------------

def aot_graphs(module, *args):
    """The forward and backward graphs AOTAutograd makes of module(*args)
    (static shapes), with placeholder values to run them on."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)
    compiled = torch.compile(module, backend=aot_autograd(fw_compiler=keep, bw_compiler=keep),
                             dynamic=False)
    compiled(*args).sum().backward()
    torch._dynamo.reset()
    return graphs


def random_capture(gm, seed=0):
    """`gm` with random values for its placeholders, as check.compare takes it."""
    g = torch.Generator().manual_seed(seed)
    values = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            v = n.meta["val"]
            values[n.name] = torch.randn(v.shape, generator=g, dtype=v.dtype) \
                if v.is_floating_point() else torch.randint(0, 4, v.shape, generator=g)
    return types.SimpleNamespace(graph_module=gm, placeholder_values=lambda: values)


class Projections(torch.nn.Module):
    def __init__(self, fused=False):
        super().__init__()
        self.fused = fused
        self.up = torch.nn.Linear(32, 96 if fused else 48, bias=True)
        self.down = torch.nn.Linear(32 if fused else 48, 32, bias=False)

    def forward(self, x):
        h = self.up(x)
        if self.fused:  # a fused projection read in three slices (Phi3's qkv_proj)
            q, k, v = h.split([32, 32, 32], -1)
            h = q * k + v
        return self.down(torch.nn.functional.silu(h))


def test_projections_after_autograd_are_the_dialect_ops():
    # mm(x, t(W)) between a flattening of [B, T, K] and the view back is
    # liger.linear on [B, T, K]; the backward's mm(dy, W) and mm(t(dy), x)
    # are linear_grad_input and linear_grad_weight.
    forward, backward = aot_graphs(Projections(), torch.randn(2, 5, 32))
    found = recognize(forward)
    assert [(r.op, sorted(r.operands)) for r in found.records] == [
        ("linear", ["bias", "input", "weight"]), ("linear", ["input", "weight"])]
    assert [G.rank(r.operands["input"]) for r in found.records] == [3, 3]
    # (dy · W where autograd saved Wᵀ from the forward is a projection by Wᵀ.)
    ops = sorted(r.op for r in recognize(backward).records)
    assert ops in (["linear", "linear_grad_weight", "linear_grad_weight"],
                   ["linear_grad_input", "linear_grad_weight", "linear_grad_weight"]), ops
    for gm in (forward, backward):
        imported = import_graph(gm, "g")
        results = check.compare(random_capture(gm), imported)
        assert results and all(r.error <= 1e-5 for r in results)


def test_projection_read_in_slices_is_a_projection_per_slice():
    forward, _ = aot_graphs(Projections(fused=True), torch.randn(2, 5, 32))
    found = recognize(forward)
    slices = [r.operands["weight"][1:] for r in found.records if r.op == "linear"
              and isinstance(r.operands["weight"], tuple)]
    assert slices == [(0, 32), (32, 32), (64, 32)]
    imported = import_graph(forward, "g", found)
    assert imported.mlir.count("tensor.extract_slice") == 6  # the weight's rows, the bias's
    results = check.compare(random_capture(forward), imported)
    assert results and all(r.error <= 1e-5 for r in results)


def test_liger_operator_calls_are_their_dialect_ops():
    import liger.operators  # noqa: F401 (registers torch.ops.liger.*)
    def f(x, w, gate, up, dy):
        y, rstd = torch.ops.liger.rms_norm(x, w, 1e-6, 1.0, "gemma")
        dx, dw = torch.ops.liger.rms_norm_backward(dy, x, w, rstd, 1e-6, 1.0, "gemma")
        return y, dx, dw, torch.ops.liger.swiglu(gate, up)
    args = [torch.randn(2, 5, 32), torch.randn(32), torch.randn(2, 5, 64), torch.randn(2, 5, 64),
            torch.randn(2, 5, 32)]
    gm = make_fx(f, tracing_mode="fake")(*args)
    found = recognize(gm)
    assert [(r.op, r.attrs) for r in found.records] == [
        ("rms_norm", {"eps": 1e-6, "offset": 1.0, "casting_mode": "gemma", "with_rstd": True}),
        ("rms_norm_grad", {"offset": 1.0, "casting_mode": "gemma"}),
        ("swiglu", {})]
    assert len(found.records[0].results) == 2  # y and rstd
    mlir = import_graph(gm, "f", found).mlir
    assert "liger.rms_norm %x_1, %w_1 offset = 1.0 casting = gemma rstd" in mlir
    assert "liger.rms_norm_grad %dy_1, %x_1, %w_1, %getitem_1 offset = 1.0 casting = gemma" in mlir
    driver.run_opt(mlir, ["-o", os.devnull])


def test_attention_operator_calls_are_their_dialect_ops():
    """liger::attention is liger.attention (return_lse where its lse is read,
    the operator's scale 0 the dialect's default), liger::attention_backward
    liger.attention_grad from the saved output and lse."""
    import liger.operators  # noqa: F401 (registers torch.ops.liger.*)

    def f(q, k, v, dout):
        out, lse = torch.ops.liger.attention(q, k, v, True, 0.0)
        dq, dk, dv = torch.ops.liger.attention_backward(dout, q, k, v, out, lse, True, 0.0)
        capped, clse = torch.ops.liger.attention(q, k, v, True, 0.0, 3, 50.0)
        cq, ck, cv = torch.ops.liger.attention_backward(dout, q, k, v, capped, clse, True, 0.0,
                                                        3, 50.0)
        return (out, dq, dk, dv, torch.ops.liger.attention(q, k, v, False, 0.25)[0], cq, ck,
                cv)
    args = [torch.randn(2, 4, 5, 16), torch.randn(2, 2, 5, 16), torch.randn(2, 2, 5, 16),
            torch.randn(2, 4, 5, 16)]
    gm = make_fx(f, tracing_mode="fake")(*args)
    found = recognize(gm)
    assert [(r.op, r.attrs, len(r.results)) for r in found.records] == [
        ("attention", {"causal": True, "return_lse": True}, 2),
        ("attention_grad", {"causal": True}, 3),
        ("attention", {"causal": True, "window": 3, "softcap": 50.0, "return_lse": True}, 2),
        ("attention_grad", {"causal": True, "window": 3, "softcap": 50.0}, 3),
        ("attention", {"causal": False, "scale": 0.25, "return_lse": False}, 1)]
    mlir = import_graph(gm, "f", found).mlir
    assert "= liger.attention %q_1, %k_1, %v_1 causal return_lse : " in mlir
    assert ("= liger.attention_grad %dout_1, %q_1, %k_1, %v_1 saved(%getitem, %getitem_1 : "
            "tensor<2x4x5x16xf32>, tensor<2x4x5xf32>) causal : ") in mlir
    assert "= liger.attention %q_1, %k_1, %v_1 scale = 0.25 : " in mlir
    # The window and the softcap (the operators' arguments 5 and 6, 8 and 9).
    assert "= liger.attention %q_1, %k_1, %v_1 causal window = 3 softcap = 50.0 return_lse : " \
        in mlir
    assert " causal window = 3 softcap = 50.0 : " in mlir
    driver.run_opt(mlir, ["-o", os.devnull])


class Attention(torch.nn.Module):
    def __init__(self, **sdpa):
        super().__init__()
        self.sdpa = sdpa

    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True,
                                                                **self.sdpa)


@pytest.mark.parametrize("causal,t", [(True, 8), (False, 3)], ids=["causal", "fewer_queries"])
def test_attention_recognised_and_exact(causal, t):
    """SDPA without a mask, grouped heads: liger.attention, causal where T = S
    (SDPA's top-left mask is liger's bottom-right one there), or without a
    mask whatever the lengths."""
    args = (torch.randn(2, 4, t, 16), torch.randn(2, 2, 8, 16), torch.randn(2, 2, 8, 16))
    gm = export(Attention(is_causal=causal), *args)
    found = recognize(gm)
    assert [(r.op, r.attrs) for r in found.records] == [("attention", {"causal": causal})]
    imported = import_graph(gm, "attention", found)
    (want,) = torch.fx.Interpreter(gm).run(*args)
    (got,) = driver_run(imported, args)
    assert np.allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_causal_attention_of_fewer_queries_is_left_alone():
    # SDPA's causal mask is aligned top-left, liger.attention's bottom-right.
    gm = export(Attention(is_causal=True), torch.randn(2, 4, 3, 16), torch.randn(2, 2, 8, 16),
                torch.randn(2, 2, 8, 16))
    found = recognize(gm)
    assert found.records == []
    assert found.lines() == [
        "[recognise-attention] left alone scaled_dot_product_attention at "
        "scaled_dot_product_attention: is_causal with 3 queries over 8 keys: SDPA aligns its "
        "causal mask top-left, liger.attention bottom-right (the two agree only where T = S)"]


class EagerSoftcapAttention(torch.nn.Module):
    """Gemma 2's eager attention as its modeling code writes it: k and v
    repeated per query head, the scores scaled and softcapped, a mask
    added (`mask`: "causal" computed from the sizes, "window" that with a
    sliding window of 3 keys, "shifted" a mask that is not causal,
    "input" the caller's, None), the softmax in f32,
    dropout, the product with v."""

    def __init__(self, mask="causal", softcap=50.0, scale=0.25, p=0.0):
        super().__init__()
        self.mask, self.softcap, self.scale, self.p = mask, softcap, scale, p

    def forward(self, q, k, v, given):
        b, hkv, s, d = k.shape
        n = q.shape[1] // hkv
        k = k[:, :, None, :, :].expand(b, hkv, n, s, d).reshape(b, hkv * n, s, d)
        v = v[:, :, None, :, :].expand(b, hkv, n, s, d).reshape(b, hkv * n, s, d)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scale
        if self.softcap:
            w = torch.tanh(w / self.softcap) * self.softcap
        lowest = torch.finfo(torch.float32).min
        if self.mask in ("causal", "window", "shifted"):
            mask = torch.full((s, s), lowest).triu(2 if self.mask == "shifted" else 1)
            if self.mask == "window":
                mask = mask + torch.full((s, s), lowest).tril(-3)
            w = w + mask
        elif self.mask == "input":
            w = w + given
        w = torch.nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = torch.nn.functional.dropout(w, p=self.p, training=True)
        return torch.matmul(w, v)


def _eager_args(t=8):
    return (torch.randn(2, 4, t, 16), torch.randn(2, 2, t, 16), torch.randn(2, 2, t, 16),
            torch.zeros(t, t))


@pytest.mark.parametrize("mask,scale,attrs", [
    ("causal", 0.25, {"causal": True, "softcap": 50.0}),
    ("window", 0.25, {"causal": True, "window": 3, "softcap": 50.0}),
    (None, 0.1, {"causal": False, "scale": 0.1, "softcap": 50.0})],
    ids=["causal", "window", "no_mask"])
def test_eager_softcapped_attention_recognised_and_exact(mask, scale, attrs):
    """Gemma 2's eager attention (softcapped scores, the causal mask
    computed from the sizes, with a sliding window or not, k and v
    repeated): liger.attention with its softcap (and window) over the
    original key/value heads, the default scale implicit; the reference
    lowering computes what the graph does."""
    args = _eager_args()
    gm = export(EagerSoftcapAttention(mask, softcap=2.0 if mask else 50.0, scale=scale), *args)
    found = recognize(gm)
    attrs = dict(attrs, softcap=2.0) if mask else attrs
    assert [(r.op, r.attrs) for r in found.records] == [("attention", attrs)]
    assert [tuple(G.shape(x)) for x in found.records[0].operands.values()] == [
        (2, 4, 8, 16), (2, 2, 8, 16), (2, 2, 8, 16)]
    imported = import_graph(gm, "attention", found)
    spelled = {"causal": " causal softcap = 2.0", "window": " causal window = 3 softcap = 2.0",
               None: " softcap = 50.0 scale = 0.1"}[mask]
    assert re.search(r"= liger\.attention %\w+, %\w+, %\w+" + spelled + " : ", imported.mlir), \
        imported.mlir
    (want,) = torch.fx.Interpreter(gm).run(*args)
    (got,) = driver_run(imported, args[:3])  # (the unread mask argument is no parameter)
    assert np.allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("module,reason", [
    (EagerSoftcapAttention("input"), "the mask is not the causal mask (the mask is computed "
                                     "from the graph input given)"),
    (EagerSoftcapAttention("shifted"), "the mask is not the causal mask (the mask is not "
                                       "causal)"),
    (EagerSoftcapAttention(p=0.1), "attention dropout 0.1")], ids=["input_mask", "not_causal",
                                                                  "dropout"])
def test_eager_softcapped_attention_near_misses(module, reason):
    """What liger.attention cannot say stays as it is, with the reason: a
    mask the caller gives (padding), a mask that is not causal, dropout."""
    found = recognize(export(module, *_eager_args()))
    assert not [r for r in found.records if r.op == "attention"]
    lines = [line for line in found.lines() if line.startswith("[recognise-eager-attention]")]
    assert len(lines) == 1 and lines[0].endswith(": " + reason), lines


def test_eager_softcapped_attention_over_broadcast_keys_is_left_alone():
    """Keys and values of one batch entry broadcast over the queries' two
    (matmul broadcasts them; liger.attention takes one batch): left alone."""
    q, k, v, given = _eager_args()
    found = recognize(export(EagerSoftcapAttention(), q, k[:1], v[:1], given))
    assert not [r for r in found.records if r.op == "attention"]
    lines = [line for line in found.lines() if line.startswith("[recognise-eager-attention]")]
    assert len(lines) == 1 and lines[0].endswith(
        ": q, k and v differ in batch, k and v in length or q and k in head size (a broadcast "
        "product)"), lines


def test_eager_attention_without_a_softcap_is_not_this_pattern():
    """Without the softcap's tanh the eager product is no candidate (its
    softmax is the softmax pattern's)."""
    found = recognize(export(EagerSoftcapAttention(softcap=None), *_eager_args()))
    assert not [line for line in found.lines() if "eager-attention" in line]
    assert "attention" not in [r.op for r in found.records]


class SplitBack(torch.nn.Module):
    """Flattened tokens split back into batch and sequence, then a norm."""

    def forward(self, x, w):
        y = (x + x).reshape(-1, 8)
        h = (y + y).view(x.shape) + x
        return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))


def test_flattened_tokens_split_back_keep_both_dynamic():
    # [B*T, H] -> [B, T, H] with B and T symbolic (a gradient of flattened
    # hidden states): both sizes are read from an argument that has them.
    args = (torch.randn(2, 5, 8), torch.randn(8))
    batch, seq = torch.export.Dim("batch", min=2), torch.export.Dim("seq", min=2)
    program = torch.export.export(SplitBack(), args, dynamic_shapes=({0: batch, 1: seq}, None))
    gm = program.graph_module
    imported = import_graph(gm, "f")
    assert [r.op for r in imported.recognition.records] == ["add_rms_norm"]
    assert re.search(r"tensor.expand_shape %add_1 \[\[0, 1\], \[2\]\] output_shape "
                     r"\[%dim_\d+, %dim_\d+, 8\] : tensor<\?x8xf32> into tensor<\?x\?x8xf32>",
                     imported.mlir), imported.mlir
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    capture = types.SimpleNamespace(graph_module=gm,
                                    placeholder_values=lambda: dict(zip(names, args)))
    results = check.compare(capture, imported)
    assert results and all(r.error <= 1e-5 for r in results)


# --- losses, softmax, LoRA ---------------------------------------------------

class Losses(torch.nn.Module):
    def forward(self, logits, target):
        ce = torch.nn.functional.cross_entropy(logits, target, ignore_index=3,
                                               label_smoothing=0.1, reduction="sum")
        nll = torch.nn.functional.nll_loss(torch.log_softmax(logits, -1), target,
                                           reduction="none")
        return ce, nll, torch.softmax(logits, -1)


def test_losses_and_softmax_recognised_and_exact():
    args = (torch.randn(6, 40), torch.tensor([1, 3, 0, 39, 3, 7]))
    gm = export(Losses(), *args)
    found = recognize(gm)
    ops = [(r.op, r.attrs) for r in found.records]
    assert ops == [("cross_entropy", {"ignore_index": 3, "label_smoothing": 0.1,
                                      "reduction": "sum"}),
                   ("cross_entropy", {"ignore_index": -100, "label_smoothing": 0.0,
                                      "reduction": "none"}),
                   ("softmax", {})]
    imported = import_graph(gm, "losses", found)
    assert "ignore_index = 3 label_smoothing = 0.1 reduction = sum" in imported.mlir
    want = torch.fx.Interpreter(gm).run(*args)
    got = driver_run(imported, args)
    for g, w in zip(got, want):
        assert np.allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)


class Norms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(40, eps=1e-6)
        self.unbiased = torch.nn.LayerNorm(40, bias=False)
        self.plain = torch.nn.LayerNorm(40, elementwise_affine=False)
        with torch.no_grad():
            for p in self.parameters():
                p.normal_()

    def forward(self, x):
        return self.norm(x), self.unbiased(x), self.plain(x)


def test_layer_norm_recognised_and_exact():
    """nn.LayerNorm with and without a bias -> liger.layer_norm; without a
    weight it is left alone (liger.layer_norm scales by one)."""
    args = (torch.randn(6, 40),)
    gm = export(Norms(), *args)
    found = recognize(gm)
    assert [(r.op, r.attrs, sorted(r.operands)) for r in found.records] == [
        ("layer_norm", {"eps": 1e-6}, ["bias", "input", "weight"]),
        ("layer_norm", {"eps": 1e-5}, ["input", "weight"])]
    assert found.lines()[-1].endswith(": no weight (liger.layer_norm scales by one)")
    imported = import_graph(gm, "norms", found)
    assert "eps = 1.0e-06" in imported.mlir
    results = check.compare(random_capture(gm), imported)
    assert len(results) == 2 and all(r.error <= 1e-5 for r in results), results


def test_softmax_left_in_f32_is_left_alone():
    gm = export(torch.nn.Softmax(-1), torch.randn(4, 8, dtype=torch.bfloat16))
    assert recognize(gm).records[0].op == "softmax"

    class Upcast(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, -1, dtype=torch.float32)
    assert recognize(export(Upcast(), torch.randn(4, 8, dtype=torch.bfloat16))).lines() == [
        "[recognise-softmax] left alone softmax at softmax: the result stays in f32; "
        "liger.softmax returns the input's dtype"]


def test_peft_lora_recognised_fused_and_exact():
    peft = pytest.importorskip("peft")
    config = cap.load_config(config_path("llama"))
    model = cap.build_model(config, "f32", "cpu")
    lora = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                                                      target_modules=["q_proj", "v_proj"]))
    for name, p in lora.named_parameters():
        if "lora_B" in name:  # PEFT starts B at zero; make the update visible
            torch.nn.init.normal_(p)
    c = cap.capture_decoder_layer(lora.base_model.model)
    imported = import_graph(c.graph_module, c.name, argument_names=c.argument_names)
    ops = [r.op for r in imported.recognition.records]
    assert ops.count("lora_linear") == 2
    assert "liger.lora_linear" in imported.mlir and "scale = 2.0" in imported.mlir
    report = driver.run_opt(imported.mlir, ["--canonicalize", "--liger-fuse=report=true", "-o",
                                            os.devnull])
    assert "[liger-fuse-lora] fused liger.lora_linear" in report
    assert all(r.error <= 1e-5 for r in check.compare(c, imported))


@pytest.mark.parametrize("name", ["mlp", "conv", "layer_norm", "scalar_ops"])
def test_other_models_import_what_they_can_and_never_fail(name):
    # Graphs with nothing liger recognises: what is left is a boundary, never an error.
    class ScalarOps(torch.nn.Module):
        def forward(self, x):
            return (x * 2.0 + 1.0).sum(-1), x.max(), torch.nn.functional.silu(x) + x
    modules = {
        "mlp": (torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 4)), torch.randn(3, 8)),
        "conv": (torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),
                                     torch.nn.Linear(4 * 6 * 6, 5)), torch.randn(2, 3, 8, 8)),
        "layer_norm": (torch.nn.LayerNorm(8, elementwise_affine=False), torch.randn(3, 8)),
        "scalar_ops": (ScalarOps(), torch.randn(3, 8)),
    }
    module, x = modules[name]
    gm = export(module, x)
    found = recognize(gm)
    assert found.records == []
    imported = import_graph(gm, name, found)
    assert imported.functions == [] and imported.imported_nodes == 0
    driver.run_opt(imported.mlir, ["-o", os.devnull])


# --- records -----------------------------------------------------------------

def test_record_checks_its_operands_and_results():
    with pytest.raises(ValueError, match=r"^liger.rms_norm needs operand weight$"):
        Record("rms_norm", {"input": object()}, {}, (None,))
    with pytest.raises(ValueError, match=r"^liger.rope has 2 results, the record gives 1$"):
        Record("rope", {"q": 1, "k": 2, "cos": 3, "sin": 4}, {}, (None,))
    with pytest.raises(ValueError, match=r"^liger.swiglu has no attribute eps$"):
        Record("swiglu", {"gate": 1, "up": 2}, {"eps": 1.0}, (None,))
    with pytest.raises(ValueError, match=r"^liger.linear has no operand lora_a$"):
        Record("linear", {"input": 1, "weight": 2, "lora_a": 3}, {}, (None,))
    with pytest.raises(ValueError, match=r"^liger.attention_grad takes its saved operands out, "
                                         r"lse together, got out$"):
        Record("attention_grad", {"grad": 1, "q": 2, "k": 3, "v": 4, "out": 5}, {},
               (None, None, None))


def test_float_literals_parse_in_mlir():
    assert format_float(1e-6) == "1.0e-06" and format_float(30.0) == "30.0"
    with pytest.raises(ValueError, match=r"^not a finite attribute value: inf$"):
        format_float(float("inf"))


def test_every_spec_names_a_dialect_op():
    doc = open(os.path.join(ROOT, "docs", "Dialects", "LigerDialect.md")).read()
    for name in OPS:
        assert "### `liger.%s`" % name in doc, name


# --- the command line -------------------------------------------------------

def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-m", "liger.frontend", *args], capture_output=True,
                          text=True, env=env)


def test_cli_imports_a_config(tmp_path):
    out = tmp_path / "layer.mlir"
    proc = run_cli("import", config_path("llama"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "[recognise-rope] recognised liger.rope at layer.self_attn" in proc.stdout
    assert "llama_decoder_layer: 48 of 48 aten nodes imported, 13 liger ops, 8 kernels, " \
           "0 graph breaks" in proc.stdout
    assert "liger.frontend: wrote %s (verified by liger-opt)" % out in proc.stdout
    driver.run_opt(out.read_text(), ["-o", os.devnull])


def test_cli_backward(tmp_path, capsys):
    out = tmp_path / "layer.mlir"
    code, stdout, err = cli(capsys, "import", config_path("llama"), "-o", str(out), "--backward",
                            "--quiet")
    assert code == 0, err
    assert "llama_decoder_layer_backward: @llama_decoder_layer_backward, " \
           "@llama_decoder_layer_backward_1" in stdout
    assert "func.func @llama_lm_head_loss_backward(" in out.read_text()


def cli(capsys, *args):
    """The command line in this process: (exit code, stdout, stderr)."""
    from liger.frontend.__main__ import main
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_model_directory(tmp_path, capsys):
    (tmp_path / "config.json").write_text(open(config_path("qwen2")).read())
    code, out, err = cli(capsys, "import", str(tmp_path), "-o", str(tmp_path / "q.mlir"), "--quiet")
    assert code == 0, err
    assert out.splitlines()[0].startswith("qwen2_decoder_layer: ")


def test_cli_errors(tmp_path, capsys):
    missing = tmp_path / "missing.json"
    code, _, err = cli(capsys, "import", str(missing), "-o", str(tmp_path / "x.mlir"))
    assert code == 1
    assert err.strip() == ("liger.frontend: error: no config at %s (give a config.json or "
                           "a directory holding one)" % missing)
    bad = tmp_path / "bad.json"
    bad.write_text('{"hidden_size": 8}')
    code, _, err = cli(capsys, "import", str(bad), "-o", str(tmp_path / "x.mlir"))
    assert code == 1
    assert err.strip() == ("liger.frontend: error: %s has no model_type: not a Hugging "
                           "Face config.json" % bad)
    bad.write_text('{"model_type": "no-such-model"}')
    code, _, err = cli(capsys, "import", str(bad), "-o", str(tmp_path / "x.mlir"))
    assert code == 1
    assert err.startswith("liger.frontend: error: %s: transformers does not know "
                          "model_type 'no-such-model'" % bad)
    bad.write_text('[1, 2')
    code, _, err = cli(capsys, "import", str(bad), "-o", str(tmp_path / "x.mlir"))
    assert code == 1 and err.startswith("liger.frontend: error: cannot read %s: " % bad)
    code, _, err = cli(capsys, "import", config_path("llama"), "-o", str(tmp_path / "x.mlir"),
                       "--tokens", "1")
    assert code == 2
    assert "argument --tokens: expected 'dynamic' or BATCH,SEQUENCE with BATCH >= 1 and " \
           "SEQUENCE >= 2, got '1'" in err
    assert not (tmp_path / "x.mlir").exists()


def test_cli_unwritable_output(tmp_path, capsys):
    code, _, err = cli(capsys, "import", config_path("llama"), "-o",
                       str(tmp_path / "no-such-dir" / "x.mlir"), "--quiet")
    assert code == 1 and "liger.frontend: error: [Errno 2] No such file or directory" in err

"""Every fusion pass keeps the function it rewrites, on the CPU oracle.

Each case of test/Transforms/fuse-*.mlir (positive cases and near-misses
alike) is run before and after its pass on the same fresh random inputs, and
the results must agree within the tolerance of their dtype. The inputs come
from the function signature: every dynamic size is one token count, integer
tensors hold class indices. The scaled-down Llama layer is checked the same
way through the whole liger-fuse pipeline.
"""

import glob
import os
import re

import numpy as np
import pytest

from liger.reference import assert_close, run_before_after, to_bf16

from test_example_layer import tiny_layer

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
ARG = re.compile(r"%(\w+):\s*(tensor<[^>]*>|index|f32|i64)")


def cases():
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "Transforms", "fuse-*.mlir"))):
        flag = "--liger-" + os.path.basename(path)[: -len(".mlir")]
        for chunk in open(path).read().split("// -----"):
            for match in re.finditer(r"func\.func @(\w+)\((.*?)\)\s*(->|\{)", chunk, re.S):
                yield pytest.param(flag, chunk, match.group(1), match.group(2),
                                   id="%s:%s" % (os.path.basename(path), match.group(1)))


def make_input(rng, type_text, tokens):
    inner = type_text[len("tensor<"):-1]
    *dims, elem = inner.split("x")
    shape = tuple(tokens if d == "?" else int(d) for d in dims)
    if elem in ("i32", "i64"):
        return rng.integers(0, 16, size=shape).astype(np.int32 if elem == "i32" else np.int64)
    values = rng.standard_normal(shape).astype(np.float32) * 0.5
    if elem == "bf16":
        return to_bf16(values)
    return values if elem == "f32" else values.astype(np.float16)


@pytest.mark.parametrize("flag,chunk,name,args", list(cases()))
def test_fusion_pass_keeps_the_function(rng, flag, chunk, name, args):
    types = [t for _, t in ARG.findall(args)]
    if any(not t.startswith("tensor<") for t in types):
        pytest.skip("a non-tensor argument")
    inputs = [make_input(rng, t, tokens=3) for t in types]
    before, after, fused = run_before_after(chunk, [flag], name, inputs)
    assert len(before) == len(after)
    for i, (b, a) in enumerate(zip(before, after)):
        dtype = "bf16" if "bf16" in chunk else "f32"
        assert_close(a, b, dtype, "result #%d" % i)


@pytest.mark.parametrize("fuse,groups", [
    ("--liger-fuse", 4),                          # input norm a rowwise kernel
    ("--liger-fuse=norm-prologue=true", 5)])      # input norm folded
@pytest.mark.parametrize("batch,seq", [(1, 4), (2, 3)])
def test_fused_llama_layer_matches_unfused(rng, batch, seq, fuse, groups):
    text = tiny_layer()
    types = [t for _, t in ARG.findall(text.split("{", 1)[0])]
    inputs = []
    for t in types:
        inner = t[len("tensor<"):-1]
        *dims, elem = inner.split("x")
        # [B, T, H] activations; [1, T, D] tables; weights are static.
        shape = []
        for i, d in enumerate(dims):
            if d != "?":
                shape.append(int(d))
            else:
                shape.append(batch if (len(dims) == 3 and i == 0 and dims[0] == "?") else seq)
        values = rng.standard_normal(shape).astype(np.float32) * 0.3
        inputs.append(to_bf16(values))
    before, after, fused = run_before_after(text, ["--canonicalize", fuse],
                                            "llama3_8b_decoder_layer", inputs)
    assert fused.count("liger.fusion") == groups
    assert_close(after[0], before[0], "bf16", "layer output")

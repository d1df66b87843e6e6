"""The CPU runner from Python: the before/after-pass helper, shape
specialization, and the errors a caller sees."""

import numpy as np
import pytest

from liger import LigerError
from liger.reference import (BF16, assert_close, bf16_bits_to_f32, run_before_after, run_cpu,
                             to_bf16)

CANONICALIZABLE = """
func.func @f(%x: tensor<?x64xbf16>, %w: tensor<32x64xbf16>, %a: tensor<4x64xbf16>,
             %b: tensor<32x4xbf16>, %g: tensor<32xbf16>) -> tensor<?x32xbf16> {
  %p = liger.lora_linear %x, %w, %a, %b scale = 0.0 : tensor<?x64xbf16>, tensor<32x64xbf16>, tensor<4x64xbf16>, tensor<32x4xbf16>
  %n, %rstd = liger.rms_norm %p, %g eps = 1.0e-5 rstd : tensor<?x32xbf16>, tensor<32xbf16>
  return %n : tensor<?x32xbf16>
}
"""


def test_canonicalize_keeps_the_function(rng):
    """The helper every fusion test uses: same inputs, before and after a pass."""
    inputs = [to_bf16(rng.standard_normal(shape).astype(np.float32))
              for shape in [(5, 64), (32, 64), (4, 64), (32, 4), (32,)]]
    before, after, transformed = run_before_after(CANONICALIZABLE, ["--canonicalize"], "f", inputs)
    # The pass did change the function: LoRA with scale 0 is a plain linear,
    # and the unread rstd result is gone.
    assert "liger.lora_linear" not in transformed and "liger.linear" in transformed
    assert "rstd" not in transformed
    assert len(before) == len(after) == 1
    assert_close(after[0], before[0], "bf16", "canonicalized")


def test_before_after_catches_a_changed_function(rng):
    """The helper is only useful if a wrong rewrite shows: scale 0 -> 1 must."""
    inputs = [to_bf16(rng.standard_normal(shape).astype(np.float32))
              for shape in [(5, 64), (32, 64), (4, 64), (32, 4), (32,)]]
    changed = CANONICALIZABLE.replace("scale = 0.0", "scale = 1.0")
    before = run_cpu(CANONICALIZABLE, "f", inputs)
    after = run_cpu(changed, "f", inputs)
    with pytest.raises(AssertionError):
        assert_close(after[0], before[0], "bf16")


def test_lowered_module_runs_the_same(rng):
    """liger-lower-to-linalg itself, checked with the helper."""
    inputs = [rng.standard_normal((3, 1000)).astype(np.float32),
              rng.integers(0, 1000, size=3).astype(np.int64)]
    mlir = """func.func @f(%x: tensor<?x1000xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t label_smoothing = 0.1 : tensor<?x1000xf32>, tensor<?xi64>
  return %l : tensor<f32>
}"""
    before, after, lowered = run_before_after(mlir, ["--liger-lower-to-linalg"], "f", inputs)
    assert "liger." not in lowered
    assert_close(after[0], before[0], "f32")


@pytest.mark.parametrize("mlir,shapes", [
    ("""func.func @f(%q: tensor<?x2x?x8xf32>, %k: tensor<?x1x?x8xf32>, %c: tensor<?x?x8xf32>) -> (tensor<?x2x?x8xf32>, tensor<?x1x?x8xf32>) {
  %a, %b = liger.rope %q, %k, %c, %c : tensor<?x2x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x8xf32>
  return %a, %b : tensor<?x2x?x8xf32>, tensor<?x1x?x8xf32>
}""", [(3, 2, 5, 8), (3, 1, 5, 8), (3, 5, 8)]),
    ("""func.func @f(%q: tensor<?x4x?x16xf32>, %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x16xf32>) -> tensor<?x4x?x16xf32> {
  %o = liger.attention %q, %k, %v causal : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>
  return %o : tensor<?x4x?x16xf32>
}""", [(2, 4, 3, 16), (2, 2, 6, 16), (2, 2, 6, 16)]),
], ids=["rope", "attention"])
def test_specialized_and_dynamic_compiles_agree(rng, mlir, shapes):
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    dynamic = run_cpu(mlir, "f", inputs)
    static = run_cpu(mlir, "f", inputs, specialize_shapes=True)
    for d, s in zip(dynamic, static):
        assert_close(d, s, "f32")


def test_bf16_round_trip():
    values = np.array([1.0, -2.5, 3.14159, 65504.0, 1e-20, np.inf, -np.inf], dtype=np.float32)
    b = to_bf16(values)
    back = b.to_f32()
    assert back[0] == 1.0 and back[1] == -2.5 and back[5] == np.inf and back[6] == -np.inf
    # Round to nearest even: 1 + 2^-8 is halfway between two bf16 values.
    tie = to_bf16(np.array([1.0 + 2.0 ** -8], dtype=np.float32)).to_f32()
    assert tie[0] == 1.0
    assert np.isnan(to_bf16(np.array([np.nan], dtype=np.float32)).to_f32()[0])
    assert np.all(np.abs(back[:5] - values[:5]) <= np.abs(values[:5]) * 2.0 ** -8)
    assert bf16_bits_to_f32(np.array([0x3F80], dtype=np.uint16))[0] == 1.0
    with pytest.raises(TypeError):
        BF16(np.zeros(3, dtype=np.float32))


RMS = """func.func @f(%x: tensor<?x8xf32>, %w: tensor<8xf32>) -> tensor<?x8xf32> {
  %y = liger.rms_norm %x, %w : tensor<?x8xf32>, tensor<8xf32>
  return %y : tensor<?x8xf32>
}"""


@pytest.mark.parametrize("inputs,message", [
    (lambda: [np.zeros((2, 8), np.float32)], "expects 2 input(s), got 1"),
    (lambda: [np.zeros((2, 8), np.float64), np.zeros(8, np.float32)],
     "input #0: expected f32 elements for 'tensor<?x8xf32>', got 2x8xf64"),
    (lambda: [np.zeros((2, 9), np.float32), np.zeros(8, np.float32)],
     "input #0: expected shape [?, 8] for 'tensor<?x8xf32>', got 2x9xf32"),
    (lambda: [to_bf16(np.zeros((2, 8), np.float32)), np.zeros(8, np.float32)],
     "expected f32 elements for 'tensor<?x8xf32>', got 2x8xbf16"),
], ids=["count", "dtype", "shape", "bf16-for-f32"])
def test_bad_inputs_are_diagnosed(inputs, message):
    with pytest.raises(LigerError) as info:
        run_cpu(RMS, "f", inputs())
    assert message in str(info.value)


def test_unsupported_numpy_dtype_is_rejected_before_running():
    with pytest.raises(TypeError, match="unsupported input dtype"):
        run_cpu(RMS, "f", [np.zeros((2, 8), np.complex64), np.zeros(8, np.float32)])


def test_operands_that_must_match_are_checked(rng):
    """Two dynamic sizes the op needs equal: an error, not an out-of-bounds read."""
    mlir = """func.func @f(%x: tensor<?x?x16xf32>, %r: tensor<?x?x16xf32>, %w: tensor<16xf32>) -> tensor<?x?x16xf32> {
  %y, %s = liger.add_rms_norm %x, %r, %w : tensor<?x?x16xf32>, tensor<16xf32>
  return %y : tensor<?x?x16xf32>
}"""
    inputs = [np.zeros((2, 3, 16), np.float32), np.zeros((2, 4, 16), np.float32),
              np.zeros(16, np.float32)]
    with pytest.raises(LigerError) as info:
        run_cpu(mlir, "f", inputs)
    assert ("'liger.add_rms_norm' op failed to verify that all of {input, residual} have "
            "same type") in str(info.value)
    assert ("'liger.add_rms_norm' op does not accept operands of these shapes: "
            "'tensor<2x3x16xf32>', 'tensor<2x4x16xf32>', 'tensor<16xf32>'") in str(info.value)


def test_reshapes_of_dynamic_token_dimensions(rng):
    """Flattened tokens split back into batch and sequence (two dynamic sizes
    in one group: liger-lower-expand-shape) and a result that aliases an
    input (a copy the caller owns): exact values."""
    mlir = """func.func @split(%x: tensor<?x?x64xf32>, %y: tensor<?x64xf32>) -> tensor<?x?x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x64xf32>
  %t = tensor.dim %x, %c1 : tensor<?x?x64xf32>
  %e = tensor.expand_shape %y [[0, 1], [2]] output_shape [%b, %t, 64] : tensor<?x64xf32> into tensor<?x?x64xf32>
  return %e : tensor<?x?x64xf32>
}
func.func @merge(%x: tensor<?x?x64xf32>) -> tensor<?x64xf32> {
  %f = tensor.collapse_shape %x [[0, 1], [2]] : tensor<?x?x64xf32> into tensor<?x64xf32>
  return %f : tensor<?x64xf32>
}"""
    x = rng.standard_normal((3, 5, 64)).astype(np.float32)
    y = rng.standard_normal((15, 64)).astype(np.float32)
    (split,) = run_cpu(mlir, "split", [x, y])
    assert split.shape == (3, 5, 64) and np.array_equal(split, y.reshape(3, 5, 64))
    (merged,) = run_cpu(mlir, "merge", [x])
    assert merged.shape == (15, 64) and np.array_equal(merged, x.reshape(15, 64))

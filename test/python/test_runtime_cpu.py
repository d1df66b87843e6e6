"""The runtime's Python extension on a machine without a GPU: it imports,
opens a bundle that liger-compile just wrote, lists its kernels, and says
clearly why nothing can launch; bad bundles are clear errors."""

import os
import shutil
import subprocess
import sys

import pytest

from liger import find_tool

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
EXT_DIR = os.path.join(os.environ.get("LIGER_RUNTIME_BUILD_DIR",
                                      os.path.join(ROOT, "build-runtime")), "python")

MODULE = """func.func @norm(%x: tensor<?x256xbf16>, %w: tensor<256xbf16>) -> (tensor<?x256xbf16>, tensor<?xf32>) {
  %y, %r = liger.rms_norm %x, %w rstd : tensor<?x256xbf16>, tensor<256xbf16>
  return %y, %r : tensor<?x256xbf16>, tensor<?xf32>
}

func.func @norm_grad(%dy: tensor<?x256xbf16>, %x: tensor<?x256xbf16>, %w: tensor<256xbf16>, %r: tensor<?xf32>) -> (tensor<?x256xbf16>, tensor<256xbf16>) {
  %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %r : tensor<?x256xbf16>, tensor<256xbf16>, tensor<?xf32>
  return %dx, %dw : tensor<?x256xbf16>, tensor<256xbf16>
}
"""


@pytest.fixture(scope="module")
def rt():
    if not os.path.isdir(EXT_DIR) or not any(
            n.startswith("_liger_runtime") for n in os.listdir(EXT_DIR)):
        pytest.skip("the runtime extension is not built in %s (scripts/build-runtime.sh)"
                    % EXT_DIR)
    sys.path.insert(0, EXT_DIR)
    from liger import runtime
    return runtime


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    if not shutil.which("ptxas") and not os.path.exists("/usr/local/cuda/bin/ptxas"):
        pytest.skip("ptxas (CUDA toolkit) not found: cannot compile a bundle")
    d = tmp_path_factory.mktemp("rt")
    src = d / "norm.mlir"
    src.write_text(MODULE)
    subprocess.run([find_tool("liger-compile"), str(src), "-o", str(d / "norm.bundle")],
                   check=True, capture_output=True)
    return str(d / "norm.bundle")


def test_open_and_list_kernels(rt, bundle_dir):
    bundle = rt.load(bundle_dir)
    kernel = bundle["norm_rowwise_0"]
    assert kernel.ops == "liger.rms_norm"
    assert [p["name"] for p in kernel.inputs] == ["input0", "input1"]
    assert [(p["kind"], p["dtype"]) for p in kernel.outputs] == [("rows", "bf16"),
                                                               ("row_scalars", "f32")]
    with pytest.raises(KeyError, match="has no kernel 'other'"):
        bundle["other"]


class _Shaped:
    def __init__(self, *shape):
        self.shape = shape


def test_weight_gradient_kernel_has_a_workspace(rt, bundle_dir):
    kernel = rt.load(bundle_dir)["norm_grad_rowwise_0"]
    assert kernel.ops == "liger.rms_norm_grad"
    assert [(p["kind"], p["dtype"]) for p in kernel.outputs] == [("rows", "bf16"),
                                                               ("feature", "bf16")]
    assert [(p["name"], p["kind"], p["dtype"], p["length"]) for p in kernel.workspaces] == [
        ("workspace0", "partials", "f32", 256)]
    # dx takes the rows of dy, dW the static feature length.
    x = _Shaped(2, 3, 256)
    assert kernel.output_shapes([x, x, _Shaped(256), _Shaped(2, 3)]) == [(2, 3, 256), (256,)]
    # The workspace rows: min(rows, SMs x ctas_per_sm), at least one.
    raw = kernel._bundle
    assert raw.workspace_ctas(kernel.name, 16384, 132) == 132 * 4
    assert raw.workspace_ctas(kernel.name, 5, 132) == 5
    assert raw.workspace_ctas(kernel.name, 0, 132) == 1
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        raw.workspace_ctas("nope", 1, 1)


GRAD_MODULE = """
func.func @dw(%dy: tensor<?x512xbf16>, %x: tensor<?x256xbf16>) -> tensor<512x256xbf16> {
  %dw = liger.linear_grad_weight %dy, %x : tensor<?x512xbf16>, tensor<?x256xbf16>
  return %dw : tensor<512x256xbf16>
}
"""


def test_weight_gradient_product_has_a_matrix_output(rt, bundle_dir, tmp_path):
    """dW = dyᵀ · x: row-shaped inputs, an [N, K] output whatever the rows."""
    src = tmp_path / "dw.mlir"
    src.write_text(GRAD_MODULE)
    subprocess.run([find_tool("liger-compile"), str(src), "--matmul-kernels",
                    "-o", str(tmp_path / "dw.bundle")], check=True, capture_output=True)
    kernel = rt.load(str(tmp_path / "dw.bundle"))["dw_matmul_0"]
    assert kernel.ops == "liger.linear_grad_weight"
    assert [(p["kind"], p["dtype"]) for p in kernel.outputs] == [("matrix", "bf16")]
    for tokens in (1, 77):
        assert kernel.output_shapes([_Shaped(tokens, 512), _Shaped(tokens, 256)]) == [(512, 256)]


QK_ROPE_MODULE = """
func.func @qk(%x: tensor<?x?x64xbf16>, %wq: tensor<64x64xbf16>, %wk: tensor<32x64xbf16>,
              %cos: tensor<1x?x16xbf16>, %sin: tensor<1x?x16xbf16>)
    -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x64xbf16>
  %t = tensor.dim %x, %c1 : tensor<?x?x64xbf16>
  %q = liger.linear %x, %wq : tensor<?x?x64xbf16>, tensor<64x64xbf16>
  %k = liger.linear %x, %wk : tensor<?x?x64xbf16>, tensor<32x64xbf16>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%b, %t, 4, 16] : tensor<?x?x64xbf16> into tensor<?x?x4x16xbf16>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%b, %t, 2, 16] : tensor<?x?x32xbf16> into tensor<?x?x2x16xbf16>
  %qi = tensor.empty(%b, %t) : tensor<?x4x?x16xbf16>
  %ki = tensor.empty(%b, %t) : tensor<?x2x?x16xbf16>
  %qh = linalg.transpose ins(%q4 : tensor<?x?x4x16xbf16>) outs(%qi : tensor<?x4x?x16xbf16>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<?x?x2x16xbf16>) outs(%ki : tensor<?x2x?x16xbf16>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cos, %sin : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<1x?x16xbf16>
  return %qr, %kr : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
}
"""


def test_qk_rope_kernel_writes_head_major_outputs(rt, bundle_dir, tmp_path):
    """The q/k projections with RoPE (fused by liger-compile, then one wgmma
    kernel): tensor inputs only, [B, H, T, D] outputs sized from x [B, T, K]."""
    src = tmp_path / "qk.mlir"
    src.write_text(QK_ROPE_MODULE)
    subprocess.run([find_tool("liger-compile"), str(src), "--matmul-kernels",
                    "-o", str(tmp_path / "qk.bundle")], check=True, capture_output=True)
    kernel = rt.load(str(tmp_path / "qk.bundle"))["qk_matmul_0"]
    assert [(p["kind"], p["dtype"]) for p in kernel.inputs] == [
        ("rows", "bf16"), ("matrix", "bf16"), ("matrix", "bf16"), ("tables", "bf16"),
        ("tables", "bf16")]
    assert [(p["kind"], p["outer"], p["length"]) for p in kernel.outputs] == [
        ("heads", 4, 16), ("heads", 2, 16)]
    table = _Shaped(1, 7, 16)
    assert kernel.output_shapes([_Shaped(3, 7, 64), _Shaped(64, 64), _Shaped(32, 64),
                                 table, table]) == [(3, 4, 7, 16), (3, 2, 7, 16)]
    with pytest.raises(ValueError, match=r"writes \[B, H, T, D\] from \[B, T, K\] rows"):
        kernel.output_shapes([_Shaped(21, 64), _Shaped(64, 64), _Shaped(32, 64), table, table])


def test_no_driver_is_a_clear_message(rt):
    status = rt.driver_status()
    if status == "OK":
        pytest.skip("this machine has a CUDA driver")
    assert "cannot load the CUDA driver" in status or "cuInit" in status


def test_bad_bundles(rt, bundle_dir, tmp_path):
    with pytest.raises(RuntimeError, match="cannot read .*manifest.json"):
        rt.load(str(tmp_path))
    broken = tmp_path / "broken"
    shutil.copytree(bundle_dir, broken)
    cubin = next(p for p in broken.iterdir() if p.suffix == ".cubin")
    cubin.write_bytes(cubin.read_bytes()[:3])
    with pytest.raises(RuntimeError, match="is not the cubin the manifest names"):
        rt.load(str(broken))
    (broken / "manifest.json").write_text('{"format": "liger-bundle", "version": 7}')
    with pytest.raises(RuntimeError, match="version 7 is not supported"):
        rt.load(str(broken))


class _Symbolic:
    """A size torch.compile would hold as a symbol (not an int)."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, _Symbolic) and other.name == self.name


def test_shapes_and_arguments_come_from_the_runtime(rt, bundle_dir):
    bundle = rt.load(bundle_dir)
    kernel = bundle["norm_rowwise_0"]
    assert kernel.function == "norm"
    assert bundle.kernels_of("norm") == [kernel]
    assert [k.name for k in bundle.kernels_of("norm_grad")] == ["norm_grad_rowwise_0"]
    assert kernel.output_shapes([_Shaped(2, 3, 256), _Shaped(256)]) == [(2, 3, 256), (2, 3)]
    # Symbolic sizes: the runtime's rule says which input size each is.
    b, t = _Symbolic("b"), _Symbolic("t")
    assert kernel.output_shapes([_Shaped(b, t, 256), _Shaped(256)]) == [(b, t, 256), (b, t)]
    # The runtime's checks, with its messages: a ValueError and a RuntimeError.
    raw = kernel._bundle
    with pytest.raises(ValueError, match=r"kernel 'norm_rowwise_0': 'input1' \(#1\) must have "
                                         r"shape \[256\], got \[255\]"):
        kernel.output_shapes([_Shaped(2, 256), _Shaped(255)])
    with pytest.raises(RuntimeError, match=r"takes 2 input tensors \(input0, input1\), got 1"):
        kernel.output_shapes([_Shaped(2, 256)])
    with pytest.raises(ValueError, match="input #0 has rank 9; liger kernels take tensors of "
                                         "rank 0 to 8"):
        raw.output_shapes(kernel.name, [[1] * 9, [256]])
    with pytest.raises(ValueError, match="argument #1 has an unknown dtype 'bf17'"):
        raw.launch(kernel.name, [(0, "bf16", [0, 256]), (0, "bf17", [256])])
    # Workspaces of the weight gradient: [min(rows, SMs x ctas_per_sm), H].
    grad = bundle["norm_grad_rowwise_0"]
    x = [16384, 256]
    assert raw.workspace_shapes(grad.name, [x, x, [256], [16384]], 132) == [(528, 256)]
    assert raw.workspace_shapes(kernel.name, [x, [256]], 132) == []


def test_plans_come_from_the_runtime(rt, tmp_path):
    """The runtime's plans are the manifest's, field for field."""
    import json
    src = tmp_path / "step.mlir"
    src.write_text("""func.func @step(%h: tensor<?x256xbf16>, %w: tensor<1000x256xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.fused_linear_cross_entropy %h, %w, %t : tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}
""")
    if not shutil.which("ptxas") and not os.path.exists("/usr/local/cuda/bin/ptxas"):
        pytest.skip("ptxas (CUDA toolkit) not found: cannot compile a bundle")
    out = tmp_path / "step.bundle"
    subprocess.run([find_tool("liger-compile"), str(src), "--matmul-kernels",
                    "--loss-memory-budget=256000", "-o", str(out)], check=True,
                   capture_output=True)
    bundle = rt.load(str(out))
    (plan,) = bundle.plans
    assert bundle.plans == json.load(open(out / "manifest.json"))["plans"]
    assert sorted(plan["kernels"]) == ["ce", "logits"]
    assert all(name in bundle.kernels for name in plan["kernels"].values())

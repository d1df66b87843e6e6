"""Tests of liger.driver against a built liger-opt."""
import os

import pytest

import liger

REPO = os.path.join(os.path.dirname(__file__), "..", "..")
EXAMPLE = os.path.join(REPO, "examples", "llama3_8b_decoder_layer.mlir")


def test_summarize_llama_layer():
    with open(EXAMPLE) as f:
        (summary,) = liger.summarize(f.read())
    assert summary.function == "llama3_8b_decoder_layer"
    assert summary.liger_ops["liger.linear"] == 7
    assert summary.liger_ops["liger.rope"] == 1
    assert summary.other_ops["linalg.transpose"] == 4
    # 4096^2 * 2 + 1024*4096 * 2 + 14336*4096 * 3 projection weights + 2 norms.
    assert summary.weight_elements == 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096
    assert summary.projection_flops_per_token == 2 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096)


def test_run_opt_canonicalizes():
    ir = """
    func.func @f(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>) -> tensor<?x64xbf16> {
      %y, %r = liger.rms_norm %x, %w rstd : tensor<?x64xbf16>, tensor<64xbf16>
      return %y : tensor<?x64xbf16>
    }"""
    out = liger.run_opt(ir, ["--canonicalize"])
    assert "liger.rms_norm" in out
    assert "rstd" not in out


def test_bad_ir_raises_with_the_diagnostic():
    ir = """
    func.func @f(%x: tensor<4x64xf32>, %w: tensor<32xf32>) {
      %y = liger.rms_norm %x, %w : tensor<4x64xf32>, tensor<32xf32>
      return
    }"""
    with pytest.raises(liger.LigerError) as info:
        liger.run_opt(ir)
    assert "expects 'weight' to have shape [64]" in info.value.diagnostics


def test_missing_tool_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv("LIGER_OPT", str(tmp_path / "nope"))
    monkeypatch.setenv("LIGER_BUILD_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(liger.installation, "_CHECKOUT", str(tmp_path))
    with pytest.raises(liger.LigerError, match="cannot find liger-opt; looked in"):
        liger.find_tool()

"""liger.compiler.compile: bundles, the on-disk cache, errors, LIGER_DEBUG."""

import os
import shutil

import pytest

from liger import LigerError, cache, compiler

MODULE = """func.func @f(%x: tensor<?x128xbf16>, %w: tensor<128xbf16>) -> tensor<?x128xbf16> {
  %y = liger.rms_norm %x, %w : tensor<?x128xbf16>, tensor<128xbf16>
  return %y : tensor<?x128xbf16>
}
"""

needs_ptxas = pytest.mark.skipif(
    not shutil.which("ptxas") and not os.path.exists("/usr/local/cuda/bin/ptxas"),
    reason="ptxas (CUDA toolkit) not found")


@needs_ptxas
def test_compiles_once(tmp_path):
    first = compiler.compile(MODULE, cache_dir=str(tmp_path))
    assert not first.cached
    assert os.path.isfile(os.path.join(first.path, "manifest.json"))
    second = compiler.compile(MODULE, cache_dir=str(tmp_path))
    assert second.cached and second.path == first.path
    other = compiler.compile(MODULE, target="sm_80", cache_dir=str(tmp_path))
    assert not other.cached and other.key != first.key
    assert '"arch": "sm_80"' in open(os.path.join(other.path, "manifest.json")).read()


@needs_ptxas
def test_a_rebuilt_compiler_misses_the_cache(tmp_path):
    """liger-compile's --version is the same for every build of a release:
    the entry records the executable's bytes, so a rebuilt compiler (a copy
    with one byte more here) compiles the entry again instead of returning
    the old build's kernels; the key stays the module's and options'."""
    exe = compiler.find_tool("liger-compile")
    first = compiler.compile(MODULE, cache_dir=str(tmp_path / "cache"), tool=exe)
    rebuilt = tmp_path / "liger-compile"
    shutil.copy2(exe, rebuilt)
    again = compiler.compile(MODULE, cache_dir=str(tmp_path / "cache"), tool=str(rebuilt))
    assert again.cached and again.key == first.key  # the same bytes
    with open(rebuilt, "ab") as f:
        f.write(b"\0")
    other = compiler.compile(MODULE, cache_dir=str(tmp_path / "cache"), tool=str(rebuilt))
    assert not other.cached and other.key == first.key
    assert cache.read_marker(other.path)["identity"] == compiler.compiler_identity(str(rebuilt))
    assert compiler.compiler_identity(str(rebuilt)) != compiler.compiler_identity(exe)
    # Each compiler's entry stays: neither rebuilds the other's.
    assert other.path != first.path and cache.entry_problem(first.path, first.key) is None
    assert compiler.compile(MODULE, cache_dir=str(tmp_path / "cache"), tool=exe).cached
    assert compiler.compile(MODULE, cache_dir=str(tmp_path / "cache"), tool=str(rebuilt)).cached


@needs_ptxas
def test_from_a_file_and_debug_stages(tmp_path, monkeypatch):
    src = tmp_path / "m.mlir"
    src.write_text(MODULE)
    monkeypatch.setenv("LIGER_DEBUG", "1")
    compiled = compiler.compile(str(src), cache_dir=str(tmp_path / "cache"))
    stages = os.path.join(compiled.path, "stages")
    assert sorted(os.listdir(stages))[:4] == ["00-liger.mlir", "01-fused.mlir",
                                              "02-gpu.mlir", "03-llvm.mlir"]


@needs_ptxas
def test_debug_reports_the_stages_on_a_cache_hit_too(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LIGER_DEBUG", "1")
    compiled = compiler.compile(MODULE, cache_dir=str(tmp_path / "debug"))
    stages = os.path.join(compiled.path, "stages")
    assert capsys.readouterr().out == "liger: compiled %s; stages in %s\n" % (compiled.path,
                                                                              stages)
    hit = compiler.compile(MODULE, cache_dir=str(tmp_path / "debug"))
    assert hit.cached
    out = capsys.readouterr().out
    assert out.startswith("liger: cache hit %s; stages in %s (00-liger.mlir, 01-fused.mlir, "
                          % (compiled.path, stages)), out
    # An entry compiled without LIGER_DEBUG kept no stages: the hit says so.
    monkeypatch.delenv("LIGER_DEBUG")
    plain = compiler.compile(MODULE, cache_dir=str(tmp_path / "plain"))
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("LIGER_DEBUG", "1")
    assert compiler.compile(MODULE, cache_dir=str(tmp_path / "plain")).cached
    assert capsys.readouterr().out == (
        "liger: cache hit %s; its stages were not kept (compiled without LIGER_DEBUG): delete "
        "the entry, or set LIGER_CACHE_DIR to another directory, to compile it again with "
        "them\n" % plain.path)


def test_errors_carry_the_diagnostics(tmp_path):
    with pytest.raises(LigerError) as info:
        compiler.compile(MODULE.replace("tensor<128xbf16>", "tensor<127xbf16>"),
                         cache_dir=str(tmp_path))
    assert "expects 'weight' to have shape [128]" in str(info.value)
    # Nothing half-written is left in the cache (only the entry's lock).
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".lock-")] == []

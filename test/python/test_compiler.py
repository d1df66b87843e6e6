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


# A projection after an RMSNorm: the norm stays a row kernel by default and
# folds into the matmul kernel with norm_prologue; each schedule a kernel of
# its own grid.
PROJECTION = """func.func @p(%x: tensor<?x256xbf16>, %g: tensor<256xbf16>, %w: tensor<512x256xbf16>)
    -> tensor<?x512xbf16> {
  %n = liger.rms_norm %x, %g : tensor<?x256xbf16>, tensor<256xbf16>
  %y = liger.linear %n, %w : tensor<?x256xbf16>, tensor<512x256xbf16>
  return %y : tensor<?x512xbf16>
}
"""


def _kernels(compiled):
    import json
    with open(os.path.join(compiled.path, "manifest.json")) as f:
        return {k["name"]: k for m in json.load(f)["modules"] for k in m["kernels"]}


@needs_ptxas
def test_norm_prologue_and_matmul_schedule_reach_liger_compile(tmp_path):
    """norm_prologue folds the norm into the projection's kernel
    (--norm-prologue); matmul_schedule="pingpong" or "persistent" makes it
    persistent (one CTA per SM: the grid's "sms"); each option is its own
    cache entry, and
    the defaults keep the key they had before the options existed."""
    plain = compiler.compile(PROJECTION, cache_dir=str(tmp_path))
    assert sorted(name.split("_")[1] for name in _kernels(plain)) == ["matmul", "rowwise"]
    assert plain.key == cache.bundle_key(PROJECTION, {"target": "sm_90a", "fuse": True,
                                                      "matmul_kernels": True})
    folded = compiler.compile(PROJECTION, cache_dir=str(tmp_path), norm_prologue=True)
    (kernel,) = _kernels(folded).values()
    assert kernel["ops"].startswith("liger.rms_norm, liger.linear")
    assert "sms" not in kernel["grid"]
    pingpong = compiler.compile(PROJECTION, cache_dir=str(tmp_path), norm_prologue=True,
                                matmul_schedule="pingpong")
    (kernel,) = _kernels(pingpong).values()
    assert "sms" in kernel["grid"]
    explicit = compiler.compile(PROJECTION, cache_dir=str(tmp_path),
                                matmul_schedule="data-parallel")
    # persistent: one CTA per SM too, at the data-parallel tile (its
    # threads: two consumer warpgroups and the producer).
    persistent = compiler.compile(PROJECTION, cache_dir=str(tmp_path),
                                  matmul_schedule="persistent")
    kernels = [k for k in _kernels(persistent).values() if "matmul" in k["name"]]
    assert len(kernels) == 1 and "sms" in kernels[0]["grid"]
    assert len({plain.key, folded.key, pingpong.key, explicit.key, persistent.key}) == 5
    assert compiler.compile(PROJECTION, cache_dir=str(tmp_path), norm_prologue=True,
                            matmul_schedule="pingpong").cached


@needs_ptxas
def test_matmul_config_table_reaches_liger_compile(tmp_path):
    """matmul_config_table (--matmul-config-table): the projection an entry
    matches takes its schedule; the key is the table's content, not its
    path (the same text elsewhere is a cache hit, an edited one compiles
    again); a malformed table is liger-compile's diagnostic."""
    import json
    cache_dir = str(tmp_path / "cache")
    entry = {"match": {"body": "projection", "k": 256, "widths": [512]},
             "config": {"schedule": "pingpong"}}
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"version": 1, "entries": [entry]}))
    plain = compiler.compile(PROJECTION, cache_dir=cache_dir)
    measured = compiler.compile(PROJECTION, cache_dir=cache_dir,
                                matmul_config_table=str(table))
    kernels = _kernels(measured)
    assert ["sms" in k["grid"] for name, k in sorted(kernels.items())] == [True, False]
    assert measured.key != plain.key and not measured.cached
    copy = tmp_path / "copy.json"
    copy.write_text(table.read_text())
    assert compiler.compile(PROJECTION, cache_dir=cache_dir,
                            matmul_config_table=str(copy)).key == measured.key
    # An entry for another width matches nothing: the default, another key.
    entry["match"]["widths"] = [1024]
    table.write_text(json.dumps({"version": 1, "entries": [entry]}))
    other = compiler.compile(PROJECTION, cache_dir=cache_dir, matmul_config_table=str(table))
    assert other.key not in (plain.key, measured.key)
    assert ["sms" in k["grid"] for k in _kernels(other).values()] == [False, False]
    bad = {"match": {"k": "256"}, "config": {}}
    table.write_text(json.dumps({"version": 1, "entries": [bad]}))
    with pytest.raises(compiler.LigerError) as info:
        compiler.compile(PROJECTION, cache_dir=cache_dir, matmul_config_table=str(table))
    assert "entry 0: match: 'k' must be a positive integer" in str(info.value)


@pytest.mark.parametrize("options,message", [
    (dict(matmul_config_table="/nonexistent/table.json"), "cannot read the matmul "
     "configuration table /nonexistent/table.json: No such file or directory"),
    (dict(matmul_config_table="t.json", matmul_schedule="pingpong"), "matmul_schedule="
     "'pingpong' and matmul_config_table both choose the configuration of matmul groups: "
     "give one"),
    (dict(matmul_config_table="t.json", matmul_kernels=False), "matmul_config_table shapes "
     "the matmul kernels: it needs matmul_kernels=True"),
    (dict(matmul_schedule="ping-pong"), "matmul_schedule must be one of auto, data-parallel, "
     "pingpong, persistent, got 'ping-pong'"),
    (dict(matmul_schedule="pingpong", matmul_kernels=False), "matmul_schedule='pingpong' "
     "shapes the matmul kernels: it needs matmul_kernels=True"),
    (dict(norm_prologue=True, fuse=False), "norm_prologue shapes the matmul kernels: it needs "
     "matmul_kernels=True and fuse=True"),
])
def test_matmul_options_that_cannot_be_are_refused_before_compiling(tmp_path, options,
                                                                     message):
    with pytest.raises(compiler.LigerValueError) as info:
        compiler.compile(PROJECTION, cache_dir=str(tmp_path), tool="/nonexistent", **options)
    assert str(info.value) == message
    assert os.listdir(tmp_path) == []

"""liger.installation and the `liger` command: the version from its one
place, and an installed liger's tools found inside the package (a fake
_build_info, as CMake writes it at install), or the runtime-only message."""
import os
import re
import types

import pytest

import liger
from liger import cli, installation
from liger.driver import find_tool
from liger.errors import LigerError

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_the_version_is_the_projects():
    cmake = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    version = re.search(r"^project\(liger VERSION ([0-9.]+)", cmake, re.M).group(1)
    assert liger.__version__ == installation.version() == version


def test_liger_version_and_info(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == "liger %s\n" % liger.__version__
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("liger %s\npackage: %s\n" % (liger.__version__, installation.PACKAGE_DIR))


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """This package as if installed, runtime-only, its tools in tmp/pkg/bin."""
    package = tmp_path / "pkg"
    (package / "bin").mkdir(parents=True)
    info = types.SimpleNamespace(VERSION="9.8.7", COMPILER=False, TORCH_OPS=False,
                                 TORCH_VERSION="", TOOLS_DIR="bin")
    monkeypatch.setattr(installation, "_build_info", info)
    monkeypatch.setattr(installation, "PACKAGE_DIR", str(package))
    monkeypatch.delenv("LIGER_BUILD_DIR", raising=False)
    monkeypatch.delenv("LIGER_OPT", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return package


def test_an_installed_liger_finds_its_tools_in_the_package(installed):
    tool = installed / "bin" / "liger-bundle"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert installation.version() == "9.8.7"
    assert find_tool("liger-bundle") == str(tool)
    assert installation.library_candidates("libliger_torch_ops.so")[0] == \
        str(installed / "libliger_torch_ops.so")
    assert "compiler: not built (no MLIR 22 where it was built)" in installation.describe()


def test_a_runtime_only_liger_names_what_installs_the_compiler(installed, capsys):
    message = ("cannot find liger-compile: this liger (%s) was built without the compiler (no "
               "MLIR 22 where it was built), and none is in %s or on PATH. Install LLVM/MLIR 22 "
               "(Debian: apt-get install llvm-22-dev libmlir-22-dev mlir-22-tools) and "
               "reinstall liger, or use bundles precompiled elsewhere (LIGER_OPS_BUNDLES)."
               % (installed, installed / "bin" / "liger-compile"))
    with pytest.raises(LigerError) as info:
        find_tool("liger-compile")
    assert str(info.value) == message
    assert cli.run_tool("liger-compile", []) == 1
    assert capsys.readouterr().err == "liger-compile: %s\n" % message


def _command(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_liger_s_own_command_on_path_is_not_taken_for_the_tool(installed, tmp_path, monkeypatch):
    # A runtime-only wheel puts pip's script for liger-opt on PATH: it runs
    # find_tool itself, so the backend must not take it for the compiler
    # (it would fail for every graph instead of using a precompile).
    script = ("#!/usr/bin/python3\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
              "from liger.cli import liger_opt\nif __name__ == '__main__':\n"
              "    sys.exit(liger_opt())\n")
    _command(tmp_path / "venv-bin", "liger-opt", script)
    monkeypatch.setenv("PATH", str(tmp_path / "venv-bin"))
    with pytest.raises(LigerError, match="built without the compiler"):
        find_tool("liger-opt")
    assert cli.run_tool("liger-opt", []) == 1
    # A real tool further along PATH is found past it.
    real = _command(tmp_path / "tools", "liger-opt", "#!/bin/sh\necho real\n")
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "venv-bin"), str(tmp_path / "tools")]))
    assert find_tool("liger-opt") == str(real)


def test_a_tool_on_path_that_only_mentions_liger_is_still_a_tool(installed, tmp_path, monkeypatch):
    # Near miss: a shell wrapper naming liger.cli in a comment past its first
    # line is not pip's script (no shebang then import) -- still a tool.
    wrapper = _command(tmp_path / "tools", "liger-opt",
                       "#!/bin/sh\n# not from liger.cli\nexec /opt/liger/bin/liger-opt \"$@\"\n")
    monkeypatch.setenv("PATH", str(tmp_path / "tools"))
    assert find_tool("liger-opt") == str(wrapper)

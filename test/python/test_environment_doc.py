"""docs/environment.md documents every environment variable liger reads:
os.environ in the package, the tests' conftests and scripts, getenv in the
C++ sources, $VAR in the shell scripts."""
import os
import re

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
READS = [
    (("python/liger", "scripts", "test/python", "test/Integration/gpu"), (".py",),
     r"environ(?:\.get)?[\[(]\s*\"(LIGER_[A-Z_]+)\""),
    (("lib", "tools"), (".cpp",), r"getenv\(\"(LIGER_[A-Z_]+)\""),
    (("scripts", ".ci"), (".sh", "run"), r"\$\{?(LIGER_[A-Z_]+)"),
]


def variables_read():
    found = {}
    for folders, suffixes, pattern in READS:
        for folder in folders:
            for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
                for name in files:
                    if name.endswith(suffixes):
                        path = os.path.join(dirpath, name)
                        for var in re.findall(pattern, open(path, errors="replace").read()):
                            found.setdefault(var, os.path.relpath(path, ROOT))
    return found


def test_every_variable_read_is_documented():
    doc = open(os.path.join(ROOT, "docs", "environment.md")).read()
    documented = set(re.findall(r"`(LIGER_[A-Z_]+)`", doc))
    read = variables_read()
    assert {"LIGER_DEBUG", "LIGER_LIBCUDA", "LIGER_OPS_BUNDLES", "LIGER_CACHE_DIR"} <= set(read)
    missing = {var: where for var, where in read.items() if var not in documented}
    assert not missing, "read but not in docs/environment.md: %s" % missing

"""The liger package's modules form layers: every module imports in a
fresh interpreter on its own, and the graph of imports between them (every
`import` and `from ... import` of a liger module, at the top of a file or
inside a function) has no cycle."""

import ast
import os
import subprocess
import sys

import pytest

PACKAGE = os.path.join(os.path.dirname(__file__), "..", "..", "python", "liger")
MODULES = sorted(n[:-3] for n in os.listdir(PACKAGE) if n.endswith(".py") and n != "__main__.py")


def imports_of(module):
    """The liger modules `module` imports."""
    tree = ast.parse(open(os.path.join(PACKAGE, module + ".py")).read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 or (node.module or "").startswith("liger"):
                base = (node.module or "") if node.level == 1 else node.module[len("liger"):]
                base = base.lstrip(".")
                if base:
                    found.add(base.split(".")[0])
                else:  # from . import a, b
                    found.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("liger."):
                    found.add(alias.name.split(".")[1])
    return sorted(m for m in found if m in MODULES and m != module)


def find_cycle(graph):
    """A cycle of `graph` (module -> modules it imports) as a list, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in graph[node]:
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt, path + [nxt])
                if cycle:
                    return cycle
        state[node] = "done"
        return None

    for node in graph:
        if node not in state:
            cycle = visit(node, [node])
            if cycle:
                return cycle
    return None


def test_the_import_graph_has_no_cycle():
    graph = {m: imports_of(m) for m in MODULES}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
    # The layers, bottom up.
    assert graph["errors"] == []
    assert set(graph["specs"]) <= {"errors", "cache"}
    assert "ops" not in graph["runtime"] and "ops" not in graph["loss_plan"]


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b"], "b": [], "c": ["a", "b"]}) is None


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_alone(module):
    proc = subprocess.run([sys.executable, "-c", "import liger.%s" % module],
                          env=dict(os.environ, PYTHONPATH=os.path.dirname(PACKAGE)),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr

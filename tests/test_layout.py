"""The package's import graph: no module imports another that imports it back (directly or
through others, function-level imports included), and no module imports a job."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sentray"


def imports_of(path: Path, modules: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "sentray":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("sentray."):
                found.add(node.module.split(".")[1])
            assert not node.module.startswith("jobs"), f"{path.name} imports a job"
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("sentray."))
    return found & modules


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for other in sorted(graph[module]):
            if state.get(other) == 1:
                return path[path.index(other):] + [other]
            if other not in state and (cycle := visit(other)):
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_package_has_no_import_cycle():
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    graph = {p.stem: imports_of(p, modules) - {p.stem} for p in PACKAGE.glob("*.py")}
    assert graph["corenlp"] == {"backbone"}  # the CoreNLP backend sits below the job
    assert find_cycle(graph) is None, find_cycle(graph)


def test_what_ray_data_tasks_run_does_not_import_torch():
    """Ray Data's tasks import the module of each function or class they run: the epoch order
    of training, the corpus readers and the part writers. torch costs each such process seconds
    of CPU, so these modules (and what they import) stay without it."""
    import subprocess
    import sys

    code = ("import sys, sentray.epoch_order, sentray.corpus, sentray.parts; "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"

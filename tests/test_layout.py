"""The package's shape: every subpackage says in its docstring what it may import and imports
nothing else (function-level imports included); no import cycle between modules; no module
imports a job; what Ray Data's tasks and `--help` load stays free of torch; modules and
functions stay short enough to read, and so do the scripts beside the package (bench/, docs/)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sentray"
MAX_MODULE_LINES = 350
MAX_FUNCTION_LINES = 60
# The caps are a signal, not a budget: a module (or function) longer than its cap is fine when it
# is one concept, listed here with the reason; code is never moved out of a module only to fit.
# module or function -> why it may be longer
LONGER_ALLOWED: dict[str, str] = {
    "bench.bench_gpu_feed": "one bench, one question (does the job's CPU side keep a GPU fed?) "
                            "in four measures that share its corpora, runs and record",
    "sentray.precision.probe": "one concept: the candidates timed, the choice, and the decision "
                               "kept per kind of machine and told of the job that reads it",
    "sentray.precision.probe.measure_grid": "one pass over the grid, in order: the reference "
                                            "built and handed to the job, each candidate's "
                                            "conversion weighed, made and timed, the choice",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(path: Path) -> set[str]:
    """The sentray modules `path` imports, anywhere in it ("from sentray.x import y" counts as
    sentray.x.y when that is a module, else sentray.x)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert not node.module.startswith("jobs"), f"{path} imports a job"
            if node.module == "sentray" or node.module.startswith("sentray."):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("sentray"))
    return found


def allowed_imports(subpackage: str) -> list[str]:
    """What the subpackage's docstring says it may import ("May import: a, b." or "nothing")."""
    doc = ast.get_docstring(ast.parse((PACKAGE / subpackage / "__init__.py").read_text()))
    match = re.search(r"May import: (.*?)\.\s*$", doc or "", flags=re.S)
    assert match, f"sentray/{subpackage}/__init__.py does not say what it may import"
    text = " ".join(match.group(1).split())
    return [] if text.startswith("nothing") else [item.strip() for item in text.split(",")]


SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def test_every_subpackage_imports_only_what_its_docstring_allows():
    broken = []
    for subpackage in SUBPACKAGES:
        allowed = [f"sentray.{subpackage}", *allowed_imports(subpackage)]
        for name, path in MODULES.items():
            if not name.startswith(f"sentray.{subpackage}."):
                continue
            for imported in imports_of(path):
                if not any(imported == a or imported.startswith(a + ".") for a in allowed):
                    broken.append(f"{name} imports {imported}")
    assert not broken, "\n".join(broken)


def test_subpackage_inits_hold_a_docstring_only():
    """Importing a subpackage imports nothing: a Ray worker loads only what it runs."""
    for path in [PACKAGE / "__init__.py", *(PACKAGE / s / "__init__.py" for s in SUBPACKAGES)]:
        body = ast.parse(path.read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), path


def test_every_package_docstring_names_each_of_its_modules():
    """A newcomer reads a package's docstring to find what is where: it names every module of the
    package (as `module` or module.py), so a module added or renamed is described there too."""
    unnamed = []
    for init in [PACKAGE / "__init__.py", *(PACKAGE / s / "__init__.py" for s in SUBPACKAGES)]:
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        for module in sorted(p.stem for p in init.parent.glob("*.py") if p.stem != "__init__"):
            if f"`{module}`" not in doc and f"{module}.py" not in doc:
                unnamed.append(f"{init.parent.name}/{module}.py")
    assert not unnamed, f"not named in their package's docstring: {unnamed}"


def test_no_import_cycle_between_modules():
    graph = {name: (imports_of(path) & set(MODULES)) - {name} for name, path in MODULES.items()}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1  # on the current path
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
        cycle = None if module in state else visit(module)
        assert cycle is None, " -> ".join(cycle)


def too_long(name: str, path: Path) -> list[str]:
    """The module `name` at `path`, and each function in it (methods and nested ones too), that
    is longer than its limit and not in LONGER_ALLOWED."""
    long = []
    text = path.read_text()
    if len(text.splitlines()) > MAX_MODULE_LINES and name not in LONGER_ALLOWED:
        long.append(f"{name}: {len(text.splitlines())} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES and f"{name}.{node.name}" not in LONGER_ALLOWED:
                long.append(f"{name}.{node.name}: {lines} lines")
    return long


LONG_REMEDY = ("\na module or function past its cap: split it where a second concept begins, or, "
               "when it is one concept, list it in LONGER_ALLOWED with the reason (never move "
               "code out only to fit)")


def test_modules_and_functions_are_short():
    long = [item for name, path in MODULES.items() for item in too_long(name, path)]
    assert not long, "\n".join(long) + LONG_REMEDY


# The scripts beside the package, held to its limits: the benchmarks (bench/), the docs' generator
# (docs/*.py) and the experiments and audits (experiments/), named like modules
# ("bench.bench_lstm", "experiments.sifter_study") in the messages and in LONGER_ALLOWED.
ROOT = PACKAGE.parent
SCRIPTS = {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in sorted(
    [*ROOT.glob("bench/**/*.py"), *ROOT.glob("docs/*.py"), *ROOT.glob("experiments/**/*.py")])}


def test_bench_and_docs_scripts_are_short():
    assert "experiments.sifter_study" in SCRIPTS and "docs.gen_reference" in SCRIPTS
    long = [item for name, path in SCRIPTS.items() for item in too_long(name, path)]
    assert not long, "\n".join(long) + LONG_REMEDY


def _torch_loaded_by(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code + "; import sys; print(sorted(m for m in "
                          "('torch', 'transformers') if m in sys.modules))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_what_ray_data_tasks_run_does_not_import_torch():
    """Ray Data's tasks import the module of each function or class they run: the epoch order
    of training, the corpus readers and the part writers, the index job's fragment writers.
    torch costs each such process seconds of CPU, so these modules (and what they import) stay
    without it."""
    assert _torch_loaded_by("import sentray.contrastive.epoch_order, sentray.corpus.reading, "
                            "sentray.corpus.part_files, sentray.index.table_writing, "
                            "sentray.bulk_embedding.storing") == "[]"


def test_the_command_line_and_every_config_load_without_torch():
    """`sentray <job> --help` and a bad flag answer without importing torch (seconds)."""
    assert _torch_loaded_by("import sentray.cli; [j._load(j.config) for j in "
                            "sentray.cli.JOBS.values()]") == "[]"


def test_no_product_module_imports_the_test_machinery():
    """sentray.testing (the fake clusters, the misbehaving S3) serves tests, the demo and the
    bench only: no other module of the package imports it."""
    users = [f"{name} imports {imported}" for name, path in MODULES.items()
             if not name.startswith("sentray.testing") for imported in imports_of(path)
             if imported == "sentray.testing" or imported.startswith("sentray.testing.")]
    assert users == []


def _string_constants(path: Path) -> list[str]:
    """The string literals of a module, its docstrings left out (they describe, for readers)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings]


def test_only_the_output_folder_names_the_files_of_an_output():
    """One owner of the output folder's layout (`sentray.kit.output_folder.OutputFolder`):
    no other module spells one of its file names, so a reader and a writer can never
    disagree on one."""
    from sentray.kit.output_folder import OutputFolder

    names = {value for key, value in vars(OutputFolder).items()
             if key.isupper() and isinstance(value, str)}
    assert {"_settings.json", "_summary.json", "_quantization.json"} <= names
    owner = PACKAGE / "kit" / "output_folder.py"
    spelled = [f"{name}: {text!r}" for name, path in MODULES.items() if path != owner
               for text in _string_constants(path) if any(n in text for n in names)]
    assert spelled == [], "\n".join(spelled)


def _code_words(path: Path) -> str:
    """A module's code as words: its names, attributes, imports and string literals, its
    docstrings and comments left out."""
    tree = ast.parse(path.read_text())
    words = _string_constants(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.alias):
            words.append(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            words.append(node.module)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.arg)):
            words.append(getattr(node, "name", None) or node.arg)
    return " ".join(words).lower()


@pytest.mark.parametrize("package", ["openvino", "onnxruntime"])
def test_a_runtime_is_named_by_its_module_and_the_registry_only(package):
    """Adding a runtime touches its module and one line of the registry
    (`sentray.encode.runtimes`): no other module's code names it (prose may)."""
    naming = sorted(name for name, path in MODULES.items() if package in _code_words(path))
    assert naming == sorted([f"sentray.encode.runtimes.{package}_runtime",
                             "sentray.encode.runtimes.registry"]), naming

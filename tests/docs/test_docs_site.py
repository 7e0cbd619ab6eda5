"""The documentation site: it builds in strict mode (a broken link, an unknown anchor, a page
missing from the nav fail), and its generated pages are current: what docs/gen_reference.py
writes today from the config dataclasses, the pooling catalogue and the package's docstrings,
with every flag and default the reference shows being the job parser's own."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sentray.cli import JOBS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_in_strict_mode(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # Material's banner about MkDocs 2
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "embed" / "index.html").is_file()


def test_the_generated_pages_are_current(generator):
    assert generator.stale() == [], "run: python docs/gen_reference.py"


def cells(row: str) -> list[str]:
    """A Markdown table row's cells: split at `|`, except an escaped one or one in code."""
    found, current, in_code, previous = [], "", False, ""
    for char in row.strip().strip("|"):
        in_code ^= char == "`"
        if char == "|" and not in_code and previous != "\\":
            found.append(current.strip())
            current = ""
        else:
            current += char
        previous = char
    return [*found, current.strip()]


def reference_rows(page: str) -> list[tuple[str, str, str]]:
    """(first flag, type, default) of every row of a reference page's flag tables, the table of
    the flags every job takes left out."""
    own = page.split("## Every job also takes")[0]
    rows = [cells(line) for line in own.splitlines()
            if line.startswith("| `--") or re.match(r"\| `[A-Z_]+` \|", line)]
    return [(flag.strip("`").split(",")[0], kind, default.strip("`"))
            for flag, kind, default, _ in rows]


@pytest.mark.parametrize("name", list(JOBS))
def test_every_flag_of_the_reference_parses_to_its_default(name, generator):
    """The reference's flags, each given its listed default, make the job's default config:
    every flag is spelled as the parser spells it and every default is the real one. And
    every field of the config is in the reference."""
    from sentray.kit.config_files import flat_fields

    job = JOBS[name]
    rows = reference_rows(generator.job_page(name))
    argv = []
    for flag, kind, default in rows:
        if not flag.startswith("--"):  # a positional argument (`sentray search OUTPUT`)
            argv.insert(0, default)
        elif kind == "list" and default == "[]":  # a repeatable flag given no times
            continue
        elif kind == "switch":
            argv.append(flag if default == "True" else f"--no-{flag[2:]}")
        else:
            argv += [flag, default]
    assert {flag if flag.startswith("--") else "--" + flag.lower().replace("_", "-")
            for flag, _, _ in rows} == {
        "--" + field.replace("_", "-") for field in flat_fields(job._load(job.config))}
    assert job.parse_config(name, argv) == job.parse_config(name, [])


def test_the_package_reference_lists_every_module(generator):
    page = (ROOT / "docs" / "reference" / "packages.md").read_text()
    for path in (ROOT / "sentray").glob("*/*.py"):
        if path.name != "__init__.py":
            assert f"| `{path.stem}` |" in page.split(f"## `sentray/{path.parent.name}/`")[1]


def test_the_readme_is_a_front_page_whose_links_resolve():
    """README.md stays short (issue 37: at most 150 lines; what it does not hold is in docs/)
    and every relative link in it names a file of the repository (mkdocs checks the pages')."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert links and [link for link in links if not (ROOT / link).is_file()] == []


def test_the_readme_says_what_the_makefile_installs():
    """The README's set-up line names the extras `make demo` and `make test` install: the
    Makefile's own install line, and the same torch pin."""
    makefile = (ROOT / "Makefile").read_text()
    extras = re.search(r'pip install -q -e "\.\[([a-z0-9,]+)\]"', makefile).group(1)
    torch = re.search(r"pip install -q (torch==[0-9.]+)", makefile).group(1)
    readme = (ROOT / "README.md").read_text()
    assert f"sentray[{extras}]" in readme and f'pip install -e ".[{extras}]"' in readme
    assert f"pip install {torch}" in readme and torch in readme.split("make demo")[1]

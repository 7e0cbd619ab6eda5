"""The code passes ruff (its rules: pyproject.toml's [tool.ruff]) where `make lint` checks it:
the package, the jobs, the tests, the benchmarks, the experiments and the docs' scripts."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["sentray", "jobs", "tests", "bench", "experiments", "docs"]  # the Makefile's lint target checks these


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed: it comes with the dev extra, "
                           "pip install -e '.[dev]'")
def test_ruff_passes():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", *PATHS], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check {' '.join(PATHS)} failed:\n" \
        f"{result.stdout}{result.stderr}"

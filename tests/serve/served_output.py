"""The tiny output the serve tests search: 120 Brown sentences embedded by the tiny random
encoder in this process (no Ray, even beside the session's cluster), indexed with their texts."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from conftest import load_job

ROWS = 120


def indexed_output(root: Path, tiny_model_dir: Path, brown_corpus: Path) -> Path:
    """root/out (indexed: root/out/_index.lance) of root/brown.txt; returns root."""
    corpus = root / "brown.txt"
    corpus.write_text("\n".join(brown_corpus.read_text().splitlines()[:ROWS]) + "\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("RAY_ADDRESS", raising=False)
        patch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False))
        load_job("embed").main(["--input", str(corpus), "--output", str(root / "out"),
                                "--model", str(tiny_model_dir), "--pooling", "mean"])
    load_job("index").main([str(root / "out"), "--text-from", str(corpus)])
    return root

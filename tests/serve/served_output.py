"""The tiny output the serve tests search: 120 Brown sentences embedded by the tiny random
encoder in this process (no Ray, even beside the session's cluster), indexed with their texts;
and a replica as the ASGI app Ray Serve's proxy would hand requests to."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest
from conftest import load_job

ROWS = 120


def indexed_output(root: Path, tiny_model_dir: Path, brown_corpus: Path,
                   extra: tuple[str, ...] = ()) -> Path:
    """root/out (indexed: root/out/_index.lance) of root/brown.txt (ROWS Brown sentences, then
    the `extra` lines); returns root."""
    corpus = root / "brown.txt"
    lines = [*brown_corpus.read_text().splitlines()[:ROWS], *extra]
    corpus.write_text("\n".join(lines) + "\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("RAY_ADDRESS", raising=False)
        patch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False))
        load_job("embed").main(["--input", str(corpus), "--output", str(root / "out"),
                                "--model", str(tiny_model_dir), "--pooling", "mean"])
    load_job("index").main([str(root / "out"), "--text-from", str(corpus)])
    return root


def asgi(service):
    """The service as an ASGI app: each HTTP request to `SearchService.__call__`, as Ray
    Serve's proxy hands it over."""
    from starlette.requests import Request

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":  # the test client's start and end: nothing to do
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        response = await service(Request(scope, receive))
        await response(scope, receive, send)

    return app


def job_vectors(root: Path) -> dict[str, tuple[str, np.ndarray]]:
    """id -> (text, the vector the embedding job stored) of root/out."""
    import pyarrow.dataset as pads

    table = pads.dataset(str(root / "out"), format="parquet",
                         exclude_invalid_files=True).to_table(columns=["id", "embedding"])
    lines = (root / "brown.txt").read_text().splitlines()
    return {i: (lines[int(i.rsplit(":", 1)[1])], np.asarray(v, dtype=np.float32))
            for i, v in zip(table.column("id").to_pylist(),
                            table.column("embedding").to_pylist(), strict=True)}

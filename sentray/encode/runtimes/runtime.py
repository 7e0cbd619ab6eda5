"""`Runtime`: what a runtime module declares, the one shape the registry lists (a test registers a
stand-in of the same shape)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def nothing_to_silence() -> None:
    """A runtime whose package does nothing on import or on its own."""


@dataclass(frozen=True)
class Runtime:
    """A runtime: what it runs, whether it is here, how it builds its forward."""

    name: str  # as --runtime and the settings record spell it
    # precision -> the kind of artefact it runs (None: the torch model itself;
    # `artefact_kinds.KINDS`)
    precisions: dict[str, str | None]
    probed: tuple[str, ...]  # the precisions `--precision auto` times it at, on a CPU
    package: str | None  # the Python package it needs (None: torch, always here)
    extra: str | None  # the pyproject extra that installs it
    # (plan, model handed in or None, threads or None) -> forward
    build_forward: Callable[..., Any]
    computes: Callable[[str], bool] = lambda pooling: True  # the poolings it computes right
    # whether it runs a precision as itself on this CPU (as the runtime reports it); one that
    # cannot say is timed
    runs_as_itself: Callable[[str], bool] = lambda precision: True
    # (ONNX graph bytes, precision, threads) -> a call from named inputs to its first output;
    # None: it runs no graph
    graph_runner: Callable[..., Callable] | None = None
    silence: Callable[[], None] = nothing_to_silence  # before its package is imported
    # whether its first call on each new input shape builds kernels for it (a one-time cost the
    # probe warms apart, shape by shape); False: only its very first call costs more
    shapes_compile: bool = True
    wrong_poolings: str = field(default="")  # why `computes` refuses some (said in errors)

    def available(self) -> bool:
        """Whether this machine has its package (without importing it)."""
        return self.package is None or importlib.util.find_spec(self.package) is not None

    def install_hint(self) -> str:
        return (f"--runtime {self.name} needs the {self.package} package: pip install "
                f"'sentray[{self.extra}]'")

"""What gpu_check's steps share: where the repository is, the corpus reader, and running a
subprocess from the repository root with its output in a log file (steps 1 and 4 run pytest,
jobs/augment.py and jobs/train.py that way, so a failure leaves a log to read)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository root: relative paths start here
SHARED = ROOT.parent / "shared"  # the data beside the checkout on the project's machines


def read_lines(path: Path, count: int) -> list[str]:
    """The first `count` non-blank lines of `path` (one sentence each), newline removed."""
    if not path.is_file():
        raise FileNotFoundError(f"corpus {path} does not exist; pass --corpus FILE (one "
                                "sentence per line)")
    lines = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                lines.append(line.rstrip("\n"))
                if len(lines) == count:
                    break
    return lines


def job_env(extra: dict | None = None) -> dict:
    """This process's environment for a subprocess: the packaged model only, never the Hub."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", **(extra or {})}


def run_logged(command: list[str], log: Path, timeout: int, env: dict | None = None) -> int:
    """Run from the repository root with output to `log`; the exit code (124 on timeout)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as f:
        try:
            return subprocess.run(command, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                  env=job_env(env), timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\n[gpu_check] killed after {timeout} s\n")
            return 124


def tail(path: Path, lines: int = 15) -> str:
    """The last `lines` lines of a log, for an error message ("" when it cannot be read)."""
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""

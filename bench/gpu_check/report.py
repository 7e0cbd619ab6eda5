"""The record gpu_check writes: OUT/gpu_check.json, rewritten after every step so that a crash
keeps what was measured, and OUT/gpu_check.md rebuilt from that JSON each time.

A step is a function returning a dict of figures. The report runs it and records
{"status": "ok", **figures}, or the error: a step that measured something before failing raises
`StepFailed` with those figures, so that they reach the report too."""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bench.gpu_check.markdown import markdown

logger = logging.getLogger(__name__)


class StepFailed(RuntimeError):
    """A step that measured something and still failed: its figures go into the report."""

    def __init__(self, message: str, record: dict) -> None:
        super().__init__(message)
        self.record = record


class Report:
    """The JSON report: `header` (run settings, environment) plus one record per step run."""

    def __init__(self, out: Path, header: dict, step_names: tuple[str, ...]) -> None:
        self.out, self.step_names = out, step_names
        self.data = {**header, "steps": {}}

    def run_step(self, name: str, function: Callable[[], dict], skip: str | None = None) -> None:
        """Run one step (or record it skipped, `skip` saying why) and rewrite the files."""
        logger.info("== step %s", name)
        started = time.perf_counter()
        if skip:
            record = {"status": "skipped", "note": skip}
        else:
            try:
                record = {"status": "ok", **function()}
            except StepFailed as exc:  # figures measured before the failure are kept
                logger.error("step %s failed: %s", name, exc)
                record = {**exc.record, "status": "error", "error": str(exc)}
            except Exception as exc:  # recorded; the next step still runs
                logger.exception("step %s failed", name)
                record = {"status": "error", "error": f"{type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc(limit=8)[-3000:]}
        record["seconds"] = round(time.perf_counter() - started, 1)
        self.data["steps"][name] = record
        logger.info("step %s: %s in %.1f s", name, record["status"], record["seconds"])
        self.write()

    def failed(self) -> list[str]:
        return [name for name, r in self.data["steps"].items() if r["status"] == "error"]

    def write(self) -> None:
        """Both files, each through a partial file renamed into place: never half written."""
        self.data["failed_steps"] = self.failed()
        for name, text in (("gpu_check.json", json.dumps(self.data, indent=1)),
                           ("gpu_check.md", markdown(self.data, self.step_names))):
            partial = self.out / f".{name}.partial"
            partial.write_text(text + "\n", encoding="utf-8")
            partial.replace(self.out / name)

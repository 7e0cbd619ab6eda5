"""Step 1: the GPU-marked tests, `python -m pytest -q -m gpu`, and their pass/skip/fail counts.

They skip without CUDA, so on a GPU machine this is the first sign that the CUDA paths (fast
Ditto on SDPA, autocast, the trainer on a GPU) work at all. Counts come from pytest's JUnit XML,
not from its printed summary."""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.gpu_check.repo_io import run_logged, tail
from bench.gpu_check.report import StepFailed


def gpu_tests(args: argparse.Namespace, out: Path) -> dict:
    """Run the tests marked gpu; the counts, the failing tests and where the log is."""
    junit, log = out / "pytest-gpu.xml", out / "logs" / "pytest-gpu.log"
    command = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
               f"--junitxml={junit}"]
    junit.unlink(missing_ok=True)
    rc = run_logged(command, log, args.job_timeout, env={"SENTRAY_DATA_DIR": args.data_dir})
    if not junit.is_file():
        raise RuntimeError(f"pytest wrote no report (exit {rc}); see {log}:\n{tail(log)}")
    counts, failing = junit_counts(junit)
    record = {"command": " ".join(command[1:]), "exit_code": rc, "collected": counts["tests"],
              "passed": counts["tests"] - counts["failures"] - counts["errors"]
              - counts["skipped"], "skipped": counts["skipped"], "failed": counts["failures"],
              "errors": counts["errors"], "failing_tests": failing, "log": str(log)}
    if counts["failures"] or counts["errors"] or rc not in (0, 5):  # 5: nothing collected
        raise StepFailed(f"{counts['failures']} failed, {counts['errors']} errors (exit {rc}); "
                         f"see {log}", record)
    if counts["skipped"] == counts["tests"]:
        import torch

        record["note"] = ("all skipped: torch sees no CUDA GPU" if not torch.cuda.is_available()
                          else "all skipped")
    return record


def junit_counts(junit: Path) -> tuple[dict[str, int], list[str]]:
    """Totals over every test suite of a JUnit XML file, and the failing tests' ids."""
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    root = ET.parse(junit).getroot()
    for suite in root.iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    failing = [f"{case.get('classname')}::{case.get('name')}" for case in root.iter("testcase")
               if case.find("failure") is not None or case.find("error") is not None]
    return counts, failing

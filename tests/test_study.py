"""docs/experiments/sifter_study.py's tables, on run folders written here: runs are told apart by
lr, and SIFTER and SimCSE are paired at the lr each chose on STS-B dev."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT

TASKS = ["STS12", "STSBenchmark"]


@pytest.fixture(scope="module")
def study():
    spec = importlib.util.spec_from_file_location(
        "sifter_study", ROOT / "docs" / "experiments" / "sifter_study.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sifter_study"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def write_run(study, root: Path, objective: str, seed: int, lr: float, score: float, dev: float,
              tag: str = "", lambdas: str | None = None) -> None:
    run = study.Run("cls", objective, seed, 300, lr, lambdas, tag)
    folder = root / run.name
    (folder / "eval").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(dataclasses.asdict(run)))
    (folder / "eval" / "results.json").write_text(json.dumps({t: score for t in TASKS}))
    history = [{"step": 300, "stsb_dev": dev, "loss": 0.1, "seconds_per_step": 1.0}]
    (folder / "summary.json").write_text(json.dumps(
        {"best_stsb_dev": dev, "initial_stsb_dev": 70.0, "history": history}))


def test_pairs_are_made_at_each_objectives_dev_chosen_lr(study, tmp_path):
    # SIFTER's dev prefers 1e-5, SimCSE's 3e-5; the 3e-5 seed-1 runs must not stand in for the
    # 1e-5 ones (they did when runs were keyed without their lr)
    for seed in (1, 2):
        write_run(study, tmp_path, "sifter", seed, 1e-5, 70.0 + seed, dev=85.0)
        write_run(study, tmp_path, "simcse", seed, 1e-5, 71.0 + seed, dev=84.0)
        write_run(study, tmp_path, "simcse", seed, 3e-5, 73.0 + seed, dev=86.0)
    write_run(study, tmp_path, "sifter", 1, 3e-5, 60.0, dev=80.0)
    write_run(study, tmp_path, "sifter", 1, 1e-5, 72.0, dev=85.0, tag="xy", lambdas="1,0,0")
    table = study.tables(argparse.Namespace(out=str(tmp_path), readouts=["cls"]))
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if "|" in line}
    chosen = rows["**SIFTER − SimCSE, same steps, each at its dev-chosen lr, paired by seed**"]
    assert "| 2 | -3.00 ± 0.00 | -3.00 ± 0.00 |" in chosen  # sifter 1e-5 vs simcse 3e-5
    same = rows["**SIFTER − SimCSE, same steps, both at lr 1e-05, paired by seed**"]
    assert "| 2 | -1.00 ± 0.00 | -1.00 ± 0.00 |" in same
    assert "| 1 | -14.00 | -14.00 |" in rows[
        "**SIFTER − SimCSE, same steps, both at lr 3e-05, paired by seed**"]
    assert "SIFTER 1e-05, SimCSE 3e-05" in table
    # the ablation is set against all three pairs of its own seed and lr (71, not the 60 at 3e-5)
    assert "| +1.00 | +1.00 | +0.00 |" in rows["**λ 1,0,0 − λ 1,1,1, lr 1e-05, seed 1**"]

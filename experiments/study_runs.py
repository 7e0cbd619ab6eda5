"""The study's runs and their records, shared by sifter_study.py (which plans, trains and keeps
them) and study_tables.py (which makes the tables of docs/results.md from them): `Run`, what
names one; the objectives and SIFTER's lambda ablations a run can be; the few files each finished
run keeps (committed under experiments/runs/) and how they are read back."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

ABLATIONS = {"xy": "1,0,0", "xz": "0,1,0", "yz": "0,0,1", "xyz+xx": "1,1,1,1"}
LABELS = {"sifter": "SIFTER-SimCSE", "simcse": "SimCSE (unsup.)"}


@dataclass(frozen=True)
class Run:
    readout: str
    objective: str
    seed: int
    steps: int
    lr: float
    lambdas: str | None = None  # SIFTER ablations
    tag: str = ""  # names the variant: "", "compute", "xy", "z-penn", "dropout0.1", ...
    flags: tuple[str, ...] = field(default=())  # jobs/train.py flags of the variant

    def __post_init__(self) -> None:
        object.__setattr__(self, "flags", tuple(self.flags))  # run.json holds a list

    @property
    def name(self) -> str:
        variant = f"-{self.tag}" if self.tag else ""
        return f"{self.readout}/{self.objective}{variant}-lr{self.lr:g}-seed{self.seed}"


# A run's records: what the tables need and what checks them (config, schedule, evaluation
# history, the 7 tasks), a few kB; the weights and logs stay in --out.
RECORD_FILES = {"run.json": "run.json", "summary.json": "summary.json",
                "eval/results.json": "results.json"}


def keep_records(folder: Path, records: Path) -> None:
    """Copy a finished run's records from its --out folder to `records` (committed)."""
    records.mkdir(parents=True, exist_ok=True)
    for source, target in RECORD_FILES.items():
        shutil.copyfile(folder / source, records / target)


def load(records: Path) -> dict:
    """A run as its records hold it."""
    return {"run": Run(**json.loads((records / "run.json").read_text())),
            "results": json.loads((records / "results.json").read_text()),
            "summary": json.loads((records / "summary.json").read_text())}

"""Print the mean +- std STS table of an experiment folder written by sifter_vs_simcse.sh:
OUT/base-*/results.json and OUT/<objective>-seed<N>/eval/results.json."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from sentray.sts import mean_std_table


def main(folder: str) -> None:
    root = Path(folder)
    runs: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(root.glob("base-*/results.json")):
        runs[f"all-MiniLM-L6-v2 {path.parent.name[5:]} (no training)"].append(
            json.loads(path.read_text()))
    for path in sorted(root.glob("*-seed*/eval/results.json")):
        objective = path.parent.parent.name.split("-seed")[0]
        runs[{"sifter": "SIFTER-SimCSE", "simcse": "SimCSE (unsup.)"}.get(objective, objective)
             ].append(json.loads(path.read_text()))
    print(mean_std_table(runs))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/exp")

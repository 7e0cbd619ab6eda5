"""Print the SST-2 tables of an experiment folder written by sifter_lstm_sst2.sh:
OUT/<cell>-seed<N>/metrics.json -> accuracy mean +- std per cell, then one row per run."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from sentray.evaluation.sts import mean_std_table

LABELS = {"lstm": "LSTM (torch.nn.LSTM)", "sifter": "SIFTER-LSTM"}


def last_epoch_loss(history: list[dict]) -> float:
    """Mean training cross-entropy over the last epoch, from the per-evaluation records (each
    the mean over the steps since the previous one), weighted by those steps."""
    last = max(r["epoch"] for r in history)
    total = steps = 0
    previous = 0
    for record in history:
        if record["epoch"] == last:
            total += record["loss"] * (record["step"] - previous)
            steps += record["step"] - previous
        previous = record["step"]
    return total / steps


def main(folder: str) -> None:
    runs: dict[str, list[dict]] = defaultdict(list)
    rows = []
    for path in sorted(Path(folder).glob("*-seed*/metrics.json")):
        m = json.loads(path.read_text())
        runs[LABELS.get(m["cell"], m["cell"])].append(
            {"SST-2 dev acc.": 100 * m["dev_accuracy"], "SST-2 test acc.": 100 * m["test_accuracy"]})
        rows.append(f"| {LABELS.get(m['cell'], m['cell'])} | {m['seed']} | "
                    f"{100 * m['dev_accuracy']:.2f} | {100 * m['test_accuracy']:.2f} | "
                    f"{m['best_step']} / {m['steps']} | {last_epoch_loss(m['history']):.3f} | "
                    f"{m['seconds']:.0f} s |")
    if not runs:
        raise SystemExit(f"no */metrics.json under {folder}")
    print(mean_std_table(dict(sorted(runs.items()))))
    print()
    print("| cell | seed | dev acc. (best) | test acc. | best step / steps "
          "| train cross-entropy, last epoch | wall time |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/lstm")

"""Repeated texts embedded once: `jobs/embed.py` on a corpus of distinct sentences against the
same number of rows where a share of them repeat earlier ones, in one run, plus the repeating
corpus with --no-dedupe (every row encoded) to check the output is the same.

Two kinds of repeat, each `--repeat-share` of the rows:
- `boilerplate`: the repeats are drawn from a small pool of lines (signatures, headers, templated
  text), as real corpora repeat themselves;
- `uniform`: each repeat copies a row drawn uniformly from all the rows before it, the hardest
  case: a twin is as likely to sit in another block, on another actor, as in this one.

For each: rows/s end to end (launch to summary, Ray start and model load included), its ratio to
the distinct corpus's, the rows the job did not encode (`rows_not_encoded`), and the largest
difference of any row's vector from the --no-dedupe run.

    python bench/bench_dedupe.py --rows 10000 --out bench/results/dedupe.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"
OFFLINE_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
               "HF_HUB_OFFLINE": "1"}


def repeating(distinct: list[str], rows: int, share: float, kind: str, seed: int) -> list[str]:
    """`rows` lines of which `share` repeat: earlier rows (uniform) or a pool (boilerplate)."""
    rng = random.Random(seed)
    pool = distinct[-200:]  # the boilerplate: 200 lines never used as fresh text
    fresh = iter(distinct)
    out: list[str] = []
    for _ in range(rows):
        if out and rng.random() < share:
            out.append(rng.choice(out) if kind == "uniform" else rng.choice(pool))
        else:
            out.append(next(fresh))
    return out


def run_job(corpus: Path, output: Path, extra: list[str]) -> dict:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "jobs" / "embed.py"), "--input", str(corpus),
                    "--output", str(output), "--actors", "2", *extra],
                   check=True, env={**os.environ, **OFFLINE_ENV}, capture_output=True)
    seconds = time.perf_counter() - started
    summary = json.loads((output / "_summary.json").read_text())
    return {"seconds": round(seconds, 1), "rows": summary["rows_in"],
            "rows_per_second": round(summary["rows_in"] / seconds, 1),
            "rows_not_encoded": summary["rows_not_encoded"]}


def vectors_by_row(output: Path) -> np.ndarray:
    table = pads.dataset(output, format="parquet").to_table(columns=["row", "embedding"])
    table = table.sort_by("row")
    return np.stack(table.column("embedding").to_numpy(zero_copy_only=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat-share", type=float, default=0.3)
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--kinds", default="boilerplate,uniform")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    lines = Path(args.corpus).read_text(encoding="utf-8").split("\n")
    distinct = list(dict.fromkeys(line for line in lines if line.strip()))
    results: dict = {"rows": args.rows, "repeat_share": args.repeat_share}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        plain = root / "distinct.txt"
        plain.write_text("\n".join(distinct[:args.rows]) + "\n")
        results["distinct"] = run_job(plain, root / "out-distinct", [])
        for kind in args.kinds.split(","):
            corpus = root / f"{kind}.txt"
            corpus.write_text("\n".join(repeating(distinct, args.rows, args.repeat_share, kind,
                                                  seed=0)) + "\n")
            dedupe = run_job(corpus, root / f"out-{kind}", [])
            every = run_job(corpus, root / f"out-{kind}-every", ["--no-dedupe"])
            difference = float(np.abs(vectors_by_row(root / f"out-{kind}")
                                      - vectors_by_row(root / f"out-{kind}-every")).max())
            results[kind] = {"dedupe": dedupe, "no_dedupe": every,
                             "ratio_to_distinct": round(dedupe["rows_per_second"]
                                                        / results["distinct"]["rows_per_second"],
                                                        2),
                             "max_abs_difference": difference}
    print(f"{args.rows:,} rows, {args.repeat_share:.0%} repeats, jobs/embed.py --actors 2\n")
    print("| corpus | rows/s | / distinct | rows not encoded | max |vector - no-dedupe| |")
    print("|---|---|---|---|---|")
    print(f"| distinct | {results['distinct']['rows_per_second']:.0f} | 1.00x | "
          f"{results['distinct']['rows_not_encoded']} | |")
    for kind in args.kinds.split(","):
        r = results[kind]
        print(f"| {kind} repeats | {r['dedupe']['rows_per_second']:.0f} | "
              f"{r['ratio_to_distinct']:.2f}x | {r['dedupe']['rows_not_encoded']:,} | "
              f"{r['max_abs_difference']:.1e} |")
        print(f"| {kind}, --no-dedupe | {r['no_dedupe']['rows_per_second']:.0f} | "
              f"{r['no_dedupe']['rows_per_second'] / results['distinct']['rows_per_second']:.2f}x"
              f" | {r['no_dedupe']['rows_not_encoded']} | |")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

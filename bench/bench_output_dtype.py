"""What `--output-dtype int8` costs over float32 on a corpus no larger than its code book: the
embedding job as a user runs it (`python jobs/embed.py` in a subprocess, wall time, the packaged
model, in process), the first ROWS Brown sentences, float32 and int8 into fresh outputs, in
alternating order, REPEATS times each, after one float32 warm-up run (the model's files and the
precision decision cached, as on any second run). The int8 job measures its code book on up to
--code-book-rows (10,000) rows and writes those rows as its first rows (issue 68): its goal is
at most 1.15x the float32 run. With --before CHECKOUT, the int8 job of that checkout (the code
before the change) runs too, in the same rounds.

    python bench/bench_output_dtype.py --rows 2000 --repeats 2 --before ../main \\
        --out bench/results/output-dtype-int8-2k.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sentray.kit.cpu import cpu_info

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"
GOAL = 1.15  # int8 at most this many times the float32 run


def embed(corpus: Path, output: Path, dtype: str, checkout: Path = ROOT) -> dict:
    """One run of the job of `checkout`: its wall time and its brief result."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(checkout / "jobs/embed.py"), "--input",
                           str(corpus), "--output", str(output), "--output-dtype", dtype],
                          capture_output=True, text=True, cwd=checkout,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(checkout)})
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{dtype} run failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.splitlines()[-1])
    name = dtype if checkout == ROOT else f"{dtype} before"
    return {"dtype": name, "seconds": round(seconds, 2), "rows_out": result["rows_out"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--before", type=Path, help="a checkout whose int8 job runs too")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    cpu = cpu_info()["name"]
    print(f"CPU: {cpu}, {os.cpu_count()} logical CPUs")
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        corpus = folder / "corpus.txt"
        lines = [line for line in args.corpus.read_text().splitlines() if line.strip()]
        corpus.write_text("\n".join(lines[:args.rows]) + "\n")
        embed(corpus, folder / "warm-up", "float32")
        runs = []
        for repeat in range(args.repeats):
            order = [("float32", ROOT), ("int8", ROOT)]
            order += [("int8", args.before.resolve())] if args.before else []
            for dtype, checkout in order if repeat % 2 == 0 else order[::-1]:
                runs.append(embed(corpus, folder / f"{dtype}-{repeat}-{checkout.name}", dtype,
                                  checkout))
                print(f"{runs[-1]['dtype']:>11}: {runs[-1]['seconds']:.1f} s, "
                      f"{runs[-1]['rows_out']} rows",
                      flush=True)
    median = {dtype: statistics.median(r["seconds"] for r in runs if r["dtype"] == dtype)
              for dtype in dict.fromkeys(r["dtype"] for r in runs)}
    ratio = median["int8"] / median["float32"]
    verdict = "meets" if ratio <= GOAL else "misses"
    print(f"int8 / float32 (median of {args.repeats}): {ratio:.3f}x, {verdict} the goal "
          f"<= {GOAL}x")
    if "int8 before" in median:
        print(f"int8 before / float32: {median['int8 before'] / median['float32']:.3f}x")
    record = {"cpu": cpu, "logical_cpus": os.cpu_count(), "rows": args.rows,
              "repeats": args.repeats, "runs": runs, "median_seconds": median,
              "int8_over_float32": round(ratio, 3), "goal": GOAL, "verdict": verdict,
              "before": args.before.name if args.before else None}
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()

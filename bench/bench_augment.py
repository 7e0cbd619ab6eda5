"""SIFTER augmentation throughput, measured in one run on the same Brown sentences:

- peer: spaCy `nlp.pipe` alone (the same en_core_web_sm, NER off), one process;
- ours: `python jobs/augment.py` end to end (Ray start, per-actor model load, OpenIE, Parquet)
  with 1 and with 2 actors.

    python bench/bench_augment.py --sentences 20000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"


def run_pipe(sentences: list[str]) -> float:
    from sentray.sifter.parsers import load_spacy

    start = time.perf_counter()
    nlp = load_spacy()
    for _ in nlp.pipe(sentences, batch_size=64):
        pass
    return time.perf_counter() - start


def run_job(corpus: Path, output: Path, actors: int) -> tuple[float, dict]:
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "RAY_USAGE_STATS_ENABLED": "0"}
    start = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "jobs" / "augment.py"), "--input", str(corpus),
                    "--output", str(output), "--actors", str(actors)], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    return seconds, json.loads((output / "_summary.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--sentences", type=int, default=20_000)
    args = parser.parse_args()
    sentences = Path(args.corpus).read_text(encoding="utf-8").splitlines()[:args.sentences]
    n = len(sentences)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "sentences.txt"
        corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        pipe = run_pipe(sentences)
        jobs = {actors: run_job(corpus, Path(tmp) / f"out{actors}", actors) for actors in (1, 2)}
    print(f"{n} Brown sentences, {os.cpu_count()} CPUs")
    print("| run | seconds | sentences/s |")
    print("|---|---|---|")
    print(f"| spaCy nlp.pipe alone (model load included) | {pipe:.1f} | {n / pipe:.0f} |")
    for actors, (seconds, summary) in jobs.items():
        assert summary["rows_in"] == n == summary["rows_out"] + summary["rows_rejected"]
        print(f"| jobs/augment.py --actors {actors} (end to end) | {seconds:.1f} | "
              f"{n / seconds:.1f} |")
    print(f"ratio augmentation (2 actors) / nlp.pipe: {pipe / jobs[2][0]:.3f} (goal >= 0.5)")
    print(f"scaling 1 -> 2 actors: {jobs[1][0] / jobs[2][0]:.2f}x")
    summary = jobs[2][1]
    print(f"kept {summary['rows_out']}, rejected {summary['rejected_by_reason']}, "
          f"backbones {summary['backbone_source']}")


if __name__ == "__main__":
    main()

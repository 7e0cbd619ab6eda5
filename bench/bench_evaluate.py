"""The evaluator against its peer on the whole STS files, in one run: `jobs/evaluate.py`
(sentray's encoder) and sentence-transformers' own `encode` + scipy's Spearman, all-MiniLM-L6-v2
with mean pooling, every pair of the 7 tasks. Prints each task's two scores, their difference
(goal: within 0.01) and the time ratio. The test suite checks the same on each task's first 100
pairs (`--max-pairs`); this is the whole-file check.

    python bench/bench_evaluate.py --data-dir ../shared/data/senteval
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from sentray.encode.model_lookup import resolve_model
from sentray.evaluation.senteval import DATA_DIR_ENV, TASKS, load_task

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=os.environ.get(DATA_DIR_ENV))
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    spec = importlib.util.spec_from_file_location("job_evaluate", ROOT / "jobs" / "evaluate.py")
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        ours = job.main(["--pooling", "mean", "--data-dir", str(args.data_dir), "--output", out])
    ours_seconds = time.perf_counter() - started

    from sentence_transformers import SentenceTransformer

    started = time.perf_counter()
    peer = SentenceTransformer(resolve_model("all-MiniLM-L6-v2").path, device="cpu")
    theirs = {}
    for task in TASKS:
        pairs = load_task(task, args.data_dir)
        a = peer.encode(pairs.first, batch_size=64, convert_to_numpy=True,
                      show_progress_bar=False)
        b = peer.encode(pairs.second, batch_size=64, convert_to_numpy=True,
                      show_progress_bar=False)
        cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        theirs[task] = float(spearmanr(cosine, pairs.gold).statistic * 100)
    theirs["avg"] = float(np.mean([theirs[t] for t in TASKS]))
    peer_seconds = time.perf_counter() - started

    print(f"\n{'task':<18}{'jobs/evaluate.py':>18}{'sentence-transformers':>24}{'diff':>9}")
    for task in (*TASKS, "avg"):
        print(f"{task:<18}{ours[task]:>18.2f}{theirs[task]:>24.2f}"
              f"{ours[task] - theirs[task]:>+9.3f}")
    worst = max(abs(ours[t] - theirs[t]) for t in TASKS)
    print(f"\nlargest difference {worst:.4f} (goal <= 0.01): {'met' if worst <= 0.01 else 'NOT met'}")
    print(f"seconds: jobs/evaluate.py {ours_seconds:.1f}, sentence-transformers {peer_seconds:.1f}"
          f" (ratio {peer_seconds / ours_seconds:.2f}x in sentray's favour when > 1)")


if __name__ == "__main__":
    main()

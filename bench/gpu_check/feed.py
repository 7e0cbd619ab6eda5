"""Step 5: does the embedding job keep the GPU fed? On the same rows (--feed-rows: Brown
sentences and pairs of neighbours, one a line), two rates at the job's batch and precision:

- the forward passes alone: the job's encoder, its batches tokenized, padded and already on the
  device (`time_encoder` of step 2): what the GPU can do;
- `python jobs/embed.py` on its Ray path as a user runs it (`--in-process-rows 0 --actors 1
  --num-gpus 1`, so tokenizing and storing run on the node's CPUs in stages of their own,
  `--tokenize auto`): rows over the seconds from its first row embedded to its last part
  written (the summary's `since_launch`), and over the whole pipeline.

busy = the job's steady rate / the forward-only rate: the fraction of the time the GPU would be
computing if the job's rows were all it did. The dry run does the same on the CPU with
`--tokenize own-stage` (no GPU to ask for), on a few hundred rows.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from bench.gpu_check.repo_io import ROOT, read_lines, run_logged, tail
from bench.gpu_check.report import StepFailed

logger = logging.getLogger(__name__)

NOTE = ("forward: the job's encoder on the same rows, pre-tokenized, length-sorted padded "
        "batches already on the device, best of --repeats after a warm-up; job: jobs/embed.py on "
        "its Ray path, one encoder actor, rows / (last part written - first row embedded); "
        "busy = job / forward.")


def feed_rows(corpus: Path, rows: int) -> list[str]:
    """`rows` rows: the corpus's sentences, then pairs of neighbours (bench_gpu_feed's corpus)."""
    sentences = list(dict.fromkeys(read_lines(corpus, rows)))
    pairs = [f"{a} {b}" for a, b in zip(sentences, sentences[1:], strict=False)]
    return (sentences + pairs)[:rows]


def feed(args: argparse.Namespace, out: Path, device: str) -> dict:
    """Step 5's record: the forward-only rate, the job's rates on the same rows, the busy."""
    import torch

    from bench.gpu_check.embed import time_encoder
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder
    from sentray.precision.plan import plan_encoder

    rows = feed_rows(Path(args.corpus), args.feed_rows)
    corpus = out / "feed-rows.txt"
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")
    precision = args.precisions[-1]  # bf16 on a GPU run: what users run there
    encoder = SentenceEncoder(plan_encoder(EncoderConfig(
        model=args.model, device=device, precision=precision, batch_size=args.batch_size)))
    timing = time_encoder(encoder, rows, args.repeats, device)
    forward_rate = len(rows) / timing.forward_seconds
    del encoder
    if device == "cuda":
        torch.cuda.empty_cache()  # the job's actor gets the GPU's memory
    output = out / "feed-output"
    flags = ["--input", str(corpus), "--output", str(output), "--overwrite", "--model",
             args.model, "--precision", precision, "--batch-size", str(args.batch_size),
             "--in-process-rows", "0", "--actors", "1"]
    flags += ["--num-gpus", "1", "--device", "cuda"] if device == "cuda" else [
        "--tokenize", "own-stage", "--device", "cpu"]
    log = out / "logs" / "feed-job.log"
    code = run_logged([sys.executable, str(ROOT / "jobs" / "embed.py"), *flags], log,
                      args.job_timeout)
    record = {"rows": len(rows), "precision": precision, "batch_size": args.batch_size,
              "forward_seconds": round(timing.forward_seconds, 4),
              "forward_rows_per_s": round(forward_rate, 1), "job_flags": flags, "note": NOTE}
    if code:
        raise StepFailed(f"jobs/embed.py exited {code}; see {log}:\n{tail(log)}", record)
    summary = json.loads((output / "_summary.json").read_text())
    timings = summary["timings"]
    moments = timings["since_launch"]
    steady = moments["first_part"] is not None and moments["first_row"] is not None
    last_part = timings["pipeline"] - timings["first_part"] + moments["first_part"]
    steady_seconds = last_part - moments["first_row"] if steady else None
    job_rate = len(rows) / steady_seconds if steady_seconds else None
    record.update({
        "job_rows_out": summary["rows_out"],
        "job_pipeline_seconds": timings["pipeline"],
        "job_rows_per_s": round(len(rows) / timings["pipeline"], 1),
        "job_steady_seconds": round(steady_seconds, 3) if steady_seconds else None,
        "job_steady_rows_per_s": round(job_rate, 1) if job_rate else None,
        "busy_fraction": round(job_rate / forward_rate, 4) if job_rate else None})
    if summary["rows_out"] != len(rows):
        raise StepFailed(f"the job put out {summary['rows_out']} rows of {len(rows)}", record)
    logger.info("feed: forward %.0f rows/s, job %s rows/s at steady state: busy %s",
                forward_rate, record["job_steady_rows_per_s"], record["busy_fraction"])
    return record



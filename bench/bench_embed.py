"""End-to-end bulk embedding vs sentence-transformers, measured in one run on the same
sentences with the same model:

- peer: `SentenceTransformer(model).encode(sentences)` in this process (its default batch size,
  its own length sorting), model load included;
- sentray's `SentenceEncoder.encode` in this process (same model, pooling and batch size as
  the job), model load included: the job's compute without Ray;
- ours: `python jobs/embed.py` as a subprocess, Ray start, model load per actor, reading and
  writing Parquet all included; the output is checked (every id once);
- first, the batching table: forward passes and padding of fixed batches of 32 vs a token budget
  (`--max-tokens-per-batch`) on the same sentences.

    python bench/bench_embed.py --sentences 50000
    python bench/bench_embed.py --sentences 10000 --padding-only
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

import pyarrow.dataset as pads

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"


def run_peer(model_path: str, sentences: list[str], batch_size: int) -> float:
    from sentence_transformers import SentenceTransformer

    start = time.perf_counter()
    model = SentenceTransformer(model_path, device="cpu")
    vectors = model.encode(sentences, batch_size=batch_size)
    assert vectors.shape[0] == len(sentences)
    return time.perf_counter() - start


def run_in_process(model: str, sentences: list[str]) -> float:
    """sentray's encoder without Ray: where the job's time goes besides the model."""
    from sentray.encoder import EncoderConfig, SentenceEncoder

    start = time.perf_counter()
    vectors = SentenceEncoder(EncoderConfig(model=model, device="cpu")).encode(sentences)
    assert vectors.shape[0] == len(sentences)
    return time.perf_counter() - start


def padding_table(model: str, sentences: list[str], batch_size: int, budget: int) -> str:
    """Forward passes and padding of fixed batches of `batch_size` vs a token budget on the
    same sentences (the shapes the encoder would run; no model call)."""
    from sentray.encoder import EncoderConfig, SentenceEncoder

    rows = ["| batching | forward passes | padded tokens | real tokens | padding |",
            "|---|---|---|---|---|"]
    for label, config in ((f"fixed, {batch_size} sentences", EncoderConfig(
            model=model, device="cpu", batch_size=batch_size)),
                          (f"token budget {budget}", EncoderConfig(
            model=model, device="cpu", max_tokens_per_batch=budget))):
        encoder = SentenceEncoder(config)
        passes = padded = real = 0
        for batch in encoder.length_sorted_batches(encoder.tokenize(sentences)):
            passes += 1
            padded += batch.input_ids.numel()
            real += int(batch.attention_mask.sum())
        rows.append(f"| {label} | {passes} | {padded} | {real} | {1 - real / padded:.2%} |")
    return "\n".join(rows)


def run_ours(corpus: Path, output: Path, extra: list[str]) -> float:
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "RAY_USAGE_STATS_ENABLED": "0", "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "jobs" / "embed.py"), "--input", str(corpus),
                    "--output", str(output), *extra], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--sentences", type=int, default=50_000)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--peer-batch-size", type=int, default=32,
                        help="sentence-transformers' batch size (default: its own default, 32)")
    parser.add_argument("--job-args", default="--actors 2",
                        help="extra flags for jobs/embed.py (default: %(default)s)")
    parser.add_argument("--max-tokens-per-batch", type=int, default=2048,
                        help="the token budget compared with fixed batches of 32 (default: "
                             "%(default)s = 32 x 64 tokens)")
    parser.add_argument("--padding-only", action="store_true",
                        help="print the batching table only (seconds, no model run)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentray.models import resolve_model

    sentences = Path(args.corpus).read_text(encoding="utf-8").splitlines()[:args.sentences]
    print(padding_table(args.model, sentences, 32, args.max_tokens_per_batch))
    if args.padding_only:
        return
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "sentences.txt"
        corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        ours = run_ours(corpus, Path(tmp) / "out", args.job_args.split())
        table = pads.dataset(Path(tmp) / "out", format="parquet").to_table(
            columns=["id", "status"])
        ids = table.column("id").to_pylist()
        assert len(ids) == len(sentences) == len(set(ids)), "every id once"
        summary = json.loads((Path(tmp) / "out" / "_summary.json").read_text())
    peer = run_peer(resolve_model(args.model).path, sentences, args.peer_batch_size)
    in_process = run_in_process(args.model, sentences)
    n = len(sentences)
    print(f"{n} Brown sentences, {args.model}, {os.cpu_count()} CPUs")
    print("| run | seconds | sentences/s |")
    print("|---|---|---|")
    print(f"| sentence-transformers encode (batch {args.peer_batch_size}) | {peer:.1f} | "
          f"{n / peer:.0f} |")
    print(f"| sentray SentenceEncoder.encode, in-process, no Ray | {in_process:.1f} | "
          f"{n / in_process:.0f} |")
    print(f"| jobs/embed.py {args.job_args} (Ray start included) | {ours:.1f} | {n / ours:.0f} |")
    print(f"ratio jobs/embed.py / sentence-transformers throughput: {peer / ours:.2f}x "
          "(goal >= 1.2)")
    print(f"ratio sentray encoder in-process / sentence-transformers: {peer / in_process:.2f}x")
    print(f"job summary: rows_in={summary['rows_in']} rows_out={summary['rows_out']} "
          f"status={summary['status']}")


if __name__ == "__main__":
    main()

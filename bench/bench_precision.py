"""bf16 and int8 against fp32 on this machine's CPU, in one run: what each costs or gains, and
what it changes in the vectors (`--precisions`, default bf16,int8).

- the CPU: its name and whether it runs bf16 natively (AMX or AVX512-BF16) or emulates it;
- speed, best of `--repeats`, on `--speed-rows` Brown sentences, batch 32, `--threads` torch
  threads (the job's actors run one each): sentence-transformers `encode` in fp32 and with
  `model_kwargs={"torch_dtype": torch.bfloat16}` and under `torch.autocast("cpu",
  torch.bfloat16)` (the peers a user would write), sentray's `SentenceEncoder` in fp32 and bf16
  (bf16 weights on CPU) and int8 (NNCF static int8 on ONNX Runtime, prepared once and not
  timed: `sentray.precision.artefacts`);
- quality, each precision against sentray fp32 on `--quality-rows` Brown sentences: per-row
  cosine (min, mean), for mean pooling and for Ditto (`--ditto-head`); the int8 output codes
  (ranges calibrated on the fp32 vectors, as the job does) and binary bits that agree; recall@10
  of every 10th row's 10 nearest neighbours (cosine) against fp32's;
- with `--sts TASKS` (or `all`): the STS tasks' Spearman in fp32 and each precision.

    python bench/bench_precision.py --out bench/results/precision-avx2.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"


def best_seconds(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def sentray_encoder(precision: str, pooling: str = "mean", head: str | None = None):
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder
    from sentray.precision.plan import plan_encoder

    return SentenceEncoder(plan_encoder(EncoderConfig(
        pooling=pooling, head=head, precision=precision, device="cpu", batch_size=32)))


def speeds(sentences: list[str], repeats: int) -> dict:
    """sentences/s of each configuration on the same sentences."""
    from sentence_transformers import SentenceTransformer

    from sentray.encode.model_lookup import resolve_model

    path = resolve_model("all-MiniLM-L6-v2").path
    runs = {
        "sentence_transformers_fp32": (SentenceTransformer(path, device="cpu"), None),
        "sentence_transformers_bf16": (SentenceTransformer(
            path, device="cpu", model_kwargs={"torch_dtype": torch.bfloat16}), None),
        "sentence_transformers_fp32_under_bf16_autocast": (SentenceTransformer(
            path, device="cpu"), torch.bfloat16),
        "sentray_fp32": (sentray_encoder("fp32"), None),
        **{f"sentray_{p}": (sentray_encoder(p), None) for p in PRECISIONS},
    }
    out = {}
    for name, (model, autocast) in runs.items():
        def run(model=model, autocast=autocast):
            with torch.autocast("cpu", dtype=autocast or torch.float32,
                                enabled=autocast is not None):
                if hasattr(model, "tokenizer") and hasattr(model, "embed_tokens"):
                    model.encode(sentences)
                else:
                    model.encode(sentences, batch_size=32)
        seconds = best_seconds(run, repeats)
        out[name] = round(len(sentences) / seconds, 1)
        print(f"  {name:<34} {out[name]:8.1f} sentences/s", flush=True)
    fp32 = out["sentence_transformers_fp32"]
    out["ratios_to_sentence_transformers_fp32"] = {
        name: round(rate / fp32, 2) for name, rate in out.items() if isinstance(rate, float)}
    return out


PRECISIONS: list[str] = ["bf16", "int8"]  # set from --precisions


def recall_at_10(a: np.ndarray, b: np.ndarray) -> float:
    """Of every 10th row's 10 nearest other rows by `a` (normalized), the share `b` also ranks
    in its top 10."""
    queries = np.arange(0, len(a), 10)
    found = 0
    for start in range(0, len(queries), 256):
        chunk = queries[start:start + 256]
        tops = []
        for v in (a, b):
            scores = v[chunk] @ v.T
            scores[np.arange(len(chunk)), chunk] = -np.inf  # not itself
            tops.append(np.argpartition(-scores, 10, axis=1)[:, :10])
        found += sum(len(set(x) & set(y)) for x, y in zip(*tops, strict=True))
    return found / (10 * len(queries))


def agreement(fp32: np.ndarray, bf16: np.ndarray) -> dict:
    """Per-row cosine of the two, how many int8 codes / binary bits agree, recall@10."""
    from sentray.bulk_embedding import vectors

    a = fp32 / np.linalg.norm(fp32, axis=1, keepdims=True)
    b = bf16 / np.linalg.norm(bf16, axis=1, keepdims=True)
    cosine = (a * b).sum(1)
    ranges = vectors.CodeBook.of(a)
    codes_a, codes_b = (vectors.to_output(v, "int8", ranges).astype(int) for v in (a, b))
    bits_a, bits_b = (vectors.to_output(v, "ubinary") for v in (a, b))
    differing_bits = np.unpackbits(bits_a ^ bits_b, axis=1).sum(1)
    return {"rows": len(a), "cosine_min": round(float(cosine.min()), 6),
            "cosine_mean": round(float(cosine.mean()), 6),
            "int8_codes_equal": round(float((codes_a == codes_b).mean()), 4),
            "int8_codes_within_1": round(float((np.abs(codes_a - codes_b) <= 1).mean()), 4),
            "binary_bits_equal": round(float(1 - differing_bits.sum() / a.size), 4),
            "binary_rows_all_bits_equal": round(float((differing_bits == 0).mean()), 4),
            "recall_at_10": round(recall_at_10(a, b), 4)}


def quality(sentences: list[str], ditto_head: str) -> dict:
    out = {}
    for label, pooling, head in (("mean", "mean", None), (f"ditto {ditto_head}", "ditto",
                                                           ditto_head)):
        fp32 = sentray_encoder("fp32", pooling, head).encode(sentences)
        for precision in PRECISIONS:
            started = time.perf_counter()
            other = sentray_encoder(precision, pooling, head).encode(sentences)
            out[f"{label} {precision}"] = agreement(fp32, other)
            print(f"  {label} {precision}: {out[f'{label} {precision}']} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    return out


def sts(tasks: str, data_dir: str | None, ditto_head: str) -> dict:
    """Each task's Spearman x 100 in fp32 and bf16, for mean pooling and for Ditto."""
    from sentray.evaluation.sts import evaluate

    out = {}
    for label, pooling, head in (("mean", "mean", None), (f"ditto {ditto_head}", "ditto",
                                                           ditto_head)):
        for precision in ("fp32", *PRECISIONS):
            results = evaluate(sentray_encoder(precision, pooling, head), tasks,
                               data_dir=data_dir)
            scores = {task: round(score, 2) for task, score in results.items()}
            out[f"{label} {precision}"] = scores
            print(f"  STS {label} {precision}: {scores}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--speed-rows", type=int, default=1000)
    parser.add_argument("--quality-rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ditto-head", default="0-8")
    parser.add_argument("--sts", default=None, help="also score these STS tasks (comma-"
                        "separated, or 'all' for the 7), in fp32 and bf16")
    parser.add_argument("--data-dir", default=os.environ.get("SENTRAY_DATA_DIR"))
    parser.add_argument("--precisions", default="bf16,int8",
                        help="compared with fp32 (default: %(default)s)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    PRECISIONS[:] = args.precisions.split(",")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(args.threads)

    from sentray.kit.cpu import BF16_CPU_FLAGS, cpu_bf16_features, cpu_info

    features = cpu_bf16_features()
    report = {"cpu": cpu_info()["name"], "bf16_features": features,
              "bf16": "native" if features else f"emulated (no {' or '.join(BF16_CPU_FLAGS)})",
              "torch": torch.__version__, "threads": args.threads, "model": "all-MiniLM-L6-v2",
              "speed_rows": args.speed_rows, "repeats": args.repeats,
              "quality_rows": args.quality_rows, "sts_tasks": args.sts,
              "precisions": PRECISIONS, "cpu_flags": sorted(
                  f for f in cpu_info()["flags"] if f.startswith(("avx", "amx")))}
    print(f"CPU: {report['cpu']}; bf16 {report['bf16']}; {args.threads} thread(s)", flush=True)
    lines = Path(args.corpus).read_text(encoding="utf-8").splitlines()
    if args.speed_rows:
        print(f"speed, {args.speed_rows} sentences, batch 32, best of {args.repeats}:",
              flush=True)
        report["speed"] = speeds(lines[:args.speed_rows], args.repeats)
    if args.quality_rows:
        print(f"quality against fp32 on {args.quality_rows} sentences:", flush=True)
        report["quality"] = quality(lines[:args.quality_rows], args.ditto_head)
    if args.sts:
        report["sts"] = sts(None if args.sts == "all" else args.sts, args.data_dir,
                            args.ditto_head)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

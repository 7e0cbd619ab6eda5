"""What each stored vector costs: bytes per row and quality against float32 at full dimension,
for dimensions {full, 256, 128, 64} x dtypes {float32, int8, binary}, with the vectors
`jobs/embed.py` stores (`sentray.bulk_embedding.vectors`: truncated, normalized as the model is,
quantized; int8 ranges calibrated on the corpus, as the job does).

- STS-B test Spearman x 100 (1,379 pairs): cosine for float32 and for the int8 codes (what an
  int8 vector index computes), Hamming similarity (bits that agree) for binary.
- recall@10 of nearest-neighbour search: for every 10th sentence of the corpus, the share of its
  10 nearest other sentences (float32, full dimension, cosine: the reference) that the stored
  vectors also rank in their top 10 (cosine, or Hamming for binary).

    python bench/bench_vectors.py --sentences 10000 --out bench/results/vectors.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from sentray.bulk_embedding import vectors
from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder
from sentray.evaluation.senteval import load_sts_benchmark, resolve_data_dir
from sentray.precision.plan import plan_encoder

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"
DTYPES = ("float32", "int8", "binary")


def similarity(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """Row-wise similarity of stored vectors (N, W) x (N, W) -> (N,)."""
    if dtype == "binary":  # bits that agree, of the packed codes
        return -np.unpackbits(a.view(np.uint8) ^ b.view(np.uint8), axis=1).sum(1, dtype=np.int64)
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1),
                                       1e-12)


def top_k(queries: np.ndarray, database: np.ndarray, dtype: str, k: int,
          query_rows: np.ndarray) -> np.ndarray:
    """The k nearest database rows (N_q, k) of each query, the query's own row left out."""
    if dtype == "binary":
        bits_q = np.unpackbits(queries.view(np.uint8), axis=1).astype(np.float32)
        bits_d = np.unpackbits(database.view(np.uint8), axis=1).astype(np.float32)
        # agreements = matching ones + matching zeros
        scores = bits_q @ bits_d.T + (1 - bits_q) @ (1 - bits_d).T
    else:
        q = queries.astype(np.float32)
        d = database.astype(np.float32)
        q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
        scores = q @ d.T
    scores[np.arange(len(queries)), query_rows] = -np.inf
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def stored(floats: np.ndarray, dimension: int, dtype: str, normalize: bool,
           ranges: vectors.CodeBook | None) -> np.ndarray:
    out = vectors.truncate(floats, dimension)
    out = vectors.normalize(out) if normalize else out
    return vectors.to_output(out, dtype, ranges)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=10_000)
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--data-dir", default=None, help="SentEval folder (or $SENTRAY_DATA_DIR)")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--dims", default="full,256,128,64")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()

    started = time.perf_counter()
    encoder = SentenceEncoder(plan_encoder(EncoderConfig(model=args.model, device="cpu")))
    normalize = encoder.plan.normalize
    corpus = Path(args.corpus).read_text(encoding="utf-8").split("\n")[:args.sentences]
    dev = load_sts_benchmark(resolve_data_dir(args.data_dir), "test")
    floats = encoder.encode(corpus)  # (N, D) pooled, as the job's actors pool them
    first, second = encoder.encode(dev.first), encoder.encode(dev.second)
    query_rows = np.arange(0, len(corpus), 10)
    full = encoder.dimension
    truth = top_k(stored(floats[query_rows], full, "float32", normalize, None),
                  stored(floats, full, "float32", normalize, None), "float32", args.k, query_rows)
    rows = []
    for dim in [full if d == "full" else int(d) for d in args.dims.split(",")]:
        for dtype in DTYPES:
            ranges = (vectors.CodeBook.of(vectors.normalize(floats[:, :dim]) if normalize
                                        else floats[:, :dim]) if dtype == "int8" else None)
            corpus_stored = stored(floats, dim, dtype, normalize, ranges)
            a = stored(first, dim, dtype, normalize, ranges)
            b = stored(second, dim, dtype, normalize, ranges)
            sts = spearmanr(similarity(a, b, dtype), dev.gold).statistic * 100
            found = top_k(corpus_stored[query_rows], corpus_stored, dtype, args.k, query_rows)
            recall = np.mean([len(set(f) & set(t)) / args.k for f, t in zip(found, truth,
                                                                            strict=True)])
            rows.append({"dimension": dim, "dtype": dtype,
                         "bytes_per_row": int(corpus_stored.shape[1] * corpus_stored.itemsize),
                         "stsb_test_spearman": round(float(sts), 2),
                         f"recall_at_{args.k}": round(float(recall), 4)})
    base = rows[0]
    print(f"{args.model}, {len(corpus):,} sentences of {Path(args.corpus).name} "
          f"(normalized: {normalize}), {len(query_rows):,} queries, "
          f"{time.perf_counter() - started:.0f} s\n")
    print(f"| dimension | dtype | bytes/row | vs float32 full | STS-B test | recall@{args.k} |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['dimension']} | {row['dtype']} | {row['bytes_per_row']} | "
              f"{base['bytes_per_row'] / row['bytes_per_row']:.0f}x smaller | "
              f"{row['stsb_test_spearman']:.2f} | {row[f'recall_at_{args.k}']:.3f} |")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"model": args.model, "sentences": len(corpus),
                                             "queries": len(query_rows), "normalized": normalize,
                                             "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

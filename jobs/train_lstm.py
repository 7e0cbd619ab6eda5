"""SIFTER-LSTM or the LSTM baseline on SST-2: WordPiece embeddings from a pretrained encoder, one
LSTM layer, dev accuracy every --eval-steps, the best step (by dev) scored on test. Writes
OUT/metrics.json (dev_accuracy, test_accuracy, best_step, history, ...).

    python jobs/train_lstm.py --cell sifter --data-dir ../shared/data --out out/lstm/sifter-1 \\
        --seed 1
    python jobs/train_lstm.py --cell lstm --data-dir ../shared/data --out out/lstm/lstm-1 \\
        --seed 1
    python jobs/train_lstm.py --cell sifter --workers 2          # Ray Train, 2 CPU workers (DDP)
    ray job submit --address http://HEAD:8265 --working-dir . -- python jobs/train_lstm.py \\
        --cell sifter --workers 1 --use-gpu --out /shared/lstm/sifter

SIFTER forces the input gate to 1 on sentiment words: VADER lexicon entries with |valence| >=
--lexicon-threshold whose tokenization is a single word piece (see sentray/lexicon.py).
"""

from __future__ import annotations

import argparse
import json

from sentray import senteval
from sentray.cli import setup_logging
from sentray.lexicon import DEFAULT_THRESHOLD
from sentray.lstm import CELLS, LSTMConfig, run_lstm
from sentray.models import DEFAULT_MODEL


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    io = parser.add_argument_group("input and output")
    io.add_argument("--data-dir", default=None,
                    help="SentEval folder with SST/binary/sentiment-{train,dev,test}, or a "
                         f"folder holding senteval/ (default: ${senteval.DATA_DIR_ENV})")
    io.add_argument("--out", default="out/lstm",
                    help="writes OUT/metrics.json (default: %(default)s)")
    io.add_argument("--limit-train", type=int, default=None,
                    help="train on the first N rows only, for quick checks (default: all)")
    io.add_argument("--limit-eval", type=int, default=None,
                    help="score the first N dev and test rows only, for quick checks "
                         "(default: all)")
    model = parser.add_argument_group("model")
    model.add_argument("--cell", default="sifter", choices=CELLS,
                       help="sifter: input gate = 1 on sentiment words; lstm: torch.nn.LSTM "
                            "(default: %(default)s)")
    model.add_argument("--model", default=DEFAULT_MODEL,
                       help="encoder whose tokenizer and input word embeddings initialise the "
                            "classifier: HF id, local dir or packaged name (default: "
                            "%(default)s; LSTM hidden size = embedding size / 2)")
    model.add_argument("--lexicon-threshold", type=float, default=DEFAULT_THRESHOLD,
                       help="|VADER valence| of a sentiment word, on VADER's [-4, 4] scale "
                            "(default: %(default)s)")
    model.add_argument("--dropout", type=float, default=0.2,
                       help="on the embeddings and on the LSTM output (default: %(default)s)")
    model.add_argument("--max-length", type=int, default=64,
                       help="word pieces per sentence, no [CLS]/[SEP] (default: %(default)s)")
    opt = parser.add_argument_group("optimisation")
    opt.add_argument("--batch-size", type=int, default=32,
                     help="global batch, split over the workers (default: %(default)s)")
    opt.add_argument("--lr", type=float, default=1e-5, help="Adam (default: %(default)s)")
    opt.add_argument("--l2", type=float, default=1e-7,
                     help="loss += L2 x sum of squared parameters (default: %(default)s)")
    opt.add_argument("--epochs", type=int, default=3,
                     help="passes over SST-2 train; the paper does not say (default: "
                          "%(default)s)")
    opt.add_argument("--max-steps", type=int, default=None,
                     help="stop after this many steps (default: all epochs)")
    opt.add_argument("--eval-steps", type=int, default=50,
                     help="dev accuracy every N steps; the best is kept (default: %(default)s)")
    opt.add_argument("--eval-batch-size", type=int, default=256, help="(default: %(default)s)")
    opt.add_argument("--seed", type=int, default=42, help="(default: %(default)s)")
    opt.add_argument("--log-steps", type=int, default=100, help="(default: %(default)s)")
    opt.add_argument("--threads", type=int, default=0,
                     help="torch threads with --workers 0; 0: torch's default (default: "
                          "%(default)s)")
    ray_group = parser.add_argument_group("Ray")
    ray_group.add_argument("--workers", type=int, default=0,
                           help="0: train in this process; N >= 1: Ray Train with N DDP workers "
                                "(default: %(default)s)")
    ray_group.add_argument("--use-gpu", action="store_true",
                           help="one GPU per worker (or for this process with --workers 0)")
    ray_group.add_argument("--cpus-per-worker", type=float, default=1.0,
                           help="CPUs per Ray worker, also its torch threads (default: "
                                "%(default)s)")
    ray_group.add_argument("--address", default=None,
                           help="Ray cluster (default: $RAY_ADDRESS, else a local one on "
                                "127.0.0.1)")
    ray_group.add_argument("--num-cpus", type=int, default=None,
                           help="logical CPUs of a local cluster (default: workers x "
                                "cpus-per-worker + 2, rounded up)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def config_from_args(args: argparse.Namespace) -> LSTMConfig:
    return LSTMConfig(
        cell=args.cell, model=args.model, data_dir=args.data_dir, out=args.out,
        lexicon_threshold=args.lexicon_threshold, batch_size=args.batch_size, lr=args.lr,
        l2=args.l2, epochs=args.epochs, max_steps=args.max_steps, eval_steps=args.eval_steps,
        eval_batch_size=args.eval_batch_size, seed=args.seed, max_length=args.max_length,
        dropout=args.dropout, workers=args.workers, use_gpu=args.use_gpu,
        cpus_per_worker=args.cpus_per_worker, address=args.address, num_cpus=args.num_cpus,
        limit_train=args.limit_train, limit_eval=args.limit_eval, log_steps=args.log_steps,
        threads=args.threads)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup_logging(args.verbose)
    try:
        metrics = run_lstm(config_from_args(args))
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from exc
    print(json.dumps({k: metrics[k] for k in ("cell", "seed", "dev_accuracy", "test_accuracy",
                                              "best_step", "steps", "seconds")}))
    return metrics


if __name__ == "__main__":
    main()

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

import json

from sentray import cli
from sentray.lstm_config import LSTMConfig
from sentray.lstm_train import run_lstm


def parse_config(argv: list[str] | None) -> tuple[LSTMConfig, bool]:
    """(config, verbose): the flags are LSTMConfig's fields (`--help` lists them)."""
    return cli.parse(LSTMConfig, argv, description=__doc__, prog="jobs/train_lstm.py")


def main(argv: list[str] | None = None) -> dict:
    config, verbose = parse_config(argv)
    cli.setup_logging(verbose)
    try:
        metrics = run_lstm(config)
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from exc
    print(json.dumps({k: metrics[k] for k in ("cell", "seed", "dev_accuracy", "test_accuracy",
                                              "best_step", "steps", "seconds")}))
    return metrics


if __name__ == "__main__":
    main()

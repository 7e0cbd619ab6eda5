"""SIFTER-LSTM cell throughput: our SifterLSTM (a Python loop over time steps, one matmul per step)
against torch.nn.LSTM (its fused kernel; cuDNN on GPU) at the SST-2 classifier's sizes, and the
SIFTER cell with an empty set against the real VADER set. Forward + backward tokens per second
on right-padded batches of SST-2-like lengths; every figure measured in this run.

    python bench/bench_lstm.py                      # B=32, T~25, E=384, H=192, CPU
    python bench/bench_lstm.py --device cuda --threads 0
"""

from __future__ import annotations

import argparse
import logging
import time

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from sentray.cli import setup_logging
from sentray.lstm.cell import SifterLSTM

VOCAB = 30522  # bert-base-uncased / all-MiniLM-L6-v2 WordPiece


def sentiment_ids(model: str, threshold: float) -> set[int]:
    from sentray.encode.model_loading import load_tokenizer
    from sentray.encode.model_lookup import resolve_model
    from sentray.lstm import lexicon

    tokenizer = load_tokenizer(resolve_model(model))
    return lexicon.sentiment_token_ids(
        lexicon.sentiment_words(lexicon.load_vader_lexicon(), threshold), tokenizer)


def batches(count: int, batch: int, steps: int, embedding: int, device: torch.device,
            ids_in_set: set[int], set_share: float, seed: int = 0):
    """Right-padded batches: lengths uniform in [steps/2, 3*steps/2] (mean `steps`); a
    `set_share` of the token ids are drawn from the set."""
    generator = torch.Generator().manual_seed(seed)
    pool = torch.tensor(sorted(ids_in_set) or [0])
    made = []
    for _ in range(count):
        lengths = torch.randint(steps // 2, steps + steps // 2 + 1, (batch,), generator=generator)
        longest = int(lengths.max())
        x = torch.randn(batch, longest, embedding, generator=generator)
        ids = torch.randint(0, VOCAB, (batch, longest), generator=generator)
        from_set = torch.rand(batch, longest, generator=generator) < set_share
        ids[from_set] = pool[torch.randint(0, len(pool), (int(from_set.sum()),),
                                           generator=generator)]
        made.append((x.to(device).requires_grad_(), ids.to(device), lengths))
    return made


def tokens_per_second(run, data, device: torch.device, repeats: int) -> float:
    for x, ids, lengths in data[:2]:  # warm-up
        run(x, ids, lengths)
    if device.type == "cuda":
        torch.cuda.synchronize()
    tokens, started = 0, time.perf_counter()
    for _ in range(repeats):
        for x, ids, lengths in data:
            run(x, ids, lengths)
            tokens += int(lengths.sum())
    if device.type == "cuda":
        torch.cuda.synchronize()
    return tokens / (time.perf_counter() - started)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=32, help="(default: %(default)s)")
    parser.add_argument("--steps", type=int, default=25,
                        help="mean tokens per row (default: %(default)s)")
    parser.add_argument("--embedding", type=int, default=384, help="(default: %(default)s)")
    parser.add_argument("--hidden", type=int, default=192, help="(default: %(default)s)")
    parser.add_argument("--batches", type=int, default=20, help="(default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="(default: %(default)s)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch CPU threads, 0: torch's default (default: %(default)s)")
    parser.add_argument("--model", default="all-MiniLM-L6-v2",
                        help="tokenizer for the real sentiment set (default: %(default)s)")
    parser.add_argument("--threshold", type=float, default=1.5,
                        help="VADER threshold of the real set (default: %(default)s)")
    parser.add_argument("--set-share", type=float, default=0.08,
                        help="share of tokens in the set (SST-2 train: ~7%%) (default: "
                             "%(default)s)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    setup_logging()
    logging.getLogger("sentray").setLevel(logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    real_set = sentiment_ids(args.model, args.threshold)
    data = batches(args.batches, args.batch_size, args.steps, args.embedding, device, real_set,
                   args.set_share)

    torch.manual_seed(0)
    reference = nn.LSTM(args.embedding, args.hidden, batch_first=True).to(device)
    empty = SifterLSTM(args.embedding, args.hidden, vocab_size=VOCAB).to(device)
    empty.load_state_dict(reference.state_dict())
    sifter = SifterLSTM(args.embedding, args.hidden, vocab_size=VOCAB,
                        sentiment_ids=real_set).to(device)
    sifter.load_state_dict(reference.state_dict())

    def run_reference(x, ids, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        _, (h, _) = reference(packed)
        h.sum().backward()

    def run_sifter(model):
        def run(x, ids, lengths):
            _, (h, _) = model(x, ids, lengths.to(device))
            h.sum().backward()
        return run

    rates = {
        "torch.nn.LSTM (packed)": tokens_per_second(run_reference, data, device, args.repeats),
        "SifterLSTM, empty set": tokens_per_second(run_sifter(empty), data, device,
                                                   args.repeats),
        f"SifterLSTM, VADER set ({len(real_set)} ids)": tokens_per_second(
            run_sifter(sifter), data, device, args.repeats),
    }
    print(f"device {device}, threads {torch.get_num_threads()}, B={args.batch_size}, "
          f"T~{args.steps}, E={args.embedding}, H={args.hidden}; forward + backward")
    base = rates["torch.nn.LSTM (packed)"]
    for name, rate in rates.items():
        print(f"  {name:<36} {rate:>10,.0f} tokens/s   {rate / base:5.2f} x nn.LSTM")
    empty_rate = rates["SifterLSTM, empty set"]
    print(f"  SIFTER real set / empty set: {list(rates.values())[2] / empty_rate:.2f}")
    return rates


if __name__ == "__main__":
    main()

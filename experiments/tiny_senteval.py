"""A SentEval data folder cut to the first N pairs of every file, for dry runs: the same layout
(STS/STS12-en-test/..., STS/STSBenchmark/sts-{dev,test}.csv, SICK/...), so every loader and job
reads it as it reads the real one, in seconds.

    python experiments/tiny_senteval.py SRC DST [--pairs 40]

STS12-16's input and gold-score files are line-aligned, so their first N lines stay pairs; the
SICK files keep their header line. The scores mean nothing about a model: this is a set-up check.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def cut(source: Path, target: Path, pairs: int) -> int:
    """Copy `source`'s SentEval files to `target`, each cut to its first `pairs` pairs; returns
    the files written."""
    written = 0
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if not path.is_file() or relative.parts[0] not in ("STS", "SICK"):
            continue
        if path.suffix not in (".txt", ".csv") or "readme" in path.name.lower() \
                or "LICENSE" in path.name:
            continue
        header = 1 if relative.parts[0] == "SICK" else 0
        lines = path.read_text(encoding="utf-8").splitlines()[:pairs + header]
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        (target / relative).write_text("\n".join(lines) + "\n", encoding="utf-8")
        written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="SentEval's data/downstream folder")
    parser.add_argument("target", type=Path)
    parser.add_argument("--pairs", type=int, default=40)
    args = parser.parse_args()
    print(f"{cut(args.source, args.target, args.pairs)} files cut to {args.pairs} pairs in "
          f"{args.target}")


if __name__ == "__main__":
    main()

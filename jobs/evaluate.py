"""Score an encoder on the 7 STS tasks (SentEval protocol), optionally choosing the Ditto head.

    python jobs/evaluate.py --model all-MiniLM-L6-v2 --pooling mean --data-dir ../shared/data
    python jobs/evaluate.py --pooling ditto --search-head --data-dir ../shared/data
    python jobs/evaluate.py --max-pairs 200 ...   # a quick check: each task's first 200 pairs
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from sentray import export, senteval, sts
from sentray.cli import add_encoder_args, encoder_config_from_args, setup_logging
from sentray.encoder import SentenceEncoder

logger = logging.getLogger("sentray.evaluate")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_encoder_args(parser)
    parser.add_argument("--tasks", default="all",
                        help=f"comma-separated, from {', '.join(senteval.TASKS)} (default: all)")
    parser.add_argument("--data-dir", default=None,
                        help=f"SentEval data/downstream folder (default: ${senteval.DATA_DIR_ENV})")
    parser.add_argument("--out", default="out/evaluate",
                        help="folder for results.json (and the head grid) (default: %(default)s)")
    parser.add_argument("--search-head", action="store_true",
                        help="score every layer-head on STS-B dev, keep the best, then evaluate")
    parser.add_argument("--max-pairs", type=int, default=None,
                        help="score each task (and the head search) on its first N pairs only: "
                             "a quick check of a set-up, not the tasks' scores (default: all)")
    parser.add_argument("--export-st", default=None, metavar="DIR",
                        help="also write the model with this pooling (and Ditto head, searched "
                             "or given) as a sentence-transformers directory: "
                             "SentenceTransformer(DIR, trust_remote_code=True) for Ditto")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    setup_logging(args.verbose)
    tasks = senteval.parse_tasks(args.tasks)
    if args.max_pairs is not None and args.max_pairs < 3:
        raise SystemExit(f"error: --max-pairs must be at least 3, got {args.max_pairs}")
    senteval.resolve_data_dir(args.data_dir)  # fail before loading any model
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extra: dict = {}
    if args.search_head:
        if not (args.pooling or "").startswith("ditto"):
            raise SystemExit(f"error: --search-head chooses a Ditto head; use --pooling ditto "
                             f"(or ditto_last, ...), not {args.pooling!r}")
        # The search reads every head; the placeholder head only lets the config validate.
        search_config = encoder_config_from_args(args, head=args.head or "0-0")
        grid = sts.search_head(SentenceEncoder(search_config), args.data_dir,
                               max_pairs=args.max_pairs)
        args.head = sts.best_head(grid)
        (out / "head_grid.json").write_text(json.dumps({
            "model": args.model, "pooling": search_config.pooling, "split": "STSBenchmark dev",
            "best_head": args.head, "best_spearman": float(grid.max()),
            "grid": [[round(float(v), 4) for v in row] for row in grid]}, indent=1))
        sts.save_head_heatmap(grid, out / "head_grid.png",
                              f"{args.model} {search_config.pooling}: STS-B dev, best {args.head}")
        logger.info("best head on STS-B dev: %s (%.2f); grid in %s", args.head, grid.max(),
                    out / "head_grid.png")
        extra = {"head": args.head, "dev_spearman": float(grid.max())}
    config = encoder_config_from_args(args)
    encoder = SentenceEncoder(config)
    if args.export_st:
        export.save_directory(encoder, args.export_st, **extra)
        logger.info("wrote sentence-transformers model %s", args.export_st)
    results = sts.evaluate(encoder, tasks, args.data_dir,
                           max_pairs=args.max_pairs)  # batches as the config says
    label = f"{config.model} {config.pooling}" + (f" {config.head}" if config.head else "")
    if args.max_pairs is not None:
        label += f" (first {args.max_pairs} pairs of each task)"
        logger.warning("--max-pairs %d: these are not the tasks' scores", args.max_pairs)
    print(sts.markdown_table(results, label))
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "config.json").write_text(json.dumps({**vars(args), **extra}, indent=1))
    logger.info("wrote %s", out / "results.json")
    return results


if __name__ == "__main__":
    main()

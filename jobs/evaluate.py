"""Score an encoder on the 7 STS tasks (SentEval protocol), optionally choosing the Ditto head.

    python jobs/evaluate.py --model all-MiniLM-L6-v2 --pooling mean --data-dir ../shared/data
    python jobs/evaluate.py --pooling ditto --search-head --data-dir ../shared/data
    python jobs/evaluate.py --max-pairs 200 ...   # a quick check: each task's first 200 pairs
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from sentray import cli, configfile, export, senteval, sts
from sentray.encoder import SentenceEncoder
from sentray.sts import EvaluateConfig

logger = logging.getLogger("sentray.evaluate")


def parse_config(argv: list[str] | None) -> tuple[EvaluateConfig, bool]:
    """(config, verbose): the flags are EvaluateConfig's fields, its encoder included."""
    return cli.parse(EvaluateConfig, argv, description=__doc__, prog="jobs/evaluate.py")


def main(argv: list[str] | None = None) -> dict[str, float]:
    config, verbose = parse_config(argv)
    cli.setup_logging(verbose)
    tasks = senteval.parse_tasks(config.tasks)
    try:
        senteval.resolve_data_dir(config.data_dir)  # fail before loading any model
    except FileNotFoundError as exc:
        raise SystemExit(f"error: {exc}") from exc
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    extra: dict = {}
    encoder_config = config.encoder
    if config.search_head:
        # The search reads every head; the placeholder head only lets the encoder load.
        search_config = dataclasses.replace(encoder_config, head=encoder_config.head or "0-0")
        grid = sts.search_head(SentenceEncoder(search_config), config.data_dir,
                               max_pairs=config.max_pairs)
        head = sts.best_head(grid)
        encoder_config = dataclasses.replace(encoder_config, head=head)
        (out / "head_grid.json").write_text(json.dumps({
            "model": encoder_config.model, "pooling": encoder_config.pooling,
            "split": "STSBenchmark dev", "best_head": head, "best_spearman": float(grid.max()),
            "grid": [[round(float(v), 4) for v in row] for row in grid]}, indent=1))
        sts.save_head_heatmap(grid, out / "head_grid.png", f"{encoder_config.model} "
                              f"{encoder_config.pooling}: STS-B dev, best {head}")
        logger.info("best head on STS-B dev: %s (%.2f); grid in %s", head, grid.max(),
                    out / "head_grid.png")
        extra = {"head": head, "dev_spearman": float(grid.max())}
    # what ran: the searched head, never the search itself again
    ran = dataclasses.replace(config, encoder=encoder_config, search_head=False)
    configfile.write_config(ran, str(out), job="evaluate")
    encoder = SentenceEncoder(encoder_config)
    if config.export_st:
        export.save_directory(encoder, config.export_st, **extra)
        logger.info("wrote sentence-transformers model %s", config.export_st)
    results = sts.evaluate(encoder, tasks, config.data_dir,
                           max_pairs=config.max_pairs)  # batches as the config says
    used = encoder.config
    label = f"{used.model} {used.pooling}" + (f" {used.head}" if used.head else "")
    if config.max_pairs is not None:
        label += f" (first {config.max_pairs} pairs of each task)"
        logger.warning("--max-pairs %d: these are not the tasks' scores", config.max_pairs)
    print(sts.markdown_table(results, label))
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "config.json").write_text(json.dumps({**configfile.flat_values(ran), **extra}, indent=1))
    logger.info("wrote %s", out / "results.json")
    return results


if __name__ == "__main__":
    main()

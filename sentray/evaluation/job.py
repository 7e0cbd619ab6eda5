"""The STS evaluation behind `jobs/evaluate.py`: an encoder scored on the 7 tasks (SentEval's
protocol), optionally after choosing the Ditto head on STS-B dev, optionally exported as a
model folder that sentray and sentence-transformers load. Writes OUT/results.json (and the head
grid, OUT/_config.yaml, OUT/config.json)."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder
from sentray.encode.export import save_model_directory
from sentray.evaluation import head_search, senteval, sts
from sentray.evaluation.config import EvaluateConfig
from sentray.kit import config_files
from sentray.precision.plan import plan_encoder

logger = logging.getLogger(__name__)


def run_evaluation(config: EvaluateConfig) -> dict[str, float]:
    """Score the configured encoder; returns {task: Spearman x 100, ..., "avg": ...}."""
    tasks = senteval.parse_tasks(config.tasks)
    senteval.resolve_data_dir(config.data_dir)  # fail before loading any model
    out = Path(config.output)
    out.mkdir(parents=True, exist_ok=True)
    encoder_config, extra = config.encoder, {}
    if config.search_head:
        encoder_config, extra = _search_head(config, out)
    plan = plan_encoder(encoder_config)
    # what ran: the read-out the plan decided, the searched head, never the search again
    ran = dataclasses.replace(config, search_head=False, encoder=dataclasses.replace(
        encoder_config, pooling=plan.pooling, head=plan.head))
    config_files.write_config(ran, str(out), job="evaluate")
    encoder = SentenceEncoder(plan)
    if config.export_st:  # sentray.json records the head; the dev score it was chosen on too
        # the model's own fp32 weights: a CPU bf16 encoder holds them rounded to bf16
        exported = encoder
        if plan.precision != "fp32" and encoder.device.type == "cpu":
            exported = SentenceEncoder(plan.running("fp32", why="exported in fp32"))
        save_model_directory(exported, config.export_st,
                             extra={k: v for k, v in extra.items() if k != "head"})
        logger.info("wrote sentence-transformers model %s", config.export_st)
    results = sts.evaluate(encoder, tasks, config.data_dir,
                           max_pairs=config.max_pairs)  # batches as the config says
    label = f"{plan.model.name} {plan.pooling}" + (f" {plan.head}" if plan.head else "")
    if config.max_pairs is not None:
        label += f" (first {config.max_pairs} pairs of each task)"
        logger.warning("--max-pairs %d: these are not the tasks' scores", config.max_pairs)
    print(sts.markdown_table(results, label))
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "config.json").write_text(json.dumps({**config_files.flat_values(ran), **extra},
                                                indent=1))
    logger.info("wrote %s", out / "results.json")
    return results


def _search_head(config: EvaluateConfig, out: Path) -> tuple[EncoderConfig, dict]:
    """Every head scored on STS-B dev: the encoder config with the best head, and what the
    export records of it. Writes OUT/head_grid.json and OUT/head_grid.png."""
    encoder_config = config.encoder
    # The search reads every head; the placeholder head only lets the encoder load.
    search_config = dataclasses.replace(encoder_config, head=encoder_config.head or "0-0")
    if search_config.precision in ("int8", "auto"):  # every head is read from torch's maps
        search_config = dataclasses.replace(search_config, precision="fp32",
                                            int8_calibration=None)
        logger.info("the head search runs in fp32 (it reads every head's attention map); "
                    "the chosen head is scored in %s", encoder_config.precision)
    grid = head_search.search_head(SentenceEncoder(plan_encoder(search_config)),
                                   config.data_dir, max_pairs=config.max_pairs)
    head = head_search.best_head(grid)
    encoder_config = dataclasses.replace(encoder_config, head=head)
    (out / "head_grid.json").write_text(json.dumps({
        "model": encoder_config.model, "pooling": encoder_config.pooling,
        "split": "STSBenchmark dev", "best_head": head, "best_spearman": float(grid.max()),
        "grid": [[round(float(v), 4) for v in row] for row in grid]}, indent=1))
    head_search.save_head_heatmap(grid, out / "head_grid.png", f"{encoder_config.model} "
                                  f"{encoder_config.pooling}: STS-B dev, best {head}")
    logger.info("best head on STS-B dev: %s (%.2f); grid in %s", head, grid.max(),
                out / "head_grid.png")
    return encoder_config, {"head": head, "dev_spearman": float(grid.max())}

"""SIFTER-LSTM or the LSTM baseline on SST-2 (the SIFTER paper's SST-2 experiment): the driver
behind `jobs/train_lstm.py`. It prepares the data once (`sentray.lstm.data`), trains in this
process or on Ray Train (`sentray.lstm.loop`, `sentray.training.ray_train`), and writes the
best-by-dev state's metrics to OUT/metrics.json.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch

from sentray.kit import config_files
from sentray.lstm.config import LSTMConfig
from sentray.lstm.data import LSTMData, prepare_data
from sentray.lstm.loop import LSTMLoopConfig, step_plan, train_loop, train_loop_per_worker
from sentray.training import ray_train

logger = logging.getLogger(__name__)


def _train_on_ray(config: LSTMConfig, data: LSTMData) -> dict:
    import ray

    result = ray_train.fit(
        train_loop_per_worker, lambda: LSTMLoopConfig(config, ray.put(data)), config.cluster,
        name=f"lstm-{config.cell}-seed{config.seed}",
        storage_path=str((Path(config.output) / "ray").resolve()))
    if not result.return_value:
        raise RuntimeError("Ray Train returned no metrics from rank 0")
    return result.return_value


def run_lstm(config: LSTMConfig) -> dict:
    """Train and test one classifier; returns the metrics, also written to OUT/metrics.json."""
    started = time.perf_counter()
    logger.info("LSTM config: %s", json.dumps(config_files.flat_record(config)))
    if config.cluster.workers == 0 and config.cluster.use_gpu and not torch.cuda.is_available():
        raise ValueError("use_gpu is set but torch sees no CUDA GPU; drop --use-gpu")
    data = prepare_data(config)
    step_plan(config, len(data.train))  # fewer rows than a batch fails here
    config_files.write_config(config, config.output, job="train_lstm")
    if config.cluster.workers == 0:
        if config.threads:
            torch.set_num_threads(config.threads)
        metrics = train_loop(config, data, device="cuda" if config.cluster.use_gpu else "cpu")
    else:
        metrics = _train_on_ray(config, data)
    metrics = {"cell": config.cell, "seed": config.seed, **metrics,
               "sentiment_words": data.sentiment_words,
               "sentiment_token_ids": len(data.sentiment_ids),
               "train_rows": len(data.train), "dev_rows": len(data.dev),
               "test_rows": len(data.test), "seconds": round(time.perf_counter() - started, 1),
               "config": config_files.flat_record(config)}
    out = Path(config.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    return metrics

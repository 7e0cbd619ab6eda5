"""The contrastive trainer's input: the augmentation output checked before any worker starts
(`inspect_input`, which returns the run's `StepPlan`), the settings its views were made with
(`input_settings`, for the run's record), and one Ray Dataset per epoch in a seeded
order that does not depend on how Ray Data schedules blocks (`epoch_datasets`, ordered by
`sentray.contrastive.epoch_order`)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as pads

from sentray.contrastive.config import TrainConfig
from sentray.contrastive.epoch_order import EpochOrder
from sentray.contrastive.objectives import VIEW_COLUMNS
from sentray.contrastive.view_tokens import backbone_coverage
from sentray.encode.model_loading import load_tokenizer
from sentray.encode.plan import EncoderPlan
from sentray.kit import storage
from sentray.kit.output_folder import OutputFolder
from sentray.kit.settings_record import read_settings
from sentray.training.steps import StepPlan

SORT_ROWS = 200_000  # rows per partition of the epoch shuffle's sort
COVERAGE_ROWS = 50_000  # rows the backbone coverage looks at (a seeded sample beyond)


def inspect_input(config: TrainConfig) -> StepPlan:
    """Check the augmentation output before any worker starts: the columns the objective
    needs, no null text, at least one global batch. Reads Parquet metadata and the text columns'
    validity only. Returns the run's step plan."""
    location = storage.locate(config.input, config.s3_endpoint)
    if not storage.exists(location):
        raise FileNotFoundError(f"training input {config.input!r} does not exist; make it with "
                                "`python jobs/augment.py --output ...`")
    files = [f.path for f in storage.list_files(location, (".parquet",))]
    if not files:
        raise FileNotFoundError(f"training input {config.input!r} holds no .parquet files; it "
                                "should be the output folder of jobs/augment.py")
    dataset = pads.dataset(files, filesystem=location.filesystem, format="parquet")
    needed = ("id", *VIEW_COLUMNS[config.objective])
    missing = [c for c in needed if c not in dataset.schema.names]
    if missing:
        raise ValueError(f"training input {config.input!r} lacks columns {missing} that "
                         f"objective {config.objective!r} needs (it has {dataset.schema.names}); "
                         "it should be the output folder of jobs/augment.py")
    for column in needed:
        nulls = dataset.count_rows(filter=pc.field(column).is_null())
        if nulls:
            example = dataset.to_table(columns=["id"], filter=pc.field(column).is_null())
            raise ValueError(f"training input {config.input!r}: {nulls} rows have no "
                             f"{column!r} (e.g. id {example.column('id')[0].as_py()!r})")
    rows = dataset.count_rows()
    if rows < config.batch_size:
        raise ValueError(f"training input {config.input!r} has {rows} rows, fewer than one "
                         f"global batch ({config.batch_size})")
    return StepPlan(rows, config.batch_size, config.epochs, config.max_steps,
                    config.eval_steps, config.log_steps)


def input_settings(config: TrainConfig) -> dict:
    """What the input's views were made with, for the run's record: jobs/augment.py's
    `_settings.json` (the Z rule, the parsers, the seed), or, for an input that holds none
    (made before the job recorded its settings, or not by it), `{"unknown": why}`: never
    null, so a record always says which."""
    settings = read_settings(storage.locate(config.input, config.s3_endpoint))
    if settings is None:
        return {"unknown": f"the input {config.input!r} holds no {OutputFolder.SETTINGS}: it "
                           "was made before jobs/augment.py recorded its settings, or not by it"}
    return settings


def input_backbone_coverage(config: TrainConfig, encoder: EncoderPlan) -> dict | None:
    """For SIFTER: the share of rows whose Y keeps its whole backbone at the training length
    (the Y views of training are tokenized the same way), over the whole input up to
    COVERAGE_ROWS rows and over a seeded sample of COVERAGE_ROWS rows beyond: the driver
    tokenizes every row it looks at before any worker starts (all of Brown's 44,961 rows: 3.5
    min while two training runs shared this 2-core machine; 20x that on a 1M-row corpus, the
    cluster idle meanwhile)."""
    if config.objective != "sifter":
        return None
    location = storage.locate(config.input, config.s3_endpoint)
    files = [f.path for f in storage.list_files(location, (".parquet",))]
    table = pads.dataset(files, filesystem=location.filesystem, format="parquet").to_table(
        columns=["text", "backbone_text"])
    total = table.num_rows
    if total > COVERAGE_ROWS:  # rows in input order, a seeded choice: the same on every run
        table = table.take(np.sort(np.random.default_rng(0).choice(total, COVERAGE_ROWS,
                                                                   replace=False)))
    coverage = backbone_coverage(load_tokenizer(encoder.model),
                                 table.column("text").to_pylist(),
                                 table.column("backbone_text").to_pylist(), config.encoder.max_length)
    return {**coverage, "input_rows": total}


def epoch_datasets(config: TrainConfig, epochs: int, rows: int) -> dict:
    """One Ray Dataset per epoch: the view columns, in that epoch's seeded order."""
    import ray.data

    location = storage.locate(config.input, config.s3_endpoint)
    files = [f.path for f in storage.list_files(location, (".parquet",))]
    columns = ["id", *VIEW_COLUMNS[config.objective]]
    context = ray.data.DataContext.get_current()
    # Ray's defaults (200 sort partitions, a read task per few files) cost minutes on small
    # data: ~SORT_ROWS rows per read task and per sort partition instead. A dataset keeps a
    # copy of the context it was made under, so the process-wide one is restored after.
    partitions = max(1, math.ceil(rows / SORT_ROWS))
    saved = context.default_hash_shuffle_parallelism, context.enable_progress_bars
    context.default_hash_shuffle_parallelism = partitions
    context.enable_progress_bars = False  # one line per step from rank 0 says enough
    try:
        if partitions == 1:
            # The epoch is one sort partition: read and order it here, as one table, and hand
            # Ray the result. No read, map or sort task starts (Ray Data's distributed sort
            # costs 10-20 s of fixed cost on a small machine, and every task process seconds
            # more); the object store holds each epoch's copy (Brown: ~15 MB an epoch).
            table = pads.dataset(files, filesystem=location.filesystem,
                                 format="parquet").to_table(columns=columns)
            return {f"epoch_{epoch}": ray.data.from_arrow(
                EpochOrder(config.seed, epoch, sort=True)(table).select(columns[1:]))
                for epoch in range(epochs)}
        datasets = {}
        for epoch in range(epochs):
            dataset = ray.data.read_parquet(files, filesystem=location.filesystem,
                                            columns=columns, override_num_blocks=partitions)
            dataset = dataset.map_batches(EpochOrder(config.seed, epoch),
                                          batch_format="pyarrow").sort("order")
            datasets[f"epoch_{epoch}"] = dataset.select_columns(list(columns[1:]))
        return datasets
    finally:
        context.default_hash_shuffle_parallelism, context.enable_progress_bars = saved

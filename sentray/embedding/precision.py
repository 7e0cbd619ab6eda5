"""The precision an embedding job runs in, decided once in its driver for every actor:

- `auto` into an output that holds rows: the precision those rows were made in (one output
  never mixes two kinds of vector); else measured on this CPU for a job of this many rows and
  the actors' thread count (`sentray.encode.precision_probe`), or fp16 for a GPU pool;
- `int8`: the int8 model prepared once (`sentray.encode.int8`: the cache, else exported and
  calibrated here) and carried to every actor; an output that holds int8 rows keeps the model
  they were made with, `OUTPUT/_int8_model.onnx`, which a rerun and a query encoder read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging

from sentray.embedding.config import EmbedConfig
from sentray.kit import storage

logger = logging.getLogger(__name__)

INT8_MODEL_FILE = "_int8_model.onnx"
INT8_RECORD_FILE = "_int8_model.json"


def actor_threads(config: EmbedConfig, rows: int) -> int | None:
    """The torch threads each encoder of this job will run on: an actor's CPUs on Ray, this
    process's default in its own process (None)."""
    from sentray.corpus import running

    if running.in_process_chosen(config.pool, rows):
        return None
    return max(1, int(config.pool.cpus_per_actor))


def decide_precision(config: EmbedConfig, output: storage.Location, rows: int) -> EmbedConfig:
    """`config` (resolved) with its precision decided and, for int8, its model prepared."""
    from sentray.kit.settings_record import read_settings

    encoder = config.encoder
    stored = None if config.overwrite else read_settings(output)
    if encoder.precision == "auto":
        on_gpu = encoder.device.startswith("cuda")
        if stored and stored.get("precision"):
            precision = stored["precision"]
            logger.info("precision auto: %s, as the rows in %s were made", precision, output.uri)
        elif on_gpu:
            precision = "fp16"
            logger.info("precision auto: fp16 on the GPU pool (every CUDA GPU runs it fast)")
        else:
            decision = probe_where_actors_run(config, rows)
            precision = decision.precision
            if precision == "int8":
                encoder = dataclasses.replace(encoder, int8_model=decision.int8_model)
        encoder = dataclasses.replace(encoder, precision=precision)
    if encoder.precision == "int8" and encoder.int8_model is None:
        kept = None if config.overwrite else read_stored(output)
        if kept is not None and not made_for(kept, encoder):
            kept = None  # another calibration or model: a new one (and the rerun refused)
        encoder = dataclasses.replace(encoder, int8_model=kept or prepare(encoder))
    return dataclasses.replace(config, encoder=encoder)


def probe_where_actors_run(config: EmbedConfig, rows: int):
    """`auto` measured where the actors will run: on a cluster (an address, $RAY_ADDRESS, or
    a Ray this process is connected to), in a Ray task with an actor's CPUs, on a node that
    runs actors; else in this process (the job's own machine), on an actor's threads."""
    import os
    import sys

    from sentray.encode.precision_probe import probe

    threads = actor_threads(config, rows)
    address = config.pool.address or os.environ.get("RAY_ADDRESS")
    connected = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    if threads is None or not (address or connected):  # in this process, or on this machine
        return probe(config.encoder, rows=rows, threads=threads, build=build_encoder)
    import ray

    from sentray.kit.ray_cluster import init_ray

    init_ray(address)  # the job's own connection, which its driver goes on to use
    task = ray.remote(num_cpus=config.pool.cpus_per_actor)(_probe_task)
    decision, where = ray.get(task.remote(config.encoder, rows, threads))
    logger.info("precision auto measured in a Ray task on node %s (pid %d)", *where)
    return decision


def _probe_task(encoder, rows, threads):
    import os

    import ray

    from sentray.encode.precision_probe import probe

    node = ray.get_runtime_context().get_node_id()[:12]
    return probe(encoder, rows=rows, threads=threads, build=build_encoder), (node, os.getpid())


def build_encoder(config, **given):
    """A `SentenceEncoder` (torch imported only when the probe measures)."""
    from sentray.encode.encoder import SentenceEncoder

    return SentenceEncoder(config, **given)


def prepare(encoder):
    """The int8 model of `encoder`: from the cache (no torch imported), else prepared by an
    encoder built here."""
    from sentray.encode import int8

    identity, max_length = int8.model_identity(encoder)
    cached = int8.read_cached(int8.cache_key(encoder, max_length, identity))
    if cached is not None:
        logger.info("int8 model %s from the cache", cached.digest[:12])
        return cached
    from sentray.encode.encoder import SentenceEncoder

    return SentenceEncoder(dataclasses.replace(encoder, device="cpu")).int8.int8


def made_for(model, encoder) -> bool:
    """Whether a stored int8 model is the one `encoder` would prepare (same model files,
    pooling, head, max length and calibration; made by whichever tool versions made it)."""
    from sentray.encode import int8

    identity, max_length = int8.model_identity(encoder)
    _, calibration = int8.calibration_texts(encoder.int8_calibration,
                                            encoder.int8_calibration_rows)
    return model.key == int8.int8_key(identity, encoder, max_length, calibration, model.versions)


def read_stored(output: storage.Location):
    """The int8 model an output's rows were made with, if it holds one (checked whole)."""
    from sentray.encode.int8 import Int8Model

    try:
        with output.filesystem.open_input_stream(output.join(INT8_RECORD_FILE).path) as f:
            record = json.loads(f.read())
        with output.filesystem.open_input_stream(output.join(INT8_MODEL_FILE).path) as f:
            data = f.read()
    except (FileNotFoundError, OSError, ValueError):
        return None
    if hashlib.sha256(data).hexdigest() != record.get("digest"):
        raise ValueError(f"{output.uri}: {INT8_MODEL_FILE} does not match its record "
                         f"({INT8_RECORD_FILE}): the file is damaged; rerun with --overwrite")
    logger.info("int8 model %s: the one the rows in %s were made with", record["digest"][:12],
                output.uri)
    return Int8Model(**record, onnx=data)


def write_stored(output: storage.Location, model) -> None:
    """The int8 model beside the rows it makes (the model first: a record names a whole file)."""
    storage.write_bytes(output.join(INT8_MODEL_FILE), model.onnx)
    storage.write_bytes(output.join(INT8_RECORD_FILE),
                        json.dumps(model.record(), indent=1).encode())

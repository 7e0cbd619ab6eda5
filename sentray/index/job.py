"""`run_index`: the index job behind `jobs/index.py`. An embedding output's rows with a vector
go into a LanceDB table once each (the rows a table already holds are skipped, a killed run's
half-done version rolled back: `index_state`), then its ANN index is trained or extended
(`ann`). Rerun with nothing new, it writes nothing."""

from __future__ import annotations

import logging
import os
import time

from sentray.bulk_embedding.output import EmbeddingOutput
from sentray.corpus.sources import CorpusConfig, discover_sources
from sentray.index import ann, table_writing
from sentray.index.config import IndexConfig
from sentray.index.embedding_record import (
    EmbeddingDescription,
    check_same_embedding,
    describe_output,
)
from sentray.index.index_state import IndexState, roll_back
from sentray.index.plan import PartWork, add_run, plan
from sentray.index.run_claim import IndexRunClaim
from sentray.kit import storage

logger = logging.getLogger(__name__)


def run_index(config: IndexConfig) -> dict:
    """Index the embedding output `config.embeddings` into `config.table_uri`; returns the
    summary (rows added, rows without a vector left out, the table's rows, its ANN index)."""
    started = time.perf_counter()
    embeddings = EmbeddingOutput.at(config.embeddings, config.s3_endpoint)
    output = embeddings.location
    description = describe_output(embeddings)
    parts = embeddings.parts()
    if not parts:
        raise ValueError(f"{output.uri} holds no part files: an embedding output with no rows "
                         "(did jobs/embed.py finish?)")
    location = storage.locate(config.table_uri, config.s3_endpoint)
    with IndexRunClaim(location) as claim:  # one run at a time on a table
        return _index(config, output, description, parts, location, claim, started)


def _index(config: IndexConfig, output: storage.Location, description: EmbeddingDescription,
           parts: list, location: storage.Location, claim: IndexRunClaim,
           started: float) -> dict:
    """run_index, under this run's claim on the table."""
    database, name = table_writing.connect(config.table_uri, config.s3_endpoint)
    table, state = _open(database, name, location, description, config)
    work = plan(parts, state.indexed if state else {})
    texts, corpus = _text_sources(config)
    added = skipped = 0
    if work:
        if table is None:
            schema = table_writing.table_schema(description, _id_type(output, work[0]),
                                                texts is not None)
            table = database.create_table(name, schema=schema)
            state = IndexState(version=table.version, digest=description.digest)
            state.write(location, table.version)
        added, skipped = _append(table, work, output, location, state, texts, corpus, config,
                                 claim)
    if table is None:
        raise ValueError(f"{output.uri} holds no embedded rows to index")
    action = ann.index_action(config, description, state.rows, state.trained_rows,
                              ann.unindexed_rows(table) if state.trained_rows else 0)
    if action:
        claim.verify()
    if action == "train":
        state.partitions = ann.train(table, config, description, state.rows)
        state.trained_rows, state.index_type = state.rows, config.index_type
    elif action == "extend":
        ann.extend(table)
    if action:
        claim.verify()
        state.write(location, table.version)
    if not work and not action:
        logger.info("%s already holds every row of %s: nothing written", location.uri,
                    output.uri)
    return {"table": location.uri, "rows_added": added, "rows_without_vector": skipped,
            "rows": state.rows, "rows_without_vector_total": state.null_rows,
            "index": state.index_type if state.trained_rows else "none (exact search)",
            "index_action": action, "seconds": round(time.perf_counter() - started, 2)}


def _open(database, name: str, location: storage.Location, description: EmbeddingDescription,
          config: IndexConfig) -> tuple[object | None, IndexState | None]:
    """(table, its record), rolled back to the record; (None, None) when there is no table (or
    only a first run's, killed before its first commit was recorded, which is dropped)."""
    table = table_writing.open_table(database, name)
    if table is not None and config.overwrite:
        logger.info("--overwrite: dropping %s", location.uri)
        database.drop_table(name)
        table = None
    if table is None:
        return None, None
    stored = EmbeddingDescription.from_metadata(table.schema.metadata, location.uri)
    check_same_embedding(stored, description, location.uri)
    state = IndexState.read(location)
    if state is None:
        logger.info("%s has no record of a finished commit: a first run was stopped; "
                    "starting it again", location.uri)
        database.drop_table(name)
        return None, None
    roll_back(table, state, location)
    return table, state


def _append(table, work: list[PartWork], output: storage.Location, location: storage.Location,
            state: IndexState, texts, corpus, config: IndexConfig,
            claim: IndexRunClaim) -> tuple[int, int]:
    """Add the rows of `work`, a commit (and a record) per group, each while the table is
    still this run's; (rows added, rows without a vector)."""
    total = sum(part.rows for part in work)
    use_ray = config.write == "ray" or (config.write == "auto" and (
        bool(config.address or os.environ.get("RAY_ADDRESS")) or total > config.ray_rows))
    if use_ray:
        from sentray.kit.ray_cluster import init_ray

        init_ray(config.address)
    logger.info("adding %d rows of %d part files to %s (%s)", total, len(work), location.uri,
                "Ray Data" if use_ray else "this process")
    schema = table.schema
    added = skipped = 0
    for group in table_writing.commit_groups(work, config.rows_per_commit):
        claim.verify()
        before = table.count_rows()
        if use_ray:
            options = table_writing.lance_storage_options(location.uri, config.s3_endpoint)
            table_writing.append_ray(location.uri if location.is_s3 else location.path, group,
                                     output.filesystem, schema, texts, corpus, options,
                                     table.version)
            table.checkout_latest()
        else:
            table_writing.append_local(table, group, output.filesystem, schema, texts, corpus)
        rows = table.count_rows() - before
        read = sum(part.rows for part in group)
        added, skipped = added + rows, skipped + read - rows
        state.rows, state.null_rows = state.rows + rows, state.null_rows + read - rows
        for part in group:
            for a, b in part.runs:
                state.indexed[part.source_key] = add_run(state.indexed.get(part.source_key, []),
                                                         a, b)
        claim.verify()
        state.write(location, table.version)
        logger.info("%d/%d rows added (table version %d)", added + skipped, total,
                    table.version)
    return added, skipped


def _text_sources(config: IndexConfig):
    if config.text_from is None:
        return None, None
    corpus = CorpusConfig(input=config.text_from, text_column=config.text_column,
                          s3_endpoint=config.s3_endpoint)
    return {source.key: source for source in discover_sources(corpus)}, corpus


def _id_type(output: storage.Location, part: PartWork):
    import pyarrow.parquet as pq

    with output.filesystem.open_input_file(part.path) as handle:
        return pq.read_schema(handle).field("id").type

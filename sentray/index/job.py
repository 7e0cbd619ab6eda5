"""`run_index`: the index job behind `jobs/index.py`. An embedding output's rows with a vector
go into a LanceDB table once each (the rows a table already holds are skipped, a killed run's
half-done version rolled back: `index_state`), then its ANN index is trained or extended
(`ann`). Rerun with nothing new, it writes nothing."""

from __future__ import annotations

import logging
import os
import time

from sentray.bulk_embedding.output import EmbeddingDescription, EmbeddingOutput
from sentray.corpus.sources import CorpusConfig, discover_sources
from sentray.index import ann, table_writing
from sentray.index.config import IndexConfig
from sentray.index.index_state import IndexState
from sentray.index.rows_to_add import PartWork, parts_to_add
from sentray.index.run_claim import IndexRunClaim
from sentray.kit import storage

logger = logging.getLogger(__name__)


def run_index(config: IndexConfig) -> dict:
    """Index the embedding output `config.embeddings` into `config.table_uri`; returns the
    summary (rows added, rows without a vector left out, the table's rows, its ANN index)."""
    started = time.perf_counter()
    embeddings = EmbeddingOutput.at(config.embeddings, config.s3_endpoint)
    output = embeddings.location
    description = embeddings.describe()
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
    texts, corpus = _text_sources(config, description.settings)
    database, name = table_writing.connect(config.table_uri, config.s3_endpoint)
    table, state = table_writing.open_for_run(database, name, location, description,
                                              config.overwrite)
    work = parts_to_add(parts, state.indexed if state else {})
    added = skipped = 0
    if work:
        if table is None:
            schema = table_writing.table_schema(description, output.filesystem, work[0],
                                                texts is not None)
            table = database.create_table(name, schema=schema)
            state = IndexState(version=table.version, digest=description.digest)
            state.write(location, table.version)
        added, skipped = _append(table, work, output, location, state, texts, corpus,
                                 description.ranges if description.dequantized else None,
                                 config, claim)
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


def _append(table, work: list[PartWork], output: storage.Location, location: storage.Location,
            state: IndexState, texts, corpus, code_book, config: IndexConfig,
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
                                     output.filesystem, schema, texts, corpus, code_book,
                                     options, table.version)
            table.checkout_latest()
        else:
            table_writing.append_local(table, group, output.filesystem, schema, texts, corpus,
                                       code_book)
        rows = table.count_rows() - before
        read = sum(part.rows for part in group)
        added, skipped = added + rows, skipped + read - rows
        state.add(group, rows, read)
        claim.verify()
        state.write(location, table.version)
        logger.info("%d/%d rows added (table version %d)", added + skipped, total,
                    table.version)
    return added, skipped


def _text_sources(config: IndexConfig, settings: dict):
    """({source key: Source}, CorpusConfig) of --text-from, read as the embedding job read its
    input: its text column and format as the output's settings record them (--text-column
    overrides the column); (None, None) without --text-from."""
    if config.text_from is None:
        return None, None
    corpus = CorpusConfig(input=config.text_from, s3_endpoint=config.s3_endpoint,
                          text_column=config.text_column or settings.get("text_column") or "text",
                          format=settings.get("format") or "auto")
    return {source.key: source for source in discover_sources(corpus)}, corpus

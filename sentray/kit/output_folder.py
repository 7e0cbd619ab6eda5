"""`OutputFolder`: the files a job keeps at the top of its output folder (local or s3://), by
name. This is the one module that names them; every job writes them, and every reader reads
them, through it:

    _settings.json       what the rows (or a training run's model) depend on: a rerun with other
                         values stops (`sentray.kit.settings_record`)
    _summary.json        the row accounting and the record of every run that did work
    _config.yaml         the configuration of the last run that did work (`config_files`)
    _runs/<run>.json     the claim of each run writing the folder now
    _quantization.json   int8/uint8 embeddings: the code book every row and query is coded with
    _int8_model.onnx     --precision int8: the model every row and query is encoded by,
    _int8_model.json     and its record (what it was made from, its digest)
    _index.lance         the vector table `sentray index` makes of an embedding output

A file is written whole or not at all (`storage.write_bytes`). An embedding output's own records
(its code book, its int8 model, its description) are made and read by its subclass,
`sentray.bulk_embedding.output.EmbeddingOutput`; the corpus driver writes them, under the run's
claim (`sentray.corpus.output_records.prepare`)."""

from __future__ import annotations

import json

from sentray.kit import storage


class OutputFolder:
    """A job's output folder and the records at its top."""

    SETTINGS = "_settings.json"
    SUMMARY = "_summary.json"
    CONFIG = "_config.yaml"
    CLAIMS = "_runs"
    CODE_BOOK = "_quantization.json"
    ARTEFACT = "_int8_model.onnx"
    ARTEFACT_RECORD = "_int8_model.json"
    INDEX_TABLE = "_index.lance"
    # what a job's --overwrite deletes at the top of its folder, besides its part files
    JOB_FILES = (SUMMARY, CONFIG, SETTINGS, CODE_BOOK, ARTEFACT, ARTEFACT_RECORD)

    def __init__(self, location: storage.Location) -> None:
        self.location = location

    @classmethod
    def at(cls, uri: str, s3_endpoint: str | None = None) -> OutputFolder:
        return cls(storage.locate(uri, s3_endpoint))

    @property
    def uri(self) -> str:
        return self.location.uri

    def file(self, name: str) -> storage.Location:
        return self.location.join(name)

    def read_json(self, name: str) -> dict | None:
        """A JSON record of the folder, or None (missing, or not JSON)."""
        return storage.read_json(self.file(name))

    def write_json(self, name: str, values: dict) -> None:
        storage.write_json(self.file(name), values)

    def read_bytes(self, name: str) -> bytes | None:
        location = self.file(name)
        try:
            with location.filesystem.open_input_stream(location.path) as handle:
                return handle.read()
        except (FileNotFoundError, OSError):
            return None

    def write_bytes(self, name: str, data: bytes) -> None:
        storage.write_bytes(self.file(name), data)

    # -- the records --------------------------------------------------------------------------

    def settings_record(self) -> dict | None:
        """{"job": the job that made the folder, "settings": ...}, or None."""
        return self.read_json(self.SETTINGS)

    def write_settings_record(self, job: str, settings: dict) -> None:
        self.write_json(self.SETTINGS, {"job": job, "settings": settings})

    def summary(self) -> dict | None:
        return self.read_json(self.SUMMARY)

    def write_summary(self, summary: dict) -> None:
        self.write_bytes(self.SUMMARY, json.dumps(summary, indent=1, default=str).encode())

    def config_file(self) -> storage.Location:
        return self.file(self.CONFIG)

    def claims(self) -> storage.Location:
        """The folder of the running jobs' claims."""
        return self.file(self.CLAIMS)

    @classmethod
    def index_table(cls, folder_uri: str) -> str:
        """The URI of the default vector table of the folder at `folder_uri`."""
        return f"{folder_uri.rstrip('/')}/{cls.INDEX_TABLE}"

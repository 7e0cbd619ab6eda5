"""`QueryEncoder`: queries embedded the way an output's rows were, so that they can be compared
with the stored vectors: the model, pooling, head, max_length, precision (and its artefact),
dimension, normalization, dtype and code book its `EmbeddingDescription` records, through the
same `EmbedBatch` the job's actors ran. The one way to build the encoder of a query."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.actor import EmbedBatch, EmbedSpec
from sentray.bulk_embedding.output import EmbeddingDescription, EmbeddingOutput
from sentray.encode.plan import Artefact, EncoderPlan
from sentray.encode.runtimes import registry
from sentray.kit import storage
from sentray.precision import artefacts
from sentray.precision.plan import Kept, plan_encoder


class QueryEncoder:
    """Embeds texts into the stored form of an embedding output's rows, described by `output`:
    its folder (local or s3://), any one of its Parquet files (each file's schema metadata
    carries the settings and the code book: a file copied out of its output still says how), or
    its `EmbeddingDescription` as an index table stores it. `float_output`: the query as
    float32 before any quantization (the asymmetric side of an int8 or binary search).
    `precision`: None (the rows' own plan, exactly), or "bf16": the rows' model, read-out and
    runtime at bf16 (not the job's vectors: `sentray.index.query_precision` gates it against
    them before a search uses it)."""

    def __init__(self, output: str | EmbeddingDescription, *, device: str = "auto",
                 s3_endpoint: str | None = None, float_output: bool = False,
                 precision: str | None = None) -> None:
        if isinstance(output, str):
            output = EmbeddingOutput.at(output, s3_endpoint).describe()
        self.description = output
        if precision not in (None, "bf16"):
            raise ValueError(f"a query encoder's precision is the rows' own (None) or bf16, "
                             f"got {precision!r}")
        self.plan = (bf16_query_plan(output, device) if precision == "bf16" else
                     query_plan(output, storage.locate(output.embeddings, s3_endpoint), device))
        # a query encoder meets batches of every size and length: padded to a few shapes
        self.actor = EmbedBatch(EmbedSpec(self.plan, output.vector(float_output),
                                          None if float_output else output.ranges,
                                          bucket_shapes=True))

    @property
    def settings(self) -> dict:
        """The settings of the rows (the description's)."""
        return self.description.settings

    @property
    def ranges(self) -> vectors.CodeBook | None:
        """The code book of the rows (the description's)."""
        return self.description.ranges

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(N, width) vectors in the output's dtype; a text with nothing to embed (empty) gets
        a zero row."""
        return self.encode_counted(texts)[0]

    def warm_shapes(self, max_rows: int) -> int:
        """Run the encoder once at its largest batch shape (`max_rows` queries of its longest
        length) and at each common bucket shape of up to `max_rows` queries of up to 128
        tokens (`shape_buckets.common_shapes`): a runtime's buffers and kernels built now, not
        as queries meet them; then measure what a forward call costs beside its tokens, which
        decides how a batch is split (`ShapeBuckets.calibrate`); returns how many shapes."""
        import torch

        from sentray.encode.shape_buckets import ShapeBuckets, common_shapes

        encoder = self.actor.encoder
        if encoder is None:  # a stand-in forward: nothing built per shape
            return 0
        # the largest batch first: the runtime's buffers are sized once, by it
        shapes = [ShapeBuckets(self.plan.max_length).shape(max_rows, self.plan.max_length),
                  *common_shapes(max_rows, min(128, self.plan.max_length))]
        words = encoder.tokenize(["the city jury said the election was fair " * 64])[0]
        with torch.inference_mode():
            for rows, length in shapes:
                ids = torch.tensor([words[:length - 1] + words[-1:]] * rows)  # (rows, length)
                encoder.embed_tokens(ids, torch.ones_like(ids))
            self.actor.encode.buckets.calibrate(encoder.embed_tokens, words)
        return len(shapes)

    def encode_counted(self, texts: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        """`encode`'s vectors, and the tokens each text was encoded as (special tokens
        included, as the job counts them; a repeated text's copies count 0)."""
        n = len(texts)
        table = self.actor(pa.table({
            "id": [str(i) for i in range(n)], "text": list(texts), "read_error": [None] * n,
            "source": ["query"] * n, "row": list(range(n)), "source_rows": [n] * n}))
        column = table.column("embedding")
        width = column.type.list_size
        rows = [np.zeros(width) if v is None else v for v in column.to_pylist()]
        return (np.asarray(rows, dtype=column.type.value_type.to_pandas_dtype()),
                table.column("_tokens").to_pylist())


def query_plan(description: EmbeddingDescription, location: storage.Location,
               device: str) -> EncoderPlan:
    """The plan of the rows `description` describes, exactly: the recorded model, read-out and
    length, in the recorded precision on the recorded runtime with the very artefact the rows
    were encoded by (fp16, a GPU's, is fp32 on a CPU)."""
    settings = description.settings
    precision, runtime = settings.get("precision") or "fp32", settings.get("runtime")
    if precision == "fp16" and not device.startswith("cuda"):
        precision, runtime = "fp32", None  # fp16 is a GPU's; on a CPU the same model
    read_out = (settings["pooling"], settings["head"], settings["max_length"])
    artefact = (stored_artefact(location, settings["int8_model"], read_out)
                if settings.get("int8_model") else None)
    if precision == "fp32" and runtime and not registry.available(runtime):
        runtime = None  # exact either way: the rows' runtime is not installed here
    return plan_encoder(description.encoder(device, precision),
                        kept=Kept(precision, runtime, artefact, exact=True))


def bf16_runtime(description: EmbeddingDescription) -> str:
    """The runtime a bf16 query encoder runs on: the rows' own where it runs bf16 and is
    installed here (OpenVINO), else torch."""
    runtime = description.settings.get("runtime")
    if runtime and registry.runs(runtime, "bf16") and registry.available(runtime):
        return runtime
    return "torch"


def bf16_query_plan(description: EmbeddingDescription, device: str) -> EncoderPlan:
    """The rows' model, read-out and length at bf16, on `bf16_runtime`."""
    return plan_encoder(description.encoder(device, "bf16"),
                        kept=Kept("bf16", bf16_runtime(description), exact=True))


def stored_artefact(location: storage.Location, digest: str,
                    read_out: tuple[str, str | None, int]) -> Artefact:
    """The artefact of digest `digest`: beside the output's rows, else (one copied file) in
    this machine's cache, made for the rows' `read_out` (pooling, head, max_length)."""
    found = EmbeddingOutput(location).artefact()
    if found is None or found.digest != digest:
        found = artefacts.find_cached(digest, read_out)
    if found is None:
        raise FileNotFoundError(
            f"{location.uri}: its rows were encoded by int8 model {digest[:12]}, which is "
            "neither beside it nor in this machine's int8 cache: pass the output folder, "
            "which holds it")
    return found

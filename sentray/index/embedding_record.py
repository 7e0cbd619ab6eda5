"""An index table's vectors: their column and dtypes, and the refusal to add an output's vectors
to a table of another embedding. What the vectors are is the output's `EmbeddingDescription`
(`sentray.bulk_embedding.output`): the index job reads it from the output and stores it as the
table's metadata; the search builds its query encoder from it (`QueryEncoder`)."""

from __future__ import annotations

from sentray.bulk_embedding.output import EmbeddingDescription, EmbeddingSettings
from sentray.kit.settings_record import differences

# an index table's vector column: float outputs as stored; int8/uint8 codes dequantized to
# float32 through the output's code book (their query: a float32 vector); packed bits as uint8
# bytes (the distance: hamming): `EmbeddingDescription.vector_type`
VECTOR_COLUMN = "vector"


def check_same_embedding(table: EmbeddingDescription, output: EmbeddingDescription,
                         table_uri: str) -> None:
    """ValueError naming what differs and the fix, when the table at `table_uri` holds vectors
    of other settings than the output about to be added to it."""
    if table.digest == output.digest:
        return
    changed = differences(table.settings, EmbeddingSettings(output.settings))
    raise ValueError(
        f"{table_uri} holds vectors of another embedding (settings digest {table.digest[:12]} "
        f"!= {output.digest[:12]} of {output.embeddings}):\n  " + "\n  ".join(changed) +
        "\nrerun with --overwrite to index this output afresh, or give another --index-uri")

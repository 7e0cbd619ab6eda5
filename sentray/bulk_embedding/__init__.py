"""The bulk embedding job behind `jobs/embed.py` (a corpus in, one stored vector per row out):
its config (`config`), a row's three stages: its status and the token ids of its windows
(`tokenizing`, a CPU stage), the encoder actor that runs the model on them and the one actor of a
CPU pool that runs all three (`actor`), its vector as stored in the output's columns
(`storing`); and
the job on the corpus-job driver with its settings, summary and the code book of int8/uint8
outputs (`job`), its first rows written while its probe measures (`early_rows`); the stored
vector's truncation, normalization and quantization (`vectors`), long texts cut into windows
(`windows`), the output folder and how it is read and written
(`output`: `EmbeddingOutput`, and `EmbeddingDescription`, the one description of its vectors
that every reader takes), and the encoder of queries rebuilt from that description (`query`:
`QueryEncoder`), with the precision a search encodes its queries in, bf16 gated against the
rows' plan (`query_precision`).
Models, poolings and the encoder itself are `sentray.encode`'s; how it runs is decided by
`sentray.precision`.

May import: sentray.kit, sentray.corpus, sentray.encode, sentray.precision.
"""

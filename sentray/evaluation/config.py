"""`EvaluateConfig`: one STS evaluation (jobs/evaluate.py), an encoder scored on the 7 tasks."""

from __future__ import annotations

from dataclasses import dataclass, field

from sentray.encode.config import EncoderConfig
from sentray.encode.pooling_catalog import DITTO_POOLINGS
from sentray.evaluation.senteval import parse_tasks


@dataclass(frozen=True)
class EvaluateConfig:
    """One STS evaluation (jobs/evaluate.py): an encoder scored on the 7 tasks."""

    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    tasks: str = "all"  # comma-separated, from STS12, ..., STSBenchmark, SICKRelatedness
    data_dir: str | None = None  # SentEval data/downstream folder (default: $SENTRAY_DATA_DIR)
    output: str = "out/evaluate"  # folder for results.json (and the head grid); was --out
    search_head: bool = False  # score every layer-head on STS-B dev, keep the best, then evaluate
    # score each task (and the head search) on its first N pairs only: a quick check of a
    # set-up, not the tasks' scores
    max_pairs: int | None = None
    # also write the model with this pooling (and Ditto head, searched or given) as a
    # sentence-transformers directory: SentenceTransformer(DIR, trust_remote_code=True) for Ditto
    export_st: str | None = None

    def __post_init__(self) -> None:
        parse_tasks(self.tasks)
        if self.max_pairs is not None and self.max_pairs < 3:
            raise ValueError(f"max_pairs must be at least 3, got {self.max_pairs}")
        if self.search_head and self.encoder.pooling not in DITTO_POOLINGS:
            raise ValueError(f"--search-head chooses a Ditto head; use --pooling ditto (or "
                             f"ditto_last, ...), not {self.encoder.pooling!r}")

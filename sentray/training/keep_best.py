"""`EvalHistory`: a run's evaluation records in order, and the best of them by one score."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class EvalHistory:
    """Evaluation records ({"step": ..., score: ..., ...}) of a run, the best by `score`
    (highest; the earliest of ties) and, where the caller keeps it, the state it had then.
    Records without the score (a worker that does not evaluate) are kept but never best."""

    score: str
    records: list[dict] = field(default_factory=list)
    best: dict | None = None
    best_state: Any = None

    @classmethod
    def restore(cls, score: str, records: list[dict]) -> EvalHistory:
        """The history of a run restarted from a checkpoint holding `records`."""
        history = cls(score)
        for record in records:
            history.add(record)
        return history

    def add(self, record: dict, state: Any = None) -> bool:
        """Append `record`; True (keeping `state`; a callable is called for it then) when it is
        the best so far."""
        self.records.append(record)
        if self.score not in record or (self.best is not None
                                        and record[self.score] <= self.best[self.score]):
            return False
        self.best = record
        self.best_state = state() if callable(state) else state
        return True

    @property
    def best_score(self) -> float | None:
        return None if self.best is None else self.best[self.score]

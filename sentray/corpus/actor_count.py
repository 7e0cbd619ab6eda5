"""`ActorCount`: how many actors a corpus job's pool has, written as one flag value: `N` (a
fixed pool of N actors) or `MIN-MAX` (a pool that Ray Data starts at MIN actors and grows up to
MAX while it has work queued and the cluster has room for another actor, shrinking again when
actors sit idle; on an autoscaling cluster the autoscaler adds nodes for the actors asked for,
so nodes that arrive later are used). Either way every actor runs the same callable class on
the same settings, so the rows, their accounting and their vectors do not depend on how many
actors made them."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPEC = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


@dataclass(frozen=True)
class ActorCount:
    minimum: int
    maximum: int

    METAVAR = "N|MIN-MAX"

    def __post_init__(self) -> None:
        if self.minimum < 1 or self.maximum < self.minimum:
            raise ValueError(f"actors must be N >= 1 or MIN-MAX with 1 <= MIN <= MAX, got "
                             f"{self.spec()}")

    @classmethod
    def parse(cls, spec: str | int) -> ActorCount:
        """'2' -> a fixed pool of 2; '1-8' -> a pool of 1 to 8 actors."""
        match = _SPEC.match(str(spec))
        if match is None:
            raise ValueError(f"actors must be N or MIN-MAX (e.g. 2 or 1-8), got {spec!r}")
        low = int(match.group(1))
        return cls(low, int(match.group(2)) if match.group(2) else low)

    def spec(self) -> str:
        return str(self.minimum) if self.fixed else f"{self.minimum}-{self.maximum}"

    @property
    def fixed(self) -> bool:
        return self.minimum == self.maximum

    def strategy(self):
        """Ray Data's `ActorPoolStrategy` for this count."""
        from ray.data import ActorPoolStrategy

        if self.fixed:
            return ActorPoolStrategy(size=self.minimum)
        return ActorPoolStrategy(min_size=self.minimum, max_size=self.maximum)

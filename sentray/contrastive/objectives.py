"""What each objective trains on, without torch (configs validate against it): the objectives,
SIFTER's view pairs and their weights (SIFTER eq. 2's lambdas), the views a step encodes and
the columns of the augmentation output (jobs/augment.py) each view is read from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

Objective = Literal["sifter", "simcse"]
OBJECTIVES: tuple[str, ...] = ("sifter", "simcse")


# (weight field, anchor view, candidate view); views: x, y (backbone), z (pruned), x2 (x again)
SIFTER_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("xy", "x", "y"), ("xz", "x", "z"), ("yz", "y", "z"), ("xx", "x", "x2"))
SIFTER_VIEWS: tuple[str, ...] = ("x", "y", "z", "x2")


@dataclass(frozen=True)
class SifterWeights:
    """lambda of each pair in SIFTER eq. 2; the paper uses 1 for all three. `xx` weighs
    SimCSE's dropout pair (X, X'), not in the paper (0)."""

    METAVAR: ClassVar[str] = "XY,XZ,YZ[,XX]"  # how the flag spells it

    xy: float = 1.0
    xz: float = 1.0
    yz: float = 1.0
    xx: float = 0.0

    def __post_init__(self) -> None:
        values = [self.xy, self.xz, self.yz, self.xx]
        if min(values) < 0 or sum(values) == 0:
            raise ValueError(f"SIFTER weights must be >= 0 and not all 0, got {self}")

    @classmethod
    def parse(cls, spec: str) -> SifterWeights:
        """From `xy,xz,yz` or `xy,xz,yz,xx`, e.g. "1,0,0" (X-Y alone)."""
        try:
            values = [float(part) for part in spec.split(",")]
            if len(values) not in (3, 4):
                raise ValueError(f"{len(values)} numbers")
        except ValueError as exc:
            raise ValueError(f"lambdas take 3 or 4 numbers like 1,1,1 (X-Y, X-Z, Y-Z[, X-X']), "
                             f"got {spec!r}: {exc}") from exc
        return cls(*values)

    def spec(self) -> str:
        """The inverse of `parse`: "1,1,1,0"."""
        return ",".join(f"{v:g}" for v in (self.xy, self.xz, self.yz, self.xx))

    @property
    def views(self) -> tuple[str, ...]:
        """The views the weighted pairs need, in SIFTER_VIEWS order: only those are encoded."""
        used = {v for key, a, b in SIFTER_PAIRS if getattr(self, key) for v in (a, b)}
        return tuple(v for v in SIFTER_VIEWS if v in used)


PAPER_WEIGHTS = SifterWeights()  # 1, 1, 1: the paper's lambdas


@dataclass(frozen=True)
class PaperSettings:
    """What each objective's own paper trains with, where the two papers differ: the default of
    a run that does not say (`TrainConfig.resolved`)."""

    dropout: float  # the encoder's dropout while training
    lr: float  # AdamW learning rate
    source: str  # where the paper says so


# Both papers: batch 64, tau 0.05, one epoch, STS-B dev every 125 steps, max_length 32.
PAPER_SETTINGS: dict[str, PaperSettings] = {
    # SIFTER §5.3 (../shared/papers/sifter.txt): "learning rate = 1e-5 and batch size = 64 ...
    # the dropout rate is p = 0.15 for all the experiments"
    "sifter": PaperSettings(0.15, 1e-5, "SIFTER §5.3"),
    # SimCSE (Gao et al. 2021), unsupervised BERT-base: Appendix A's batch 64 and lr 3e-5 (its
    # run_unsup_example.sh); dropout p = 0.1, BERT's own, which §3 finds best (Table 2)
    "simcse": PaperSettings(0.1, 3e-5, "SimCSE §3 and Appendix A, unsupervised BERT-base"),
}

# Columns of the augmentation output (jobs/augment.py) each objective reads.
VIEW_COLUMNS: dict[str, tuple[str, ...]] = {
    "sifter": ("text", "backbone_text", "pruned_text"),  # X, Y (+ backbone), Z (pruned)
    "simcse": ("text",),  # X, encoded twice under two dropout masks
}
# The column of each SIFTER view (SIFTER_VIEWS); x2 is X under another mask.
SIFTER_VIEW_COLUMN = {"x": "text", "y": "backbone_text", "z": "pruned_text", "x2": "text"}


def objective_views(objective: Objective, weights: SifterWeights | None = None
                    ) -> tuple[str, ...]:
    """The views one step encodes, in order: SIFTER's weighted views, SimCSE's (x, x2)."""
    if objective == "sifter":
        return (weights or SifterWeights()).views
    return ("x", "x2")


def candidate_views(objective: Objective, weights: SifterWeights | None = None
                    ) -> frozenset[str]:
    """The views some weighted pair takes its candidates (positives and negatives) from: the
    only ones a worker gathers from the others. SIFTER's X is an anchor only; SimCSE's x2."""
    if objective == "sifter":
        weights = weights or SifterWeights()
        return frozenset(b for key, _, b in SIFTER_PAIRS if getattr(weights, key))
    return frozenset({"x2"})

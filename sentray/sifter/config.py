"""`AugmentConfig`: the SIFTER augmentation job (jobs/augment.py), validated on construction."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from sentray.corpus.actor_pool import ActorPoolConfig
from sentray.corpus.sources import CorpusConfig
from sentray.kit.validation import check_choices
from sentray.sifter.parsers import SPACY_MODEL
from sentray.sifter.positives import TripleChoice, ZRule


@dataclass(frozen=True)
class AugmentConfig:
    """The augmentation job. Validated on construction, before Ray starts."""

    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    output: str = "out/augmented"  # output folder, local or s3://
    rejects: str | None = None  # folder for rejected rows and their reason (default: OUTPUT-rejects)
    # spacy: spaCy en_core_web_sm + triplet-extract OpenIE (offline); corenlp: Stanford CoreNLP's
    # OpenIE and parser via stanza, a server per node (CORENLP_HOME)
    backend: Literal["spacy", "corenlp"] = "spacy"
    corenlp_url: str = "http://localhost:9000"  # the CoreNLP server on each node (corenlp backend)
    spacy_model: str = SPACY_MODEL  # spaCy pipeline: a package name or a folder
    triple: TripleChoice = "random"  # which OpenIE triple is the backbone (random, as the paper)
    seed: int = 0  # seed of the random triple choice, per (seed, row id)
    # Z's deletions: penn (articles, CC, personal/possessive pronouns by Penn Treebank tag, never a
    # negation or quantifier; the README's rule) or ud (the rule before issue 25, every UD PRON,
    # CCONJ, SCONJ: remakes the first SIFTER study's inputs exactly)
    z_rule: ZRule = "penn"
    min_words: int = 3  # drop sentences with fewer words
    keep_short: bool = False  # turn the min_words rule off
    # keep a sentence whose last word is capitalized (and the sentence after it), which the
    # paper's corpus filter drops
    keep_capitalized_tail: bool = False
    max_parse_chars: int = 1000  # longer texts are parsed from a truncated copy
    openie_entailment: bool = False  # triplet-extract's natural-logic entailment stage (slower)
    # parsing is slower than embedding: smaller blocks keep both actors busy
    pool: ActorPoolConfig = field(default_factory=lambda: ActorPoolConfig(rows_per_batch=256))
    # delete this job's files in OUTPUT and REJECTS (and only those) first, and start afresh;
    # without it a rerun whose settings would change the rows stops and says which
    overwrite: bool = False

    def __post_init__(self) -> None:
        check_choices(self)
        if not self.output:
            raise ValueError("no output given")
        if self.pool.num_gpus:
            raise ValueError(f"the augmentation runs on CPUs: num_gpus must be 0, got "
                             f"{self.pool.num_gpus}")
        if self.min_words < 1 or self.max_parse_chars < 10:
            raise ValueError("min_words must be >= 1 and max_parse_chars >= 10")
        if self.rejects_folder.rstrip("/") == self.output.rstrip("/"):
            raise ValueError("rejects and output must be different folders")
        if not self.corpus.with_previous_text:  # the capitalized-last-word rule needs it
            object.__setattr__(self, "corpus",
                               dataclasses.replace(self.corpus, with_previous_text=True))

    @property
    def rejects_folder(self) -> str:
        """`rejects`, else OUTPUT-rejects."""
        return self.rejects or self.output.rstrip("/") + "-rejects"

    def resolved(self) -> AugmentConfig:
        """This config with the rejects folder decided (as `_config.yaml` records it)."""
        return dataclasses.replace(self, rejects=self.rejects_folder)

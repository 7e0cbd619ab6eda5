"""Issue 55's second labelling found a quarter of the sampled backbones were not sentences
(docs/sifter-views.md): OpenIE fragments and dependency backbones that dropped an auxiliary, an
object or a subject. The units that complete them (a verb with all its auxiliaries, a verb with
its direct object) and the last check (`sentence_units.is_sentence`: a finite verb, its subject,
an "and" with its conjunct, no relative pronoun alone), on spaCy's parse and on CoreNLP-shaped
ones. The rows are the labelling's own (experiments/audit/second-labelling-55.json)."""

from __future__ import annotations

import pytest
from test_corenlp import ud_sentence

from sentray.sifter.corenlp import backbone_from_annotation
from sentray.sifter.positives import Triple, augment, choose_backbone, row_rng
from sentray.sifter.scope import missing_words
from sentray.sifter.sentence_units import is_sentence

pytest.importorskip("spacy", reason="the openie extra is not installed")


def chosen(nlp, sentence: str, triples: list[tuple[str, str, str]], seed: int = 0):
    made = augment(sentence, nlp(sentence), [Triple(*t) for t in triples],
                   rng=row_rng(seed, "t:1"))
    return made.backbone, made.backbone_source


@pytest.mark.parametrize("sentence,triples,backbone,source", [
    # the labelling's "The process can accelerated." (OpenIE dropped "be")
    ("The process can be accelerated by heating the mixture.",
     [("The process", "can accelerated by", "heating the mixture")],
     "Process can be accelerated by heating mixture.", "dependency"),
    # "Which means it is safe." stood alone; with its noun it is a sentence
    ("The motor has the seal of the laboratories, which means it is safe.",
     [("which", "means", "it is safe")], "Motor has seal.", "dependency"),
    ("The motor has the seal of the laboratories, which means it is safe.",
     [("which", "means", "it is safe"), ("The motor", "has", "the seal")],
     "The motor has the seal.", "openie"),
    # no finite verb: "Report ending in February or March."
    ("The report ending in February or March shows what is happening.",
     [("Report", "ending in", "February or March")], "Report shows what is happening.",
     "dependency"),
    # the subject of "can not handle" was lost: "The President said can not now handle ..."
    ("The President said the schools cannot now handle the load.",
     [("The President", "said can not now handle", "the load")],
     "President said schools can not now handle load.", "dependency"),
    # an object the dependency backbone dropped: "He tied and gagged."
    ("He tied and gagged the man.", [], "He tied and gagged man.", "dependency"),
    # an "and" whose conjunct OpenIE left out
    ("The advantages of a fiscal year and a calendar are great.",
     [("The advantages of a fiscal year and", "are", "great")], "Advantages are great.",
     "dependency"),
])
def test_backbones_that_were_not_sentences(nlp, sentence, triples, backbone, source):
    for seed in range(4):
        assert chosen(nlp, sentence, triples, seed) == (backbone, source)


@pytest.mark.parametrize("sentence,backbone", [
    ("Close the door before you leave.", "Close door before you leave."),  # an imperative
    ("But I insist upon believing that it may be regained.",  # a first "but"
     "But I insist upon believing."),
    ("Nor does a medium know how to interpret it.", "Nor does medium know how to interpret it."),
])
def test_sentences_the_check_lets_through(nlp, sentence, backbone):
    assert chosen(nlp, sentence, []) == (backbone, "dependency")


@pytest.mark.parametrize("sentence", [
    "All the time in the world.", "His nose up.", "Something so incredible --"])
def test_x_without_a_verb_has_no_backbone(nlp, sentence):
    """No backbone of X can be a sentence where X is none: Y = X (source "none")."""
    assert chosen(nlp, sentence, [("His", "nose", "up")]) == ("", "none")


# the same on CoreNLP's Universal Dependencies ("aux:pass", "nsubj:pass", "acl:relcl")
ACCELERATED = ud_sentence(
    "The process can be accelerated by heat .", "DT NN MD VB VBN IN NN .",
    [("det", 2, 1), ("nsubj:pass", 5, 2), ("aux", 5, 3), ("aux:pass", 5, 4), ("ROOT", 0, 5),
     ("case", 7, 6), ("obl", 5, 7), ("punct", 5, 8)],
    [("The process", "can accelerated by", "heat")])
WHICH_MEANS = ud_sentence(
    "The motor has a seal , which means it is safe .", "DT NN VBZ DT NN , WDT VBZ PRP VBZ JJ .",
    [("det", 2, 1), ("nsubj", 3, 2), ("ROOT", 0, 3), ("det", 5, 4), ("obj", 3, 5),
     ("punct", 5, 6), ("nsubj", 8, 7), ("acl:relcl", 5, 8), ("nsubj", 11, 9), ("cop", 11, 10),
     ("ccomp", 8, 11), ("punct", 3, 12)],
    [("which", "means", "it is safe")])


@pytest.mark.parametrize("sentence,text,backbone", [
    (ACCELERATED, "The process can be accelerated by heat.", "Process can be accelerated by heat."),
    (WHICH_MEANS, "The motor has a seal, which means it is safe.", "Motor has seal."),
])
def test_the_same_on_corenlp_parses(sentence, text, backbone):
    triples, parse = backbone_from_annotation({"sentences": [sentence]})
    if sentence is ACCELERATED:  # "process can accelerated" (OpenIE's) lacks "be"
        assert missing_words(parse, {1, 2, 4}) == [3]
    else:  # "which means it is safe" without "seal"
        assert not is_sentence(parse, {6, 7, 8, 9, 10})
    for seed in range(4):
        assert choose_backbone(text, parse, triples, "random", row_rng(seed, "x")) == (
            backbone, None, "dependency")

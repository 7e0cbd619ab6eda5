"""Issue 55 on spaCy's parse: comparative and proportional quantifiers are operators, kept whole
with their numbers (`scope.QUANTIFIER_PHRASES`); implicative verbs are operators; a backbone is
a sentence (`sentence_units`: "to" with its verb, a control verb with its complement, a
preposition with its object). The issue's six rows, held-out sentences of the same kinds, and a
property test over generated sentences whose quantifier and noun are known from the grammar that
made them. The same constructions on CoreNLP-shaped parses: tests/sifter/test_corenlp.py."""

from __future__ import annotations

import pytest

from sentray.sifter.dependency_parse import DependencyParse
from sentray.sifter.positives import Triple, augment, dependency_backbone, row_rng
from sentray.sifter.scope import missing_words, operators
from sentray.sifter.triple_words import drops_scope, triple_positions

pytest.importorskip("spacy", reason="the openie extra is not installed")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def chosen(nlp, sentence: str, triples: list[tuple[str, str, str]], seed: int = 0) -> str:
    return augment(sentence, nlp(sentence), [Triple(*t) for t in triples],
                   rng=row_rng(seed, "t:1")).backbone


# The issue's six rows: the backbone main (59028b3) appended, the triples triplet-extract 0.5
# gives (its repeats of X; the first row's is the one main took), the backbone now.
@pytest.mark.parametrize("sentence,triples,backbone", [
    ("At most three students solved the final problem.",  # was "Most three students solved
     [("most three students", "solved", "the final problem")],  # the final problem."
     "At most three students solved final problem."),
    ("Less than half of the voters supported the new law.",  # was "Half supported law."
     [("Less than half of the voters", "supported", "the new law"), ("half", "supported", "law")],
     "Less than half of voters supported new law."),
    ("He pretended to be asleep when his mother came in.",  # was "He pretended be."
     [("He", "pretended", "to be asleep when his mother came in")], "He pretended to be asleep."),
    ("She forgot to lock the door before leaving for work.",  # was "She forgot lock."
     [("She", "forgot", "to lock the door before leaving for work"), ("She", "lock", "door")],
     "She forgot to lock door before leaving for work."),
    ("Only a handful of soldiers returned from the expedition.",  # "Handful returned from."
     [("Only a handful of soldiers", "returned from", "the expedition"),
      ("handful", "returned from", "expedition")],
     "Only handful of soldiers returned from expedition."),
    ("Not a single letter arrived during the winter.",  # "Not single letter arrived during."
     [("Not a single letter", "arrived during", "the winter")],
     "Not single letter arrived during winter."),
])
def test_the_issue_rows_keep_their_meaning_as_sentences(nlp, sentence, triples, backbone):
    for seed in range(6):
        assert chosen(nlp, sentence, triples, seed) == backbone


# Held out: sentences of the same kinds that no rule was written from; the dependency backbone.
@pytest.mark.parametrize("sentence,backbone", [
    ("At least twenty people came to the meeting.", "At least twenty people came to meeting."),
    ("At most two of the lamps were working in the hall.",  # downward: "of lamps" stays
     "At most two of lamps were working in hall."),
    ("Fewer than ten members voted for the motion.", "Fewer than ten members voted for motion."),
    ("At most a dozen ships crossed the strait that year.",  # "a dozen": a number
     "At most a dozen ships crossed strait that year."),
    ("No more than five cars were parked outside the bank.",
     "No more than five cars were parked outside bank."),
    ("No fewer than forty ships sailed from the port.",
     "No fewer than forty ships sailed from port."),
    ("Up to 20 people attended the talk.", "Up to 20 people attended talk."),
    ("More than half of the money was lost in the fire.", "More than half was lost in fire."),
    ("A third of the budget went to defence.", "A third went to defence."),
    ("Most students passed the exam.", "Most students passed exam."),
    ("Nearly every house had a garden.", "Nearly every house had garden."),
    ("Only the youngest child stayed at home.", "Only youngest child stayed at home."),
    ("Exactly three boys were late for school.", "Exactly three boys were late for school."),
    ("She managed to open the window.", "She managed to open window."),
    ("He seemed to be happy with the result.", "He seemed to be happy."),
    ("They tried to reach the summit before noon.", "They tried to reach summit."),
    ("He neglected to mention the fee.", "He neglected to mention fee."),
    ("She failed to notice the error in the report.", "She failed to notice error in report."),
    ("The house he lived in was old.", "House was old."),
    # found by the second labelling (issue 55): a particle, a comparative, an approximator
    ("Hub picked up the telephone.", "Hub picked up telephone."),
    ("These systems are more expensive than forced air systems.",
     "Systems are more expensive than forced air systems."),
    ("Frank had been given about half his legacy to use in a business venture.",
     "Frank had been given about half legacy."),
])
def test_held_out_sentences(nlp, sentence, backbone):
    assert dependency_backbone(nlp(sentence)) == backbone


def test_why_at_most_slipped_past(nlp):
    """spaCy hangs "At" on the verb as a preposition with no object and "most" on the number:
    nothing tied them, and "at" (Penn `IN`) is a function word, so a triple without it lacked
    nothing. Now "at most three" is one operator; the triple lacks "At"."""
    sentence = "At most three students solved the final problem."
    parse = DependencyParse.from_spacy(nlp(sentence))
    assert [(t.text, t.dep, parse.tokens[t.head].text) for t in parse.tokens[:3]] == [
        ("At", "prep", "solved"), ("most", "advmod", "three"), ("three", "nummod", "students")]
    (op,) = operators(parse)
    assert (op.words, parse.tokens[op.anchor].text, op.kind) == ((0, 1, 2), "students", "downward")
    parts = ("most three students", "solved", "the final problem")
    assert [parse.tokens[t].text for t in missing_words(parse, triple_positions(parse, parts))] \
        == ["At"]


@pytest.mark.parametrize("sentence", [
    "He walked up to the house.",  # "up to" with no number: a path
    "She is the most beautiful girl in town.",  # a superlative
    "He was the only child of his parents.",  # an adjective
    "He is taller than his brother.",  # a comparison, no quantity
    "He walked about the town.",  # "about" with no quantity
])
def test_words_that_are_not_quantifiers_here(nlp, sentence):
    assert not [op for op in operators(DependencyParse.from_spacy(nlp(sentence))) if op.words]


@pytest.mark.parametrize("sentence,triple,drops", [
    # implicative verbs: "forgot to" does not entail the locking
    ("She forgot to lock the door.", ("She", "lock", "the door"), True),
    ("She forgot to lock the door.", ("She", "forgot to lock", "the door"), False),
    ("He neglected to pay the rent.", ("He", "pay", "the rent"), True),
    ("She managed to open the window.", ("She", "open", "the window"), True),
    # a control verb keeps its complement whole: "to" and the verb
    ("He pretended to be asleep.", ("He", "pretended", "be"), True),
    # a preposition keeps its object, an object its preposition
    ("The cat sat on the mat.", ("cat", "sat", "mat"), True),
    ("The cat sat on the mat.", ("cat", "sat on", "mat"), False),
    # a quantifier whole: "least" is not "at least"
    ("At least ten people came.", ("least ten people", "came", "here"), True),
    ("Most of the guests left early.", ("guests", "left", "early"), True),
])
def test_triples_that_are_not_sentences_or_lose_an_operator(nlp, sentence, triple, drops):
    assert drops_scope(DependencyParse.from_spacy(nlp(sentence)), triple) == drops


# -- property: generated sentences whose quantifier and noun the grammar knows --------------------

QUANTIFIERS = ["at most", "at least", "no more than", "no fewer than", "fewer than", "more than",
               "up to", "exactly", "only"]
NUMBERS = ["three", "five", "twenty", "12"]
NOUNS = ["students", "farmers", "soldiers", "workers"]
VERBS = ["painted", "visited", "cleaned", "guarded"]
BASE_VERBS = ["paint", "visit", "clean", "guard"]
PREPOSITIONS = ["in", "during", "after", "near"]
PLACES = ["town", "winter", "war", "river"]
CONTROL = ["pretended", "forgot", "managed", "seemed", "failed", "neglected", "tried"]
OBJECTS = ["house", "bridge", "station", "garden"]
PREPOSITION_WORDS = {"in", "on", "at", "to", "of", "for", "from", "with", "by", "during", "after",
                     "near", "before", "into", "about"}


@st.composite
def quantified_sentences(draw):
    """(sentence, the quantifier's words, its noun): "At most three students painted the
    house in town."."""
    quantifier = draw(st.sampled_from(QUANTIFIERS))
    words = [*quantifier.split(), draw(st.sampled_from(NUMBERS)), draw(st.sampled_from(NOUNS)),
             draw(st.sampled_from(VERBS)), "the", draw(st.sampled_from(OBJECTS)),
             draw(st.sampled_from(PREPOSITIONS)), draw(st.sampled_from(PLACES))]
    sentence = " ".join(words) + "."
    return sentence[0].upper() + sentence[1:], words[:len(quantifier.split()) + 1], words[
        len(quantifier.split()) + 1]


@st.composite
def control_sentences(draw):
    """(sentence, (), None): "The farmers pretended to paint the house in winter."."""
    control = draw(st.sampled_from(CONTROL))
    complement = ["be", "happy"] if control == "seemed" else [
        draw(st.sampled_from(BASE_VERBS)), "the", draw(st.sampled_from(OBJECTS))]
    words = ["The", draw(st.sampled_from(NOUNS)), control, "to", *complement,
             draw(st.sampled_from(PREPOSITIONS)), draw(st.sampled_from(PLACES))]
    return " ".join(words) + ".", [], None


def _damaged_triples(sentence: str, cuts) -> list[tuple[str, str, str]]:
    """Triples of X's words with some left out (the quantifier's first word, "to", a
    preposition's object), as a careless extractor might give."""
    words = sentence.rstrip(".").split()
    triples = []
    for drop_first, drop_to, drop_last in cuts:
        kept = words[1:] if drop_first else list(words)
        kept = [w for w in kept if not (drop_to and w == "to")]
        kept = kept[:-1] if drop_last else kept
        if len(kept) >= 3:
            triples.append((" ".join(kept[:2]), kept[2], " ".join(kept[3:]) or kept[-1]))
    return triples


@settings(max_examples=60, deadline=None)
@given(st.one_of(quantified_sentences(), control_sentences()),
       st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), max_size=3),
       st.integers(0, 2**16))
def test_no_backbone_drops_a_quantifier_word_or_dangles(nlp, made, cuts, seed):
    """For any generated X and triples that leave words out, an appended backbone that keeps
    the quantified noun keeps every word of the quantifier, in order, and no backbone ends on a
    preposition or a bare "to"."""
    sentence, quantifier, noun = made
    backbone = chosen(nlp, sentence, _damaged_triples(sentence, cuts), seed)
    words = backbone.rstrip(".").lower().split()
    if not words:
        return
    if noun in words:
        at = words.index(noun)
        assert words[at - len(quantifier):at] == [w.lower() for w in quantifier], (sentence,
                                                                                    backbone)
    assert words[-1] not in PREPOSITION_WORDS | {"to"}, (sentence, backbone)

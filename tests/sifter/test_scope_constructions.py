"""Issue 43's constructions on spaCy's parse: a negated quantifier, a downward-entailing word, a
restrictive modifier under a negation, a clause under wish/hope/if/unless/whether/deny, each
giving a Y that X entails or no backbone; Z on the same constructions; and a property test over
generated sentences whose scope is known from the grammar that made them (not from the code
under test). The same constructions on CoreNLP's parse: tests/sifter/test_corenlp.py."""

from __future__ import annotations

import pytest

from sentray.sifter.positives import Triple, augment, dependency_backbone, row_rng

pytest.importorskip("spacy", reason="the openie extra is not installed")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def chosen(nlp, sentence: str, triples: list[tuple[str, str, str]], seed: int = 0) -> str:
    out = augment(sentence, nlp(sentence), [Triple(*t) for t in triples],
                  rng=row_rng(seed, "t:1"))
    return out.backbone


# The issue's six rows, with the triples triplet-extract 0.5 gives for them (its repeats of X
# left out) and the wrong backbone main gave before; the backbone now, or '' for none.
@pytest.mark.parametrize("sentence,triples,backbone", [
    ("Not all of the students passed the exam.",  # was "All passed exam."
     [("all", "passed", "exam"), ("Not all of students", "passed", "exam")],
     "Not all of students passed exam."),
    ("Not all birds fly.", [], ""),  # was "Not birds fly.": completed, it is X
    ("This is no surprising trait for a ballplayer.",  # was "This is no trait."
     [("This", "is", "trait for a ballplayer")], "This is no surprising trait for ballplayer."),
    ("Hardly anyone came to the meeting.",  # was "Anyone came to."
     [("Anyone", "came to", "meeting"), ("Hardly anyone", "came to", "meeting")],
     "Hardly anyone came to meeting."),
    ("Few students are really so faceless that they cannot be remembered.",
     [("Students", "are really", "faceless"), ("They", "can not be remembered",
                                                "Few students are really faceless"),
      ("Students", "are really so faceless", "they can not be remembered")], ""),
    ("He rather wished he had never got into the business.",  # "He had never got into ..."
     [("He", "had never got into", "the business"), ("He", "wished", "he had never got business"),
      ("He", "wished", "he had never got into business")],
     "He wished he had never got into business."),
])
def test_the_issue_rows_get_a_backbone_x_entails(nlp, sentence, triples, backbone):
    for seed in range(6):
        assert chosen(nlp, sentence, triples, seed) == backbone


# Held-out sentences of the same kinds: the dependency backbone (no triples), or the triple
# choice where triples are given.
@pytest.mark.parametrize("sentence,triples,backbone", [
    ("Not every member voted for the plan.", [("member", "voted for", "the plan")],
     "Not every member voted for plan."),
    ("Not many children like spinach.", [], ""),
    ("Scarcely any water was left in the tank.", [("Any water", "was left in", "tank")],
     "Scarcely any water was left in tank."),
    ("She rarely eats red meat.", [("She", "eats", "red meat"), ("She", "rarely eats", "meat")],
     ""),  # completed, every choice is X
    ("He barely passed the final exam.",
     [("He", "passed", "final exam"), ("He", "barely passed", "exam")],
     "He barely passed final exam."),
    ("There is little hope of a quick recovery.", [], "There is little hope of quick recovery."),
    ("A few students came to the party.", [("Few students", "came to", "party")],
     "Students came to party."),  # "Few students came": the opposite of "a few"
    ("The old man did not buy a single red apple.", [("man", "did not buy", "apple")],
     "Man did not buy single red apple."),
    ("No other team has won three titles.", [("team", "has won", "three titles")], ""),
    ("He hoped that the rain would stop.", [("the rain", "would", "stop")],
     "He hoped that rain would stop."),  # issue 55: the clause's subject, "that", "would"
    ("She denied that she had taken the money.", [("She", "had taken", "the money"),
                                                  ("She", "denied", "she had taken")],
     "She denied that she had taken money."),
    ("If it rains, the game will be cancelled.", [("The game", "will", "cancelled")],
     "If it rains game will be cancelled."),
    ("Unless you hurry, you will miss the train.", [("You", "will miss", "train")],
     "Unless you hurry you will miss train."),
    ("I wonder whether he will come.", [("he", "will", "come")], ""),  # completed, it is X
    ("He did not come, but she stayed.", [], ""),  # was "He did not come but stayed."
])
def test_held_out_constructions(nlp, sentence, triples, backbone):
    assert chosen(nlp, sentence, triples) == backbone


def test_without_an_operator_the_backbone_is_as_before(nlp):
    assert dependency_backbone(nlp("The cat sat on the mat.")) == "Cat sat on mat."
    assert chosen(nlp, "The students passed the hard exam.",
                  [("students", "passed", "exam")]) == "Students passed exam."


# Z on the same constructions: the operators survive, and "a few" keeps its article.
@pytest.mark.parametrize("sentence,pruned", [
    ("Not all of the students passed the exam.", "Not all of students passed exam."),
    ("Hardly anyone came to the meeting.", "Hardly anyone came to meeting."),
    ("A few students came to the party.", "A few students came to party."),
    ("The few students who came were happy.", "The few students who came were happy."),
    ("The little house stood on a hill.", "little house stood on hill."),
    ("He rarely visits his mother.", "rarely visits mother."),
    ("If it rains, the game will be cancelled.", "If rains, game will be cancelled."),
    ("Unless you hurry, you will miss the train.", "Unless hurry, will miss train."),
    ("I wonder whether he will come.", "wonder whether will come."),
    ("This is no surprising trait for a ballplayer.",
     "This is no surprising trait for ballplayer."),
])
def test_z_keeps_the_operators(nlp, sentence, pruned):
    assert augment(sentence, nlp(sentence), []).pruned_text == pruned


# -- property: generated sentences whose scope the grammar knows ----------------------------------

SUBJECT_CUES = ["Not all", "No", "Few", "Hardly any", "Not many"]  # quantify the subject
VERB_CUES = ["did not", "never"]  # negate the predicate (the subject's modifiers stay outside)
NOUNS = ["students", "farmers", "teachers", "workers"]
VERBS = {"did not": ["paint", "visit", "clean"], "never": ["painted", "visited", "cleaned"],
         "": ["painted", "visited", "cleaned"]}
OBJECTS = ["house", "bridge", "station", "garden"]
ADJECTIVES = ["old", "red", "local", "small"]


@st.composite
def negated_sentences(draw):
    """(sentence, the words of X a backbone must keep, or its cue)."""
    cue = draw(st.sampled_from(SUBJECT_CUES + VERB_CUES))
    subject_adjective, object_adjective = draw(st.sampled_from(ADJECTIVES)), \
        draw(st.sampled_from(ADJECTIVES))
    noun, obj = draw(st.sampled_from(NOUNS)), draw(st.sampled_from(OBJECTS))
    if cue in SUBJECT_CUES:
        verb = draw(st.sampled_from(VERBS[""]))
        words = [cue, subject_adjective, noun, verb, "the", object_adjective, obj]
        must = [cue, subject_adjective, noun, verb, object_adjective, obj]  # all of it
    else:
        verb = draw(st.sampled_from(VERBS[cue]))
        words = ["The", subject_adjective, noun, cue, verb, "the", object_adjective, obj]
        must = [noun, cue, verb, object_adjective, obj]  # "the old" may go
    return " ".join(words) + ".", " ".join(must).lower()


def _in_order(needles: str, haystack: str) -> bool:
    rest = haystack.split()
    for word in needles.split():
        if word not in rest:
            return False
        rest = rest[rest.index(word) + 1:]
    return True


@settings(max_examples=40, deadline=None)
@given(negated_sentences(), st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()),
                                     max_size=3), st.integers(0, 2**16))
def test_a_backbone_keeps_its_cue_and_scope(nlp, made, omissions, seed):
    """For any generated X with a negation or downward cue, and triples that leave out the cue,
    the adjective or the object, an appended backbone keeps the cue and every word of its scope
    (articles aside) in X's order."""
    sentence, must = made
    words = sentence.rstrip(".").split()
    triples = []
    for drop_cue, drop_adjective, drop_object in omissions:
        kept = [w for w in words
                if not (drop_cue and w.lower() in {"not", "no", "few", "hardly", "never"})
                and not (drop_adjective and w in ADJECTIVES) and not (drop_object
                                                                     and w in OBJECTS)]
        if len(kept) >= 3:
            triples.append((" ".join(kept[:2]), kept[2], " ".join(kept[3:]) or kept[-1]))
    backbone = chosen(nlp, sentence, triples, seed).rstrip(".").lower()
    assert backbone == "" or _in_order(must, backbone), (sentence, backbone)

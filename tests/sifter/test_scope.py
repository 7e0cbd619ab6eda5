"""Y's scope rule (issues 36 and 43) on spaCy's parse, with triples written by hand (the
OpenIE extractor is not run here): a triple that drops a negation governing its relation or
arguments, or the words under it, is never chosen, the dependency backbone carries what it would
drop, and a backbone that is X repeated is not appended. Issue 43's constructions (quantifiers,
downward-entailing words, embeddings) and Z: tests/sifter/test_scope_constructions.py; the same
rule on CoreNLP's parse: tests/sifter/test_corenlp.py.
"""

from __future__ import annotations

import random

import pytest

from sentray.sifter.dependency_parse import DependencyParse, DepToken
from sentray.sifter.positives import Triple, augment, dependency_backbone, repeats, row_rng
from sentray.sifter.scope import missing_words, words
from sentray.sifter.triple_words import drops_scope, triple_positions

spacy = pytest.importorskip("spacy", reason="the openie extra is not installed")


def parse_of(nlp, sentence: str) -> DependencyParse:
    return DependencyParse.from_spacy(nlp(sentence))


# The dependency backbone (root + direct children) completed by the scope rule: the cue, the
# word it negates, the path from that word to the backbone, and under the negation the words
# the kept ones govern (articles aside); where that is X again, `choose_backbone` appends none.
@pytest.mark.parametrize("sentence,backbone", [
    # issue 36's example gave "There is reason."; issue 36 "There is no reason." (not entailed:
    # there may be reasons for other things)
    ("There is no reason to doubt it.", "There is no reason to doubt it."),
    ("The jury found no evidence that any irregularities took place.",
     "Jury found no evidence that any irregularities took place."),
    ("No student passed the exam.", "No student passed exam."),  # was "Student passed exam."
    ("Neither John nor Mary saw the film.", "Neither John nor Mary saw film."),  # "John saw film."
    ("He left without saying goodbye.", "He left without saying goodbye."),  # "He left without."
    ("He said that she did not come.", "He said that she did not come."),  # was "He said come."
    ("He did not go to the store.", "He did not go to store."),  # issue 36: "He did not go to."
    ("I saw nothing in his room.", "I saw nothing in his room."),  # issue 36: "I saw nothing in."
    ("The old man did not buy a single red apple.", "Man did not buy single red apple."),
    ("The cat sat on the mat.", "Cat sat on mat."),  # issue 55: "on" with its object
])
def test_dependency_backbone_carries_scopes(nlp, sentence, backbone):
    assert dependency_backbone(nlp(sentence)) == backbone


# (sentence, triple, drops a scope?). A cue governs its anchor's subtree, less conjoined
# clauses with their own subject, and the predicate of a negated argument, whole.
@pytest.mark.parametrize("sentence,triple,drops", [
    ("I saw nothing in his room.", ("I", "saw in", "his room"), True),
    ("I saw nothing in his room.", ("I", "saw", "nothing"), True),  # not "in his room"
    ("I saw nothing in his room.", ("I", "saw nothing in", "his room"), False),
    ("Hartman allowed no hits in his last appearance.",
     ("Hartman", "allowed in", "his last appearance"), True),
    ("Hartman allowed no hits in his last appearance.", ("Hartman", "allowed", "no hits"), True),
    ("Hartman allowed no hits in his last appearance.",
     ("Hartman", "allowed no hits in", "his last appearance"), False),
    ("There is no reason to doubt it.", ("There", "is", "reason"), True),
    ("He did not go to the store.", ("He", "did go to", "the store"), True),
    ("He did not go to the store.", ("He", "did not go to", "the store"), False),
    ("He doesn't like cats.", ("He", "does like", "cats"), True),
    ("He doesn't like cats.", ("He", "doesn't like", "cats"), False),
    ("Neither John nor Mary saw the film.", ("Mary", "saw", "the film"), True),
    ("Neither John nor Mary saw the film.", ("Neither John nor Mary", "saw", "the film"), False),
    ("We can conceive of no alternatives.", ("We", "can conceive of", "alternatives"), True),
    ("Ignorance of the law is no better excuse on the water.",
     ("Ignorance of the law", "is", "excuse on the water"), True),
    # a subordinate clause stays in the scope of its main verb's negation
    ("I don't think you want to talk to him.", ("you", "want", "to talk to him"), True),
    ("The bomb hit the ground, but not precisely the room.", ("The bomb", "hit", "the room"),
     True),
    ("The bomb hit the ground, but not precisely the room.", ("The bomb", "hit", "the ground"),
     False),
    # a conjoined clause with its own subject is outside it
    ("The league never got off the ground, but it forced the majors to expand.",
     ("it", "forced", "the majors to expand"), False),
    # "without" negates its object, not the verb it hangs on
    ("He joined the club without knowing the rules.", ("He", "joined", "the club"), False),
    ("He joined the club without knowing the rules.", ("He", "knowing", "the rules"), True),
    # not negations: an interjection, the number sign, and "not only ... but also"
    ("No, I will go home.", ("I", "will go", "home"), False),
    ("Drill a No. 43 hole through the pieces.", ("Drill", "hole through", "the pieces"), False),
    ("This will not only protect the table but also help.", ("This", "will protect", "the table"),
     False),
])
def test_triples_that_drop_a_scope(nlp, sentence, triple, drops):
    assert drops_scope(parse_of(nlp, sentence), triple) is drops


def test_a_triple_that_drops_a_negation_is_never_chosen(nlp):
    sentence = "I saw nothing in his room, but she found a key."
    triples = [Triple("I", "saw in", "his room"), Triple("I", "saw", "nothing"),
               Triple("I", "saw nothing in", "room"), Triple("I", "saw nothing in", "his room")]
    for seed in range(20):
        out = augment(sentence, nlp(sentence), triples, rng=row_rng(seed, "f:1"))
        # not "in room": under the negation, "his" restricts what was not seen
        assert out.triple == triples[3] and out.backbone == "I saw nothing in his room."
        assert out.backbone_text == f"{sentence} I saw nothing in his room."


def test_when_every_triple_drops_one_the_dependency_backbone_carries_it(nlp):
    sentence = "No student passed the exam yesterday."
    out = augment(sentence, nlp(sentence), [Triple("student", "passed", "the exam")])
    assert out.backbone_source == "dependency" and out.triple is None
    assert out.backbone == "No student passed exam yesterday."
    sentence = "There is no reason to doubt it."  # completed, it is X: none
    out = augment(sentence, nlp(sentence), [Triple("There", "is", "reason to doubt it")])
    assert (out.backbone_source, out.backbone_text) == ("none", sentence)


# A backbone with X's own words is X repeated: not appended. The next source is tried
# (the dependency backbone); where none is left, Y = X.
def test_a_backbone_that_repeats_x_is_not_appended(nlp):
    sentence = "The cat sat on the mat."
    out = augment(sentence, nlp(sentence), [Triple("The cat", "sat on", "the mat")])
    assert (out.backbone_source, out.backbone) == ("dependency", "Cat sat on mat.")
    sentence = "Cats love milk."
    out = augment(sentence, nlp(sentence), [Triple("Cats", "love", "milk")])
    assert (out.backbone_source, out.backbone, out.backbone_text) == ("none", "", sentence)
    # case, punctuation and a clitic's spacing aside: "does n't" is X's "doesn't"
    sentence = "He doesn't like cats."
    out = augment(sentence, nlp(sentence), [Triple("He", "doesn't like", "cats")])
    assert out.backbone_source == "none" and out.backbone_text == sentence
    assert repeats('The man said All we got ta go ".', 'The man said, "All we gotta go".')
    assert not repeats("Cats love milk.", "Cats love milk and mice.")


def test_the_rule_leaves_other_rows_as_they_were(nlp):
    """Where no triple drops a scope or repeats X, the random pick is the one before."""
    sentence = "Cats love milk and mice."
    triples = [Triple("Cats", "love", "milk"), Triple("Cats", "love", "mice")]
    for seed in range(10):
        expected = row_rng(seed, "f:2").choice(triples)
        assert augment(sentence, nlp(sentence), triples, rng=row_rng(seed, "f:2")).triple \
            == expected


def test_triple_positions_take_a_repeated_word_nearest_the_triple(nlp):
    parse = parse_of(nlp, "He never gets tired, and he gets a big kick out of it.")
    positions = triple_positions(parse, ("he", "gets", "a big kick"))
    assert [parse.tokens[p].text for p in sorted(positions)] == ["he", "gets", "a", "big", "kick"]
    assert not missing_words(parse, positions)


def test_words_split_as_the_parsers_do():
    assert words("He doesn't like it; I cannot.") == ["he", "does", "n't", "like", "it", "i",
                                                      "can", "not"]
    assert words("He does n't") == ["he", "does", "n't"]


def test_a_parse_with_a_head_outside_it_is_refused():
    with pytest.raises(ValueError, match=r"token 1 \('cats'\) has head 5"):
        DependencyParse([DepToken("love", 0, "ROOT", "VBP"), DepToken("cats", 5, "dobj", "NNS")])


def test_an_unparsed_doc_has_no_dependency_backbone():
    blank = spacy.blank("en")
    doc = blank("There is no reason.")
    assert len(DependencyParse.from_spacy(doc)) == 0 and dependency_backbone(doc) == ""
    out = augment(doc.text, doc, [], rng=random.Random(0))
    assert out.backbone_source == "none" and out.backbone_text == doc.text

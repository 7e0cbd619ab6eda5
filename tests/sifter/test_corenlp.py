"""The corenlp backend without a server: CoreNLP's JSON (the server's documented output format,
outputFormat=json) into triples, a dependency parse and the dependency backbone; Y's negation
rule on CoreNLP's Universal Dependencies parse (the same code as on spaCy's); clear errors when
CoreNLP or stanza is missing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sentray.sifter.corenlp import (
    backbone_from_annotation,
    corenlp_home,
    dependency_backbone_from_sentence,
    parse_from_sentence,
    triples_from_sentence,
)
from sentray.sifter.positives import Triple, choose_backbone, row_rng


def token(index, word, pos):
    return {"index": index, "word": word, "originalText": word, "lemma": word.lower(),
            "pos": pos, "before": "", "after": " "}


# "The cat sat on the mat." as CoreNLP 4.5 answers it (tokens, basicDependencies, openie).
SENTENCE = {
    "index": 0,
    "tokens": [token(1, "The", "DT"), token(2, "cat", "NN"), token(3, "sat", "VBD"),
               token(4, "on", "IN"), token(5, "the", "DT"), token(6, "mat", "NN"),
               token(7, ".", ".")],
    "basicDependencies": [
        {"dep": "ROOT", "governor": 0, "governorGloss": "ROOT", "dependent": 3,
         "dependentGloss": "sat"},
        {"dep": "det", "governor": 2, "governorGloss": "cat", "dependent": 1,
         "dependentGloss": "The"},
        {"dep": "nsubj", "governor": 3, "governorGloss": "sat", "dependent": 2,
         "dependentGloss": "cat"},
        {"dep": "case", "governor": 6, "governorGloss": "mat", "dependent": 4,
         "dependentGloss": "on"},
        {"dep": "det", "governor": 6, "governorGloss": "mat", "dependent": 5,
         "dependentGloss": "the"},
        {"dep": "obl", "governor": 3, "governorGloss": "sat", "dependent": 6,
         "dependentGloss": "mat"},
        {"dep": "punct", "governor": 3, "governorGloss": "sat", "dependent": 7,
         "dependentGloss": "."},
    ],
    "openie": [
        {"subject": "cat", "subjectSpan": [1, 2], "relation": "sat on",
         "relationSpan": [2, 4], "object": "mat", "objectSpan": [5, 6]},
        {"subject": "", "subjectSpan": [0, 0], "relation": "sat", "relationSpan": [2, 3],
         "object": "mat", "objectSpan": [5, 6]},
    ],
}


def test_triples_from_corenlp_json():
    assert triples_from_sentence(SENTENCE) == [Triple("cat", "sat on", "mat")]
    assert triples_from_sentence({"tokens": []}) == []


def test_dependency_backbone_from_corenlp_json():
    # root 'sat'; its children 'cat' (nsubj) and 'mat' (obl), and the case marker 'on' that
    # 'mat' needs (issue 55: a preposition with its object); '.' is punctuation
    assert dependency_backbone_from_sentence(SENTENCE) == "Cat sat on mat."
    assert dependency_backbone_from_sentence({"tokens": [], "basicDependencies": []}) == ""


def test_backbone_of_an_annotation_uses_its_first_sentence():
    triples, parse = backbone_from_annotation({"sentences": [SENTENCE, {"openie": []}]})
    assert triples == [Triple("cat", "sat on", "mat")]
    assert parse.tokens == parse_from_sentence(SENTENCE).tokens
    assert [(t.text, t.head, t.dep) for t in parse.tokens][:3] == [
        ("The", 1, "det"), ("cat", 2, "nsubj"), ("sat", 2, "ROOT")]
    triples, parse = backbone_from_annotation({"sentences": []})
    assert triples == [] and len(parse) == 0


def ud_sentence(words: str, tags: str, arcs: list[tuple[str, int, int]],
                openie: list[tuple[str, str, str]] = (), lemmas: dict[str, str] | None = None) -> dict:
    """One sentence of CoreNLP's JSON: words and Penn tags (space-separated), arcs
    (label, governor, dependent) counted from 1 as CoreNLP does (governor 0: ROOT), lemmas
    where they are not the lower-cased word."""
    tokens = [token(i, w, t) for i, (w, t) in enumerate(zip(words.split(), tags.split(),
                                                            strict=True), start=1)]
    for t in tokens:
        t["lemma"] = (lemmas or {}).get(t["word"], t["lemma"])
    return {"tokens": tokens,
            "basicDependencies": [{"dep": d, "governor": g, "dependent": e} for d, g, e in arcs],
            "openie": [{"subject": a, "relation": b, "object": c} for a, b, c in openie]}


# CoreNLP 4.5's Universal Dependencies hang some words elsewhere than spaCy does ("nor" under
# the conjunct it brings in, "without" as a `mark` under its verb); the rule reads both alike.
NO_REASON = ud_sentence(
    "There is no reason to doubt it .", "EX VBZ DT NN TO VB PRP .",
    [("ROOT", 0, 2), ("expl", 2, 1), ("det", 4, 3), ("nsubj", 2, 4), ("mark", 6, 5),
     ("acl", 4, 6), ("obj", 6, 7), ("punct", 2, 8)],
    [("There", "is", "reason to doubt it")])
NEITHER_NOR = ud_sentence(
    "Neither John nor Mary saw the film .", "CC NNP CC NNP VBD DT NN .",
    [("ROOT", 0, 5), ("cc:preconj", 2, 1), ("nsubj", 5, 2), ("cc", 4, 3), ("conj", 2, 4),
     ("det", 7, 6), ("obj", 5, 7), ("punct", 5, 8)],
    [("Mary", "saw", "the film"), ("Neither John nor Mary", "saw", "film")])
WITHOUT = ud_sentence(
    "He left without saying goodbye .", "PRP VBD IN VBG NN .",
    [("ROOT", 0, 2), ("nsubj", 2, 1), ("mark", 4, 3), ("advcl", 2, 4), ("obj", 4, 5),
     ("punct", 2, 6)])


@pytest.mark.parametrize("sentence,backbone", [
    # root + children alone: "There is reason."; the scope whole (issue 43): X again
    (NO_REASON, "There is no reason to doubt it."),
    (NEITHER_NOR, "Neither John nor Mary saw film."),  # alone: "John saw film."
    (WITHOUT, "He left without saying goodbye."),  # alone: "He left saying."
])
def test_dependency_backbone_from_corenlp_carries_negations(sentence, backbone):
    assert dependency_backbone_from_sentence(sentence) == backbone


def test_corenlp_triples_that_drop_a_negation_are_not_chosen():
    for sentence, text, expected in [
            (NO_REASON, "There is no reason to doubt it.", ("", None, "none")),
            (NEITHER_NOR, "Neither John nor Mary saw the film.",
             ("Neither John nor Mary saw film.",
              Triple("Neither John nor Mary", "saw", "film"), "openie"))]:
        triples, parse = backbone_from_annotation({"sentences": [sentence]})
        for seed in range(8):
            assert choose_backbone(text, parse, triples, "random", row_rng(seed, "x")) == expected


# Issue 43's constructions as CoreNLP 4.5's Universal Dependencies parse them: "not" hangs on
# the quantifier, a copula is not the root ("trait" is), "Few" is an amod of its noun.
NOT_ALL_OF = ud_sentence(
    "Not all of the students passed the exam .", "RB DT IN DT NNS VBD DT NN .",
    [("advmod", 2, 1), ("nsubj", 6, 2), ("case", 5, 3), ("det", 5, 4), ("nmod", 2, 5),
     ("ROOT", 0, 6), ("det", 8, 7), ("obj", 6, 8), ("punct", 6, 9)],
    [("all", "passed", "exam"), ("Not all of students", "passed", "exam")])
NOT_ALL = ud_sentence(
    "Not all birds fly .", "RB DT NNS VBP .",
    [("advmod", 2, 1), ("det", 3, 2), ("nsubj", 4, 3), ("ROOT", 0, 4), ("punct", 4, 5)])
NO_TRAIT = ud_sentence(
    "This is no surprising trait for a ballplayer .", "DT VBZ DT JJ NN IN DT NN .",
    [("nsubj", 5, 1), ("cop", 5, 2), ("det", 5, 3), ("amod", 5, 4), ("ROOT", 0, 5),
     ("case", 8, 6), ("det", 8, 7), ("nmod", 5, 8), ("punct", 5, 9)],
    [("This", "is", "trait for a ballplayer")])
HARDLY = ud_sentence(
    "Hardly anyone came to the meeting .", "RB NN VBD IN DT NN .",
    [("advmod", 2, 1), ("nsubj", 3, 2), ("ROOT", 0, 3), ("case", 6, 4), ("det", 6, 5),
     ("obl", 3, 6), ("punct", 3, 7)],
    [("Anyone", "came to", "meeting"), ("Hardly anyone", "came to", "meeting")])
FEW = ud_sentence(
    "Few students are really so faceless that they can not be remembered .",
    "JJ NNS VBP RB RB JJ IN PRP MD RB VB VBN .",
    [("amod", 2, 1), ("nsubj", 6, 2), ("cop", 6, 3), ("advmod", 6, 4), ("advmod", 6, 5),
     ("ROOT", 0, 6), ("mark", 12, 7), ("nsubj:pass", 12, 8), ("aux", 12, 9),
     ("advmod", 12, 10), ("aux:pass", 12, 11), ("ccomp", 6, 12), ("punct", 6, 13)],
    [("Students", "are really", "faceless"),
     ("They", "can not be remembered", "Few students are really faceless")])
WISHED = ud_sentence(
    "He rather wished he had never got into the business .",
    "PRP RB VBD PRP VBD RB VBN IN DT NN .",
    [("nsubj", 3, 1), ("advmod", 3, 2), ("ROOT", 0, 3), ("nsubj", 7, 4), ("aux", 7, 5),
     ("advmod", 7, 6), ("ccomp", 3, 7), ("case", 10, 8), ("det", 10, 9), ("obl", 7, 10),
     ("punct", 3, 11)],
    [("He", "had never got into", "the business"), ("He", "wished", "he had never got business"),
     ("He", "wished", "he had never got into business")], lemmas={"wished": "wish"})
IF_RAINS = ud_sentence(
    "If it rains , the game will be cancelled .", "IN PRP VBZ , DT NN MD VB VBN .",
    [("mark", 3, 1), ("nsubj", 3, 2), ("advcl", 9, 3), ("punct", 9, 4), ("det", 6, 5),
     ("nsubj:pass", 9, 6), ("aux", 9, 7), ("aux:pass", 9, 8), ("ROOT", 0, 9),
     ("punct", 9, 10)],
    [("The game", "will be", "cancelled")])


@pytest.mark.parametrize("sentence,text,backbone", [
    (NOT_ALL_OF, "Not all of the students passed the exam.", "Not all of students passed exam."),
    (NOT_ALL, "Not all birds fly.", ""),
    (NO_TRAIT, "This is no surprising trait for a ballplayer.",
     "This is no surprising trait for ballplayer."),
    (HARDLY, "Hardly anyone came to the meeting.", "Hardly anyone came to meeting."),
    (FEW, "Few students are really so faceless that they cannot be remembered.", ""),
    (WISHED, "He rather wished he had never got into the business.",
     "He wished he had never got into business."),
    (IF_RAINS, "If it rains, the game will be cancelled.", "If it rains game will be cancelled."),
])
def test_issue_43_constructions_on_corenlp_parses(sentence, text, backbone):
    """The same Ys as on spaCy's parse (tests/sifter/test_scope_constructions.py)."""
    triples, parse = backbone_from_annotation({"sentences": [sentence]})
    for seed in range(6):
        assert choose_backbone(text, parse, triples, "random", row_rng(seed, "x"))[0] == backbone


# Issue 55's six rows as CoreNLP 4.5's Universal Dependencies parse them: "at" a `case` of
# "most", "than" `fixed` on "Less", the infinitive's "to" a `mark`, the copula a `cop` of the
# predicate "asleep", prepositions `case` under their objects. The triples drop what main's
# backbones dropped.
AT_MOST = ud_sentence(
    "At most three students solved the final problem .", "IN JJS CD NNS VBD DT JJ NN .",
    [("case", 2, 1), ("advmod", 3, 2), ("nummod", 4, 3), ("nsubj", 5, 4), ("ROOT", 0, 5),
     ("det", 8, 6), ("amod", 8, 7), ("obj", 5, 8), ("punct", 5, 9)],
    [("most three students", "solved", "final problem"), ("three students", "solved", "problem")])
LESS_THAN_HALF = ud_sentence(
    "Less than half of the voters supported the new law .", "JJR IN NN IN DT NNS VBD DT JJ NN .",
    [("advmod", 3, 1), ("fixed", 1, 2), ("nsubj", 7, 3), ("case", 6, 4), ("det", 6, 5),
     ("nmod", 3, 6), ("ROOT", 0, 7), ("det", 10, 8), ("amod", 10, 9), ("obj", 7, 10),
     ("punct", 7, 11)],
    [("half", "supported", "law"), ("voters", "supported", "new law")])
PRETENDED = ud_sentence(
    "He pretended to be asleep when his mother came in .", "PRP VBD TO VB JJ WRB PRP$ NN VBD RP .",
    [("nsubj", 2, 1), ("ROOT", 0, 2), ("mark", 5, 3), ("cop", 5, 4), ("xcomp", 2, 5),
     ("advmod", 9, 6), ("nmod:poss", 8, 7), ("nsubj", 9, 8), ("advcl", 5, 9),
     ("compound:prt", 9, 10), ("punct", 2, 11)],
    [("He", "pretended", "be"), ("He", "be", "asleep")], lemmas={"pretended": "pretend"})
FORGOT = ud_sentence(
    "She forgot to lock the door before leaving for work .", "PRP VBD TO VB DT NN IN VBG IN NN .",
    [("nsubj", 2, 1), ("ROOT", 0, 2), ("mark", 4, 3), ("xcomp", 2, 4), ("det", 6, 5),
     ("obj", 4, 6), ("mark", 8, 7), ("advcl", 4, 8), ("case", 10, 9), ("obl", 8, 10),
     ("punct", 2, 11)],
    [("She", "lock", "door"), ("She", "forgot", "lock")], lemmas={"forgot": "forget"})
ONLY_A_HANDFUL = ud_sentence(
    "Only a handful of soldiers returned from the expedition .", "RB DT NN IN NNS VBD IN DT NN .",
    [("advmod", 3, 1), ("det", 3, 2), ("nsubj", 6, 3), ("case", 5, 4), ("nmod", 3, 5),
     ("ROOT", 0, 6), ("case", 9, 7), ("det", 9, 8), ("obl", 6, 9), ("punct", 6, 10)],
    [("handful of soldiers", "returned from", "expedition"), ("handful", "returned", "from")])
NOT_A_SINGLE = ud_sentence(
    "Not a single letter arrived during the winter .", "RB DT JJ NN VBD IN DT NN .",
    [("advmod", 4, 1), ("det", 4, 2), ("amod", 4, 3), ("nsubj", 5, 4), ("ROOT", 0, 5),
     ("case", 8, 6), ("det", 8, 7), ("obl", 5, 8), ("punct", 5, 9)],
    [("single letter", "arrived during", "winter"), ("Not a single letter", "arrived", "during")])


@pytest.mark.parametrize("sentence,text,backbone", [
    (AT_MOST, "At most three students solved the final problem.",
     "At most three students solved final problem."),
    (LESS_THAN_HALF, "Less than half of the voters supported the new law.",
     "Less than half of voters supported new law."),
    (PRETENDED, "He pretended to be asleep when his mother came in.",
     "He pretended to be asleep."),
    (FORGOT, "She forgot to lock the door before leaving for work.",
     "She forgot to lock door before leaving for work."),
    (ONLY_A_HANDFUL, "Only a handful of soldiers returned from the expedition.",
     "Only handful of soldiers returned from expedition."),
    (NOT_A_SINGLE, "Not a single letter arrived during the winter.",
     "Not single letter arrived during winter."),
])
def test_issue_55_rows_on_corenlp_parses(sentence, text, backbone):
    """The same Ys as on spaCy's parse (tests/sifter/test_sentence_backbones.py): every triple
    drops an operator or is no sentence; the dependency backbone is completed."""
    triples, parse = backbone_from_annotation({"sentences": [sentence]})
    for seed in range(6):
        assert choose_backbone(text, parse, triples, "random", row_rng(seed, "x")) == (
            backbone, None, "dependency")


# -- property: generated sentences, parsed as CoreNLP's UD would (the grammar that makes them
# knows each word's head), through the CoreNLP backend's converter ---------------------------------

UD_QUANTIFIERS = {  # the phrase's words and tags; the first an advmod, the rest fixed on it
    "at most": "IN JJS", "at least": "IN JJS", "no more than": "DT JJR IN",
    "fewer than": "JJR IN", "more than": "JJR IN", "up to": "IN TO", "exactly": "RB"}


@st.composite
def ud_quantified(draw):
    """(CoreNLP-shaped sentence, text, the quantifier's words, its noun): "<Q> <NUM> <NOUN>
    <VERB> the <OBJECT> <PREP> <PLACE> ."."""
    phrase = draw(st.sampled_from(sorted(UD_QUANTIFIERS)))
    q = phrase.split()
    words = [*q, draw(st.sampled_from(["three", "five", "20"])),
             draw(st.sampled_from(["students", "farmers"])),
             draw(st.sampled_from(["painted", "visited"])), "the",
             draw(st.sampled_from(["house", "bridge"])), draw(st.sampled_from(["in", "during"])),
             draw(st.sampled_from(["town", "winter"])), "."]
    tags = f"{UD_QUANTIFIERS[phrase]} CD NNS VBD DT NN IN NN ."
    n = len(q)  # positions from 1: number n+1, noun n+2, verb n+3, the n+4, object n+5, ...
    arcs = [("advmod", n + 1, 1)] + [("fixed", 1, i) for i in range(2, n + 1)] + [
        ("nummod", n + 2, n + 1), ("nsubj", n + 3, n + 2), ("ROOT", 0, n + 3),
        ("det", n + 5, n + 4), ("obj", n + 3, n + 5), ("case", n + 7, n + 6),
        ("obl", n + 3, n + 7), ("punct", n + 3, n + 8)]
    text = " ".join(words[:-1]) + "."
    return ud_sentence(" ".join(words), tags, arcs), text[0].upper() + text[1:], q + [
        words[n]], words[n + 1]


@st.composite
def ud_control(draw):
    """(CoreNLP-shaped sentence, text, [], None): "The <NOUN> <CONTROL> to <VERB> the <OBJECT>
    <PREP> <PLACE> ."."""
    control = draw(st.sampled_from(["pretended", "forgot", "managed", "failed", "tried"]))
    words = ["The", draw(st.sampled_from(["students", "farmers"])), control, "to",
             draw(st.sampled_from(["paint", "visit"])), "the",
             draw(st.sampled_from(["house", "bridge"])), draw(st.sampled_from(["in", "during"])),
             draw(st.sampled_from(["town", "winter"])), "."]
    arcs = [("det", 2, 1), ("nsubj", 3, 2), ("ROOT", 0, 3), ("mark", 5, 4), ("xcomp", 3, 5),
            ("det", 7, 6), ("obj", 5, 7), ("case", 9, 8), ("obl", 5, 9), ("punct", 3, 10)]
    lemmas = {"pretended": "pretend", "forgot": "forget", "managed": "manage",
              "failed": "fail", "tried": "try"}
    return (ud_sentence(" ".join(words), "DT NNS VBD TO VB DT NN IN NN .", arcs, lemmas=lemmas),
            " ".join(words[:-1]) + ".", [], None)


PREPOSITION_WORDS = {"in", "during", "to", "at", "of", "on", "from"}


@settings(max_examples=60, deadline=None)
@given(st.one_of(ud_quantified(), ud_control()),
       st.lists(st.tuples(st.integers(0, 8), st.integers(1, 4)), max_size=3),
       st.integers(0, 2**16))
def test_no_backbone_drops_a_quantifier_word_or_dangles_on_corenlp_parses(made, cuts, seed):
    """For any generated X and triples made of X's words with a stretch left out, an appended
    backbone that keeps the quantified noun keeps every word of the quantifier, and none ends
    on a preposition or a bare "to"."""
    sentence, text, quantifier, noun = made
    words = text.rstrip(".").split()
    triples = []
    for start, length in cuts:
        kept = words[:start] + words[start + length:]
        if len(kept) >= 3:
            triples.append((" ".join(kept[:2]), kept[2], " ".join(kept[3:]) or kept[-1]))
    sentence = dict(sentence, openie=[{"subject": a, "relation": b, "object": c}
                                      for a, b, c in triples])
    found, parse = backbone_from_annotation({"sentences": [sentence]})
    backbone = choose_backbone(text, parse, found, "random", row_rng(seed, "x"))[0]
    said = backbone.rstrip(".").lower().split()
    if not said:
        return
    if noun in said:
        at = said.index(noun)
        assert said[at - len(quantifier):at] == [w.lower() for w in quantifier], (text, backbone)
    assert said[-1] not in PREPOSITION_WORDS, (text, backbone)


def test_missing_corenlp_names_corenlp_home(tmp_path, monkeypatch):
    monkeypatch.setenv("CORENLP_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="CORENLP_HOME.*stanza.install_corenlp"):
        corenlp_home()
    (tmp_path / "corenlp").mkdir()
    (tmp_path / "corenlp" / "stanford-corenlp-4.5.10.jar").write_bytes(b"")
    monkeypatch.setenv("CORENLP_HOME", str(tmp_path / "corenlp"))
    assert corenlp_home() == tmp_path / "corenlp"


def test_the_backend_needs_stanza_or_says_so(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_stanza(name, *args, **kwargs):
        if name.startswith("stanza"):
            raise ImportError("No module named 'stanza'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_stanza)
    from sentray.sifter.corenlp import CoreNLPBackend

    with pytest.raises(ImportError, match=r"sentray\[corenlp\]"):
        CoreNLPBackend()


def test_the_client_is_configured_for_openie(monkeypatch, tmp_path):
    """With stanza installed, the backend asks for the paper's annotators on the given
    endpoint, and DONT_START talks to a server someone else started."""
    stanza_server = pytest.importorskip("stanza.server")
    seen = {}

    class FakeClient:
        def __init__(self, **kwargs):
            seen.update(kwargs)

        def annotate(self, text):
            return {"sentences": [SENTENCE]}

    monkeypatch.setattr(stanza_server, "CoreNLPClient", FakeClient)
    from sentray.sifter.corenlp import CoreNLPBackend

    backend = CoreNLPBackend("http://127.0.0.1:9001", start_server=False)
    # CoreNLP runs annotators in the order given, each after the ones it requires (its
    # documentation's "requirements" per annotator): Y needs depparse (the fallback) and openie
    annotators = seen["annotators"]
    requires = {"ssplit": {"tokenize"}, "pos": {"tokenize", "ssplit"},
                "lemma": {"tokenize", "ssplit", "pos"},
                "depparse": {"tokenize", "ssplit", "pos"},
                "natlog": {"tokenize", "ssplit", "pos", "lemma", "depparse"},
                "openie": {"tokenize", "ssplit", "pos", "lemma", "depparse", "natlog"}}
    assert {"depparse", "openie"} <= set(annotators)
    for position, annotator in enumerate(annotators):
        assert requires.get(annotator, set()) <= set(annotators[:position]), annotator
    assert seen["endpoint"] == "http://127.0.0.1:9001"
    assert seen["start_server"] == stanza_server.StartServer.DONT_START
    triples, parse = backend.backbone("The cat sat on the mat.")
    assert triples == [Triple("cat", "sat on", "mat")]
    assert parse.tokens == parse_from_sentence(SENTENCE).tokens

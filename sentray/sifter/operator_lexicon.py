"""The words and tags Y's operators are read from (`sentray.sifter.scope`, issues 36, 43 and
55), and the word classes built on them: negations, downward-entailing words, quantifiers,
embedding and implicative verbs, and the Penn tags of function words. Z keeps the negations and
quantifiers whatever their tag (`sentray.sifter.positives`)."""

from __future__ import annotations

import re

from sentray.sifter.dependency_parse import DependencyParse

# Z keeps these whatever their tag (sentray.sifter.positives)
NEGATIONS = frozenset({"not", "n't", "no", "nor", "neither", "never", "none", "nobody", "nothing",
                       "nowhere", "noone"})
# "cannot" for a tokenizer that keeps it whole (spaCy's and CoreNLP's split it: "can", "not")
NEGATION_CUES = NEGATIONS | {"without", "cannot"}
NOMINAL_CUES = frozenset({"nobody", "nothing", "none", "nowhere", "noone"})
CORRELATIVE_CUES = frozenset({"neither", "nor"})
DETERMINER_CUES = frozenset({"no", "neither", "few", "fewer", "little"})  # negate their noun
DOWNWARD_ADVERBS = frozenset({"hardly", "scarcely", "barely", "seldom", "rarely"})
DOWNWARD_QUANTIFIERS = frozenset({"few", "fewer", "little"})
DOWNWARD_WORDS = DOWNWARD_ADVERBS | DOWNWARD_QUANTIFIERS
# Quantifiers: content words whatever their tag (a kept "all" is a claim), and the words a
# negation passes to reach its noun ("not all birds", "not every member", "not many children")
QUANTIFIER_WORDS = frozenset({"all", "any", "both", "each", "every", "many", "much", "most",
                              "several", "some", "few", "fewer", "little", "half", "enough",
                              "more", "less"})
# Verbs whose clausal complement is not stated as a fact (lemmas)
EMBEDDING_LEMMAS = frozenset({
    "wish", "hope", "want", "doubt", "deny", "fear", "believe", "think", "suppose", "imagine",
    "pretend", "claim", "suspect", "expect", "wonder", "ask", "guess", "dream", "assume",
    "allege", "say", "seem", "appear", "try", "plan", "intend", "refuse", "fail", "hesitate",
    "wait", "demand", "insist", "suggest", "propose", "require", "question", "consider",
    # implicative verbs (issue 55): "She forgot to lock the door." does not entail that she
    # locked it; "managed to" does, but not with "managed" dropped from a backbone that keeps more
    "forget", "manage", "neglect"})
# Verbs of speech and report (issue 55's blind labellings): what they report is not stated as
# a fact; they may also stand after it, set off ("..., Reama said here yesterday.")
SPEECH_LEMMAS = frozenset({
    "say", "claim", "allege", "insist", "suggest", "ask", "deny", "believe", "think",
    "tell", "relate", "report", "state", "announce", "declare", "explain", "add", "remark",
    "reply", "answer", "write", "argue", "contend", "maintain", "complain", "warn", "predict",
    "estimate", "decide", "conclude", "testify", "counsel", "pronounce", "cry", "shout",
    "whisper", "mutter", "murmur", "exclaim", "grumble", "yell", "recount", "assert", "promise",
    "swear", "charge", "inform", "advise", "urge", "repeat", "respond", "retort", "rule"})
EMBEDDING_LEMMAS |= SPEECH_LEMMAS
# Of those, the negative ones: downward in their complement, like a negation ("denied that she
# had taken the money" does not entail "denied that she had taken anything")
NEGATIVE_LEMMAS = frozenset({"doubt", "deny", "refuse", "fail", "hesitate", "question",
                             "forget", "neglect"})
EMBEDDING_MARKS = frozenset({"if", "unless", "whether", "lest"})
COMPLEMENT_LABELS = ("ccomp", "xcomp")
ARTICLES = frozenset({"a", "an", "the"})
# an article before "few" or "little" is part of the quantifier: "a few" and "a little" are
# upward, "few" and "little" downward, "the few" definite; a backbone or a Z that keeps the word
# keeps the article ("the little house" is only an adjective)
ARTICLE_BOUND = {"a": frozenset({"few", "little"}), "the": frozenset({"few", "fewer"})}
# Penn tags of the words whose presence says nothing about which clause a backbone comes from
FUNCTION_TAGS = frozenset({"DT", "PDT", "WDT", "IN", "TO", "CC", "POS", "RP", "EX", "UH",
                           "LS", "SYM", "HYPH", "NFP"})
CLIMBED_TAGS = ("RB", "JJR", "JJS")  # adverbs, comparatives: a cue on one negates its head
NOMINAL_TAGS = ("NN", "PRP", "CD", "WP", "EX")  # prefixes: nouns, pronouns, numbers
OWN_SUBJECT = ("nsubj", "csubj", "expl")  # label prefixes, the same in ClearNLP and UD
WORD = re.compile(r"can(?=not\b)|[a-z0-9]+(?=n't\b)|n't\b|[a-z0-9]+")


def is_nominal(parse: DependencyParse, position: int) -> bool:
    """A noun, pronoun or number, or a quantifier or nominal negation ("all", "nothing")."""
    return parse.tokens[position].tag.startswith(NOMINAL_TAGS) \
        or parse.word(position) in QUANTIFIER_WORDS | NOMINAL_CUES


def is_noun(parse: DependencyParse, position: int) -> bool:
    """A noun, a personal pronoun or a number, by its Penn tag."""
    return parse.tokens[position].tag.startswith(("NN", "PRP", "CD"))


IRREGULAR = {"said": "say", "says": "say", "thought": "think", "dreamt": "dream"}


def stems(parse: DependencyParse, position: int) -> set[str]:
    """The parser's lemma and the word's own stems: a lemmatizer's slip ("hoped" -> "hop")
    must not hide an embedding verb."""
    word = parse.word(position)
    found = {word, parse.tokens[position].lemma, IRREGULAR.get(word, word)}
    for suffix, replacements in (("ied", ("y",)), ("ies", ("y",)), ("ing", ("", "e")),
                                 ("ed", ("", "e")), ("es", ("", "e")), ("s", ("",))):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            found.update(word[:-len(suffix)] + r for r in replacements)
    return found

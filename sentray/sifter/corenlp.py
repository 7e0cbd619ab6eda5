"""The `corenlp` augmentation backend: the paper's own tools, Stanford CoreNLP's OpenIE and
dependency parser, through stanza's `CoreNLPClient` (one CoreNLP server per node, on
localhost).

CoreNLP answers in its JSON format; the functions on top turn one sentence of that answer into
OpenIE triples and into a `DependencyParse`, and need no server. Both backbone sources come from
the same annotation (`openie` and `depparse` annotators), so a sentence is parsed once; Y's
dependency backbone and its negation rule then run on CoreNLP's parse, through the same code as
the spacy backend's (`positives.choose_backbone`). Z (pruned text) is decided on spaCy's Penn
Treebank tags (`tag_`), the tag set CoreNLP's own tagger uses.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sentray.sifter.dependency_parse import DependencyParse, DepToken
from sentray.sifter.positives import Triple, parse_backbone

logger = logging.getLogger(__name__)

ANNOTATORS = ["tokenize", "ssplit", "pos", "lemma", "depparse", "natlog", "openie"]
PUNCTUATION_TAGS = frozenset({".", ",", ":", "``", "''", "-LRB-", "-RRB-", "#", "$", "HYPH",
                              "NFP"})
DEFAULT_CORENLP_HOME = Path("~/stanza_corenlp").expanduser()  # stanza.install_corenlp()'s


def triples_from_sentence(sentence: dict) -> list[Triple]:
    """OpenIE triples of one sentence of CoreNLP's JSON (its `openie` list)."""
    return [Triple(t["subject"], t["relation"], t["object"]) for t in sentence.get("openie", [])
            if t.get("subject") and t.get("relation") and t.get("object")]


def parse_from_sentence(sentence: dict) -> DependencyParse:
    """The dependency parse (`basicDependencies`) of one sentence of CoreNLP's JSON; an empty
    parse without one. A token the parse leaves out hangs under the root."""
    tokens = sentence.get("tokens") or []
    arcs = {d["dependent"]: d for d in sentence.get("basicDependencies") or []}
    roots = [d["dependent"] for d in arcs.values() if d.get("dep") == "ROOT"]
    if not roots or not tokens:
        return DependencyParse([])
    position = {t["index"]: i for i, t in enumerate(tokens)}  # CoreNLP counts from 1
    parsed = []
    for i, token in enumerate(tokens):
        arc = arcs.get(token["index"], {"dep": "dep", "governor": roots[0]})
        head = i if arc["dep"] == "ROOT" else position.get(arc["governor"], position[roots[0]])
        parsed.append(DepToken(token.get("originalText") or token["word"], head, arc["dep"],
                               token.get("pos", ""), arc["dep"] == "punct"
                               or token.get("pos") in PUNCTUATION_TAGS,
                               (token.get("lemma") or "").lower()))
    return DependencyParse(parsed)


def dependency_backbone_from_sentence(sentence: dict) -> str:
    """The root and its direct children (punctuation dropped, negations carried) of one sentence
    of CoreNLP's JSON, in sentence order, as a short sentence; '' without a parse."""
    return parse_backbone(parse_from_sentence(sentence))


def backbone_from_annotation(annotation: dict) -> tuple[list[Triple], DependencyParse]:
    """(triples, dependency parse) of the first sentence of a CoreNLP JSON annotation."""
    sentences = annotation.get("sentences") or []
    if not sentences:
        return [], DependencyParse([])
    return triples_from_sentence(sentences[0]), parse_from_sentence(sentences[0])


def corenlp_home() -> Path:
    """Where CoreNLP is installed: $CORENLP_HOME, else stanza's default; a clear error if not."""
    home = Path(os.environ.get("CORENLP_HOME", DEFAULT_CORENLP_HOME)).expanduser()
    if not home.is_dir() or not any(home.glob("stanford-corenlp-*.jar")):
        raise FileNotFoundError(
            f"Stanford CoreNLP is not installed at {home}: set CORENLP_HOME to its folder, or "
            "install it with python -c 'import stanza; stanza.install_corenlp()' (needs "
            "internet and Java 8+); or use --backend spacy, which works offline")
    return home


class CoreNLPBackend:
    """Triples and dependency parses from a CoreNLP server on this node (started when
    `start_server` and none is running at `endpoint`)."""

    def __init__(self, endpoint: str = "http://localhost:9000", *, start_server: bool = True,
                 timeout_ms: int = 60_000, memory: str = "4G") -> None:
        try:
            from stanza.server import CoreNLPClient, StartServer
        except ImportError as exc:
            raise ImportError("the corenlp backend needs stanza: pip install "
                              "'sentray[corenlp]'") from exc
        if start_server:
            os.environ.setdefault("CORENLP_HOME", str(corenlp_home()))
        self.client = CoreNLPClient(
            annotators=ANNOTATORS, endpoint=endpoint, timeout=timeout_ms, memory=memory,
            be_quiet=True, output_format="json",
            start_server=StartServer.TRY_START if start_server else StartServer.DONT_START,
            properties={"openie.triple.strict": "true", "ssplit.isOneSentence": "true"})

    def backbone(self, text: str) -> tuple[list[Triple], DependencyParse]:
        """OpenIE triples and the dependency parse of `text` (its first sentence)."""
        return backbone_from_annotation(self.client.annotate(text))

    def close(self) -> None:
        self.client.stop()

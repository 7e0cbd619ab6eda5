"""Does Y's backbone drop a negation of X? An audit on Brown of the rule of issue 36
(`sentray.sifter.negation`), measured by a method that shares nothing with the rule.

The rule reads X's dependency tree (a negation's anchor and scope). This audit reads surface
strings only: it splits X into clause-like segments at punctuation and at clause-linking words
(a regex), takes as "X's clause" of a backbone the segment sharing the most content words with
it (of those that tie, the one it loses fewest negations against), and counts the negation
words (a regex lexicon: not, n't, no but "No. 43", never, none, nobody, nothing, neither, nor,
nowhere, without, cannot) in that clause and not in the backbone. It also counts the Ys that
are X repeated (the backbone's letters and digits are X's, in order: the rule's own definition,
so its "after" is zero by construction; "before" is the figure), and, for Z, the correlative
pairs whose first half Z keeps and whose second it deletes (a regex on X and Z).

Before: the rule as it was (issue 36's starting point), re-implemented here: a triple chosen
among all OpenIE triples, else the root and its direct children. After: `positives.augment` as
the augmentation job calls it. Both with the job's pipeline (spaCy `en_core_web_sm` +
triplet-extract OpenIE answered from the batch's parses, seed 0, the job's 1,000-character
truncation) on the same rows: a seeded sample of the rows the job keeps.

    nice -n 19 python bench/audit_negation.py --rows 6000 --out bench/results/negation-audit.json

It prints the figures and 20 sampled rows (half where the backbone lost a negation before and
not after, half where the measure still finds one after) for a reader to judge.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path

from sentray.sifter.corpus_filter import filter_reasons
from sentray.sifter.dependency_parse import DependencyParse
from sentray.sifter.scope import drops_negation
from sentray.sifter.parsers import ParseCache, load_spacy, spacy_load_redirect
from sentray.sifter.positives import (
    Triple,
    as_sentence,
    augment,
    choose_triple,
    is_useless,
    row_rng,
    tidy_spacing,
)

ROOT = Path(__file__).resolve().parents[1]
BROWN = ROOT.parent / "shared" / "data" / "corpus" / "brown.txt"
MAX_PARSE_CHARS = 1000  # the job's default
NEGATION = re.compile(r"n't\b|\bno\b(?!\.\s*\d)|\b(?:not|never|none|nobody|nothing|neither|nor|"
                      r"nowhere|noone|without|cannot)\b")  # "no" but the number sign "No. 43"
SEGMENT_BREAK = re.compile(
    r"[,;:!?()\[\]\"`]|--|\b(?:and|but|or|so|yet|because|although|though|while|whereas|when|"
    r"whenever|where|if|unless|since|until|after|before|that|which|who|whom|whose|than)\b")
SURFACE_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
STOPWORDS = frozenset(
    "a an the of in on at to for by with from as is are was were be been being am do does did "
    "has have had it its he she they we i you him her them us me his their our my your this "
    "these those there here s".split())
CORRELATIVE = re.compile(r"\b(either|neither|both|whether)\b(.*)", re.S)
PARTNERS = {"either": r"\bor\b", "neither": r"\b(?:nor|or)\b", "both": r"\band\b",
            "whether": r"\bor\b"}


# -- the independent measure: surface strings only ------------------------------------------------


def surface(text: str) -> str:
    return text.lower().replace("\u2019", "'")


def negation_words(text: str) -> Counter:
    """Negation words of a text by the regex lexicon ("cannot" counted as "not")."""
    found = NEGATION.findall(surface(text))
    return Counter("not" if w == "cannot" else w for w in found)


def content_words(text: str) -> set[str]:
    return {w for w in SURFACE_WORD.findall(surface(text))
            if w not in STOPWORDS and not NEGATION.fullmatch(w)}


def clauses_of(x: str, backbone: str) -> list[str]:
    """The segments of X sharing the most content words with the backbone (all of them on a
    tie); none when no segment shares one."""
    wanted = content_words(backbone)
    segments = [s for s in SEGMENT_BREAK.split(surface(x)) if s and s.strip()]
    overlaps = [len(content_words(s) & wanted) for s in segments]
    best = max(overlaps, default=0)
    return [s for s, n in zip(segments, overlaps, strict=True) if n == best] if best else []


def lost_negations(x: str, backbone: str) -> list[str]:
    """The negation words of the backbone's clause of X that the backbone lacks (of the clauses
    that tie, the one it loses fewest against: "I don't want no trouble, you don't want no
    trouble" has two)."""
    losses = [sorted((negation_words(clause) - negation_words(backbone)).elements())
              for clause in clauses_of(x, backbone)] if backbone else []
    return min(losses, key=len, default=[])


def repeats_x(x: str, backbone: str) -> bool:
    """The backbone's letters and digits are X's, in order: Y is X repeated."""
    def letters(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", surface(text))

    return bool(backbone) and letters(backbone) == letters(x)


def correlative_broken(x: str, z: str) -> bool:
    """X has a correlative pair; Z keeps its first half and has no second half after it."""
    found = CORRELATIVE.search(surface(x))
    if not found or not re.search(PARTNERS[found.group(1)], found.group(2)):
        return False
    in_z = re.search(rf"\b{found.group(1)}\b(.*)", surface(z), flags=re.S)
    return bool(in_z) and not re.search(PARTNERS[found.group(1)], in_z.group(1))


# -- the rules before issue 36, re-implemented ----------------------------------------------------


def backbone_before(doc, triples: list[Triple], rng: random.Random) -> tuple[str, str]:
    """(backbone, source) as before issue 36: a triple among all of them, else the root and its
    direct children (punctuation dropped), no negation carried, X repeated allowed."""
    triple = choose_triple(triples, "random", rng)
    if triple is not None:
        return triple.as_sentence(), "openie"
    sentences = list(doc.sents) if doc.has_annotation("DEP") else []
    if not sentences:
        return "", "none"
    root = sentences[0].root
    tokens = [root] + [c for c in root.children if not (c.is_punct or c.is_space)]
    backbone = as_sentence([t.text for t in sorted(tokens, key=lambda t: t.i)])
    return backbone, "dependency" if backbone else "none"


def z_before(doc) -> str:
    """Z by the Penn rule before issue 36: the second half of a correlative pair deleted."""
    deleted = [is_useless(t) for t in doc]
    if all(d or t.is_punct or t.is_space for t, d in zip(doc, deleted, strict=True)):
        return doc.text
    return tidy_spacing("".join(t.whitespace_ if d else t.text + t.whitespace_
                                for t, d in zip(doc, deleted, strict=True)))


# -- rows -----------------------------------------------------------------------------------------


def sampled_rows(path: Path, rows: int, seed: int) -> list[tuple[str, str]]:
    """(id, text) of a seeded sample of the rows the augmentation job keeps, in corpus order."""
    texts = path.read_text(encoding="utf-8").splitlines()
    kept = [(f"{path.name}:{i}", t) for i, (t, reason) in enumerate(
        zip(texts, filter_reasons(texts), strict=True)) if reason is None and t.strip()]
    if rows and rows < len(kept):
        kept = sorted(random.Random(seed).sample(kept, rows),
                      key=lambda r: int(r[0].rsplit(":", 1)[1]))
    return kept


def row_record(row_id: str, x: str, doc, triples: list[Triple], seed: int) -> dict:
    old, old_source = backbone_before(doc, triples, row_rng(seed, row_id))
    new = augment(x, doc, triples, rng=row_rng(seed, row_id))
    parse = DependencyParse.from_spacy(doc)
    return {"id": row_id, "x": x, "triples": len(triples),
            # the rule's own verdict, for context only: not part of the measure
            "triples_the_rule_discards": sum(
                drops_negation(parse, (t.subject, t.relation, t.object)) for t in triples),
            "before": old, "before_source": old_source,
            "after": new.backbone, "after_source": new.backbone_source,
            "lost_before": lost_negations(x, old), "lost_after": lost_negations(x, new.backbone),
            "x_has_negation": bool(negation_words(x)),
            "repeat_before": repeats_x(x, old), "repeat_after": repeats_x(x, new.backbone),
            "correlative_broken_before": correlative_broken(x, z_before(doc)),
            "correlative_broken_after": correlative_broken(x, new.pruned_text)}


def audited_rows(rows: list[tuple[str, str]], seed: int, batch: int = 256) -> list[dict]:
    from triplet_extract import OpenIEExtractor

    nlp = load_spacy()
    cache = ParseCache(nlp)
    with spacy_load_redirect():
        extractor = OpenIEExtractor(nlp=cache, enable_entailment=False)
    records, started = [], time.perf_counter()
    for start in range(0, len(rows), batch):
        chunk = rows[start:start + batch]
        heads = [text[:MAX_PARSE_CHARS] for _, text in chunk]
        docs = list(nlp.pipe(heads, batch_size=64))
        cache.prime(heads, docs)
        for (row_id, text), head, doc in zip(chunk, heads, docs, strict=True):
            try:
                found = extractor.extract_triplet_objects(head)
            except Exception:  # the job falls back to the dependency backbone too
                found = []
            triples = [Triple(t.subject, t.relation, t.object) for t in found]
            records.append(row_record(row_id, text, doc, triples, seed))
        done = start + len(chunk)
        print(f"{done:,}/{len(rows):,} rows, {done / (time.perf_counter() - started):.0f} rows/s",
              flush=True)
    return records


# -- the record -----------------------------------------------------------------------------------


def share(count: int, total: int) -> dict:
    return {"rows": count, "percent": round(100 * count / max(total, 1), 2)}


def side(records: list[dict], when: str) -> dict:
    lost = Counter(w for r in records for w in r[f"lost_{when}"])
    return {
        "backbone_loses_a_negation_of_its_clause": share(
            sum(bool(r[f"lost_{when}"]) for r in records), len(records)),
        "negation_words_lost": sum(lost.values()), "by_word": dict(lost.most_common()),
        "y_is_x_repeated": share(sum(r[f"repeat_{when}"] for r in records), len(records)),
        "backbone_source": dict(Counter(r[f"{when}_source"] for r in records)),
        "z_correlative_pair_broken": share(
            sum(r[f"correlative_broken_{when}"] for r in records), len(records)),
    }


def sample(records: list[dict], n: int, seed: int) -> list[dict]:
    """Half rows the measure flags before and not after, half rows it still flags after."""
    rng = random.Random(seed)
    fixed = [r for r in records if r["lost_before"] and not r["lost_after"]]
    still = [r for r in records if r["lost_after"]]
    picked = rng.sample(still, min(len(still), n // 2))
    picked += rng.sample(fixed, min(len(fixed), n - len(picked)))
    keys = ("id", "x", "before", "after", "lost_before", "lost_after")
    return [{k: r[k] for k in keys} for r in sorted(picked, key=lambda r: r["id"])]


def summarise(records: list[dict], seconds: float, args: argparse.Namespace) -> dict:
    return {
        "corpus": str(args.corpus.name), "rows": len(records), "seed": args.seed,
        "versions": {p: version(p) for p in ("spacy", "triplet-extract")},
        "seconds": round(seconds, 1),
        "rows_whose_x_has_a_negation_word": share(
            sum(r["x_has_negation"] for r in records), len(records)),
        "before": side(records, "before"), "after": side(records, "after"),
        "y_changed": share(sum(r["before"] != r["after"] for r in records), len(records)),
        "backbone_source_before_to_after": dict(Counter(
            f"{r['before_source']} -> {r['after_source']}" for r in records).most_common()),
        "the_rules_own_count": {
            "triples": sum(r["triples"] for r in records),
            "triples_discarded_for_a_negation": sum(r["triples_the_rule_discards"]
                                                    for r in records),
            "rows_with_one": sum(bool(r["triples_the_rule_discards"]) for r in records)},
        "sample": sample(records, args.examples, args.seed),
    }


def print_report(record: dict) -> None:
    print(f"\n{record['rows']:,} Brown rows ({record['seconds']} s); X has a negation word: "
          f"{record['rows_whose_x_has_a_negation_word']}")
    for when in ("before", "after"):
        figures = record[when]
        print(f"{when:>6}: backbone loses a negation of its clause "
              f"{figures['backbone_loses_a_negation_of_its_clause']} "
              f"({figures['negation_words_lost']} words: {figures['by_word']}); Y = X repeated "
              f"{figures['y_is_x_repeated']}; sources {figures['backbone_source']}; Z breaks a "
              f"correlative pair {figures['z_correlative_pair_broken']}")
    print(f"Y changed: {record['y_changed']}; sources {record['backbone_source_before_to_after']}"
          f"; the rule's own count {record['the_rules_own_count']}\n")
    for row in record["sample"]:
        print(f"[{row['id']}] X: {row['x']}\n   before: {row['before']!r} lost {row['lost_before']}"
              f"\n   after:  {row['after']!r} lost {row['lost_after']}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=BROWN)
    parser.add_argument("--rows", type=int, default=6000, help="sampled rows; 0: every row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=20)
    parser.add_argument("--out", type=Path, help="write the JSON record here")
    args = parser.parse_args(argv)
    if not args.corpus.is_file():
        raise FileNotFoundError(f"no corpus at {args.corpus}: pass --corpus PATH")
    started = time.perf_counter()
    records = audited_rows(sampled_rows(args.corpus, args.rows, args.seed), args.seed)
    record = summarise(records, time.perf_counter() - started, args)
    print_report(record)
    if args.out:
        args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return record


if __name__ == "__main__":
    main()

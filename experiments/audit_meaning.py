"""Does X entail the backbone Y appends? An audit of meaning on Brown (issue 43), by a labeller
that shares no code, parse or tagger with the rule it audits (`sentray.sifter.scope`).

Two steps. `make` runs the augmentation job's pipeline (spaCy `en_core_web_sm` + triplet-extract
OpenIE answered from the batch's parses, seed 0, the job's 1,000-character truncation) over a
seeded sample of the rows the job keeps, with whichever `sentray` is importable, and writes one
JSON line per row (X, the backbone, its source). Run it twice, on the code before and after:

    git worktree add out/views-before 9804951      # main before issue 43
    PYTHONPATH=out/views-before nice -n 19 python experiments/audit_meaning.py make \\
        --rows 6000 --out out/before.jsonl
    nice -n 19 python experiments/audit_meaning.py make --rows 6000 --out out/after.jsonl
    python experiments/audit_meaning.py label out/before.jsonl out/after.jsonl \\
        --out bench/results/meaning-audit.json

`label` labels every row's backbone entailed / not entailed / contradicts by the rubric of
docs/sifter-views.md, read on surface words only (the functions below): a negation or
downward-entailing word of X's clause lost ("contradicts" for a negation), a word under one
dropped, a clause under an embedding verb or "if"/"unless"/"whether" stated without it, words
out of X's order or not in X. The record holds the rates before and after on every row and on
the rows whose Y changed, and a seeded sample of >= 200 changed rows with both labels and their
reasons, for a reader to check.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # experiments/ is no package
from brown_rows import BROWN, kept_rows, parsed_rows  # noqa: E402

# -- the labeller: surface words only -------------------------------------------------------------

TOKEN = re.compile(r"[a-z0-9]+(?=n't\b)|n't\b|[a-z0-9]+|[,;:!?()\[\]\"`]|--")
NEGATIONS = frozenset("not n't no never none nobody nothing neither nor nowhere noone without "
                      "cannot".split())
NOMINAL = frozenset("none nobody nothing nowhere noone".split())
DOWNWARD = frozenset("hardly scarcely barely seldom rarely few fewer little".split())
# forms of the verbs whose complement is not stated as a fact, written out (no lemmatizer)
EMBEDDING = frozenset(
    "wish wishes wished wishing hope hopes hoped hoping want wants wanted doubt doubts doubted "
    "deny denies denied fear fears feared believe believes believed think thinks thought suppose "
    "supposed imagine imagined pretend pretended claim claims claimed suspect suspected expect "
    "expects expected wonder wondered ask asked guess guessed dream dreamed assume assumed "
    "allege alleged say says said seem seems seemed appear appears appeared try tries tried "
    "plan planned intend intended refuse refused fail failed".split())
CONDITIONALS = frozenset("if unless whether lest".split())
BREAKS = frozenset("and but or so yet because although though while whereas when whenever where "
                   "if unless since until after before that which who whom whose than whether "
                   "lest".split())
HARD_BREAKS = frozenset({";", "but", "and", "or", "yet", "so", "--"})
ARTICLES = frozenset({"a", "an", "the"})
STOPWORDS = frozenset(
    "a an the of in on at to for by with from as is are was were be been being am do does did "
    "has have had it its he she they we i you him her them us me his their our my your this "
    "these those there here s".split())
INSERTABLE = frozenset("is are was were be has have had of".split())  # OpenIE's copulas
LABELS = ("entailed", "not entailed", "contradicts")  # from best to worst


def worse(verdict: str, other: str) -> str:
    return max(verdict, other, key=LABELS.index)


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower().replace("\u2019", "'").replace("cannot", "can not"))


def is_word(token: str) -> bool:
    return token[0].isalnum() or token == "n't"


def segments(xs: list[str]) -> list[int]:
    """The clause segment of each token of X: a new one at punctuation and at clause words."""
    out, current = [], 0
    for token in xs:
        if not is_word(token) or token in BREAKS:
            current += 1
        out.append(current)
    return out


def align(xs: list[str], bs: list[str]) -> list[int] | None:
    """X's positions of the backbone's words, matched in order, one word allowed out of place
    ("Gilborn put again on his coat") and OpenIE's copulas allowed where X has none; None when
    they are not X's words in X's order."""
    for displaced in [None, *range(len(bs))]:
        kept, at = [], 0
        for j, word in enumerate(bs):
            if j == displaced:
                continue
            found = next((i for i in range(at, len(xs)) if xs[i] == word), None)
            if found is None:
                if word in INSERTABLE:
                    continue
                break
            kept.append(found)
            at = found + 1
        else:
            if displaced is not None:
                if bs[displaced] not in xs:
                    continue
                kept.append(next(i for i, w in enumerate(xs) if w == bs[displaced]
                                 and i not in kept))
            return kept
    return None


def _cue(xs: list[str], i: int) -> str | None:
    word = xs[i]
    before = xs[i - 1] if i else ""
    after = xs[i + 1] if i + 1 < len(xs) else ""
    if word in NEGATIONS and not (word == "no" and after[:1].isdigit()) and not (
            word == "not" and after == "only"):  # "not only ... but also" adds
        return "negation"
    if word in DOWNWARD and not (word in ("few", "little") and before in ("a", "the", "quite")):
        return "downward"
    return None


def label(x: str, backbone: str) -> tuple[str, list[str]]:
    """(label, reasons) of a backbone against X by the rubric (module docstring)."""
    if not backbone:
        return "entailed", ["no backbone: Y = X"]
    xs, bs = tokens(x), [t for t in tokens(backbone) if is_word(t)]
    kept = align(xs, bs)
    if kept is None:
        return "not entailed", ["words out of X's order or not in X"]
    keep, seg, reasons, verdict = set(kept), segments(xs), [], "entailed"

    def content(positions) -> bool:
        return any(p in keep and is_word(xs[p]) and xs[p] not in STOPWORDS | NEGATIONS
                   for p in positions)

    for i in range(len(xs)):
        kind = _cue(xs, i)
        if kind is None:
            continue
        clause = [p for p in range(len(xs)) if seg[p] == seg[i] and is_word(xs[p])]
        first = clause[0] if clause else i
        # a nominal cue, or one that opens its clause ("Not all ...", "Few ..."): all of it
        region = clause if xs[i] in NOMINAL or i <= first + 1 else [p for p in clause if p >= i]
        if i not in keep and content(region):
            verdict = worse(verdict, "contradicts" if kind == "negation" else "not entailed")
            reasons.append(f"loses {xs[i]!r}")
        elif i in keep:
            lost = [xs[p] for p in region if p not in keep and xs[p] not in ARTICLES | BREAKS]
            if lost:
                verdict = worse(verdict, "not entailed")
                reasons.append(f"drops {' '.join(lost)!r} under {xs[i]!r}")
    for i, word in enumerate(xs):
        if word not in EMBEDDING | CONDITIONALS or i in keep:
            continue
        if word in ("if", "unless", "lest"):  # the condition and what it conditions: up to
            hard = [p for p, t in enumerate(xs) if t in HARD_BREAKS]  # the nearest ";", "but"
            start = max([p for p in hard if p < i], default=-1) + 1
            end = min([p for p in hard if p > i], default=len(xs))
            region = range(start, end)
        else:  # the rest of its clause, and the next one after "that" ("doubt that it ...")
            follows = xs[i + 1] if i + 1 < len(xs) else ""
            region = [p for p in range(i + 1, len(xs))
                      if seg[p] == seg[i] or (follows == "that" and seg[p] == seg[i] + 1)]
        if content(region):
            verdict = worse(verdict, "not entailed")
            reasons.append(f"states what is under {word!r} as a fact")
    for i in range(len(xs) - 1):  # "not only": both or neither ("It is not Europe.")
        if xs[i:i + 2] == ["not", "only"] and (i in keep) != (i + 1 in keep):
            verdict = worse(verdict, "not entailed")
            reasons.append("splits 'not only'")
    return verdict, reasons


# -- make: the backbones of the code importable now -----------------------------------------------


def sampled_rows(path: Path, rows: int, seed: int) -> list[tuple[str, str]]:
    """(id, text) of a seeded sample of the rows the augmentation job keeps, in corpus order."""
    kept = kept_rows(path)
    if rows and rows < len(kept):
        kept = sorted(random.Random(seed).sample(kept, rows),
                      key=lambda r: int(r[0].rsplit(":", 1)[1]))
    return kept


def code_version() -> str:
    import sentray

    where = Path(sentray.__file__).resolve().parent
    found = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True,
                           text=True)
    dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "sentray"],
                           capture_output=True, text=True).stdout.strip()
    return found.stdout.strip() + ("+uncommitted" if dirty else "")


def make(args: argparse.Namespace) -> None:
    """One JSON line per sampled row: X, the backbone Y appends and its source, as the job
    (brown_rows.parsed_rows) makes them."""
    from sentray.sifter.positives import augment, row_rng

    rows, version = sampled_rows(args.corpus, args.rows, args.seed), code_version()

    def progress(done: int, seconds: float) -> None:
        print(f"{done:,}/{len(rows):,} rows, {seconds:.0f} s", flush=True)

    with args.out.open("w", encoding="utf-8") as out:
        for row in parsed_rows(rows, 256, progress):
            y = augment(row.text, row.doc, row.triples, rng=row_rng(args.seed, row.id))
            out.write(json.dumps({"id": row.id, "x": row.text, "backbone": y.backbone,
                                  "source": y.backbone_source, "code": version,
                                  "corpus": args.corpus.name}, ensure_ascii=False) + "\n")


# -- label: the record ----------------------------------------------------------------------------


def rates(labels: list[str]) -> dict:
    counts = Counter(labels)
    return {name: {"rows": counts[name], "percent": round(100 * counts[name] / max(len(labels), 1),
                                                          2)} for name in LABELS}


def rates_of(rows: list, total: int) -> dict:
    return {"rows": len(rows), "percent": round(100 * len(rows) / max(total, 1), 2)}


def read_rows(path: Path) -> dict[str, dict]:
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}


def summarise(before: dict[str, dict], after: dict[str, dict], args) -> dict:
    ids = sorted(before.keys() & after.keys(), key=lambda r: int(r.rsplit(":", 1)[1]))
    rows = []
    for row_id in ids:
        old, new = before[row_id], after[row_id]
        old_label, old_reasons = label(old["x"], old["backbone"])
        new_label, new_reasons = label(new["x"], new["backbone"])
        rows.append({"id": row_id, "x": new["x"], "before": old["backbone"],
                     "before_source": old["source"], "before_label": old_label,
                     "before_reasons": old_reasons, "after": new["backbone"],
                     "after_source": new["source"], "after_label": new_label,
                     "after_reasons": new_reasons})
    changed = [r for r in rows if r["before"] != r["after"]]
    with_backbone = {when: [r for r in rows if r[when]] for when in ("before", "after")}
    picked = random.Random(args.seed).sample(changed, min(args.sample, len(changed)))
    return {
        "corpus": next(iter(after.values()))["corpus"], "rows": len(rows), "seed": args.seed,
        "code": {"before": next(iter(before.values()))["code"],
                 "after": next(iter(after.values()))["code"]},
        "every_row": {when: rates([r[f"{when}_label"] for r in rows])
                      for when in ("before", "after")},
        "rows_with_a_backbone": {when: dict(rates([r[f"{when}_label"]
                                                   for r in with_backbone[when]]),
                                            rows=len(with_backbone[when]))
                                 for when in ("before", "after")},
        "changed_rows": len(changed),
        "changed": {when: rates([r[f"{when}_label"] for r in changed])
                    for when in ("before", "after")},
        "sources": {when: dict(Counter(r[f"{when}_source"] for r in rows))
                    for when in ("before", "after")},
        # how much of X a backbone repeats: its words (by `tokens`) >= 70% of X's
        "backbone_has_70_percent_of_x_words": {when: rates_of(
            [r for r in rows if len([t for t in tokens(r[when]) if is_word(t)])
             >= 0.7 * len([t for t in tokens(r["x"]) if is_word(t)]) and r[when]], len(rows))
            for when in ("before", "after")},
        # the first word of each reason: loses, drops, states, words (out of order), splits, no
        "reasons": {when: dict(Counter(reason.split(" ")[0] for r in rows
                                       for reason in r[f"{when}_reasons"]).most_common())
                    for when in ("before", "after")},
        "sample": sorted(picked, key=lambda r: int(r["id"].rsplit(":", 1)[1])),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    made = steps.add_parser("make", help="backbones of the importable sentray, one JSON line each")
    made.add_argument("--corpus", type=Path, default=BROWN)
    made.add_argument("--rows", type=int, default=6000, help="sampled rows; 0: every row")
    made.add_argument("--seed", type=int, default=0)
    made.add_argument("--out", type=Path, required=True)
    labelled = steps.add_parser("label", help="label two runs' backbones; write the record")
    labelled.add_argument("before", type=Path)
    labelled.add_argument("after", type=Path)
    labelled.add_argument("--sample", type=int, default=240, help="changed rows kept in the record")
    labelled.add_argument("--seed", type=int, default=0)
    labelled.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.step == "make":
        if not args.corpus.is_file():
            raise FileNotFoundError(f"no corpus at {args.corpus}: pass --corpus PATH")
        return make(args)
    record = summarise(read_rows(args.before), read_rows(args.after), args)
    print(json.dumps({k: v for k, v in record.items() if k != "sample"}, indent=1))
    if args.out:
        args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

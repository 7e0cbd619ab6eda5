"""Does X entail the backbone Y appends? An audit of meaning on Brown (issues 43 and 55), by a
labeller that shares no code, parse or tagger with the rule it audits (`sentray.sifter.scope`):
experiments/meaning_rubric.py.

`make` runs the augmentation job's pipeline (spaCy `en_core_web_sm` + triplet-extract OpenIE
answered from the batch's parses, seed 0, the job's 1,000-character truncation) over a seeded
sample of the rows the job keeps, with whichever `sentray` is importable, and writes one JSON
line per row (X, the backbone, its source). Run it on the code before and after a change; issue
55's record (before: main at 6486ecd, issue 43's views; after: issue 55's):

    git worktree add out/views-before 6486ecd
    PYTHONPATH=out/views-before nice -n 19 python experiments/audit_meaning.py make \
        --rows 6000 --out out/before.jsonl
    nice -n 19 python experiments/audit_meaning.py make --rows 6000 --out out/after.jsonl
    python experiments/audit_meaning.py label out/before.jsonl out/after.jsonl \
        --out bench/results/meaning-audit-55.json
    python experiments/audit_meaning.py compare experiments/audit/second-labelling-55.json \
        --out bench/results/meaning-audit-55-second.json

`label` labels every row's backbone entailed / not entailed / contradicts by the rubric of
docs/sifter-views.md. The record holds the rates before and after on every row and on the rows
whose Y changed, and a seeded sample of >= 200 changed rows with both labels and their reasons.
`compare` sets the rubric against a second labelling made by a reader (a JSON file of rows with
the reader's labels, written before the rubric's labels of those rows were seen): agreement on
meaning and the rows where the two differ.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # experiments/ is no package
from brown_rows import BROWN, kept_rows, parsed_rows  # noqa: E402
from meaning_rubric import LABELS, is_word, label, tokens  # noqa: E402,F401

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
    dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "."],
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


PREPOSITIONS = frozenset(
    "of in on at to for from with by about into during after before under over through between "
    "against without within upon across toward towards among around behind beyond near since "
    "until".split())


def ends_on_preposition(backbone: str) -> bool:
    said = [t for t in tokens(backbone) if is_word(t)]
    return bool(said) and said[-1] in PREPOSITIONS


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
        # issue 55: backbones whose last word is a preposition or "to" (of those with one; a
        # particle, "broke in", counts too: surface words only)
        "backbone_ends_on_a_preposition": {when: rates_of(
            [r for r in rows if r[when] and ends_on_preposition(r[when])],
            len([r for r in rows if r[when]])) for when in ("before", "after")},
        # the first word of each reason: loses, drops, states, words (out of order), splits, no
        "reasons": {when: dict(Counter(reason.split(" ")[0] for r in rows
                                       for reason in r[f"{when}_reasons"]).most_common())
                    for when in ("before", "after")},
        "sample": sorted(picked, key=lambda r: int(r["id"].rsplit(":", 1)[1])),
    }


def compare(second: dict) -> dict:
    """The rubric's labels of the rows a reader labelled by hand (`second`: a second labelling,
    e.g. experiments/audit/second-labelling-55.json), and where the two agree on meaning: the
    rubric's "not entailed" and "contradicts" against the reader's "not entailed"."""
    rows, agree = [], 0
    for row in second["rows"]:
        rubric, reasons = label(row["x"], row["backbone"])
        same = (rubric == "entailed") == (row["meaning"] == "entailed")
        agree += same
        rows.append({"id": row["id"], "x": row["x"], "backbone": row["backbone"],
                     "reader": row["label"], "reader_meaning": row["meaning"],
                     "reader_note": row["note"], "rubric": rubric, "rubric_reasons": reasons,
                     "agree": same})
    with_backbone = [r for r in rows if r["backbone"]]
    return {
        "rows": len(rows), "seed": second["seed"],
        "agreement": rates_of([r for r in rows if r["agree"]], len(rows)),
        "agreement_rows_with_a_backbone": rates_of([r for r in with_backbone if r["agree"]],
                                                   len(with_backbone)),
        "reader": dict(Counter(r["reader"] for r in rows)),
        "rubric": dict(Counter(r["rubric"] for r in rows)),
        "disagreements": [r for r in rows if not r["agree"]],
        "not_a_sentence": [r for r in rows if r["reader"] == "not a sentence"],
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
    compared = steps.add_parser("compare", help="the rubric against a reader's labels")
    compared.add_argument("second", type=Path, help="a second labelling (JSON)")
    compared.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.step == "compare":
        record = compare(json.loads(args.second.read_text()))
        print(json.dumps({k: v for k, v in record.items() if k not in ("disagreements",
                                                                       "not_a_sentence")}))
        if args.out:
            args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        return None
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

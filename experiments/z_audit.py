"""SIFTER's Z before and after issue 25, on Brown: the earlier rule (delete every spaCy UD `PRON`,
`CCONJ`, `SCONJ` and the articles; `z_rule="ud"`) against `sentray.sifter.positives`'s
Penn Treebank rule, and Y as the augmentation job builds it.

    nice -n 19 python experiments/z_audit.py                         # Brown, ~10-25 min
    nice -n 19 python experiments/z_audit.py --check-against out/brown-aug \\
        --check-rule before                                               # the job's own rows
    python experiments/z_audit.py --table --write-doc docs/results.md   # the doc's tables

For every row the augmentation job keeps (the paper's corpus filter, the job's defaults) it
parses X with the job's spaCy pipeline and OpenIE extractor and counts, for each rule:
- rows whose Z loses a negation or a quantifier (`positives.KEPT_WORDS`), and which words;
- rows where Z = X (nothing deleted);
and, for Y (the same under both rules): rows whose appended backbone has at least 70% of X's
words (Y is then nearly X twice). It also counts the subordinators (IN with dependency `mark`)
the new rule keeps, and the negations and quantifiers its keep-list saved from a deleting tag.
The record (counts, the most frequent words, example rows) goes to
experiments/audit/z_audit_brown.json. `--check-against` compares the job's output folder
row by row (Y, and Z under `--check-rule`) with what this script computes.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # experiments/ is no package
from brown_rows import BROWN, ROOT, ParsedRow, kept_rows, parsed_rows  # noqa: E402
from generated_block import write_block  # noqa: E402

from sentray.sifter.positives import (
    ARTICLES,
    DELETED_TAGS,
    KEPT_WORDS,
    augment,
    dependency_backbone,
    prune_text,
    row_rng,
    tidy_spacing,
)

RECORD = ROOT / "experiments" / "audit" / "z_audit_brown.json"
BACKBONE_SHARE = 0.7  # "Y's appended backbone is at least 70% as long as X" (issue 25)

def kept_words_lost(x: str, z: str) -> list[str]:
    """The negations and quantifiers of X missing from Z, read from the two texts (not from the
    rule's own tokens, so a rule that deleted one by any path shows here)."""
    def counts(text: str) -> Counter:
        # "don't" -> "do", "n't", as the tokenizers split it
        return Counter(w for w in re.findall(r"[a-z]+(?=n't)|n't|[a-z]+", text.lower())
                       if w in KEPT_WORDS)

    return sorted((counts(x) - counts(z)).elements())


def tag_would_delete(token) -> bool:
    """The Penn rule without its keep-list: which kept words the keep-list saved."""
    return (token.tag_ == "DT" and token.lower_ in ARTICLES) or token.tag_ in DELETED_TAGS


# -- rows -----------------------------------------------------------------------------------------


def with_tail(pruned: str, head: str, text: str) -> str:
    """Z of a text parsed from a truncated copy: the untouched tail appended (as the job)."""
    tail = text[len(head):]
    if not tail:
        return pruned
    joint = " " if head[-1:].isspace() or tail[:1].isspace() else ""
    return tidy_spacing(pruned + joint + tail)


def row_views(row: ParsedRow, seed: int) -> dict:
    """X, Y, both Zs and what the audit counts for one parsed row."""
    row_id, text, head, doc = row.id, row.text, row.head, row.doc
    result = augment(text, doc, row.triples, rng=row_rng(seed, row_id))
    backbone = (result.triple.as_sentence() if result.triple is not None
                else dependency_backbone(doc) if result.backbone_source == "dependency" else "")
    return {
        "id": row_id, "x": text, "y": result.backbone_text,
        "z_before": with_tail(prune_text(doc, "ud"), head, text),
        "z_after": with_tail(prune_text(doc), head, text),
        "backbone_source": result.backbone_source,
        "backbone_words": len(backbone.split()), "x_words": len(text.split()),
        "saved_by_keep_list": [f"{t.lower_}/{t.tag_}" for t in doc
                               if t.lower_ in KEPT_WORDS and tag_would_delete(t)],
        "subordinators_kept": [t.lower_ for t in doc if t.tag_ == "IN" and t.dep_ == "mark"],
        "subordinators_deleted_before": [t.lower_ for t in doc if t.pos_ == "SCONJ"],
    }


def audited_rows(rows: list[tuple[str, str]], seed: int, batch: int = 256) -> list[dict]:
    """Every row's views, parsed as the job parses it (brown_rows.parsed_rows)."""
    def progress(done: int, seconds: float) -> None:
        if done % (batch * 20) < batch or done == len(rows):
            print(f"{done:,}/{len(rows):,} rows, {done / seconds:.0f} rows/s", flush=True)

    return [row_views(row, seed) for row in parsed_rows(rows, batch, progress)]


# -- the record -----------------------------------------------------------------------------------


def top(counter: Counter, n: int = 12) -> dict[str, int]:
    return dict(counter.most_common(n))


def summarise(views: list[dict], examples: int, seed: int) -> dict:
    """The audit's counts over all rows, and a seeded sample of rows whose two Zs differ (two
    thirds) or agree (the rest) as examples."""
    record: dict = {"rows": len(views)}
    for rule in ("before", "after"):
        lost = [(v, kept_words_lost(v["x"], v[f"z_{rule}"])) for v in views]
        record[rule] = {
            "rows_z_loses_negation_or_quantifier": sum(bool(words) for _, words in lost),
            "words_lost": top(Counter(w for _, words in lost for w in words)),
            "rows_z_equals_x": sum(v[f"z_{rule}"] == v["x"] for v in views),
        }
    record["rows_z_differs_between_rules"] = sum(v["z_before"] != v["z_after"] for v in views)
    record["after"]["saved_by_keep_list"] = {
        "rows": sum(bool(v["saved_by_keep_list"]) for v in views),
        "words": top(Counter(w for v in views for w in v["saved_by_keep_list"]))}
    record["after"]["subordinators_kept"] = {
        "rows": sum(bool(v["subordinators_kept"]) for v in views),
        "words": top(Counter(w for v in views for w in v["subordinators_kept"]), 20)}
    record["before"]["subordinators_deleted"] = {
        "rows": sum(bool(v["subordinators_deleted_before"]) for v in views),
        "words": top(Counter(w for v in views for w in v["subordinators_deleted_before"]), 20)}
    long_backbone = [v for v in views
                     if v["backbone_words"] >= BACKBONE_SHARE * max(v["x_words"], 1)]
    record["y"] = {
        "rows_backbone_at_least_70pct_of_x_words": len(long_backbone),
        "by_source": dict(Counter(v["backbone_source"] for v in long_backbone)),
        "rows_by_source": dict(Counter(v["backbone_source"] for v in views)),
        "rows_y_equals_x": sum(v["y"] == v["x"] for v in views)}
    rng = random.Random(seed)
    differ = [v for v in views if v["z_before"] != v["z_after"]]
    agree = [v for v in views if v["z_before"] == v["z_after"]]
    sample = (rng.sample(differ, min(len(differ), examples * 2 // 3))
              + rng.sample(agree, min(len(agree), examples - examples * 2 // 3)))
    record["examples"] = [{k: v[k] for k in ("id", "x", "y", "z_before", "z_after",
                                             "backbone_source")}
                          for v in sorted(sample, key=lambda v: int(v["id"].rsplit(":", 1)[1]))]
    return record


def check_against(views: list[dict], folder: Path, rule: str) -> dict:
    """Rows of the augmentation job's output (FOLDER/**/*.parquet) against this script's:
    how many rows it holds, and how many have another Y or another Z (under `rule`)."""
    import pyarrow.parquet as pq

    job = {}
    for path in sorted(folder.rglob("*.parquet")):
        table = pq.read_table(path, columns=["id", "backbone_text", "pruned_text"])
        for row_id, y, z in zip(*(table.column(c).to_pylist() for c in table.column_names),
                                strict=True):
            job[row_id] = (y, z)
    ours = {v["id"]: v for v in views}
    shared = sorted(set(job) & set(ours))
    y_differ = [i for i in shared if job[i][0] != ours[i]["y"]]
    z_differ = [i for i in shared if job[i][1] != ours[i][f"z_{rule}"]]
    return {"folder": str(folder), "rule": rule, "job_rows": len(job), "audit_rows": len(ours),
            "shared_rows": len(shared), "y_differ": len(y_differ), "z_differ": len(z_differ),
            "y_differ_ids": y_differ[:10], "z_differ_ids": z_differ[:10]}


# docs/results.md holds the audit's tables between these lines (--table --write-doc)
BEGIN = ("<!-- generated by `python experiments/z_audit.py --table --write-doc` from "
         "experiments/audit/z_audit_brown.json; do not edit by hand -->")
END = "<!-- end of the generated Z audit -->"


def share(count: int, rows: int) -> str:
    return f"{count:,} ({100 * count / rows:.2f}%)"


def words(counts: dict[str, int], n: int = 8) -> str:
    return ", ".join(f"{word} {count:,}" for word, count in list(counts.items())[:n]) or "none"


def markdown(record: dict, examples: int = 12) -> str:
    """The audit as docs/results.md shows it: the counts, then `examples` rows (two thirds
    whose Zs differ between the rules)."""
    rows, before, after, y = record["rows"], record["before"], record["after"], record["y"]
    lines = [
        f"| Brown, {rows:,} rows kept by the corpus filter | before: UD rule | after: Penn rule |",
        "|---|---|---|",
        "| Z loses a negation or a quantifier | "
        f"{share(before['rows_z_loses_negation_or_quantifier'], rows)} | "
        f"{share(after['rows_z_loses_negation_or_quantifier'], rows)} |",
        f"| the words lost most often | {words(before['words_lost'])} | "
        f"{words(after['words_lost'])} |",
        f"| Z = X (nothing deleted) | {share(before['rows_z_equals_x'], rows)} | "
        f"{share(after['rows_z_equals_x'], rows)} |",
        f"| subordinators (rows with one) | deleted: "
        f"{share(before['subordinators_deleted']['rows'], rows)}; "
        f"{words(before['subordinators_deleted']['words'])} | kept (IN, dependency `mark`): "
        f"{share(after['subordinators_kept']['rows'], rows)}; "
        f"{words(after['subordinators_kept']['words'])} |",
        f"| negations and quantifiers the keep-list saved from a deleting tag | | "
        f"{share(after['saved_by_keep_list']['rows'], rows)}; "
        f"{words(after['saved_by_keep_list']['words'])} |",
        f"| Z differs between the two rules | {share(record['rows_z_differs_between_rules'], rows)}"
        " | |",
        f"| Y's appended backbone has >= 70% of X's words (Y is the same under both) | "
        f"{share(y['rows_backbone_at_least_70pct_of_x_words'], rows)}: "
        f"{y['by_source'].get('openie', 0):,} of the {y['rows_by_source'].get('openie', 0):,} "
        f"OpenIE backbones, {y['by_source'].get('dependency', 0):,} of the "
        f"{y['rows_by_source'].get('dependency', 0):,} dependency ones | |",
    ]
    for check in record["checks"]:
        lines.append(f"| the augmentation job's output `{check['folder']}` (Z {check['rule']}) "
                     f"against this script, row by row | {check['shared_rows']:,} rows: "
                     f"{check['y_differ']:,} other Ys, {check['z_differ']:,} other Zs | |")
    differ = [e for e in record["examples"] if e["z_before"] != e["z_after"]]
    agree = [e for e in record["examples"] if e["z_before"] == e["z_after"]]
    chosen = differ[:examples * 2 // 3] + agree[:examples - examples * 2 // 3]
    lines += ["", "| row | X | Y (X + backbone) | Z before (UD) | Z after (Penn) |",
              "|---|---|---|---|---|"]
    for e in sorted(chosen, key=lambda e: int(e["id"].rsplit(":", 1)[1])):
        cells = [e["x"], e["y"][len(e["x"]):].strip() and f"… {e['y'][len(e['x']):].strip()}",
                 e["z_before"], e["z_after"]]
        lines.append(f"| {e['id'].rsplit(':', 1)[1]} | "
                     + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=BROWN)
    parser.add_argument("--out", type=Path, default=RECORD, help="the JSON record")
    parser.add_argument("--limit", type=int, default=None, help="the first N kept rows only")
    parser.add_argument("--seed", type=int, default=0, help="the job's --seed (Y's triple)")
    parser.add_argument("--examples", type=int, default=24)
    parser.add_argument("--check-against", type=Path, action="append", default=[],
                        help="an augmentation output folder to compare with (repeatable)")
    parser.add_argument("--check-rule", action="append", default=[],
                        choices=["before", "after"], help="the Z rule of each such folder")
    parser.add_argument("--table", action="store_true",
                        help="print the Markdown of the record at --out only (no audit)")
    parser.add_argument("--write-doc", type=Path, default=None, metavar="DOC",
                        help="with --table: rewrite DOC's generated audit (docs/results.md)")
    args = parser.parse_args()
    if args.table:
        generated = markdown(json.loads(args.out.read_text()))
        if args.write_doc:
            write_block(args.write_doc, BEGIN, END, generated)
        print(generated)
        return
    if len(args.check_rule) != len(args.check_against):
        parser.error("give one --check-rule per --check-against")
    import importlib.metadata as metadata

    import spacy

    started = time.perf_counter()
    rows = kept_rows(args.corpus)
    views = audited_rows(rows[:args.limit] if args.limit else rows, args.seed)
    record = {"corpus": args.corpus.name, "limit": args.limit, "seed": args.seed,
              "spacy": spacy.__version__, "triplet_extract": metadata.version("triplet-extract"),
              **summarise(views, args.examples, args.seed),
              "checks": [check_against(views, folder, rule)
                         for folder, rule in zip(args.check_against, args.check_rule,
                                                 strict=True)],
              "seconds": round(time.perf_counter() - started)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "examples"}, indent=1,
                     ensure_ascii=False))


if __name__ == "__main__":
    main()

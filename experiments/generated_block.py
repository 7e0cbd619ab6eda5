"""The generated blocks of a document (docs/results.md): the Markdown a script writes between a
BEGIN and an END line, read back by the tests that check it against the committed records.
One implementation for sifter_study.py, lstm_table.py and z_audit.py (write_block: their
--write-doc)."""

from __future__ import annotations

from pathlib import Path


def block(document: str, begin: str, end: str) -> str:
    """What `document` holds between `begin` and `end` ('' without them)."""
    if begin not in document:
        return ""
    return document.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def replace_block(document: str, begin: str, end: str, generated: str) -> str:
    """`document` with what stands between `begin` and `end` replaced by `generated`."""
    if begin not in document or end not in document:
        raise ValueError(f"the document has no generated block: add the lines {begin!r} and "
                         f"{end!r} where it goes")
    head, rest = document.split(begin, 1)
    body = f"\n{generated}\n" if generated else "\n"  # an empty block: the two lines alone
    return f"{head}{begin}{body}{end}{rest.split(end, 1)[1]}"


def write_block(path: Path, begin: str, end: str, generated: str) -> None:
    """Rewrite the generated block of the document at `path` (--write-doc); a document without
    one stops the script, naming it and the lines to add."""
    try:
        path.write_text(replace_block(path.read_text(), begin, end, generated))
    except ValueError as exc:
        raise SystemExit(f"{path}: {exc}") from exc

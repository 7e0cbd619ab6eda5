"""No doc names a path outside the repository that a reader's machine would not have: an
absolute path of a development machine (/work/..., /home/..., /Users/..., /root/...; a
cluster's shared /mnt/efs is the user's own), or a relative one climbing out of the repository other than to ../shared/, the sibling folder the
README documents for SentEval's data and the corpus. Allowed: /tmp/ scratch paths in examples,
and /home/ubuntu/sentray, the cluster nodes' checkout that cluster.yaml mounts."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *ROOT.joinpath("docs").rglob("*.md")])
ABSOLUTE = re.compile(r"(?<![\w.~-])/(?:work|home|Users|root)/[\w./-]*")
CLIMBING = re.compile(r"(?<![\w./-])(?:\.\./)+[\w.-][\w./-]*")
ALLOWED_ABSOLUTE = ("/home/ubuntu/sentray",)


def outside_paths(doc: Path, root: Path = ROOT) -> list[str]:
    found = []
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
        for path in ABSOLUTE.findall(line):
            if not path.startswith(ALLOWED_ABSOLUTE):
                found.append(f"{doc.relative_to(root)}:{number}: {path}")
        for path in CLIMBING.findall(line):
            target = (doc.parent / path).resolve()
            inside = target == root or root in target.parents
            if not inside and not path.startswith("../shared/") and path != "../shared":
                found.append(f"{doc.relative_to(root)}:{number}: {path}")
    return found


def test_no_doc_names_a_path_outside_the_repository():
    assert [p for doc in DOCS for p in outside_paths(doc)] == []


def test_the_check_finds_such_paths(tmp_path):
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "page.md"
    doc.write_text("see /work/shared/papers/sifter.txt and ../../elsewhere/x.py; "
                   "../shared/data and ../README.md and /tmp/x are fine\n")
    assert outside_paths(doc, tmp_path) == ["docs/page.md:1: /work/shared/papers/sifter.txt",
                                            "docs/page.md:1: ../../elsewhere/x.py"]

"""The repository's README.md as a page of the site (readme.md), so that the README stays the
one front door and the pages link to it rather than repeat it: a MkDocs hook (mkdocs.yml's
`hooks`). The README's links name files from the repository root (`docs/cluster.md`); on the
site they are the pages themselves (`cluster.md`). A page's link to the README
(`../README.md` from docs/, `../../README.md` one folder down) becomes a link to that page."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parents[1] / "README.md"
PAGE = "readme.md"  # the README's place on the site, beside index.md
DOCS_LINK = re.compile(r"\]\(docs/")
README_LINK = re.compile(r"\]\(\.\./((?:\.\./)*)README\.md")


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, PAGE, abs_src_path=str(README)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri == PAGE:
        return DOCS_LINK.sub("](", markdown)
    return README_LINK.sub(rf"](\1{PAGE}", markdown)

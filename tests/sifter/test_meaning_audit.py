"""experiments/audit_meaning.py's labeller, the independent method of the meaning audit (issue 43):
surface words only, labels by the rubric of docs/sifter-views.md. Hand-made rows for each of its
rules, and its record: the rates it reports are recomputed from the rows it holds."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("audit_meaning",
                                              ROOT / "experiments" / "audit_meaning.py")
audit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(audit)


@pytest.mark.parametrize("x,backbone,expected", [
    ("The cat sat on the mat.", "Cat sat on mat.", "entailed"),
    ("The cat sat on the mat.", "", "entailed"),  # no backbone: Y = X
    ("Gilborn put on his coat again.", "Gilborn put again on his coat.", "entailed"),  # one moved
    ("Kayabashi must feel certain, a trip which could be misread.",
     "Kayabashi a trip which could be misread must feel certain.", "not entailed"),  # reordered
    ("Not all birds fly.", "All birds fly.", "contradicts"),
    ("He did not go to the store.", "He did go to the store.", "contradicts"),
    ("He did not buy a single red apple.", "He did not buy apple.", "not entailed"),
    ("He did not buy a single red apple.", "He did not buy single red apple.", "entailed"),
    ("Hardly anyone came to the meeting.", "Anyone came to meeting.", "not entailed"),
    ("A few students came.", "Students came.", "entailed"),  # "a few" is not downward
    ("He wished he had never got into the business.", "He had never got into the business.",
     "not entailed"),
    ("I doubt that the plan will work.", "The plan will work.", "not entailed"),
    ("If it rains, the game is off.", "The game is off.", "not entailed"),
    ("If it rains, the game is off.", "If it rains game is off.", "entailed"),
    ("The sun shone, but if you had a flash, use it.", "The sun shone.", "entailed"),
    ("Yet it is not only Europe the play refers to.", "It is not Europe.", "not entailed"),
    ("Drill a No. 43 hole.", "Drill hole.", "entailed"),  # the number sign
])
def test_the_labeller_follows_the_rubric(x, backbone, expected):
    assert audit.label(x, backbone)[0] == expected


def test_the_committed_record_holds_its_rates():
    record = json.loads((ROOT / "bench" / "results" / "meaning-audit.json").read_text())
    assert len(record["sample"]) >= 200 and record["changed_rows"] >= len(record["sample"])
    for row in record["sample"]:  # the labels are the labeller's on the rows it holds
        assert row["before"] != row["after"]
        assert audit.label(row["x"], row["before"])[0] == row["before_label"]
        assert audit.label(row["x"], row["after"])[0] == row["after_label"]
    for when in ("before", "after"):
        assert sum(v["rows"] for v in record["changed"][when].values()) == record["changed_rows"]

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
    # issue 55: quantifier phrases kept whole, downward ones with their scope; implicatives
    ("At most three students solved the final problem.",
     "Most three students solved the final problem.", "not entailed"),
    ("At most three students solved the final problem.",
     "At most three students solved final problem.", "entailed"),
    ("Less than half of the voters supported the new law.", "Half supported law.",
     "not entailed"),
    ("Less than half of the voters supported the new law.",
     "Less than half of voters supported law.", "not entailed"),  # "new" under it
    ("Most students passed the exam.", "Students passed exam.", "not entailed"),
    ("He walked up to the house.", "He walked to house.", "entailed"),  # no number: a path
    ("He was the only child.", "He was child.", "entailed"),  # an adjective
    ("She forgot to lock the door.", "She locked the door.", "not entailed"),
])

def test_the_labeller_follows_the_rubric(x, backbone, expected):
    assert audit.label(x, backbone)[0] == expected


def test_the_committed_record_holds_its_rates():
    """Issue 55's record (issue 43's, bench/results/meaning-audit.json, was labelled by the
    rubric before its issue-55 lexicon and is kept as it was)."""
    record = json.loads((ROOT / "bench" / "results" / "meaning-audit-55.json").read_text())
    assert len(record["sample"]) >= 200 and record["changed_rows"] >= len(record["sample"])
    for row in record["sample"]:  # the labels are the labeller's on the rows it holds
        assert row["before"] != row["after"]
        assert audit.label(row["x"], row["before"])[0] == row["before_label"]
        assert audit.label(row["x"], row["after"])[0] == row["after_label"]
    for when in ("before", "after"):
        assert sum(v["rows"] for v in record["changed"][when].values()) == record["changed_rows"]


def test_the_second_labelling_is_compared_on_its_own_rows():
    """The reader's labels (experiments/audit/second-labelling-55.json) against the rubric's:
    the committed comparison is the rubric's on the rows the reader holds."""
    second = json.loads((ROOT / "experiments" / "audit" / "second-labelling-55.json")
                        .read_text())
    record = json.loads((ROOT / "bench" / "results" / "meaning-audit-55-second.json").read_text())
    assert len(second["rows"]) >= 100 and record == audit.compare(second)
    after = json.loads((ROOT / "bench" / "results" / "meaning-audit-55.json").read_text())
    assert record["agreement"]["percent"] >= 90
    assert after["every_row"]["after"]["not entailed"]["percent"] <= 1.5
